import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { clientSettableFields } from "../../../core/client-settings.ts";
import { readRunContext } from "../../../core/run-context.ts";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import { loadAppConfig, type AppConfigOverrides } from "../../../runs/config.ts";
import { KnowledgeRunContextSchema } from "../../common/knowledge-source.ts";

/** Upper bound of `maxQuestions` (and of `--max-questions`). */
export const MAX_QUESTIONS = 12;

/**
 * The research app's limits and policies with their defaults — the one place they live. A run
 * takes them from its run context (`research: { ... }`, e.g. from `research()` options or Studio's
 * configuration form) and its input (`maxQuestions`), validated here.
 */
export const ResearchSettingsSchema = z.object({
  /** Sub-questions the planner may research in one run (its `research()` calls, over all its actions). */
  maxQuestions: z.number().int().min(1).max(MAX_QUESTIONS).default(4),
  /** Sub-question pipelines running at once (the bound of the planner's `Promise.all`). */
  concurrency: z.number().int().min(1).max(8).default(3),
  /** Passages one `retrieve_passages` call of a page reader returns (and reports as read). */
  passagesPerRead: z.number().int().min(1).max(10).default(4),
  /** Notes the condensation step keeps per sub-question. */
  maxNotesPerQuestion: z.number().int().min(1).max(12).default(6),
  /** Report sections the writer drafts at once. */
  writerConcurrency: z.number().int().min(1).max(8).default(3),
  /** Cited sentences per verifier model call. */
  verifyBatchSize: z.number().int().min(1).max(20).default(5),
  /** Verifier model calls at once. */
  verifyConcurrency: z.number().int().min(1).max(8).default(3),
  /** What happens to a sentence the verifier finds unsupported: removed, or kept with a flag. */
  onUnsupported: z.enum(["drop", "flag"]).default("drop"),
});

// A client of a served research graph may choose every research setting within the bounds above
// (src/core/client-settings.ts): they shape its own report, and the schema caps each one.
clientSettableFields(ResearchSettingsSchema, "all");

/** Validated research settings (every default filled in). */
export type ResearchSettings = z.infer<typeof ResearchSettingsSchema>;
/** Research settings as a caller gives them (each optional). */
export type ResearchSettingsInput = z.input<typeof ResearchSettingsSchema>;

/** Longest topic accepted, in characters: a topic names a subject; long material belongs in a corpus. */
export const MAX_TOPIC_CHARS = 1000;

declare module "../../../core/run-context.ts" {
  interface RunContext {
    /** The research app's settings for this run (defaults: {@link ResearchSettingsSchema}). */
    research?: ResearchSettingsInput;
  }
}

/** The research app's run-context schema: the knowledge-source keys plus `research`. */
export const ResearchRunContextSchema = KnowledgeRunContextSchema.extend({
  research: ResearchSettingsSchema.partial()
    .optional()
    .describe("research limits (maxQuestions, concurrency ...); unset fields take their defaults"),
});

/**
 * Validates settings and fills defaults; throws CODEHOP_CONFIG_INVALID naming the bad fields (a
 * caller's mistake, caught before any model call).
 */
export function resolveResearchSettings(input: ResearchSettingsInput = {}): ResearchSettings {
  const parsed = ResearchSettingsSchema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join(".") || "settings"}: ${i.message}`)
      .join("; ");
    throw new CodehopError(ErrorCodes.CONFIG_INVALID, `Invalid research settings — ${problems}`);
  }
  return parsed.data;
}

/**
 * The settings of a run: its run context's `research`, with the graph input's `maxQuestions` (when
 * given) winning over it.
 */
export function researchSettingsOf(
  config: RunnableConfig | undefined,
  maxQuestions?: number | null,
): ResearchSettings {
  const fromContext = readRunContext(config).research ?? {};
  return resolveResearchSettings({
    ...fromContext,
    ...(typeof maxQuestions === "number" ? { maxQuestions } : {}),
  });
}

/**
 * Checks a research topic: not empty, not huge. Throws CODEHOP_INPUT_INVALID with what to do
 * instead; returns the trimmed topic.
 */
export function checkTopic(topic: unknown): string {
  const text = typeof topic === "string" ? topic.trim() : "";
  if (!text) {
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      'The research topic is empty. Give a subject to research, e.g. codehop research "How the Eiffel Tower was built".',
    );
  }
  if (text.length > MAX_TOPIC_CHARS) {
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      `The research topic is ${text.length} characters long; the limit is ${MAX_TOPIC_CHARS}. ` +
        "A topic names a subject in a sentence or two; to research documents, ingest them into a corpus (`codehop ingest`) and pass --corpus.",
    );
  }
  return text;
}

/**
 * Refuses a source choice that cannot run, before anything does: the corpus source without a corpus
 * DB (CODEHOP_CONFIG_INVALID), an unknown source name (from CODEHOP_SOURCES: when the configuration
 * is loaded).
 */
export function checkSources(overrides: AppConfigOverrides = {}): void {
  const config = loadAppConfig(overrides);
  if (config.sources?.includes("corpus") && !config.corpus) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "The corpus source needs a corpus DB: pass --corpus <db> (or set CODEHOP_CORPUS), made by `codehop ingest`.",
    );
  }
}
