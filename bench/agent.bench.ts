import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { z } from "zod";
import { ScriptedChatModel } from "../src/agent/scripted-chat-model.ts";
import { createCodeAgent } from "../src/graphs/code-agent.ts";
import { createSandbox } from "../src/sandbox/index.ts";
import { defineTool } from "../src/tools/define-tool.ts";
import { type BenchSection, fmt, percentile } from "./lib.ts";

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

/** A 10-step page-reading trajectory in the seed's style, with two errors that get fixed. */
function trajectory(): string[] {
  const steps: string[] = [];
  for (let i = 1; i <= 10; i++) {
    const thought =
      `I need the height and the completion year of the tower. So far I looked at ${i - 1} passages. ` +
      `I will search the page for the next relevant passage and print it, then compare the numbers with what I already found.`;
    if (i === 10) steps.push(action(thought, "final_answer(`${height} m, completed ${year}`);"));
    else if (i === 3 || i === 6)
      steps.push(
        action(
          thought,
          `const p = await retrieve_passages("height of the tower", ${i});\nconsole.log(p.text.slice(0, 400));`,
        ),
      );
    else
      steps.push(
        action(
          thought,
          `const passages = await retrieve_passages("tower height completion year ${i}");\nfor (const p of passages) console.log(p);\nvar height = ${300 + i};\nvar year = ${1880 + i};`,
        ),
      );
  }
  return steps;
}

async function history(sandbox: ReturnType<typeof createSandbox>): Promise<BenchSection> {
  const retrieve = defineTool({
    name: "retrieve_passages",
    description: "Returns the passages of the page most relevant to a query.",
    parameters: z.object({ query: z.string() }),
    returns: "string[]",
    invoke: async ({ query }) => {
      const i = Number(/(\d+)$/.exec(query)?.[1] ?? 1);
      return [
        `Passage ${i} (section "History"): The tower was designed by engineer number ${i} and completed in ${1880 + i}.`,
        `It was the tallest structure of its city for ${10 + i} years; its height of ${300 + i} metres was measured again in ${1950 + i}.`.repeat(
          1 + (i % 3),
        ),
      ];
    },
  });
  const replies = trajectory();
  const measure = async (policy: "condensed" | "full", promptDir = "page_search") => {
    // Replies in order, one per model call (the trajectory is the same under both policies).
    let calls = 0;
    const counting = new ScriptedChatModel([() => replies[Math.min(calls++, replies.length - 1)]]);
    // The page agent's real prompt folder (falls back to prompts/code_agent/ file by file).
    const agent = createCodeAgent({
      name: `history_${policy}_${promptDir}`,
      description: "reads a page",
      prompts: promptDir,
      sandbox,
      tools: [retrieve],
      model: counting,
      maxSteps: 12,
      historyPolicy: policy,
    });
    const out = await agent.invoke({ task: "How tall is the tower and when was it completed?" });
    if (out.status !== "final_answer")
      throw new Error(`history bench (${policy}) ended with ${out.status}`);
    const prompts = counting.calls.map((c) =>
      c.messages.map((m) => `<${m.getType()}>${text(m)}`).join("\n"),
    );
    const systemChars = text(counting.calls[0].messages[0]).length;
    const lastCall = counting.calls[counting.calls.length - 1];
    const lastHistoryTokens = Math.ceil(lastCall.messages.slice(1).map(text).join("\n").length / 4);
    const historyTokens = counting.calls.reduce(
      (acc, c) => acc + Math.ceil(c.messages.slice(1).map(text).join("\n").length / 4),
      0,
    );
    const shares: number[] = [];
    for (let i = 1; i < prompts.length; i++) {
      let n = 0;
      const [a, b] = [prompts[i - 1], prompts[i]];
      while (n < a.length && n < b.length && a.charCodeAt(n) === b.charCodeAt(n)) n++;
      shares.push(n / b.length);
    }
    const actions = out.steps.filter((st: { kind: string }) => st.kind === "action");
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      calls: counting.calls.length,
      actionChars: mean(actions.map((st: { modelOutput: string }) => st.modelOutput.length)),
      observationChars: mean(actions.map((st: { observation: string }) => st.observation.length)),
      historyTokens,
      lastHistoryTokens,
      systemTokens: Math.ceil(systemChars / 4),
      prefix: shares.reduce((a, b) => a + b, 0) / shares.length,
      minPrefix: Math.min(...shares),
    };
  };
  const condensed = await measure("condensed");
  const full = await measure("full");
  // The same trajectory under the manager's longer system prompt: the prefix share grows with it.
  const condensedManager = await measure("condensed", "manager");
  const ratio = condensed.historyTokens / full.historyTokens;
  const lastRatio = condensed.lastHistoryTokens / full.lastHistoryTokens;
  return {
    title: "Code agent: history tokens, condensed vs full",
    description: `A scripted 10-step page-reading trajectory (two failing actions that get fixed, then a final answer; actions average ${fmt(condensed.actionChars, 0)} characters, observations ${fmt(condensed.observationChars, 0)}) run under both history policies with the page_search prompt. History tokens = prompt minus the fixed system prompt (≈ 4 characters per token), summed over the 10 model calls. Prefix share = how much of each prompt is a prefix of the previous step's prompt (what a prefix-caching server reuses), mean and minimum over steps 2–10. Condensed keeps every observation, so its saving is the dropped actions and resolved errors; its prompts diverge from the previous one where the previous action was (about two observations plus one action are new each step).`,
    columns: [
      "policy",
      "model calls",
      "history tokens (sum)",
      "history tokens (last call)",
      "system prompt tokens (per call)",
      "prefix share mean",
      "prefix share min",
    ],
    rows: [
      [
        "condensed",
        condensed.calls,
        condensed.historyTokens,
        condensed.lastHistoryTokens,
        condensed.systemTokens,
        `${fmt(condensed.prefix * 100, 1)}%`,
        `${fmt(condensed.minPrefix * 100, 1)}%`,
      ],
      [
        "condensed, manager prompt",
        condensedManager.calls,
        condensedManager.historyTokens,
        condensedManager.lastHistoryTokens,
        condensedManager.systemTokens,
        `${fmt(condensedManager.prefix * 100, 1)}%`,
        `${fmt(condensedManager.minPrefix * 100, 1)}%`,
      ],
      [
        "full",
        full.calls,
        full.historyTokens,
        full.lastHistoryTokens,
        full.systemTokens,
        `${fmt(full.prefix * 100, 1)}%`,
        `${fmt(full.minPrefix * 100, 1)}%`,
      ],
    ],
    verdicts: [
      `condensed history tokens <= 50% of full: ${ratio <= 0.5 ? "MET" : "NOT MET"} (${fmt(ratio * 100, 1)}% summed over the 10 calls; ${fmt(lastRatio * 100, 1)}% at the last call)`,
      `condensed prefix share >= 90%: ${condensed.prefix >= 0.9 ? "MET" : "NOT MET"} (${fmt(condensed.prefix * 100, 1)}% mean)`,
    ],
  };
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

export default async function agentBench(): Promise<BenchSection[]> {
  // Three warm processes (like the default sandbox): the parent's action waits in one while two
  // sub-agents run theirs.
  const sandbox = createSandbox({ poolSize: 3 });
  try {
    return [await overhead(sandbox), await history(sandbox), await concurrency(sandbox)];
  } finally {
    await sandbox.close();
  }
}
