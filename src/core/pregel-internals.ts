import type { RunnableConfig } from "@langchain/core/runnables";
import { isCommand } from "@langchain/langgraph";
import { z } from "zod";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * The private LangGraph configuration keys codehop relies on, in one place. They are not part of
 * LangGraph's public API: test/core/pregel-internals.test.ts checks them against the installed
 * LangGraph and fails loudly when an upgrade renames or reshapes them.
 */

/** LangGraph's per-task scratchpad in `configurable` (holds the subgraph invocation counter). */
export const PREGEL_SCRATCHPAD_KEY = "__pregel_scratchpad";

/**
 * Whether the next interrupt() of the node task `config` runs returns the value of the resume
 * command this run started with (rather than an earlier value of the task). Reads LangGraph's
 * scratchpad (pinned @langchain/langgraph: `interrupt()` returns `resume[interruptCounter + 1]`
 * while there is one, else consumes `nullResume`, the resume command's own value); false when it
 * cannot be told.
 */
export function takesNewResumeValue(config: RunnableConfig): boolean {
  const pad = (config.configurable as Record<string, unknown> | undefined)?.[
    PREGEL_SCRATCHPAD_KEY
  ] as { interruptCounter?: unknown; resume?: unknown; nullResume?: unknown } | undefined;
  if (!pad || typeof pad.interruptCounter !== "number" || !Array.isArray(pad.resume)) return false;
  return pad.nullResume !== undefined && pad.interruptCounter + 1 >= pad.resume.length;
}

/**
 * LangGraph's key in `configurable` for the abort signals of the running graph. A graph invoked
 * inside a node inherits it and then listens on the *root* graph's signal instead of the `signal`
 * it was given: every concurrent sub-agent added two abort listeners per step to that one signal
 * (MaxListenersExceededWarning at ~6 concurrent sub-agents), and the child ignored its own signal,
 * so a sub-agent kept running after the parent's action had timed out.
 */
export const PREGEL_ABORT_SIGNALS_KEY = "__pregel_abort_signals";

/**
 * Pins the checkpoint namespace of the next graph invoked with this config to `index`. LangGraph
 * numbers graphs invoked inside one node by invocation order (ns, ns|1, ns|2 ...): when a resumed
 * action is served call 0 from the journal, call 1 would become the first invocation and pick up
 * call 0's finished checkpoints. Numbering by the call's index in the action — deterministic for
 * deterministic code — keeps every call on its own checkpoints across crashes and replays.
 */
export function pinSubgraphNamespace(config: RunnableConfig, index: number): RunnableConfig {
  const configurable = config.configurable as Record<string, unknown> | undefined;
  const pad = configurable?.[PREGEL_SCRATCHPAD_KEY];
  if (!pad || typeof pad !== "object") return config;
  // Reads fall through to the node's scratchpad; only the counter the child consumes is ours.
  const pinned = Object.create(pad) as { subgraphCounter: number };
  pinned.subgraphCounter = index;
  return { ...config, configurable: { ...configurable, [PREGEL_SCRATCHPAD_KEY]: pinned } };
}

/**
 * The config without the running graph's abort signals, so a graph invoked with it listens on the
 * `signal` of its own config (see {@link PREGEL_ABORT_SIGNALS_KEY}).
 */
export function withoutInheritedAbortSignals(config: RunnableConfig): RunnableConfig {
  const { [PREGEL_ABORT_SIGNALS_KEY]: _inherited, ...configurable } = config.configurable ?? {};
  return { ...config, configurable };
}

/**
 * LangGraph's key in `configurable` for the stream of the running graph. A graph invoked inside a
 * node with it writes its own events (values, updates) into the caller's stream, where a client
 * streaming subgraphs receives them.
 */
export const PREGEL_STREAM_KEY = "__pregel_stream";

/**
 * The tag LangGraph's "messages" stream mode skips (TAG_NOSTREAM, not exported by LangGraph): a
 * model called under it is not streamed to clients as a chat message.
 */
export const NOSTREAM_TAG = "langsmith:nostream";

/**
 * The config without the running graph's stream: a graph invoked with it still checkpoints under
 * the caller's namespace, but its events stay out of the caller's stream.
 */
export function withoutParentStream(config: RunnableConfig): RunnableConfig {
  const { [PREGEL_STREAM_KEY]: _stream, ...configurable } = config.configurable ?? {};
  return { ...config, configurable };
}

/**
 * The compiled graph's method that checks a run's input (and a `Command`'s update) against the
 * graph's zod input schema, throwing zod's own error: a JSON array of issues that Studio and the
 * SDK show as is.
 */
