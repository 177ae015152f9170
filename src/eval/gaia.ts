import { existsSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { EvalExample, RecordPosition } from "./types.ts";

/**
 * GAIA (General AI Assistants): its dataset layout and its official scorer.
 *
 * Layout: a folder with `metadata.jsonl`, one task per line — `task_id`, `Question`, `Level`
 * (1-3), `Final answer`, `file_name` (an attachment beside metadata.jsonl, or "") — as the
 * benchmark's validation and test splits ship (the test split's answers are "?": not scorable).
 *
 * Scoring follows the leaderboard's `question_scorer` rule for rule: a ground truth that is a
 * number is compared as a number (the answer with `$`, `%` and `,` removed, parsed as a float);
 * one that contains `,` or `;` is a list, compared element by element (same length; numbers as
 * numbers, strings without whitespace, lower-cased); anything else as a string without whitespace
 * and punctuation, lower-cased.
 */

/** The file of a GAIA split. */
export const GAIA_METADATA = "metadata.jsonl";

/** The metadata file of a GAIA dataset path: the folder's metadata.jsonl, or the file itself. */
export function gaiaMetadataPath(path: string): string {
  try {
    if (statSync(path).isDirectory()) return join(path, GAIA_METADATA);
  } catch {
    // Left to the reader, which reports a missing path.
  }
  return path;
}

/** Whether a path looks like a GAIA split (a folder with metadata.jsonl, or that file). */
export function looksLikeGaia(path: string, first?: Record<string, unknown>): boolean {
  if (first && "task_id" in first && "Question" in first) return true;
  try {
    if (statSync(path).isDirectory()) return existsSync(join(path, GAIA_METADATA));
  } catch {
    return false;
  }
  return basename(path) === GAIA_METADATA && !first;
}

const text = (v: unknown): string | undefined =>
  typeof v === "string"
    ? v.trim()
      ? v.trim()
      : undefined
    : typeof v === "number"
      ? String(v)
      : undefined;

/**
 * A GAIA record as an example (or why it cannot be one). `dir` is the folder of metadata.jsonl,
 * where attachments are. The level is the example's `kind` ("1", "2", "3"); the attachment's path
 * its `files`; scoring is GAIA's.
 */
export function gaiaExample(
  rec: Record<string, unknown>,
  position: RecordPosition,
  dir: string,
): EvalExample | string {
  const question = text(rec.Question);
  if (!question) return "missing or empty `Question`";
  const answer = text(rec["Final answer"]);
  if (!answer || answer === "?")
    return "no `Final answer` (GAIA's test split hides its answers): it cannot be scored";
  const fileName = text(rec.file_name);
  const files: string[] = [];
  if (fileName) {
    const path = resolve(dir, fileName);
    if (!path.startsWith(resolve(dir)) || !existsSync(path))
      return `attachment "${fileName}" is not in ${dir}`;
    files.push(path);
  }
  const level = text(rec.Level);
  return {
    id: text(rec.task_id) ?? `q${position.index}`,
    question,
    answers: [answer],
    paragraphs: [],
    supportingTitles: [],
    ...(level ? { kind: level } : {}),
    ...(files.length ? { files } : {}),
    scoring: "gaia",
    position,
  };
}

/** Python's float() of a string (what GAIA's scorer calls), or undefined when it raises. */
function pyFloat(s: string): number | undefined {
  const t = s.trim();
  if (/^[+-]?(inf|infinity)$/i.test(t)) return t.startsWith("-") ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(t)) return NaN;
  if (!/^[+-]?(\d(_?\d)*(\.(\d(_?\d)*)?)?|\.\d(_?\d)*)([eE][+-]?\d(_?\d)*)?$/.test(t))
    return undefined;
  return Number(t.replace(/_/g, ""));
}

/** GAIA's normalize_number_str: `$`, `%` and `,` removed, parsed; infinity when it is no number. */
export function normalizeNumberStr(s: string): number {
  return pyFloat(s.replace(/[$%,]/g, "")) ?? Infinity;
}

const PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;

/** GAIA's normalize_str: no whitespace, lower case, and (by default) no ASCII punctuation. */
export function normalizeStr(s: string, removePunct = true): string {
  const noSpaces = s.replace(/\s/g, "").toLowerCase();
  return removePunct ? noSpaces.replace(PUNCTUATION, "") : noSpaces;
}

/** GAIA's question_scorer (see the module comment). */
export function gaiaScore(modelAnswer: string | null | undefined, groundTruth: string): boolean {
  const answer = modelAnswer ?? "None";
  const truth = pyFloat(groundTruth);
  if (truth !== undefined) return normalizeNumberStr(answer) === truth;
  if (/[,;]/.test(groundTruth)) {
    const gt = groundTruth.split(/[,;]/);
    const ma = answer.split(/[,;]/);
    if (gt.length !== ma.length) return false;
    return gt.every((g, i) => {
      const gNum = pyFloat(g);
      if (gNum !== undefined) return normalizeNumberStr(ma[i]) === gNum;
      return normalizeStr(ma[i], false) === normalizeStr(g, false);
    });
  }
  return normalizeStr(answer) === normalizeStr(groundTruth);
}
