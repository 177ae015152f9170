import { readFile, realpath, stat } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import {
  displayName,
  extractDocument,
  hasSupportedExtension,
  type ExtractedDocument,
} from "../../../ingest/documents.ts";
import { fetchDocument, isPublicAddress, megabytes } from "../../../ingest/fetch-url.ts";
import { isInputError } from "../../../ingest/reader-limits.ts";
import { servedChatAccess, type ChatAccess } from "./access.ts";
import type { ChatFiles, ThreadFile } from "./knowledge-base.ts";
import {
  isDataBlock,
  uploadRefOf,
  type DataBlock,
  type UploadReader,
} from "../../../core/uploads.ts";
import type { ChatSettings } from "./settings.ts";

/**
 * Attaching files and links to a conversation: each one read (a local path), downloaded (a URL,
 * with the settings' timeout, size and redirect limits) or decoded (an upload from a chat UI),
 * extracted to text, and indexed in the thread's knowledge base. One bad attachment never stops
 * the others nor the conversation: it comes back as a result with the reason, which the agent
 * and the user are shown.
 */

/** A file or link to attach: a local path, an http(s) URL, or an uploaded file's bytes (base64). */
export type AttachmentInput =
  | { path: string }
  | { url: string }
  | { name: string; data: string; mediaType?: string }
  | { name: string; upload: string; mediaType?: string };

/** What attaching one input did. */
export interface AttachmentResult {
  /** The name the conversation knows the file by (or the input's name when it failed). */
  name: string;
  /** The path, URL or "upload" it came from. */
  source: string;
  ok: boolean;
  /** The indexed file (when `ok`). */
  file?: ThreadFile;
  /** Why it could not be attached (when not `ok`). */
  error?: string;
  /** The error's code (CODEHOP_INPUT_INVALID for bad input, CODEHOP_INPUT_LIMIT past a reader limit). */
  code?: string;
}

/** Where an input comes from, for messages. */
export function attachmentSource(input: AttachmentInput): string {
  if ("path" in input) return input.path;
  if ("url" in input) return input.url;
  return "upload";
}

/** A path, URL or upload as an {@link AttachmentInput} ("http(s)://..." is a URL). */
export function toAttachmentInput(value: string): AttachmentInput {
  return /^https?:\/\//i.test(value.trim()) ? { url: value.trim() } : { path: value };
}

/** Options of {@link attachAll}. */
export interface AttachOptions {
  /** The run's signal: aborting it stops the attaching (and rethrows its reason). */
  signal?: AbortSignal;
  /**
   * What the inputs may reach on this machine (local paths, private addresses); default: a
   * served graph's (neither, unless CODEHOP_CHAT_ALLOW_PRIVATE_URLS allows private addresses).
   */
  access?: ChatAccess;
  /** Where uploads a server stored (reference blocks) are read (the run context's `uploads`). */
  uploads?: UploadReader;
}

/**
 * Attaches every input to the thread's knowledge base, in order. Bad input (a missing, empty,
 * huge, encrypted, corrupt or unsupported file, a link that fails, a local path or a private
 * address the access does not allow) is a failed result with a clear message; only the run's own
 * abort and broken storage throw.
 */
export async function attachAll(
  files: ChatFiles,
  threadId: string,
  inputs: readonly AttachmentInput[],
  settings: ChatSettings,
  options: AttachOptions = {},
): Promise<AttachmentResult[]> {
  const { signal } = options;
  const access = options.access ?? servedChatAccess();
  const results: AttachmentResult[] = [];
  for (const input of inputs) {
    signal?.throwIfAborted();
    const source = attachmentSource(input);
    try {
      const { name, doc, origin } = await load(input, settings, access, signal, options.uploads);
      const file = await files.add(threadId, {
        name,
        kind: doc.kind,
        source: origin,
        text: doc.text,
        ...(doc.pages !== undefined ? { pages: doc.pages } : {}),
        ...(doc.truncated ? { truncated: true } : {}),
      });
      results.push({ name: file.name, source, ok: true, file });
    } catch (err) {
      if (signal?.aborted) throw err;
      // Bad input (unreadable, or past a reader limit) is the user's to fix; anything else (a
      // full disk, a broken DB) is not.
      if (!isInputError(err)) throw err;
      results.push({
        name: inputName(input),
        source,
        ok: false,
        error: err.message,
        code: err.code,
      });
    }
  }
  return results;
}

function inputName(input: AttachmentInput): string {
  if ("path" in input) return displayName(input.path);
  if ("url" in input) return input.url;
  return input.name || "upload";
}

function invalid(message: string, cause?: unknown): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message, cause ? { cause } : undefined);
}

/** Whether `path` is `root` or inside it (both absolute, normalized). */
function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * The file a path input may read under `access`: any path with `localFiles` (the user's own
 * machine); else only one under `access.filesRoot` once symbolic links are followed (a link out
 * of it is refused), relative paths taken from it; else none. A served graph's input comes from
 * its clients: they may not read the server's other files.
 */
