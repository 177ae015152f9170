import { PassThrough } from "node:stream";
import { stripVTControlCharacters } from "node:util";
import pc from "picocolors";
import { describe, expect, it } from "vitest";
import { colorWanted } from "../../src/config/env.ts";
import { clip, errorText, RunProgress, type StreamEvent } from "../../src/runs/progress.ts";
import { createLiveView, fitToRows } from "../../src/runs/tree-renderer.ts";

// Event shapes as LangGraph 1.7 emits them for `stream(..., { subgraphs: true, streamMode:
// ["updates", "tasks"] })`: the manager is the root graph (namespace []); a sub-agent invoked from
// the manager's act node runs under ["act:<id>"], a second concurrent call under ["act:<id>", "1"].
const ACT = "act:11111111-aaaa";
const events: StreamEvent[] = [
  [
    [],
    "tasks",
    {
      id: "s",
      name: "start",
      input: { question: "Does birch plywood float in ethanol?" },
      triggers: [],
    },
  ],
  [
    [],
    "updates",
    { start: { task: "Does birch plywood float in ethanol?", context: {}, agent: "manager" } },
  ],
  [[], "tasks", { id: "p1", name: "plan", input: {}, triggers: [] }],
  [
    [],
    "updates",
    {
      plan: {
        pending: {
          step: 1,
          thought: "Look up both densities.",
          code: "const [a, b] = await Promise.all([\n  wikipedia_search_agent('q1'),\n  wikipedia_search_agent('q2'),\n]);\nconsole.log(a, b);",
        },
      },
    },
  ],
  [[], "tasks", { id: "a1", name: "act", input: {}, triggers: [] }],
  [
    [ACT],
    "tasks",
    {
      id: "c1",
      name: "plan",
      input: {
        task: "You are wikipedia_search, a member of a team. Your manager gave you this task:\nWhat is the density of birch plywood?\nSolve it.",
        // The parent's call stamps the child's name into its input (no name is guessed from depth).
        agent: "wikipedia_search",
      },
      triggers: [],
    },
  ],
  [
    [ACT, "1"],
    "tasks",
    {
      id: "c2",
      name: "plan",
      input: { task: "What is the density of ethanol?", agent: "wikipedia_search" },
      triggers: [],
    },
  ],
  [
    [ACT],
    "updates",
    {
      plan: {
        pending: {
          step: 1,
          thought: "Search.",
          code: "console.log(await search_wikipedia('birch plywood'))",
        },
      },
    },
  ],
  [
    [ACT],
    "updates",
    {
      observe: {
        steps: [
          {
            step: 1,
            kind: "action",
            thought: "Search.",
            code: "x",
            observation: "Final answer: 680 kg/m³",
            error: null,
            isFinalAnswer: true,
          },
        ],
        status: "final_answer",
        answer: "680 kg/m³",
      },
    },
  ],
  [
    [ACT, "1"],
    "updates",
    {
      observe: {
        steps: {
          step: 1,
          kind: "action",
          thought: "t",
          code: "y",
          observation: "Final answer: 0.789 g/cm³",
          error: null,
          isFinalAnswer: true,
        },
        status: "final_answer",
        answer: "0.789 g/cm³",
      },
    },
  ],
  [[], "updates", { act: { outcome: { step: 1 } } }],
  [
    [],
    "updates",
    {
      observe: {
        steps: [
          {
            step: 1,
            kind: "action",
            thought: "Look up both densities.",
            code: "...",
            observation: "680 kg/m³ 0.789 g/cm³",
            error: null,
            isFinalAnswer: false,
          },
        ],
        status: "running",
      },
    },
  ],
];

