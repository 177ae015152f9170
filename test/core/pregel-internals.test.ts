import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  Annotation,
  Command,
  END,
  MemorySaver,
  START,
  StateGraph,
  interrupt,
} from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  PREGEL_ABORT_SIGNALS_KEY,
  PREGEL_SCRATCHPAD_KEY,
  VALIDATE_INPUT_METHOD,
  pinSubgraphNamespace,
  reportInputErrorsCoded,
  takesNewResumeValue,
  withoutInheritedAbortSignals,
} from "../../src/core/pregel-internals.ts";
import { CodehopError } from "../../src/errors.ts";

// codehop relies on two private LangGraph configuration keys (src/core/pregel-internals.ts). These
// tests fail loudly when a LangGraph upgrade renames or reshapes them, instead of letting resumes
// silently pick up the wrong sub-agent checkpoints or sub-agents outlive their caller's action.

const constants = (await import(
  pathToFileURL(join(process.cwd(), "node_modules/@langchain/langgraph/dist/constants.js")).href
)) as Record<string, unknown>;

const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** A child graph that records the checkpoint namespace it runs in. */
const child = new StateGraph(State)
  .addNode("c", (_s, config: RunnableConfig) => ({
    log: [String(config.configurable?.checkpoint_ns ?? "")],
  }))
  .addEdge(START, "c")
  .addEdge("c", END)
  .compile();

