import { accessSync, constants, mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { CodehopError, ErrorCodes, type ErrorCode } from "../errors.ts";

/** Options of {@link ensureDir}. */
export interface EnsureDirOptions {
  /** Error code of a failure (default DB_INVALID). */
  code?: ErrorCode;
  /** What the directory is, for the message (default "directory"). */
  what?: string;
  /** Appended to the message: what the user can do. */
  hint?: string;
}

/**
 * Creates `path` and its missing parents, failing fast with a CodehopError naming the path.
 *
 * Node 20's `mkdirSync(p, { recursive: true })` loops forever at 100% CPU on paths under /proc
 * (e.g. CODEHOP_HOME=/proc/nope), so this walks up to the nearest existing ancestor, checks it is
 * a writable directory, then creates each missing level with a plain (non-recursive) mkdir.
 */
export function ensureDir(path: string, options: EnsureDirOptions = {}): string {
  const dir = resolve(path);
  const code = options.code ?? ErrorCodes.DB_INVALID;
  const what = options.what ?? "directory";
  const fail = (reason: string, cause?: unknown): never => {
    throw new CodehopError(
      code,
      `Cannot create ${what} ${dir}: ${reason}.${options.hint ? ` ${options.hint}` : ""}`,
      cause ? { cause } : undefined,
    );
  };
  const missing: string[] = [];
  let cursor = dir;
  for (;;) {
    let stat: ReturnType<typeof statSync> | undefined;
    try {
      stat = statSync(cursor);
    } catch (err) {
      const errno = (err as NodeJS.ErrnoException).code;
      // ENOTDIR: an ancestor is a file; walking up reports which one.
      if (errno !== "ENOENT" && errno !== "ENOTDIR")
        fail(`cannot inspect ${cursor} (${errno ?? String(err)})`, err);
    }
    if (stat) {
      if (!stat.isDirectory()) fail(`${cursor} is not a directory`);
      break;
    }
    missing.unshift(cursor);
    const parent = dirname(cursor);
    if (parent === cursor) fail("no existing parent directory");
    cursor = parent;
  }
  if (missing.length === 0) return dir;
  try {
    accessSync(cursor, constants.W_OK | constants.X_OK);
  } catch (err) {
    fail(`${cursor} is not writable`, err);
  }
  for (const level of missing) {
    try {
      mkdirSync(level);
    } catch (err) {
      const errno = (err as NodeJS.ErrnoException).code;
      // Created meanwhile by another process: fine if it is a directory.
      if (errno === "EEXIST" && statSync(level).isDirectory()) continue;
      fail(`${(err as Error).message}`, err);
    }
  }
  return dir;
}
