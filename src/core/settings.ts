import { z } from "zod";
import { GUEST_CAPABILITIES } from "../sandbox/contract.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { HistoryEntry } from "./history.ts";

/**
 * Agent limits and policies with their defaults — the one place defaults live. `createCodeAgent`
 * validates its options against this schema so a bad value fails at build time with
 * CODEHOP_CONFIG_INVALID, not in the middle of a run.
 */
export const AgentSettingsSchema = z.object({
  /** Code actions the agent may run before its max-steps policy applies. */
  maxSteps: z.number().int().min(1).max(1000).default(10),
  /**
   * What happens when `maxSteps` actions ran without a final answer:
   * "last_observation" returns the last observation as the answer (the reference design's page agent, docs/app.md);
   * "final_answer_prompt" asks the model once for a final answer from what it has.
   */
  maxStepsPolicy: z.enum(["last_observation", "final_answer_prompt"]).default("last_observation"),
  /** Run a planning step before action 1 and then every N actions (unset = never). */
  planningInterval: z.number().int().min(1).optional(),
  /**
   * What the model sees: "condensed" (default), "full" (every action and observation), or a custom
   * pure function from all history entries to the ones to keep (see src/core/history.ts).
   */
  historyPolicy: z
    .union([
      z.enum(["condensed", "full"]),
      z.custom<(entries: HistoryEntry[]) => HistoryEntry[]>((v) => typeof v === "function", {
        message: 'must be "condensed", "full" or a function',
      }),
    ])
    .default("condensed"),
  /**
   * k: the same normalized code producing the same observation k times in a row adds a nudge to
   * the observation; 2k times applies `repeatPolicy`.
   */
  repeatThreshold: z.number().int().min(1).default(3),
  /** At 2k repeats: "replan" forces a planning step, "stop" ends the run per `maxStepsPolicy`. */
  repeatPolicy: z.enum(["replan", "stop"]).default("replan"),
  /** Stop sequences sent with every action request. */
  stopSequences: z.array(z.string().min(1)).default(["<end_action>", "Observation:"]),
  /** Observations longer than this are cut (head and tail kept) before entering the prompt. */
  maxObservationChars: z.number().int().min(200).default(8_000),
  /**
   * Wall-clock limit of one code action (the sandbox kills it after that). Default: the sandbox's
   * own limit (30 s) for agents with plain tools, {@link AGENT_ACTION_TIMEOUT_MS} for agents that
   * call other agents, whose actions wait for whole sub-agent runs (many model calls).
   */
  actionTimeoutMs: z
    .number()
    .int()
    .min(1)
    .max(24 * 3_600_000)
    .optional(),
  /** Use the model's streaming API (`.stream()` + concatenated chunks) instead of `invoke()`. */
  streamModel: z.boolean().default(false),
});

/** Default action time limit for agents with agent tools (15 minutes). */
export const AGENT_ACTION_TIMEOUT_MS = 15 * 60_000;

/** Validated agent settings (every default filled in). */
export type AgentSettings = z.infer<typeof AgentSettingsSchema>;
/** Agent settings as given by a caller (defaults optional). */
export type AgentSettingsInput = z.input<typeof AgentSettingsSchema>;

/** Validates settings and fills defaults; throws CODEHOP_CONFIG_INVALID naming the bad fields. */
export function resolveSettings(agentName: string, input: AgentSettingsInput): AgentSettings {
  const parsed = AgentSettingsSchema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join(".") || "settings"}: ${i.message}`)
      .join("; ");
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Agent "${agentName}": invalid settings — ${problems}`,
    );
  }
  return parsed.data;
}

/** Built-in capabilities of guest code, listed in the system prompt's {{capabilities}} (the sandbox contract's). */
export const DEFAULT_CAPABILITIES: readonly string[] = GUEST_CAPABILITIES;

/** Recursion limit that lets an agent use all its steps (plan+act+observe per step, planning, final answer). */
export function recursionLimitFor(settings: Pick<AgentSettings, "maxSteps">): number {
  return settings.maxSteps * 4 + 10;
}