export const VALIDATE_INPUT_METHOD = "_validateInput";

/** The issues of a zod error (zod 3 and 4), or undefined for any other error. */
function zodIssues(
  err: unknown,
): ReadonlyArray<{ path: PropertyKey[]; message: string }> | undefined {
  const issues = (err as { issues?: unknown } | null)?.issues;
  const name = (err as { name?: unknown } | null)?.name;
  return Array.isArray(issues) && typeof name === "string" && /ZodError$/.test(name)
    ? issues
    : undefined;
}

/** Zod issues as one line: `topic: the research topic is empty; maxQuestions: ...`. */
export function describeInputIssues(
  issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }>,
): string {
  const lines = issues.map((i) => `${i.path.map(String).join(".") || "input"}: ${i.message}`);
  return [...new Set(lines)].join("; ");
}

/**
 * A check of a graph's input other than a zod schema (a graph whose input is an Annotation, like
 * `chat`): the problems of an input, one `path: what is wrong` each (none when it is valid), and
 * the expected shape in one line.
 */
export interface InputCheck {
  problems(input: unknown): string[];
  expected: string;
}

/**
 * Makes `graph` (compiled) report an input it rejects as CODEHOP_INPUT_INVALID naming each
 * problem — `Invalid input for the "researcher" graph: topic: the research topic is empty ...
 * [CODEHOP_INPUT_INVALID]` — instead of zod's raw issue array (or a reducer's TypeError), wherever
 * the graph runs (graph.invoke, Studio, `codehop serve`), before any node runs. The code is in the
 * message too: the LangGraph API sends only an error's name and message. `check` is the graph's
 * zod input schema (LangGraph validates with it; its errors are reworded) or an {@link InputCheck}
 * run first. A `Command` (resume) and a null input (continue) are left to LangGraph. Apply it to
 * the instance that runs: `withConfig` makes a new one.
 */
export function reportInputErrorsCoded<G extends object>(
  graph: G,
  name: string,
  check: z.ZodType | InputCheck,
): G {
  const custom = "problems" in check ? (check as InputCheck) : undefined;
  const expected = custom ? custom.expected : describeInputShape(check as z.ZodType);
  const g = graph as Record<string, unknown>;
  const validate = g[VALIDATE_INPUT_METHOD];
  if (typeof validate !== "function") return graph;
  const invalid = (problems: string, cause?: unknown) =>
    new CodehopError(
      ErrorCodes.INPUT_INVALID,
      `Invalid input for the "${name}" graph: ${problems}${expected ? ` (expected ${expected})` : ""}. [${ErrorCodes.INPUT_INVALID}]`,
      { cause },
    );
  g[VALIDATE_INPUT_METHOD] = async function (this: unknown, input: unknown) {
    if (custom && input != null && !isCommand(input)) {
      const problems = custom.problems(input);
      if (problems.length) throw invalid([...new Set(problems)].join("; "));
    }
    try {
      return await validate.call(this, input);
    } catch (err) {
      const issues = zodIssues(err);
      if (!issues) throw err;
      throw invalid(describeInputIssues(issues), err);
    }
  };
  return graph;
}

/** An input schema's shape in one line, from its JSON Schema: `{ topic: string, maxQuestions?: integer }`. */
export function describeInputShape(schema: z.ZodType): string {
  let json: { properties?: Record<string, { type?: unknown }>; required?: string[] };
  try {
    json = z.toJSONSchema(schema, { unrepresentable: "any", io: "input" }) as typeof json;
  } catch {
    return "";
  }
  const required = new Set(json.required ?? []);
  const fields = Object.entries(json.properties ?? {}).map(
    ([key, p]) =>
      `${key}${required.has(key) ? "" : "?"}: ${typeof p.type === "string" ? p.type : "any"}`,
  );
  return fields.length ? `{ ${fields.join(", ")} }` : "";
}

/**
 * Where a compiled StateGraph keeps the context schema it was built with (`new StateGraph({ ...,
 * context })`): its builder's `_configRuntimeSchema`, which LangGraph validates a run's context
 * against.
 */
export const CONTEXT_SCHEMA_FIELD = "_configRuntimeSchema";

/** A compiled graph's run-context schema (its builder's `context`), or undefined if it has none. */
export function contextSchemaOf(graph: unknown): z.ZodObject | undefined {
  const builder = (graph as { builder?: Record<string, unknown> } | null)?.builder;
  const schema = builder?.[CONTEXT_SCHEMA_FIELD];
  return schema instanceof z.ZodObject ? schema : undefined;
}