describe("run progress tree", () => {
  it("nests concurrent sub-agent calls under the action that made them", () => {
    const lines: string[] = [];
    const p = new RunProgress({ onLine: (l) => lines.push(l) });
    for (const e of events) p.apply(e);
    expect(p.root?.name).toBe("manager");
    expect(p.root?.task).toBe("Does birch plywood float in ethanol?");
    const step = p.root!.steps[0];
    expect(step.children.map((c) => [c.name, c.task, c.answer])).toEqual([
      ["wikipedia_search", "What is the density of birch plywood?", "680 kg/m³"],
      ["wikipedia_search", "What is the density of ethanol?", "0.789 g/cm³"],
    ]);
    expect(step.observation).toBe("680 kg/m³ 0.789 g/cm³");
    // The manager is still working: it shows a spinner line, the finished sub-agents collapse.
    const text = p.render("*", 100).join("\n");
    expect(text).toContain("* manager: Does birch plywood float in ethanol?");
    expect(text).toContain("✓ wikipedia_search: What is the density of ethanol?");
    expect(text).toContain("→ 0.789 g/cm³");
    expect(text).toContain("* thinking…");
    // Plain line output (non-TTY) indents sub-agents.
    expect(lines).toContain("  [wikipedia_search] done (final_answer): 680 kg/m³");
  });

  it("finishes the root with its answer and ignores events it does not understand", () => {
    const p = new RunProgress();
    for (const e of events) p.apply(e);
    p.apply([
      [],
      "updates",
      { observe: { status: "final_answer", answer: "Yes, it floats.", steps: [] } },
    ]);
    p.apply([[], "custom", "not an object"] as StreamEvent);
    p.apply([["weird"], "updates", { node: 42 }] as StreamEvent);
    expect(p.root?.phase).toBe("done");
    expect(p.output?.answer).toBe("Yes, it floats.");
    expect(p.render("*").join("\n")).toContain("answer: Yes, it floats.");
  });

  it("titles the root with rootTask when given (the chat's tree shows the user's message)", () => {
    const task =
      "Earlier in this conversation:\nUser: hi\n\nThe user's new message:\nHow long is the span?";
    const start: StreamEvent = [[], "tasks", { id: "1", name: "plan", input: { task } }];
    const titled = new RunProgress({ rootName: "chat", rootTask: "How long is the span?" });
    titled.apply(start);
    expect(titled.render("*")[0]).toBe("* chat: How long is the span?");
    const plain = new RunProgress({ rootName: "chat" });
    plain.apply(start);
    expect(plain.render("*")[0]).toBe(
      "* chat: Earlier in this conversation: User: hi The user's new message: How long is the span?",
    );
  });

  it("starts a resumed run's tree from the checkpointed steps", () => {
    const lines: string[] = [];
    const p = new RunProgress({ onLine: (l) => lines.push(l) });
    p.seed({
      question: "How many years?",
      agent: "manager",
      steps: [
        {
          step: 1,
          kind: "action",
          thought: "Ask both.",
          code: "x",
          observation: "1889 and 1930",
          error: null,
          isFinalAnswer: false,
        },
      ],
    });
    p.apply([
      [],
      "updates",
      { plan: { pending: { step: 2, thought: "Subtract.", code: "final_answer(1930 - 1889)" } } },
    ]);
    expect(p.root?.task).toBe("How many years?");
    expect(p.root?.steps.map((s) => [s.step, s.observation ?? null])).toEqual([
      [1, "1889 and 1930"],
      [2, null],
    ]);
    expect(lines[1]).toBe("[manager] step 1 (done before): Ask both.");
  });

  it("clips long code and observations with a visible marker", () => {
    expect(clip("a\nb\nc\nd", 2, 80)).toEqual(["a", "b", "… (2 more lines)"]);
    expect(clip("x".repeat(30), 1, 10)).toEqual(["xxxxxxxxx…"]);
  });
});

describe("RunProgress: plain nodes of app graphs", () => {
  it("shows each node's stage line and counts only the model calls a node made itself (nodeUsage)", () => {
    const lines: string[] = [];
    const p = new RunProgress({ onLine: (l) => lines.push(l) });
    const u = (calls: number) => ({
      calls,
      inputTokens: 10 * calls,
      outputTokens: calls,
      cachedInputTokens: 0,
    });
    p.apply([
      [],
      "updates",
      { start: { agent: "research", task: "Towers", stage: "up to 4 sub-question(s)" } },
    ]);
    // The research node rolls up the planner's usage (already counted from its own nodes): no nodeUsage.
    p.apply([[], "updates", { research: { usage: { planner: u(5) }, stage: "3 researched" } }]);
    p.apply([
      [],
      "updates",
      {
        write: {
          usage: { writer: u(4) },
          nodeUsage: { writer: u(4) },
          stage: "drafted 3 section(s)",
        },
      },
    ]);
    expect(p.totals).toEqual({ calls: 4, inputTokens: 40, outputTokens: 4 });
    expect(p.root?.name).toBe("research");
    expect(p.root?.stages).toEqual([
      "up to 4 sub-question(s)",
      "3 researched",
      "drafted 3 section(s)",
    ]);
    expect(p.render("…").join("\n")).toContain("• drafted 3 section(s)");
    expect(lines).toContain("[research] write: drafted 3 section(s)");
  });
});

