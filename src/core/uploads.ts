import { createHash } from "node:crypto";

/**
 * Files a client uploads inside a run's input (a chat UI's base64 `file` / `image` content
 * blocks). A server keeps their bytes out of everything it persists per step — the run's input,
 * its stream events, every checkpoint — by storing each file once, by content hash, and handing
 * the graph a reference block instead: `{ type: "file", upload: "sha256:<hex>", mimeType,
 * metadata }`. A graph that needs the bytes reads them through the run context's `uploads` port.
 */

/** A run's uploaded files, by content hash (the run context's `uploads`, set by the server). */
export interface UploadReader {
  /** The bytes of the upload whose SHA-256 is `sha256` (hex), or undefined when unknown. */
  get(sha256: string): Promise<Uint8Array | undefined>;
}

/** A content block carrying a file's bytes as base64 (LangChain's `file` / `image` blocks). */
export interface DataBlock {
  type: string;
  data?: unknown;
  mimeType?: unknown;
  mime_type?: unknown;
  source_type?: unknown;
  metadata?: { filename?: unknown; name?: unknown };
  /** A stored upload: "sha256:<hex>" (no `data` then). */
  upload?: unknown;
}

/** Whether `part` is a content block with a file's bytes inline (base64 `data`). */
export function isDataBlock(part: unknown): part is DataBlock & { data: string } {
  if (!part || typeof part !== "object") return false;
  const p = part as DataBlock;
  return (p.type === "file" || p.type === "image") && typeof p.data === "string";
}

/** The hash of a reference block (`upload: "sha256:<hex>"`), else undefined. */
export function uploadRefOf(part: unknown): string | undefined {
  if (!part || typeof part !== "object") return undefined;
  const ref = (part as DataBlock).upload;
  return typeof ref === "string" && /^sha256:[0-9a-f]{64}$/.test(ref) ? ref.slice(7) : undefined;
}

/** SHA-256 (hex) of bytes. */
export function sha256Of(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * `input` with every inline file of its `messages` stored by `save` (given the bytes and their
 * hash) and replaced by a reference block; the input itself when it has none. The input is not
 * modified.
 */
export async function storeUploads(
  input: unknown,
  save: (sha256: string, bytes: Buffer) => Promise<void>,
): Promise<unknown> {
  const messages = (input as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) return input;
  let changed = false;
  const stored = await Promise.all(
    messages.map(async (message) => {
      const content = (message as { content?: unknown } | null)?.content;
      if (!Array.isArray(content) || !content.some(isDataBlock)) return message;
      changed = true;
      const blocks = await Promise.all(
        content.map(async (part) => {
          if (!isDataBlock(part)) return part;
          const bytes = Buffer.from(part.data, "base64");
          const sha256 = sha256Of(bytes);
          await save(sha256, bytes);
          const { data: _data, ...rest } = part;
          return { ...rest, upload: `sha256:${sha256}` };
        }),
      );
      return { ...(message as object), content: blocks };
    }),
  );
  return changed ? { ...(input as object), messages: stored } : input;
}
