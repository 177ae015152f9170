import { readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { gaiaExample, gaiaMetadataPath, looksLikeGaia } from "./gaia.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  DATASET_FORMATS,
  type BadRecord,
  type ContextParagraph,
  type DatasetFormat,
  type EvalExample,
  type LoadedDataset,
  type RecordPosition,
} from "./types.ts";

/**
 * Dataset loaders for HotpotQA, 2WikiMultiHopQA, MuSiQue and plain JSONL, also as FlashRAG and
 * Search-R1 distribute them (`golden_answers`, the original fields under `metadata`).
 *
 * Each format is accepted in either container, a JSON array (the official HotpotQA / 2Wiki
 * releases) or JSONL (MuSiQue, Hugging Face exports), and in both field layouts seen in the wild
 * (`context: [[title, sentences]]` and the Hugging Face `context: { title: [], sentences: [] }`).
 * Arrays are split into their top-level elements by a small scanner before parsing, so one broken
 * record (a syntax error, a missing field, a duplicate id, a truncated tail) is reported with its
 * index and line and skipped, instead of losing the whole file.
 */

/** A raw record: its text, position and parse result. */
interface RawRecord {
  position: RecordPosition;
  value?: unknown;
  error?: string;
}

function fail(message: string): never {
  throw new CodehopError(ErrorCodes.INPUT_INVALID, message);
}

/** Splits a JSON array's text into its top-level elements, each parsed on its own. */
function splitJsonArray(text: string): RawRecord[] {
  const out: RawRecord[] = [];
  let line = 1;
  let i = text.indexOf("[");
  for (let k = 0; k < i; k++) if (text[k] === "\n") line++;
  i++;
  let depth = 0;
  let inString = false;
  let escape = false;
  let start = -1;
  let startLine = 0;
  let closed = false;
  const flush = (end: number) => {
    if (start === -1) return;
    const chunk = text.slice(start, end);
    const position = { index: out.length, line: startLine };
    try {
      out.push({ position, value: JSON.parse(chunk) });
    } catch (err) {
      out.push({ position, error: `invalid JSON: ${(err as Error).message}` });
    }
    start = -1;
  };
  for (; i < text.length; i++) {
    const c = text[i];
    if (c === "\n") line++;
    if (inString) {
      if (escape) escape = false;
      else if (c === "\\") escape = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (
      start === -1 &&
      c !== " " &&
      c !== "\n" &&
      c !== "\r" &&
      c !== "\t" &&
      !(depth === 0 && (c === "," || c === "]"))
    ) {
      start = i;
      startLine = line;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || (c === "]" && depth > 0)) depth--;
    else if (depth === 0 && c === ",") flush(i);
    else if (depth === 0 && c === "]") {
      flush(i);
      closed = true;
      break;
    }
  }
  if (!closed) {
    // A truncated file: keep every complete element, report the tail.
    if (start !== -1) {
      out.push({
        position: { index: out.length, line: startLine },
        error: "truncated record (file ends inside it)",
      });
    }
  }
  return out;
}

/** Splits JSONL text into records (blank lines are skipped but counted for line numbers). */
function splitJsonl(text: string): RawRecord[] {
  const out: RawRecord[] = [];
  const lines = text.split(/\r?\n/);
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n].trim();
    if (!raw) continue;
    const position = { index: out.length, line: n + 1 };
    try {
      out.push({ position, value: JSON.parse(raw) });
    } catch (err) {
      out.push({ position, error: `invalid JSON: ${(err as Error).message}` });
    }
  }
  return out;
}

function readRecords(path: string): RawRecord[] {
  let text: string;
  try {
    if (!statSync(path).isFile()) fail(`Dataset ${path} is not a file`);
    text = readFileSync(path, "utf8");
  } catch (err) {
    if (CodehopError.isInstance(err)) throw err;
    fail(`Cannot read dataset ${path}: ${(err as Error).message}`);
  }
  text = text.replace(/^\uFEFF/, "");
  const first = text.trimStart()[0];
  if (first === undefined) fail(`Dataset ${path} is empty`);
  if (first === "[") return splitJsonArray(text);
  if (first === "{") return splitJsonl(text);
  fail(`Dataset ${path} is neither a JSON array nor JSONL (starts with ${JSON.stringify(first)})`);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  if (typeof v === "string") return v.trim() ? v : undefined;
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  return undefined;
}

/** Guesses the format from the file name and the first usable record. */
export function detectFormat(path: string, records?: RawRecord[]): DatasetFormat {
  const recs = records ?? readRecords(path);
  const first = recs.find((r) => isRecord(r.value))?.value as Record<string, unknown> | undefined;
  const sample = first && liftMetadata(first);
  if (first && looksLikeGaia(path, first)) return "gaia";
  if (sample) {
    if ("paragraphs" in sample && Array.isArray(sample.paragraphs)) return "musique";
    if ("context" in sample) {
      if ("evidences" in sample || "entity_ids" in sample) return "2wiki";
      const t = typeof sample.type === "string" ? sample.type : "";
      if (["compositional", "inference", "bridge_comparison"].includes(t)) return "2wiki";
      return "hotpotqa";
    }
  }
  return "jsonl";
}

