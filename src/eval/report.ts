import type {
  BadRecord,
  DatasetFormat,
  QuestionResult,
  SystemName,
  SystemSummary,
} from "./types.ts";

/** The whole report of a run (report.json). */
export interface EvalReport {
  runId: string;
  /** When the report was (re)written. */
  generatedAt: string;
  /** True when some selected (system, question) pairs have no finished result yet (interrupted run). */
  partial: boolean;
  /** Questions × systems that were selected, and how many have a result. */
  progress: { expected: number; done: number };
  dataset: {
    path: string;
    format: DatasetFormat;
    /** Usable questions selected (after --limit). */
    questions: number;
    /** Records skipped, with position and reason. */
    bad: BadRecord[];
    /** Where retrieval came from: the dataset's own paragraphs ingested into a corpus DB, or the configured source. */
    source?: Record<string, unknown>;
  };
  /** Model, prompts and settings of every system: the same model for all of them. */
  config: Record<string, unknown>;
  systems: SystemSummary[];
  /** Per-question results (transcripts omitted; they are in the trajectory export and the HTML). */
  results: Omit<QuestionResult, "transcripts">[];
}

/** Nearest-rank percentile (0..100). */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/** Aggregates per-question results of one system. */
export function summarize(
  system: SystemName,
  results: Omit<QuestionResult, "transcripts">[],
): SystemSummary {
  const rs = results.filter((r) => r.system === system);
  const judged = rs.filter((r) => r.judge);
  const agents = [...new Set(rs.flatMap((r) => Object.keys(r.usage)))].sort();
  const perAgent: SystemSummary["perAgent"] = {};
  for (const a of agents) {
    perAgent[a] = {
      avgCalls: mean(rs.map((r) => r.usage[a]?.calls ?? 0)),
      avgInputTokens: mean(rs.map((r) => r.usage[a]?.inputTokens ?? 0)),
      avgOutputTokens: mean(rs.map((r) => r.usage[a]?.outputTokens ?? 0)),
    };
  }
  const walls = rs.map((r) => r.wallMs);
  return {
    system,
    questions: rs.length,
    em: mean(rs.map((r) => r.em)),
    f1: mean(rs.map((r) => r.f1)),
    coverEm: mean(rs.map((r) => r.coverEm)),
    supportRecall: rs.some((r) => r.supportRecall !== undefined)
      ? mean(rs.filter((r) => r.supportRecall !== undefined).map((r) => r.supportRecall!))
      : undefined,
    judgeAccuracy: judged.length ? mean(judged.map((r) => (r.judge!.correct ? 1 : 0))) : undefined,
    errors: rs.filter((r) => r.error).length,
    avgModelCalls: mean(rs.map((r) => r.modelCalls)),
    avgInputTokens: mean(rs.map((r) => r.inputTokens)),
    avgOutputTokens: mean(rs.map((r) => r.outputTokens)),
    avgTotalTokens: mean(rs.map((r) => r.inputTokens + r.outputTokens)),
    avgSteps: mean(rs.map((r) => r.steps)),
    avgWallMs: mean(walls),
    p50WallMs: rs.length ? percentile(walls, 50) : 0,
    p95WallMs: rs.length ? percentile(walls, 95) : 0,
    perAgent,
  };
}

const pct = (x: number) => (100 * x).toFixed(1);
const num = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "-");

/** Columns of the summary table (terminal and Markdown). */
export function summaryRows(report: EvalReport): { columns: string[]; rows: string[][] } {
  const judge = report.systems.some((s) => s.judgeAccuracy !== undefined);
  const support = report.systems.some((s) => s.supportRecall !== undefined);
  const columns = [
    "system",
    "n",
    "EM %",
    "F1 %",
    "cover-EM %",
    ...(judge ? ["judge %"] : []),
    ...(support ? ["support recall %"] : []),
    "calls/q",
    "in tok/q",
    "out tok/q",
    "steps/q",
    "s/q",
    "p95 s",
    "errors",
  ];
  const rows = report.systems.map((s) => [
    s.system,
    String(s.questions),
    pct(s.em),
    pct(s.f1),
    pct(s.coverEm),
    ...(judge ? [s.judgeAccuracy === undefined ? "-" : pct(s.judgeAccuracy)] : []),
    ...(support ? [s.supportRecall === undefined ? "-" : pct(s.supportRecall)] : []),
    num(s.avgModelCalls, 2),
    num(s.avgInputTokens, 0),
    num(s.avgOutputTokens, 0),
    num(s.avgSteps, 2),
    num(s.avgWallMs / 1000, 2),
    num(s.p95WallMs / 1000, 2),
    String(s.errors),
  ]);
  return { columns, rows };
}

/**
 * GAIA's figures per level: accuracy (GAIA's scorer, the `em` of each result), tasks, and the
 * average tokens and time per task, for each system and level (and all levels).
 */
export function levelRows(report: EvalReport): { columns: string[]; rows: string[][] } {
  const columns = ["system", "level", "n", "accuracy %", "tok/task", "s/task"];
  const rows: string[][] = [];
  const levels = [...new Set(report.results.map((r) => r.kind ?? "?"))].sort();
  for (const s of report.systems) {
    const mine = report.results.filter((r) => r.system === s.system);
    for (const level of [...levels, "all"]) {
      const rs = level === "all" ? mine : mine.filter((r) => (r.kind ?? "?") === level);
      if (!rs.length) continue;
      rows.push([
        s.system,
        level,
        String(rs.length),
        pct(mean(rs.map((r) => r.em))),
        num(mean(rs.map((r) => r.inputTokens + r.outputTokens)), 0),
        num(mean(rs.map((r) => r.wallMs)) / 1000, 2),
      ]);
    }
  }
  return { columns, rows };
}

