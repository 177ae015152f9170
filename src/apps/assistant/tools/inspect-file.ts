import { readFile, stat } from "node:fs/promises";
import { basename, extname } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { CodehopError } from "../../../errors.ts";
import { extractDocument } from "../../../ingest/documents.ts";
import { decodeDocumentText, looksBinary } from "../../../ingest/document-text.ts";
import { megabytes } from "../../../ingest/fetch-url.ts";
import { readerLimitsFromEnv } from "../../../ingest/reader-limits.ts";
import { BoundedZip } from "../../../ingest/zip-archive.ts";
import { defineTool, type CodeTool, type ToolCallContext } from "../../../tools/define-tool.ts";
import { assistantFilesOf, threadOf, type AssistantFilesDeps } from "../base/context.ts";
import {
  INSPECTOR,
  VISUALIZER,
  answerFromText,
  askAboutImage,
  imageType,
  transcribe,
  type ModelAnswer,
} from "../base/media.ts";

/**
 * `inspect_file(path, question?)`: reads a file of the task (attached, or saved by download_file).
 * Documents go through codehop's reader registry (src/ingest: PDF, DOCX, HTML, Markdown, text, and
 * the formats the readers add — spreadsheets as Markdown tables with their sheet names, slides),
 * bounded and off the main thread; JSON and XML are shown as text; a ZIP archive lists its members,
 * each then readable as `inspect_file("archive.zip/member")`; an image goes to the visualizer model,
 * audio to the transcription endpoint. With `question`, a model answers it from the whole content
 * (the inspector model) and only the answer comes back; without, the content itself (its start,
 * for a long file). A format nothing reads is an Error listing what can be read.
 */

/** Largest file read. */
export const MAX_FILE_BYTES = 50 * 1024 * 1024;
/** Characters of content returned without a question (the rest: ask a question). */
export const SHOWN_CHARS = 6_000;