/** `context` in either layout → paragraphs. Throws a message string on a malformed value. */
function contextParagraphs(ctx: unknown): ContextParagraph[] {
  if (ctx === undefined) return [];
  if (typeof ctx === "string") {
    // Some 2Wiki exports keep context as a JSON string.
    try {
      return contextParagraphs(JSON.parse(ctx));
    } catch {
      throw new Error("`context` is a string that is not JSON");
    }
  }
  if (Array.isArray(ctx)) {
    return ctx.map((entry, i) => {
      if (!Array.isArray(entry) || typeof entry[0] !== "string" || !Array.isArray(entry[1])) {
        throw new Error(`context[${i}] must be [title, [sentences]]`);
      }
      return { title: entry[0], text: (entry[1] as unknown[]).map(String).join("").trim() };
    });
  }
  // Hugging Face layouts: HotpotQA's `sentences`, 2Wiki's (and FlashRAG's 2Wiki) `content`.
  const column = isRecord(ctx) ? (Array.isArray(ctx.sentences) ? "sentences" : "content") : "";
  if (isRecord(ctx) && Array.isArray(ctx.title) && Array.isArray(ctx[column])) {
    const titles = ctx.title as unknown[];
    const sentences = ctx[column] as unknown[];
    if (titles.length !== sentences.length)
      throw new Error(`context.title and context.${column} differ in length`);
    return titles.map((t, i) => ({
      title: String(t),
      text: (Array.isArray(sentences[i]) ? (sentences[i] as unknown[]) : [])
        .map(String)
        .join("")
        .trim(),
    }));
  }
  throw new Error(
    "`context` must be [[title, sentences]] or { title: [], sentences: [] } (or content: [])",
  );
}

function supportingTitles(sf: unknown): string[] {
  if (Array.isArray(sf))
    return [...new Set(sf.filter(Array.isArray).map((e) => String((e as unknown[])[0])))];
  if (isRecord(sf) && Array.isArray(sf.title))
    return [...new Set((sf.title as unknown[]).map(String))];
  return [];
}

/**
 * Fields of the original datasets that FlashRAG (and Search-R1, built from FlashRAG's files) keep
 * under `metadata` — `{id, question, golden_answers, metadata: {type, supporting_facts, context}}`.
 */
const LIFTED_FIELDS = [
  "context",
  "supporting_facts",
  "type",
  "level",
  "evidences",
  "entity_ids",
  "paragraphs",
  "question_decomposition",
  "answerable",
  "answer_aliases",
];

/** A record with its `metadata`'s dataset fields lifted to the top (fields already there win). */
function liftMetadata(rec: Record<string, unknown>): Record<string, unknown> {
  if (!isRecord(rec.metadata)) return rec;
  const lifted: Record<string, unknown> = {};
  for (const k of LIFTED_FIELDS) if (k in rec.metadata) lifted[k] = rec.metadata[k];
  return { ...lifted, ...rec };
}

/** A value given as a string or a list of strings, as strings. */
function stringList(v: unknown): string[] {
  const list = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return list.map(str).filter((a): a is string => !!a);
}

/**
 * Gold answers, canonical first, from every field the formats use: `answer` (a string, or a list
 * as in some 2Wiki exports), `answers`, FlashRAG's and Search-R1's `golden_answers`, and
 * Search-R1's `reward_model.ground_truth.target`.
 */
function goldAnswers(rec: Record<string, unknown>): string[] {
  const truth = isRecord(rec.reward_model) ? rec.reward_model.ground_truth : undefined;
  return [
    ...new Set([
      ...stringList(rec.answer),
      ...stringList(rec.answers),
      ...stringList(rec.golden_answers),
      ...stringList(isRecord(truth) ? truth.target : undefined),
    ]),
  ];
}

type Mapper = (rec: Record<string, unknown>, position: RecordPosition) => EvalExample | string;

// Id fields seen in the wild: `_id` (HotpotQA, 2Wiki releases), `id` (Hugging Face, MuSiQue,
// FlashRAG), `qid` / `question_id` (other exports).
const ID_FIELDS = ["_id", "id", "qid", "question_id"];

function baseFields(rec: Record<string, unknown>, position: RecordPosition) {
  const question = str(rec.question);
  if (!question) return "missing or empty `question`";
  let id: string | undefined;
  for (const k of ID_FIELDS) id ??= str(rec[k]);
  return { question, id: id ?? `q${position.index}` };
}

const hotpotLike: Mapper = (rec, position) => {
  const base = baseFields(rec, position);
  if (typeof base === "string") return base;
  const answers = goldAnswers(rec);
  if (answers.length === 0) return "missing or empty `answer`";
  let paragraphs: ContextParagraph[];
  try {
    paragraphs = contextParagraphs(rec.context);
  } catch (err) {
    return (err as Error).message;
  }
  const kind = [rec.type, rec.level].filter((x) => typeof x === "string").join("/") || undefined;
  return {
    ...base,
    answers,
    paragraphs,
    supportingTitles: supportingTitles(rec.supporting_facts),
    kind,
    position,
  };
};