describe("LangGraph's private keys codehop uses", () => {
  it("have the names LangGraph itself uses", () => {
    expect(constants.CONFIG_KEY_SCRATCHPAD).toBe(PREGEL_SCRATCHPAD_KEY);
    expect(constants.CONFIG_KEY_ABORT_SIGNALS).toBe(PREGEL_ABORT_SIGNALS_KEY);
  });

  it("number a node's nested graph calls by the scratchpad's subgraphCounter, which pinning sets", async () => {
    let pad: unknown;
    const parent = new StateGraph(State)
      .addNode(
        "act",
        async (_s, config: RunnableConfig) => {
          pad = config.configurable?.[PREGEL_SCRATCHPAD_KEY];
          // Call 3 first, then call 0: each lands on the namespace of its own index.
          const third = await child.invoke({ log: [] }, pinSubgraphNamespace(config, 3));
          const first = await child.invoke({ log: [] }, pinSubgraphNamespace(config, 0));
          return { log: [...third.log, ...first.log] };
        },
        { subgraphs: [child] },
      )
      .addEdge(START, "act")
      .addEdge("act", END)
      .compile({ checkpointer: new MemorySaver() });
    const out = await parent.invoke({ log: [] }, { configurable: { thread_id: "pin" } });
    expect(typeof (pad as { subgraphCounter?: unknown }).subgraphCounter).toBe("number");
    // The child's node runs at "<parent task>|<index>|<child node>"; index 0 has no segment.
    const [third, first] = out.log;
    expect(third).toMatch(/^act:[^|]+\|3\|c:[^|]+$/);
    expect(first).toMatch(/^act:[^|]+\|c:[^|]+$/);
  });

  it("tell, from the scratchpad, which interrupt() of a resumed task takes the resume command's own value", async () => {
    // A node asking twice: the first resume answers the first interrupt; the second run replays
    // the first from the task's stored resume values and answers the second with its own value.
    const seen: boolean[] = [];
    const graph = new StateGraph(State)
      .addNode("ask", (_s, config: RunnableConfig) => {
        seen.push(takesNewResumeValue(config));
        const a = interrupt("first") as string;
        seen.push(takesNewResumeValue(config));
        const b = interrupt("second") as string;
        return { log: [a, b] };
      })
      .addEdge(START, "ask")
      .addEdge("ask", END)
      .compile({ checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: "resume-values" } };
    await graph.invoke({ log: [] }, config);
    expect(seen).toEqual([false]); // a fresh run: no resume command at all
    seen.length = 0;
    await graph.invoke(new Command({ resume: "A" }), config);
    expect(seen).toEqual([true, false]); // "A" answers the first; the second has no value yet
    seen.length = 0;
    const out = await graph.invoke(new Command({ resume: "B" }), config);
    expect(seen).toEqual([false, true]); // the first replays "A"; "B" is the new value
    expect(out.log).toEqual(["A", "B"]);
  });

  it("carry the running graph's abort signals, which a nested graph listens to unless they are dropped", async () => {
    let seen: unknown;
    let dropped: unknown = "not checked";
    const parent = new StateGraph(State)
      .addNode("act", async (_s, config: RunnableConfig) => {
        seen = config.configurable?.[PREGEL_ABORT_SIGNALS_KEY];
        dropped = withoutInheritedAbortSignals(config).configurable?.[PREGEL_ABORT_SIGNALS_KEY];
        // A nested run with its own signal, aborted while the parent goes on: it must stop.
        const own = new AbortController();
        const slow = new StateGraph(State)
          .addNode("wait", async () => {
            own.abort(new Error("caller's action ended"));
            await new Promise((r) => setTimeout(r, 50));
            return { log: ["not cancelled"] };
          })
          .addNode("after", () => ({ log: ["ran on"] }))
          .addEdge(START, "wait")
          .addEdge("wait", "after")
          .addEdge("after", END)
          .compile();
        const outcome = await slow
          .invoke({ log: [] }, { ...withoutInheritedAbortSignals(config), signal: own.signal })
          .then(
            () => "finished",
            (err: Error) => `stopped: ${err.message}`,
          );
        return { log: [outcome] };
      })
      .addEdge(START, "act")
      .addEdge("act", END)
      .compile();
    const out = await parent.invoke({ log: [] });
    expect(seen).toBeTruthy();
    expect(dropped).toBeUndefined();
    expect(out.log).toEqual(["stopped: caller's action ended"]);
  });

  it("validate a run's input in the compiled graph's _validateInput, whose zod errors become CODEHOP_INPUT_INVALID", async () => {
    const Input = z.object({
      name: z.string().min(1, "the name is empty"),
      n: z.number().optional(),
    });
    const build = () =>
      new StateGraph({ stateSchema: State, input: Input })
        .addNode("c", () => ({ log: ["ran"] }))
        .addEdge(START, "c")
        .addEdge("c", END)
        .compile();
    // Unwrapped: LangGraph throws zod's error, whose message is the JSON array of its issues.
    const raw = await build()
      .invoke({ name: "" })
      .catch((e) => e);
    expect(raw.message).toMatch(/^\[/);
    expect(typeof (build() as any)[VALIDATE_INPUT_METHOD]).toBe("function");
    const graph = reportInputErrorsCoded(build(), "named", Input);
    for (const [input, problem] of [
      [{ name: "" }, "name: the name is empty"],
      [{ name: "x", n: "2" }, "n: Invalid input: expected number, received string"],
    ] as const) {
      const err = await graph.invoke(input as any).catch((e) => e);
      expect(CodehopError.isInstance(err), String(err)).toBe(true);
      expect(err.code).toBe("CODEHOP_INPUT_INVALID");
      expect(err.message).toBe(
        `Invalid input for the "named" graph: ${problem} (expected { name: string, n?: number }). [CODEHOP_INPUT_INVALID]`,
      );
    }
    expect((await graph.invoke({ name: "x" })).log).toEqual(["ran"]);
  });

  it("an input check of a graph without a zod input runs before any node; a null input and a Command are left to LangGraph", async () => {
    const ran: string[] = [];
    const graph = reportInputErrorsCoded(
      new StateGraph(State)
        .addNode("c", () => (ran.push("c"), { log: ["ran"] }))
        .addEdge(START, "c")
        .addEdge("c", END)
        .compile({ checkpointer: new MemorySaver() }),
      "checked",
      {
        expected: "{ log: [string] }",
        problems: (input) =>
          Array.isArray((input as { log?: unknown }).log) ? [] : ["log: expected a list"],
      },
    );
    const config = { configurable: { thread_id: "t" } };
    const err = await graph.invoke({ log: "x" } as never, config).catch((e) => e);
    expect(err.code).toBe("CODEHOP_INPUT_INVALID");
    expect(err.message).toBe(
      'Invalid input for the "checked" graph: log: expected a list (expected { log: [string] }). [CODEHOP_INPUT_INVALID]',
    );
    expect(ran).toEqual([]);
    expect((await graph.invoke({ log: ["a"] }, config)).log).toEqual(["a", "ran"]);
    // A null input continues the thread (nothing to run here), never an input error.
    await expect(graph.invoke(null, config)).resolves.toBeDefined();
  });
});