/** An aligned plain-text table (first column left, the others right). */
function plainTable(columns: string[], rows: string[][]): string[] {
  const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(columns), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)];
}

/** Plain-text table for the terminal. */
export function terminalTable(report: EvalReport): string {
  const { columns, rows } = summaryRows(report);
  const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  const out = [line(columns), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)];
  // Where a multi-agent system spends its tokens.
  const agentRows = report.systems
    .filter((s) => Object.keys(s.perAgent).length > 1)
    .flatMap((s) =>
      Object.entries(s.perAgent).map(([a, u]) => [
        `${s.system}/${a}`,
        num(u.avgCalls, 2),
        num(u.avgInputTokens, 0),
        num(u.avgOutputTokens, 0),
      ]),
    );
  if (agentRows.length) {
    const cols = ["agent", "calls/q", "in tok/q", "out tok/q"];
    const w = cols.map((c, i) => Math.max(c.length, ...agentRows.map((r) => r[i].length)));
    const l = (cells: string[]) =>
      cells.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join("  ");
    out.push("", l(cols), w.map((x) => "-".repeat(x)).join("  "), ...agentRows.map(l));
  }
  if (report.dataset.format === "gaia") {
    const levels = levelRows(report);
    out.push(
      "",
      "GAIA accuracy by level (GAIA's scorer):",
      ...plainTable(levels.columns, levels.rows),
    );
  }
  const head =
    `${report.dataset.format} ${report.dataset.path}: ${report.dataset.questions} questions` +
    (report.dataset.bad.length ? `, ${report.dataset.bad.length} bad records skipped` : "") +
    (report.partial ? ` — PARTIAL (${report.progress.done}/${report.progress.expected} done)` : "");
  return `${head}\n${out.join("\n")}`;
}

function mdEscape(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/\r?\n/g, " ");
}

/** report.md: summary, per-agent tokens, configuration, bad records, per-question table. */
export function markdownReport(report: EvalReport): string {
  const { columns, rows } = summaryRows(report);
  const parts: string[] = [];
  parts.push(`# codehop eval — ${report.runId}${report.partial ? " (partial)" : ""}`);
  parts.push(
    `Dataset: \`${report.dataset.path}\` (${report.dataset.format}), ${report.dataset.questions} questions` +
      (report.dataset.bad.length ? `, ${report.dataset.bad.length} bad records skipped` : "") +
      `. Generated ${report.generatedAt}. Progress: ${report.progress.done}/${report.progress.expected}.`,
  );
  parts.push("## Summary");
  parts.push(
    `| ${columns.join(" | ")} |\n| ${columns.map(() => "---").join(" | ")} |\n` +
      rows.map((r) => `| ${r.join(" | ")} |`).join("\n"),
  );
  parts.push(
    "EM / F1: standard answer normalization (lower-case, no punctuation or articles, collapsed whitespace); cover-EM: a gold answer appears in the prediction; support recall: share of the dataset's supporting pages among the pages a retrieving system used. Tokens are as reported by the endpoint, per question.",
  );
  if (report.dataset.format === "gaia") {
    const levels = levelRows(report);
    parts.push("## GAIA accuracy by level");
    parts.push(
      `| ${levels.columns.join(" | ")} |\n| ${levels.columns.map(() => "---").join(" | ")} |\n` +
        levels.rows.map((r) => `| ${r.join(" | ")} |`).join("\n"),
    );
    parts.push(
      "Accuracy: GAIA's question scorer (numbers compared as numbers without `$`, `%` and `,`; comma- or semicolon-separated lists element by element; strings without whitespace, punctuation and case). In the tables above, EM is this accuracy.",
    );
  }
  parts.push("## Tokens per agent (average per question)");
  const agentRows = report.systems.flatMap((s) =>
    Object.entries(s.perAgent).map(
      ([a, u]) =>
        `| ${s.system} | ${a} | ${num(u.avgCalls, 2)} | ${num(u.avgInputTokens, 0)} | ${num(u.avgOutputTokens, 0)} |`,
    ),
  );
  parts.push(
    `| system | agent | calls | input tokens | output tokens |\n| --- | --- | --- | --- | --- |\n${agentRows.join("\n")}`,
  );
  parts.push("## Configuration");
  parts.push("```json\n" + JSON.stringify(report.config, null, 2) + "\n```");
  if (report.dataset.source)
    parts.push("Knowledge source: `" + JSON.stringify(report.dataset.source) + "`");
  if (report.dataset.bad.length) {
    parts.push("## Skipped records");
    parts.push(
      report.dataset.bad
        .map((b) => `- record ${b.position.index} (line ${b.position.line}): ${mdEscape(b.reason)}`)
        .join("\n"),
    );
  }
  parts.push("## Questions");
  const qRows = report.results.map(
    (r) =>
      `| ${mdEscape(r.questionId)} | ${r.system} | ${mdEscape(r.prediction)} | ${mdEscape(r.answers[0] ?? "")} | ${r.em} | ${num(r.f1, 2)} | ${r.coverEm} | ${r.inputTokens + r.outputTokens} | ${num(r.wallMs / 1000, 2)} | ${r.error ? mdEscape(r.error) : ""} | \`${r.threadId}\` |`,
  );
  parts.push(
    "| id | system | prediction | gold | EM | F1 | cover | tokens | s | error | thread |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
      qRows.join("\n"),
  );
  return parts.join("\n\n") + "\n";
}