async function localPath(given: string, access: ChatAccess): Promise<string> {
  if (access.localFiles) return resolve(given);
  const refused = (): never => {
    throw invalid(
      `${displayName(given)}: local paths are not read in this conversation (it runs on a server, whose files its clients may not read)${access.filesRoot ? " except those in the directory the server shares for it" : ""}; upload the file instead.`,
    );
  };
  if (!access.filesRoot) return refused();
  const root = await realpath(access.filesRoot).catch((err: unknown) => {
    throw invalid(
      `${displayName(given)}: the directory this server shares for attachments (CODEHOP_CHAT_FILES_ROOT) cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}).`,
      err,
    );
  });
  const path = resolve(root, given);
  // Refused before touching the file system, so a client cannot probe what exists outside.
  if (!isInside(root, path)) return refused();
  const real = await realpath(path).catch(() => path);
  if (!isInside(root, real)) return refused();
  return real;
}

async function load(
  input: AttachmentInput,
  settings: ChatSettings,
  access: ChatAccess,
  signal?: AbortSignal,
  uploads?: UploadReader,
): Promise<{ name: string; doc: ExtractedDocument; origin: string }> {
  if ("url" in input) {
    const fetched = await fetchDocument(
      input.url,
      {
        timeoutMs: settings.urlTimeoutMs,
        maxBytes: settings.maxUrlBytes,
        maxRedirects: settings.maxRedirects,
        ...(access.privateNetwork
          ? {}
          : {
              allowAddress: isPublicAddress,
              refusedHint:
                "the operator of the server can allow such links with CODEHOP_CHAT_ALLOW_PRIVATE_URLS=1",
            }),
      },
      signal,
    );
    const doc = await extractDocument(
      { name: fetched.name, mediaType: fetched.mediaType },
      fetched.bytes,
      { signal },
    );
    // A page is best known by its title; a file by its name.
    const name =
      doc.kind === "html" && doc.title
        ? doc.title
        : hasSupportedExtension(fetched.name)
          ? fetched.name
          : new URL(fetched.finalUrl).host + new URL(fetched.finalUrl).pathname.replace(/\/$/, "");
    return { name, doc, origin: fetched.url };
  }
  if ("path" in input) {
    const path = await localPath(input.path, access);
    const name = displayName(path);
    let size: number;
    try {
      const st = await stat(path);
      if (st.isDirectory())
        throw invalid(`${input.path} is a directory; attach the files in it one by one.`);
      size = st.size;
    } catch (err) {
      if (CodehopError.isInstance(err)) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      throw invalid(
        code === "ENOENT"
          ? `${input.path} does not exist.`
          : `${input.path} cannot be read (${code ?? (err as Error).message}).`,
        err,
      );
    }
    if (size > settings.maxFileBytes) {
      throw invalid(
        `${name} is ${megabytes(size)}, over the ${megabytes(settings.maxFileBytes)} limit for attached files (CODEHOP_CHAT_MAX_FILE_MB).`,
      );
    }
    if (size === 0) throw invalid(`${name} is empty: it has no text to search.`);
    let bytes: Uint8Array;
    try {
      bytes = await readFile(path);
    } catch (err) {
      throw invalid(`${input.path} cannot be read (${(err as Error).message}).`, err);
    }
    return { name, doc: await extractDocument({ name }, bytes, { signal }), origin: path };
  }
  const name = displayName(input.name || "upload");
  let bytes: Uint8Array;
  if ("upload" in input) {
    const stored = await uploads?.get(input.upload);
    if (!stored)
      throw invalid(
        `${name}: the uploaded file is not available here (the server that received it keeps it); upload it again.`,
      );
    bytes = stored;
  } else bytes = Buffer.from(input.data ?? "", "base64");
  if (bytes.length > settings.maxFileBytes) {
    throw invalid(
      `${name} is ${megabytes(bytes.length)}, over the ${megabytes(settings.maxFileBytes)} limit for attached files.`,
    );
  }
  if (bytes.length === 0) throw invalid(`${name} is empty: it has no text to search.`);
  return {
    name,
    doc: await extractDocument({ name, mediaType: input.mediaType }, bytes, { signal }),
    origin: "upload",
  };
}

/**
 * The files a chat UI put into a message as base64 content blocks (LangChain's `file` / `image`
 * blocks, in both the current `mimeType` and the older `mime_type` + `source_type` shape) or a
 * server stored and replaced by a reference (`upload: "sha256:..."`, src/core/uploads.ts), and the
 * message content without their bytes — each block replaced by a short text note, so the
 * conversation's checkpoints do not carry the files (they live in the knowledge base).
 */
export function takeUploads(content: unknown): {
  uploads: AttachmentInput[];
  content: unknown;
} {
  const isUpload = (part: unknown) => isDataBlock(part) || uploadRefOf(part) !== undefined;
  if (!Array.isArray(content) || !content.some(isUpload)) return { uploads: [], content };
  const uploads: AttachmentInput[] = [];
  const kept = content.map((part, i) => {
    if (!isUpload(part)) return part;
    const block = part as DataBlock;
    const mediaType = String(block.mimeType ?? block.mime_type ?? "");
    const name = String(
      block.metadata?.filename ??
        block.metadata?.name ??
        `upload-${i + 1}${guessExtension(mediaType)}`,
    );
    const ref = uploadRefOf(part);
    uploads.push({
      name,
      ...(ref ? { upload: ref } : { data: block.data as string }),
      ...(mediaType ? { mediaType } : {}),
    });
    return { type: "text", text: `[attached file: ${name}]` };
  });
  return { uploads, content: kept };
}

function guessExtension(mediaType: string): string {
  if (mediaType === "application/pdf") return ".pdf";
  if (mediaType.startsWith("image/")) return `.${mediaType.slice(6)}`;
  return "";
}
