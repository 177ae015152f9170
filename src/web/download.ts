import { constants } from "node:fs";
import { mkdir, open } from "node:fs/promises";
import { extname, join } from "node:path";
import { megabytes } from "../ingest/fetch-url.ts";
import { httpGet } from "./http.ts";
import { downloadPolicy, type WebSettings } from "./settings.ts";

/**
 * Downloads a file into a folder (the agent then reads it with its file tools): within the
 * settings' download cap, deadline and link policy, under a safe name of its own (the server's
 * name with anything but letters, digits, `.`, `-` and `_` replaced, never hidden, never a path),
 * made unique with a counter, written with O_EXCL so nothing existing is overwritten or followed.
 */

/** A downloaded file. */
export interface DownloadedFile {
  /** Where it was written. */
  path: string;
  /** Its file name in the folder. */
  name: string;
  /** The URL it came from (after redirects). */
  url: string;
  /** The declared media type, if any. */
  mediaType?: string;
  /** Its size in bytes. */
  bytes: number;
}

const EXTENSIONS: Readonly<Record<string, string>> = {
  "application/pdf": ".pdf",
  "text/html": ".html",
  "text/plain": ".txt",
  "text/csv": ".csv",
  "application/json": ".json",
  "application/xml": ".xml",
  "text/xml": ".xml",
  "application/zip": ".zip",
  "image/png": ".png",
  "image/jpeg": ".jpg",
  "image/gif": ".gif",
  "image/webp": ".webp",
  "audio/mpeg": ".mp3",
  "audio/wav": ".wav",
  "audio/x-wav": ".wav",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
  "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
};

/** A file name safe in any folder: no separators, no leading dot, at most 100 characters. */
export function safeFileName(name: string, mediaType?: string): string {
  let base = name
    .normalize("NFKC")
    .replace(/[^\p{L}\p{N}._-]+/gu, "_")
    .replace(/^[._]+/, "")
    .slice(-100);
  if (!base) base = "download";
  if (!extname(base) && mediaType && EXTENSIONS[mediaType]) base += EXTENSIONS[mediaType];
  return base;
}

/** Downloads `url` into `folder` (created when missing); WebErrors as {@link httpGet}'s. */
export async function downloadFile(
  url: string,
  folder: string,
  settings: WebSettings,
  signal?: AbortSignal,
): Promise<DownloadedFile> {
  const res = await httpGet(url, downloadPolicy(settings), signal);
  await mkdir(folder, { recursive: true });
  const wanted = safeFileName(res.name, res.mediaType);
  const ext = extname(wanted);
  const stem = wanted.slice(0, wanted.length - ext.length);
  for (let n = 1; ; n++) {
    const name = n === 1 ? wanted : `${stem}-${n}${ext}`;
    const path = join(folder, name);
    let handle;
    try {
      handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST" && n < 1000) continue;
      throw err;
    }
    try {
      await handle.writeFile(res.bytes);
    } finally {
      await handle.close();
    }
    return {
      path,
      name,
      url: res.finalUrl,
      ...(res.mediaType ? { mediaType: res.mediaType } : {}),
      bytes: res.bytes.byteLength,
    };
  }
}

/** "report.pdf (application/pdf, 0.1 MB)". */
export function describeDownload(file: DownloadedFile): string {
  return `${file.name} (${file.mediaType ?? "unknown type"}, ${megabytes(file.bytes)})`;
}
