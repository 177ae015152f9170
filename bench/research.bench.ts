import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureDemoCorpus } from "../src/apps/qa/demo.ts";
import { research, type ResearchResult } from "../src/apps/research/app.ts";
import { DEMO_RESEARCH, researchResponder } from "../src/apps/research/demo-trajectories.ts";
import { openPersistence, type SqlitePersistence } from "../src/persistence/index.ts";
import { ScriptedOpenAIServer, type LoggedRequest } from "../src/testing/scripted-openai-server.ts";
import { type BenchSection, fmt } from "./lib.ts";

/** Tokens of a logged request as the scripted server reported them (≈ 4 characters per token). */
function tokens(r: LoggedRequest): { input: number; output: number } {
  const text = r.request.messages.map((m) => `<${m.role}>${m.content}`).join("\n");
  return { input: Math.ceil(text.length / 4), output: Math.ceil((r.content ?? "").length / 4) };
}

const sum = (rs: LoggedRequest[]) =>
  rs.reduce(
    (a, r) => {
      const t = tokens(r);
      return { calls: a.calls + 1, input: a.input + t.input, output: a.output + t.output };
    },
    { calls: 0, input: 0, output: 0 },
  );

const userOf = (r: LoggedRequest) => r.request.messages.at(-1)?.content ?? "";

/** Wall time between the root checkpoints before and after `node` ran. */
async function nodeMs(
  persistence: SqlitePersistence,
  threadId: string,
  node: string,
): Promise<number> {
  const byNext = new Map<string, number>();
  const graph = (await import("../src/apps/research/team.ts")).createResearcherGraph({
    checkpointer: persistence.checkpointer,
  });
  const snaps: Array<{ next: readonly string[]; at: number }> = [];
  for await (const s of graph.getStateHistory({ configurable: { thread_id: threadId } }))
    snaps.push({ next: s.next, at: Date.parse(s.createdAt ?? "") });
  snaps.reverse();
  for (let i = 0; i + 1 < snaps.length; i++)
    if (snaps[i].next.includes(node)) byNext.set(node, snaps[i + 1].at - snaps[i].at);
  return byNext.get(node) ?? NaN;
}

/**
 * The research app over the demo corpus with the scripted model (src/apps/research/demo-trajectories.ts):
 * model calls and tokens per report section, and what verification costs as a share of a run.
 */
export default async function researchBench(): Promise<BenchSection[]> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-research-"));
  const corpus = await ensureDemoCorpus(home);
  const persistence = openPersistence(home);
  const config = (baseURL: string) => ({
    home,
    corpus,
    baseURL,
    apiKey: "bench",
    model: "scripted",
    models: {},
  });
  try {
    // 1. One run, split by report section.
    const server = await ScriptedOpenAIServer.start({ responder: researchResponder() });
    let result: ResearchResult;
    try {
      result = await research(DEMO_RESEARCH.topic, {
        threadId: "sections",
        persistence,
        config: config(server.baseURL),
      });
    } finally {
      await server.close();
    }
    const log = server.requests;
    const rows: (string | number)[][] = [];
    const total = sum(log);
    const row = (name: string, s: { calls: number; input: number; output: number }) =>
      rows.push([
        name,
        s.calls,
        s.input,
        s.output,
        `${fmt((100 * (s.input + s.output)) / (total.input + total.output), 1)}%`,
      ]);
    const planner = log.filter((r) => r.rule === "planner");
    row("planning (planner)", sum(planner));
    for (const [i, q] of DEMO_RESEARCH.questions.entries()) {
      const research = log.filter(
        (r) =>
          (r.rule?.endsWith(`:q${i + 1}`) && r.rule !== "planner") ||
          (r.rule === "condenser" && userOf(r).includes(`Question: ${q}`)),
      );
      const writer = log.filter(
        (r) => r.rule === "writer" && userOf(r).includes(`This section answers: ${q}`),
      );
      const heading = result.report.match(new RegExp(`^## (.+)$`, "gm"))?.[i]?.slice(3) ?? q;
      row(`section ${i + 1} "${heading}": research + condense`, sum(research));
      row(`section ${i + 1}: writing`, sum(writer));
    }
    row("summary (writer)", sum(log.filter((r) => r.rule === "writer:summary")));
    const verifier = sum(log.filter((r) => r.rule === "verifier"));
    row("verification (all sections)", verifier);
    row("total", total);

    // 2. Verification's share of a run, by batch size, with a 200 ms model (wall time included).
    const shareRows: (string | number)[][] = [];
    for (const batch of [1, 5, 10]) {
      const slow = await ScriptedOpenAIServer.start({
        responder: async (req, ctx) => {
          const reply: any = await researchResponder()(req, ctx);
          return typeof reply === "object" && "content" in reply
            ? { ...reply, delayMs: 200 }
            : reply;
        },
      });
      const threadId = `batch-${batch}`;
      const t0 = performance.now();
      let r: ResearchResult;
      try {
        r = await research(DEMO_RESEARCH.topic, {
          threadId,
          persistence,
          config: config(slow.baseURL),
          settings: { verifyBatchSize: batch },
        });
      } finally {
        await slow.close();
      }
      const wall = performance.now() - t0;
      const all = sum(slow.requests);
      const v = sum(slow.requests.filter((x) => x.rule === "verifier"));
      const verifyMs = await nodeMs(persistence, threadId, "verify");
      shareRows.push([
        batch,
        r.verification!.checked,
        v.calls,
        `${fmt((100 * v.calls) / all.calls, 1)}%`,
        v.input + v.output,
        `${fmt((100 * (v.input + v.output)) / (all.input + all.output), 1)}%`,
        fmt(verifyMs, 0),
        fmt(wall, 0),
        `${fmt((100 * verifyMs) / wall, 1)}%`,
      ]);
    }
    const share5 = shareRows.find((r) => r[0] === 5)!;
    return [
      {
        title: "Research: model calls and tokens per report section",
        description: `One research run of the demo topic ("${DEMO_RESEARCH.topic}") over the demo corpus: 3 sub-questions researched in parallel, a section each, a summary, every cited sentence verified (batches of 5). The model is the scripted server (src/apps/research/demo-trajectories.ts); tokens are its counts (about 4 characters per token) of each request's messages and reply. "research + condense" is the section's sub-question pipeline: its researcher, page readers and condensation.`,
        columns: ["step", "model calls", "input tokens", "output tokens", "share of tokens"],
        rows,
      },
      {
        title: "Research: verification cost as a share of the run",
        description:
          "The same run with a 200 ms scripted model reply and the verifier's batch size varied (cited sentences per verifier call). Calls and tokens are the verifier's against the whole run's; verify wall time is the time between the root checkpoints before and after the verify node.",
        columns: [
          "batch size",
          "claims checked",
          "verifier calls",
          "share of calls",
          "verifier tokens",
          "share of tokens",
          "verify wall (ms)",
          "run wall (ms)",
          "share of wall time",
        ],
        rows: shareRows,
        verdicts: [
          `verification at the default batch size (5) costs ${share5[3]} of the calls, ${share5[5]} of the tokens and ${share5[8]} of the wall time of a run`,
        ],
      },
    ];
  } finally {
    persistence.close();
    rmSync(home, { recursive: true, force: true });
  }
}