const musique: Mapper = (rec, position) => {
  const base = baseFields(rec, position);
  if (typeof base === "string") return base;
  if (rec.answerable === false) return "unanswerable question (answerable: false) cannot be scored";
  const answers = goldAnswers(rec);
  if (answers.length === 0) return "missing or empty `answer`";
  const aliases = stringList(rec.answer_aliases);
  if (!Array.isArray(rec.paragraphs)) return "`paragraphs` must be an array";
  const paragraphs: ContextParagraph[] = [];
  const supporting: string[] = [];
  for (const [i, p] of (rec.paragraphs as unknown[]).entries()) {
    if (!isRecord(p) || typeof p.paragraph_text !== "string")
      return `paragraphs[${i}] has no paragraph_text`;
    const title = str(p.title) ?? `paragraph ${i}`;
    paragraphs.push({ title, text: p.paragraph_text.trim() });
    if (p.is_supporting === true) supporting.push(title);
  }
  const hops = Array.isArray(rec.question_decomposition) ? rec.question_decomposition.length : 0;
  return {
    ...base,
    answers: [...new Set([...answers, ...aliases])],
    paragraphs,
    supportingTitles: [...new Set(supporting)],
    kind: hops ? `${hops}hop` : undefined,
    position,
  };
};

const plain: Mapper = (rec, position) => {
  const base = baseFields(rec, position);
  if (typeof base === "string") return base;
  // `answer` (a string or a list: first = canonical, rest = aliases), `answers: [...]`, or
  // FlashRAG's / Search-R1's `golden_answers`.
  const answers = goldAnswers(rec);
  if (answers.length === 0) return "missing or empty `answer`";
  const aliasesRaw = rec.aliases ?? rec.answer_aliases;
  if (aliasesRaw !== undefined && !Array.isArray(aliasesRaw))
    return "`aliases` must be an array of strings";
  const aliases = ((aliasesRaw as unknown[] | undefined) ?? [])
    .map(str)
    .filter((a): a is string => !!a);
  return {
    ...base,
    answers: [...new Set([...answers, ...aliases])],
    paragraphs: [],
    supportingTitles: [],
    position,
  };
};

const MAPPERS: Record<Exclude<DatasetFormat, "gaia">, Mapper> = {
  hotpotqa: hotpotLike,
  "2wiki": hotpotLike,
  musique,
  jsonl: plain,
};

/** Options for {@link loadDataset}. */
export interface LoadDatasetOptions {
  /** Format; guessed from the file when omitted. */
  format?: DatasetFormat;
  /** Keep only the first N usable examples. */
  limit?: number;
}

/**
 * Loads a dataset file. Throws CODEHOP_INPUT_INVALID only when the file as a whole is unusable
 * (missing, empty, not JSON/JSONL, no usable record); single bad records land in `bad`.
 */
export function loadDataset(path: string, options: LoadDatasetOptions = {}): LoadedDataset {
  if (options.format && !DATASET_FORMATS.includes(options.format)) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Unknown dataset format "${options.format}" (expected one of ${DATASET_FORMATS.join(", ")})`,
    );
  }
  // A GAIA split is a folder (metadata.jsonl and its attachments) or its metadata.jsonl.
  const file = options.format === "gaia" || looksLikeGaia(path) ? gaiaMetadataPath(path) : path;
  const records = readRecords(file);
  const format = options.format ?? detectFormat(file, records);
  const map: Mapper =
    format === "gaia"
      ? (rec, position) => gaiaExample(rec, position, dirname(resolve(file)))
      : MAPPERS[format];
  const examples: EvalExample[] = [];
  const bad: BadRecord[] = [];
  const seen = new Set<string>();
  const limit = options.limit ?? Infinity;
  for (const r of records) {
    if (examples.length >= limit) break;
    if (r.error) {
      bad.push({ position: r.position, reason: r.error });
      continue;
    }
    if (!isRecord(r.value)) {
      bad.push({ position: r.position, reason: "record is not a JSON object" });
      continue;
    }
    const ex = map(format === "gaia" ? r.value : liftMetadata(r.value), r.position);
    if (typeof ex === "string") {
      bad.push({ position: r.position, reason: ex });
      continue;
    }
    if (seen.has(ex.id)) {
      bad.push({ position: r.position, reason: `duplicate id "${ex.id}"` });
      continue;
    }
    seen.add(ex.id);
    examples.push(ex);
  }
  if (examples.length === 0) {
    const first = bad[0];
    fail(
      `Dataset ${path} (${format}) has no usable record` +
        (first
          ? `; first problem at record ${first.position.index} (line ${first.position.line}): ${first.reason}`
          : ""),
    );
  }
  return { format, path, examples, bad };
}

/** "record 3 (line 17): missing `answer`" */
export function describeBadRecord(b: BadRecord): string {
  return `record ${b.position.index} (line ${b.position.line}): ${b.reason}`;
}
