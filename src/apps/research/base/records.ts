import type { Source } from "../../../core/state.ts";
import type { UsageByAgent } from "../../../core/usage.ts";
import type { CitedPassage } from "../../common/citations.ts";

/**
 * What the research pipeline passes from step to step, and how it travels through agents: tools
 * report records through `ctx.report({ sources })` (which the call journal keeps with each call, so
 * a resumed run gets them back), tagged by `kind` so they can be told from plain page sources.
 */

/** A passage that was read, with everything a citation needs (see src/apps/common/citations.ts). */
export type { CitedPassage };

/** A short note condensed from what was read, tied to the exact passages it came from. */
export interface Note {
  /** The sub-question it answers. */
  question: string;
  text: string;
  /** Ids of the passages it came from (each one a {@link CitedPassage} that was read). */
  passages: string[];
}

/** How one sub-question went. */
export interface QuestionRecord {
  question: string;
  /** "answered" (notes kept), "no_evidence" (nothing relevant was read), "failed" (its pipeline failed). */
  status: "answered" | "no_evidence" | "failed";
  /** Notes kept. */
  notes: number;
  /** Why there are no notes (no_evidence, failed). */
  reason?: string;
  /** Model usage of its pipeline (researcher, page readers, condensation), per agent. */
  usage?: UsageByAgent;
}

/** Record kinds in `sources`. */
export const RECORD_KIND = {
  passage: "research_passage",
  note: "research_note",
  question: "research_question",
} as const;

/** A passage as a source record. */
export function passageRecord(p: CitedPassage): Source {
  return { kind: RECORD_KIND.passage, ...stripUndefined(p) } as Source;
}

/** A note as a source record. */
export function noteRecord(n: Note): Source {
  return { kind: RECORD_KIND.note, ...n } as Source;
}

/** A sub-question outcome as a source record. */
export function questionRecord(q: QuestionRecord): Source {
  return { kind: RECORD_KIND.question, ...stripUndefined(q) } as unknown as Source;
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

const isRecord = (s: unknown): s is Record<string, unknown> =>
  typeof s === "object" && s !== null && !Array.isArray(s);

/** The passages among `sources` (deduplicated by id, first kept). */
export function passagesIn(sources: readonly unknown[] | undefined): CitedPassage[] {
  const out = new Map<string, CitedPassage>();
  for (const s of sources ?? []) {
    if (!isRecord(s) || s.kind !== RECORD_KIND.passage) continue;
    if (typeof s.id !== "string" || typeof s.text !== "string" || out.has(s.id)) continue;
    const { kind: _kind, ...rest } = s;
    out.set(s.id, rest as unknown as CitedPassage);
  }
  return [...out.values()];
}

/** The notes among `sources`, in order. */
export function notesIn(sources: readonly unknown[] | undefined): Note[] {
  return (sources ?? [])
    .filter((s): s is Record<string, unknown> => isRecord(s) && s.kind === RECORD_KIND.note)
    .map((s) => ({
      question: String(s.question ?? ""),
      text: String(s.text ?? ""),
      passages: Array.isArray(s.passages) ? s.passages.map(String) : [],
    }));
}

/** The sub-question outcomes among `sources`, in order (the last record of a question wins). */
export function questionsIn(sources: readonly unknown[] | undefined): QuestionRecord[] {
  const out = new Map<string, QuestionRecord>();
  for (const s of sources ?? []) {
    if (!isRecord(s) || s.kind !== RECORD_KIND.question || typeof s.question !== "string") continue;
    const { kind: _kind, ...rest } = s;
    out.delete(s.question);
    out.set(s.question, rest as unknown as QuestionRecord);
  }
  return [...out.values()];
}

/** Sources that are plain pages (not research records). */
export function plainSources(sources: readonly unknown[] | undefined): Source[] {
  return (sources ?? []).filter(
    (s): s is Source =>
      isRecord(s) &&
      !Object.values(RECORD_KIND).includes(
        s.kind as (typeof RECORD_KIND)[keyof typeof RECORD_KIND],
      ),
  );
}