describe("errors, interruptions and colour in the tree", () => {
  const started = (): RunProgress => {
    const p = new RunProgress();
    for (const e of events.slice(0, 7)) p.apply(e);
    return p;
  };

  it("shows a task's error as its message, whatever form LangGraph hands it in", () => {
    const serialized = {
      message:
        'Model call for agent "manager" failed (x): HTTP 404: Not Found\nThe thread is saved.',
      name: "CodehopError",
    };
    for (const error of [serialized, JSON.stringify(serialized), new Error(serialized.message)]) {
      expect(errorText(error)).toBe(
        'Model call for agent "manager" failed (x): HTTP 404: Not Found',
      );
      const lines: string[] = [];
      const p = new RunProgress({ onLine: (l) => lines.push(l) });
      for (const e of events.slice(0, 3)) p.apply(e);
      p.apply([[], "tasks", { id: "p1", name: "plan", error, result: [] }]);
      expect(lines.at(-1)).toBe(
        '[manager] failed in plan: Model call for agent "manager" failed (x): HTTP 404: Not Found',
      );
      const tree = p.render("…", 120).join("\n");
      expect(tree).toContain("✗ manager");
      expect(tree).toContain("failed: Model call");
      expect(tree).not.toContain("{");
    }
  });

  it("a run stopped by its user shows its agents as interrupted, not busy or failed", () => {
    const p = started();
    p.apply([
      [ACT],
      "tasks",
      { id: "c1", name: "plan", error: { name: "AbortError", message: "Aborted" } },
    ]);
    p.interrupt();
    const tree = p.render("…", 120).join("\n");
    expect(tree).not.toContain("✗");
    expect(tree).not.toMatch(/thinking…|running code…/);
    expect(tree.match(/■ /g)?.length).toBe(3); // the manager and both sub-agents
    expect(tree).toContain("interrupted (resumable)");
  });

  it("keeps a long tree's top (the question) in a short terminal", () => {
    const lines = Array.from({ length: 50 }, (_, i) => `line ${i}`);
    const fit = fitToRows(lines, 10);
    expect(fit).toHaveLength(10);
    expect(fit.slice(0, 2)).toEqual(["line 0", "line 1"]);
    expect(fit[2]).toContain("41 lines hidden");
    expect(fit.at(-1)).toBe("line 49");
    expect(fitToRows(lines.slice(0, 5), 10)).toEqual(lines.slice(0, 5));
  });

  it("every live frame fits a short terminal and starts with the root agent", () => {
    const writes: string[] = [];
    const stream = Object.assign(new PassThrough(), { isTTY: true, rows: 12, columns: 100 });
    stream.on("data", (d) => writes.push(stripVTControlCharacters(String(d))));
    const view = createLiveView(stream as unknown as NodeJS.WriteStream);
    for (const e of events) view.onEvent(e);
    const live = writes.filter((w) => w.trim()).map((w) => w.replace(/\n$/, "").split("\n"));
    const before = writes.length;
    view.stop();
    // One write per frame (log-update erases the previous one first).
    expect(live.length).toBeGreaterThan(5);
    expect(Math.max(...live.map((f) => f.length))).toBeLessThanOrEqual(11);
    // The root is named once its own stamp arrives ("agent" before).
    for (const f of live.slice(1))
      expect(f[0]).toMatch(/(agent|manager): Does birch plywood float/);
    expect(live.at(-1)!.some((l) => l.includes("lines hidden"))).toBe(true);
    // The final frame is the whole tree: nothing hidden.
    const final = writes.slice(before).join("");
    expect(final).toContain("manager: Does birch plywood float");
    expect(final).not.toContain("lines hidden");
  });

  it("colours follow FORCE_COLOR, NO_COLOR and whether the stream is a terminal", () => {
    expect(colorWanted({ isTTY: true }, {})).toBe(true);
    expect(colorWanted({ isTTY: false }, {})).toBe(false);
    expect(colorWanted({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
    expect(colorWanted({ isTTY: true }, { NO_COLOR: "" })).toBe(true);
    expect(colorWanted({ isTTY: false }, { FORCE_COLOR: "1" })).toBe(true);
    expect(colorWanted({ isTTY: true }, { FORCE_COLOR: "0" })).toBe(false);
    expect(colorWanted({ isTTY: true }, { TERM: "dumb" })).toBe(false);
    const p = started();
    const colors = pc.createColors(true);
    expect(p.render("…", 120, { colors }).join("\n")).toContain("\u001b[");
    expect(p.render("…", 120).join("\n")).not.toContain("\u001b[");
  });
});