const AUDIO = new Set([".mp3", ".wav", ".m4a", ".ogg", ".oga", ".flac", ".webm", ".mpga", ".aac"]);
const AUDIO_TYPES: Record<string, string> = {
  ".mp3": "audio/mpeg",
  ".mpga": "audio/mpeg",
  ".wav": "audio/wav",
  ".m4a": "audio/mp4",
  ".ogg": "audio/ogg",
  ".oga": "audio/ogg",
  ".flac": "audio/flac",
  ".webm": "audio/webm",
  ".aac": "audio/aac",
};
/** ZIP-based document formats the readers read as documents, not as archives. */
const ZIP_DOCUMENTS = new Set([".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".epub"]);
const MEDIA_TYPES: Record<string, string> = {
  ".csv": "text/csv",
  ".tsv": "text/tab-separated-values",
  ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  ".xls": "application/vnd.ms-excel",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
};

/** What reading a file gave: its text, or an answer a model already gave (images, audio). */
type Reading = { text: string; note?: string } | { answer: ModelAnswer; model: string };

const isZip = (b: Uint8Array) => b[0] === 0x50 && b[1] === 0x4b && b[2] === 0x03 && b[3] === 0x04;

function isAudio(name: string, b: Uint8Array): boolean {
  if (AUDIO.has(extname(name).toLowerCase())) return true;
  const head = Buffer.from(b.subarray(0, 12)).toString("latin1");
  return (
    head.startsWith("ID3") ||
    head.startsWith("OggS") ||
    head.startsWith("fLaC") ||
    (head.startsWith("RIFF") && head.slice(8, 12) === "WAVE")
  );
}

async function readZip(
  name: string,
  bytes: Uint8Array,
  member: string | undefined,
): Promise<{ name: string; bytes: Uint8Array } | string> {
  const zip = await BoundedZip.open(bytes, name, readerLimitsFromEnv());
  try {
    if (member === undefined) {
      const files = zip.entries.filter((e) => !e.directory);
      const lines = files
        .slice(0, 500)
        .map((e) => `- ${e.name} (${e.size} bytes${e.encrypted ? ", encrypted" : ""})`);
      return [
        `${name} is a ZIP archive of ${files.length} file(s):`,
        ...lines,
        ...(files.length > 500 ? [`... and ${files.length - 500} more`] : []),
        `Read a member with inspect_file(${JSON.stringify(`${name}/${files[0]?.name ?? "member"}`)}, question).`,
      ].join("\n");
    }
    if (!zip.has(member)) {
      const names = zip.entries.filter((e) => !e.directory).map((e) => e.name);
      throw new Error(
        `${name} has no member "${member}". Its members: ${names.slice(0, 50).join(", ")}.`,
      );
    }
    return { name: member, bytes: await zip.read(member) };
  } finally {
    zip.close();
  }
}

/** The text (or a model's answer) of one file's bytes. */
async function read(
  config: RunnableConfig | undefined,
  file: { name: string; bytes: Uint8Array },
  question: string | undefined,
  signal: AbortSignal,
): Promise<Reading> {
  const { name, bytes } = file;
  const ext = extname(name).toLowerCase();
  const image = imageType(bytes);
  if (image) {
    const answer = await askAboutImage(
      config,
      { name, bytes, mediaType: image },
      question ?? "Describe this image in detail, with any text, numbers and labels it contains.",
      signal,
    );
    return { answer, model: VISUALIZER };
  }
  if (isAudio(name, bytes)) {
    const transcript = await transcribe(
      config,
      { name, bytes, mediaType: AUDIO_TYPES[ext] },
      signal,
    );
    return {
      text: transcript
        ? `Transcript of ${name}:\n${transcript}`
        : `${name}: the transcription is empty (no speech?).`,
    };
  }
  if (ext === ".json") {
    const text = decodeDocumentText(bytes, "application/json");
    try {
      return { text: JSON.stringify(JSON.parse(text), null, 2) };
    } catch {
      return { text, note: "(not valid JSON: shown as it is)" };
    }
  }
  if (ext === ".xml" || ext === ".tsv" || ((ext === ".csv" || !ext) && !looksBinary(bytes))) {
    // Spreadsheet-like and structured text: the readers' own reader when they have one.
    try {
      const doc = await extractDocument(
        { name, mediaType: MEDIA_TYPES[ext] ?? "text/plain" },
        bytes,
        { signal },
      );
      return { text: doc.text, ...(doc.truncation ? { note: doc.truncation } : {}) };
    } catch (err) {
      if (signal.aborted) throw err;
      return { text: decodeDocumentText(bytes) };
    }
  }
  const doc = await extractDocument(
    { name, ...(MEDIA_TYPES[ext] ? { mediaType: MEDIA_TYPES[ext] } : {}) },
    bytes,
    {
      signal,
    },
  );
  return { text: doc.text, ...(doc.truncation ? { note: doc.truncation } : {}) };
}

/** Options of {@link createInspectFileTool}. */
export type InspectFileDeps = AssistantFilesDeps;

/** The `inspect_file(path, question?)` tool (see the module comment). */
export function createInspectFileTool(deps: InspectFileDeps): CodeTool<any> {
  return defineTool({
    name: "inspect_file",
    description:
      'Reads a file of this task (attached, or saved by download_file): PDF, Word, Excel and CSV (tables), PowerPoint, JSON, XML, ZIP (lists members; read one as "archive.zip/member"), text, images, audio. With a question, returns only the answer to it; without, the file\'s content.',
    parameters: z.object({
      path: z.string().min(1).describe('the file\'s name, e.g. "report.pdf"'),
      question: z.string().optional().describe("what to find out from the file (recommended)"),
    }),
    returns: "string",
    invoke: async ({ path, question }, ctx: ToolCallContext) => {
      const config = ctx.config as RunnableConfig | undefined;
      const files = assistantFilesOf(config, deps);
      const thread = threadOf(config);
      let real: string;
      let member: string | undefined;
      try {
        real = files.resolve(thread, path);
      } catch (err) {
        // "archive.zip/inner/file.csv": a member of an archive of the task.
        const m = /^(.*?\.zip)\/(.+)$/i.exec(String(path).trim());
        if (!m) throw err;
        real = files.resolve(thread, m[1]);
        member = m[2];
      }
      const size = (await stat(real)).size;
      if (size > MAX_FILE_BYTES)
        throw new Error(
          `${path} is ${megabytes(size)}, over the ${megabytes(MAX_FILE_BYTES)} inspect_file reads.`,
        );
      let file: { name: string; bytes: Uint8Array } = {
        name: basename(real),
        bytes: await readFile(real),
      };
      const q = question?.trim() || undefined;
      try {
        if (isZip(file.bytes) && !ZIP_DOCUMENTS.has(extname(file.name).toLowerCase())) {
          const opened = await readZip(file.name, file.bytes, member);
          if (typeof opened === "string") return opened;
          file = opened;
        } else if (member !== undefined) {
          throw new Error(
            `${basename(real)} is not a ZIP archive: read it with inspect_file(${JSON.stringify(basename(real))}).`,
          );
        }
        const reading = await read(config, file, q, ctx.signal);
        if ("answer" in reading) {
          ctx.report?.({ usage: { [reading.model]: reading.answer.usage } });
          return reading.answer.answer;
        }
        if (q) {
          const answer = await answerFromText(
            config,
            { name: file.name, text: reading.text },
            q,
            ctx.signal,
          );
          ctx.report?.({ usage: { [INSPECTOR]: answer.usage } });
          return answer.answer;
        }
        const text = reading.text;
        const shown =
          text.length > SHOWN_CHARS
            ? `${text.slice(0, SHOWN_CHARS)}\n[... showing the first ${SHOWN_CHARS} of ${text.length} characters: ask inspect_file(path, question) to search the whole file]`
            : text;
        return `File: ${file.name}${reading.note ? ` ${reading.note}` : ""}\n${shown}`;
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        // The readers' INPUT_INVALID / INPUT_LIMIT: the agent reads why (an encrypted PDF, a bomb ...).
        if (CodehopError.isInstance(err) && /INPUT/.test(err.code)) throw new Error(err.message);
        throw err;
      }
    },
  });
}
