import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { cliCommand } from "../config/cli-command.ts";
import type { EvalReport } from "./report.ts";
import type { AgentTranscript } from "./types.ts";

/** Chart.js's UMD bundle, read from node_modules so the page works offline and from file://. */
function chartJsSource(): string {
  const entry = createRequire(import.meta.url).resolve("chart.js");
  return readFileSync(join(dirname(entry), "chart.umd.min.js"), "utf8");
}

/** JSON safe to embed in a <script> element. */
function embedJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

function esc(s: string): string {
  return s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}

/** Per-message cap for transcripts embedded in the page (the JSONL export keeps them whole). */
const TRANSCRIPT_CHARS = 4000;
/** Total transcript characters embedded in the page, so a run of thousands of questions stays openable. */
const TRANSCRIPT_BUDGET = 15_000_000;

/**
 * report.html: one self-contained page (Chart.js inlined, data embedded) with the summary table,
 * accuracy-vs-tokens and accuracy charts per system, tokens per agent, and a per-question
 * drill-down (filterable) showing prediction, gold answers, scores, usage per agent, sources,
 * errors, the thread id (anchor `#<thread id>`) and each agent's transcript.
 */
export function htmlReport(
  report: EvalReport,
  transcriptsOf: (r: EvalReport["results"][number]) => AgentTranscript[],
  options: { outDir?: string; transcriptBudget?: number } = {},
): string {
  const outDir = options.outDir;
  let budget = options.transcriptBudget ?? TRANSCRIPT_BUDGET;
  const questions = report.results.map((r) => {
    // The command that lists an agentic question's checkpoints, as every printed next step is.
    const inspect =
      r.system === "agentic" && outDir
        ? cliCommand(["history", r.threadId], { home: outDir })
        : null;
    if (budget <= 0) return { ...r, inspect, transcripts: [], transcriptsOmitted: true };
    const transcripts = transcriptsOf(r).map((t) => ({
      agent: t.agent,
      messages: t.messages.map((m) => {
        const content =
          m.content.length > TRANSCRIPT_CHARS
            ? `${m.content.slice(0, TRANSCRIPT_CHARS)}\n… (${m.content.length - TRANSCRIPT_CHARS} more characters)`
            : m.content;
        budget -= content.length;
        return { role: m.role, content };
      }),
    }));
    return { ...r, inspect, transcripts };
  });
  const data = { ...report, results: questions, outDir: outDir ?? null };
  const title = `codehop eval — ${report.runId}${report.partial ? " (partial)" : ""}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>
  :root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --ok:#067647; --bad:#b42318; --bg:#f8f9fb; }
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); margin: 0; background: var(--bg); }
  main { max-width: 1200px; margin: 0 auto; padding: 24px; }
  h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 10px; }
  .muted { color: var(--muted); }
  .banner { background: #fffaeb; border: 1px solid #fedf89; padding: 8px 12px; border-radius: 6px; margin: 12px 0; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: right; white-space: nowrap; }
  th:first-child, td:first-child, table.names td:nth-child(2), table.names th:nth-child(2) { text-align: left; }
  th { background: #f2f4f7; font-weight: 600; }
  .charts { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
  .card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px; }
  .filters { display: flex; gap: 12px; align-items: center; margin-bottom: 8px; flex-wrap: wrap; }
  details.q { background: #fff; border: 1px solid var(--line); border-radius: 6px; margin: 4px 0; }
  details.q > summary { cursor: pointer; padding: 6px 10px; display: grid; grid-template-columns: 90px 70px 1fr 1fr 60px 90px; gap: 8px; align-items: center; }
  details.q > summary span { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  details.q .body { padding: 4px 14px 12px; border-top: 1px solid var(--line); }
  button { margin: 8px 0; padding: 4px 12px; }
  .ok { color: var(--ok); font-weight: 600; } .bad { color: var(--bad); font-weight: 600; }
  pre { white-space: pre-wrap; word-break: break-word; background: #f2f4f7; padding: 8px; border-radius: 4px; margin: 4px 0; max-height: 360px; overflow: auto; }
  .role { font-weight: 600; font-size: 12px; text-transform: uppercase; color: var(--muted); }
  code { background: #f2f4f7; padding: 1px 4px; border-radius: 3px; }
  dl { display: grid; grid-template-columns: 140px 1fr; gap: 2px 12px; margin: 8px 0; } dt { color: var(--muted); } dd { margin: 0; }
</style>
</head>
<body>
<main>
  <h1 id="title"></h1>
  <div class="muted" id="subtitle"></div>
  <div id="partial"></div>
  <h2>Summary</h2>
  <div class="card"><table id="summary"></table></div>
  <h2>Charts</h2>
  <div class="charts">
    <div class="card"><canvas id="scatter" height="260"></canvas></div>
    <div class="card"><canvas id="bars" height="260"></canvas></div>
  </div>
  <h2>Tokens per agent <span class="muted">(average per question)</span></h2>
  <div class="card"><table id="agents" class="names"></table></div>
  <h2>Questions</h2>
  <div class="filters">
    <label>System <select id="f-system"><option value="">all</option></select></label>
    <label>Outcome <select id="f-outcome"><option value="">all</option><option value="correct">correct (EM)</option><option value="wrong">wrong</option><option value="error">error</option></select></label>
    <label>Search <input id="f-text" type="search" placeholder="question, answer, id"></label>
    <span class="muted" id="f-count"></span>
  </div>
  <div id="questions"></div>
  <h2>Configuration</h2>
  <pre id="config"></pre>
  <div id="bad"></div>
</main>
<script>${chartJsSource().replace(/<\/script/gi, "<\\/script")}</script>
<script type="application/json" id="data">${embedJson(data)}</script>
<script>
(function () {
  const R = JSON.parse(document.getElementById("data").textContent);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) { if (k === "class") e.className = v; else e.setAttribute(k, v); }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  };
  const pct = (x) => (100 * x).toFixed(1);
  const colors = { agentic: "#7a5af8", rag: "#2e90fa", direct: "#f79009" };
  const color = (s, i) => colors[s] || ["#12b76a", "#f04438", "#667085"][i % 3];

  document.getElementById("title").textContent = ${embedJson(title)};
  document.getElementById("subtitle").textContent =
    R.dataset.format + " · " + R.dataset.path + " · " + R.dataset.questions + " questions" +
    (R.dataset.bad.length ? " · " + R.dataset.bad.length + " bad records skipped" : "") +
    " · model " + ((R.config.model && R.config.model.model) || "?") + " · generated " + R.generatedAt;
  if (R.partial) document.getElementById("partial").append(el("div", { class: "banner" },
    "Partial run: " + R.progress.done + " of " + R.progress.expected + " question × system results are in. Rerun the same command to finish it."));

  const judge = R.systems.some((s) => s.judgeAccuracy !== undefined && s.judgeAccuracy !== null);
  const support = R.systems.some((s) => s.supportRecall !== undefined && s.supportRecall !== null);
  const head = ["system", "n", "EM %", "F1 %", "cover-EM %"].concat(judge ? ["judge %"] : [], support ? ["support recall %"] : [], ["calls/q", "in tok/q", "out tok/q", "steps/q", "s/q", "p95 s", "errors"]);
  const summary = document.getElementById("summary");
  summary.append(el("tr", {}, ...head.map((h) => el("th", {}, h))));
  for (const s of R.systems) {
    const cells = [s.system, s.questions, pct(s.em), pct(s.f1), pct(s.coverEm)]
      .concat(judge ? [s.judgeAccuracy == null ? "-" : pct(s.judgeAccuracy)] : [],
        support ? [s.supportRecall == null ? "-" : pct(s.supportRecall)] : [],
        [s.avgModelCalls.toFixed(2), s.avgInputTokens.toFixed(0), s.avgOutputTokens.toFixed(0), s.avgSteps.toFixed(2),
         (s.avgWallMs / 1000).toFixed(2), (s.p95WallMs / 1000).toFixed(2), s.errors]);
    summary.append(el("tr", {}, ...cells.map((c) => el("td", {}, c))));
  }

  const agents = document.getElementById("agents");
  agents.append(el("tr", {}, ...["system", "agent", "calls", "input tokens", "output tokens"].map((h) => el("th", {}, h))));
  for (const s of R.systems) for (const [a, u] of Object.entries(s.perAgent))
    agents.append(el("tr", {}, ...[s.system, a, u.avgCalls.toFixed(2), u.avgInputTokens.toFixed(0), u.avgOutputTokens.toFixed(0)].map((c) => el("td", {}, c))));

  if (window.Chart) {
    Chart.defaults.animation = false;
    new Chart(document.getElementById("scatter"), {
      type: "scatter",
      data: { datasets: R.systems.map((s, i) => ({
        label: s.system, backgroundColor: color(s.system, i), borderColor: color(s.system, i), pointRadius: 7, pointHoverRadius: 9,
        data: [{ x: s.avgTotalTokens, y: 100 * s.em }] })) },
      options: { plugins: { title: { display: true, text: "Accuracy (EM %) vs tokens per question" },
          tooltip: { callbacks: { label: (c) => c.dataset.label + ": EM " + c.parsed.y.toFixed(1) + "% at " + c.parsed.x.toFixed(0) + " tokens/q" } } },
        scales: { x: { title: { display: true, text: "tokens per question (input + output)" }, beginAtZero: true },
                  y: { title: { display: true, text: "EM %" }, min: 0, max: 100 } } },
    });
    const metrics = [["EM", "em"], ["F1", "f1"], ["cover-EM", "coverEm"]].concat(judge ? [["judge", "judgeAccuracy"]] : []);
    new Chart(document.getElementById("bars"), {
      type: "bar",
      data: { labels: R.systems.map((s) => s.system),
        datasets: metrics.map(([label, key], i) => ({ label, backgroundColor: ["#7a5af8", "#2e90fa", "#12b76a", "#f79009"][i],
          data: R.systems.map((s) => 100 * (s[key] || 0)) })) },
      options: { plugins: { title: { display: true, text: "Answer quality per system (%)" } }, scales: { y: { min: 0, max: 100 } } },
    });
  }

  const fs = document.getElementById("f-system");
  for (const s of R.systems) fs.append(el("option", { value: s.system }, s.system));
  const box = document.getElementById("questions");
  // Rows are built when first shown and their drill-down when first opened, and at most PAGE
  // matching rows are shown at a time, so a run of thousands of questions opens quickly.
  const PAGE = 200;
  let limit = PAGE;
  const body = (r) => {
    const dl = el("dl", {});
    const row = (k, v) => { dl.append(el("dt", {}, k), el("dd", {}, v)); };
    row("question", r.question);
    row("gold", r.answers.join(" | "));
    row("prediction", r.prediction || "(none)");
    row("scores", "EM " + r.em + " · F1 " + r.f1.toFixed(2) + " · cover-EM " + r.coverEm + (r.judge ? " · judge " + (r.judge.correct ? "correct" : "incorrect") : "") +
      (r.supportRecall != null ? " · support recall " + r.supportRecall.toFixed(2) : ""));
    row("thread id", el("a", { href: "#" + encodeURIComponent(r.threadId) }, el("code", {}, r.threadId)));
    if (r.inspect) row("inspect", el("code", {}, r.inspect));
    if (r.status) row("stopped by", r.status);
    row("cost", r.modelCalls + " model calls · " + r.inputTokens + " in / " + r.outputTokens + " out tokens · " + r.steps + " steps · " + (r.wallMs / 1000).toFixed(2) + " s");
    const per = Object.entries(r.usage).map(([a, u]) => a + ": " + u.calls + " calls, " + u.inputTokens + " in / " + u.outputTokens + " out").join(" · ");
    if (per) row("per agent", per);
    if (r.sources.length) row("sources", r.sources.join(" · "));
    if (r.error) row("error", el("span", { class: "bad" }, r.error));
    const b = el("div", { class: "body" }, dl);
    if (r.transcriptsOmitted) b.append(el("div", { class: "muted" }, "Transcripts left out of this page to keep it small: see trajectories/ and eval.db in the output directory."));
    for (const t of r.transcripts) {
      const d = el("details", {}, el("summary", {}, "transcript: " + t.agent + " (" + t.messages.length + " messages)"));
      for (const m of t.messages) d.append(el("div", { class: "role" }, m.role), el("pre", {}, m.content));
      b.append(d);
    }
    return b;
  };
  const build = (it) => {
    const r = it.r;
    const status = r.error ? el("span", { class: "bad" }, "error") : r.em ? el("span", { class: "ok" }, "EM 1") : el("span", { class: "bad" }, r.coverEm ? "cover" : "EM 0");
    const sum = el("summary", {}, el("span", {}, r.questionId), el("span", {}, r.system), el("span", { title: r.question }, r.question),
      el("span", { title: r.prediction }, "→ " + (r.prediction || "∅")), status, el("span", { class: "muted" }, (r.inputTokens + r.outputTokens) + " tok"));
    const q = el("details", { class: "q", id: r.threadId }, sum);
    q.addEventListener("toggle", () => { if (q.open && q.childNodes.length === 1) q.append(body(r)); });
    return q;
  };
  const items = R.results.map((r) => ({ r, q: null, text: (r.questionId + " " + r.question + " " + r.prediction + " " + r.answers.join(" ")).toLowerCase() }));
  const more = el("button", { type: "button" }, "show more");
  more.addEventListener("click", () => { limit += PAGE; apply(); });
  const apply = (pinned) => {
    const sys = fs.value, out = document.getElementById("f-outcome").value, text = document.getElementById("f-text").value.toLowerCase();
    let n = 0;
    box.replaceChildren();
    for (const it of items) {
      const r = it.r;
      const okOutcome = !out || (out === "error" ? !!r.error : out === "correct" ? r.em === 1 : !r.error && r.em !== 1);
      const match = (!sys || r.system === sys) && okOutcome && (!text || it.text.includes(text));
      if (!match && it !== pinned) continue;
      n++;
      if (n > limit && it !== pinned) continue;
      it.q ??= build(it);
      box.append(it.q);
    }
    document.getElementById("f-count").textContent = n + " shown" + (n > limit ? " (first " + limit + " listed)" : "");
    if (n > limit) box.append(more);
  };
  for (const id of ["f-system", "f-outcome", "f-text"]) document.getElementById(id).addEventListener("input", () => { limit = PAGE; apply(); });
  apply();
  // report.html#<thread id> opens that question's drill-down
  const openHash = () => {
    const id = decodeURIComponent(location.hash.slice(1));
    const it = items.find((x) => x.r.threadId === id);
    if (!it) return;
    apply(it);
    it.q.open = true;
    it.q.scrollIntoView();
  };
  window.addEventListener("hashchange", openHash);
  openHash();

  document.getElementById("config").textContent = JSON.stringify({ config: R.config, source: R.dataset.source }, null, 2);
  if (R.dataset.bad.length) {
    const bad = document.getElementById("bad");
    bad.append(el("h2", {}, "Skipped records"));
    const ul = el("ul", {});
    for (const b of R.dataset.bad) ul.append(el("li", {}, "record " + b.position.index + " (line " + b.position.line + "): " + b.reason));
    bad.append(ul);
  }
})();
</script>
</body>
</html>
`;
}
