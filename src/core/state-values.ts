import { z } from "zod";
import type { AgentState } from "./state.ts";

/**
 * What a state edit may write into each channel of a code agent: the update type of the channel's
 * reducer (src/core/state.ts), as zod. `updateState` (and so `codehop replay --set`) writes any
 * value LangGraph is given; a value of the wrong type only fails later, inside a node of the forked
 * run, and every resume of that fork fails the same way. Checking an edit against these first
 * turns it into an error that names the channel, before anything is written.
 */

const json: z.ZodType<unknown> = z.lazy(() =>
  z.union([
    z.string(),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(json),
    z.record(z.string(), json),
  ]),
);
const count = z.number().int().nonnegative();
const usageTotals = z.object({
  calls: count,
  inputTokens: count,
  outputTokens: count,
  cachedInputTokens: count,
});
const guestError = z.object({
  name: z.string(),
  message: z.string(),
  line: z.number().int().nullable(),
  column: z.number().int().nullable().optional(),
});
const toolCall = z.looseObject({
  callIndex: count,
  tool: z.string(),
  ok: z.boolean(),
  durationMs: z.number(),
  fromJournal: z.boolean(),
});
const stepRecord = z.looseObject({
  step: count,
  kind: z.enum(["action", "planning", "final_answer"]),
  modelOutput: z.string(),
  thought: z.string(),
  code: z.string().nullable(),
  observation: z.string(),
  error: guestError.nullable(),
  toolCalls: z.array(toolCall),
  isFinalAnswer: z.boolean(),
  durationMs: z.number(),
});

/** Each channel of {@link AgentState} and the values an edit may write into it. */
export const AGENT_STATE_VALUES: Readonly<Record<keyof AgentState, z.ZodType>> = {
  task: z.string(),
  context: z.record(z.string(), json),
  agent: z.string(),
  // The reducer appends: a record, or a list of them.
  steps: z.union([stepRecord, z.array(stepRecord)]),
  pending: z
    .looseObject({
      step: count,
      modelOutput: z.string(),
      thought: z.string(),
      code: z.string().nullable(),
      parseError: z.string().optional(),
      usage: usageTotals,
    })
    .nullable(),
  outcome: z
    .looseObject({
      step: count,
      ok: z.boolean(),
      logs: z.string(),
      isFinalAnswer: z.boolean(),
      error: guestError.nullable(),
      toolCalls: z.array(toolCall),
      durationMs: z.number(),
    })
    .nullable(),
  stepCount: count,
  // The reducer appends one delta of the variables log (src/core/variables.ts).
  variables: z.object({
    values: z.record(z.string(), json).optional(),
    declarations: z.record(z.string(), z.string()).optional(),
    unserializable: z.record(z.string(), z.string()).optional(),
    removed: z.array(z.string()).optional(),
  }),
  answer: json,
  status: z.enum(["running", "final_answer", "max_steps", "repeated_action"]),
  // The reducer sums per agent.
  usage: z.record(z.string(), usageTotals),
  // The reducer appends, dropping duplicates.
  sources: z.array(z.record(z.string(), json)),
  repeat: z.object({ fingerprint: z.string(), count }),
  replan: z.boolean(),
  taskEpoch: count,
};

const byBuilder = new WeakMap<object, Readonly<Record<string, z.ZodType>>>();

/**
 * Records the channel schemas of an agent's graph builder: {@link AGENT_STATE_VALUES} plus the
 * fields of a custom input (`createCodeAgent({ input })`), which are channels too.
 */
export function registerStateValues(
  builder: object,
  inputFields: Record<string, z.ZodType> = {},
): void {
  byBuilder.set(builder, { ...AGENT_STATE_VALUES, ...inputFields });
}

/**
 * The channel schemas of a compiled code-agent graph (compiled graphs keep their builder), or
 * undefined for a graph codehop did not build.
 */
export function stateValueSchemas(graph: unknown): Readonly<Record<string, z.ZodType>> | undefined {
  const builder = (graph as { builder?: unknown } | null)?.builder;
  return builder && typeof builder === "object" ? byBuilder.get(builder) : undefined;
}

/** Why `value` does not fit `schema` ("expected number, received string"), or undefined if it fits. */
export function stateValueProblem(schema: z.ZodType, value: unknown): string | undefined {
  const parsed = schema.safeParse(value);
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0];
  const where = issue.path.length ? ` at ${issue.path.join(".")}` : "";
  return `${issue.message}${where}`;
}
