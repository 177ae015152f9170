/**
 * V8 code caches of the SES bundle for starting children (see {@link sesCodeCaches}): where they
 * are kept, when a starting child is to make one, and the checks that make a cache file safe to
 * hand to a child.
 */
import { createHash, randomBytes } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { threadId } from "node:worker_threads";
import { CHILD_MODULES_ENTRY, SES_PATH, type ChildSpec } from "./child-launch.ts";

/**
 * V8 code caches of the SES bundle, by child heap size (V8 accepts a cache only under the flags it
 * was made with, and `--max-old-space-size` is one of them). A child given one loads SES and locks
 * down in less time (child/lockdown.mjs). A cache is made by the first child of a heap size that
 * finds none: it sends the bytecode its start-up compiled before it reports ready — before it runs
 * any action, so no guest code has run in that process yet; a `code-cache` message at any other
 * time, or from a child not asked for one, is a protocol violation (the child is killed). Files are
 * named by a hash of what the bytecode depends on (the Node build, the SES file's bytes, the heap
 * size; V8's own check compares only the source's length and its flags), so a cache never goes
 * stale and host processes of this user share them, in a directory only this user may use
 * (`codehop-sandbox-<uid>` in the temp directory: created 0700). A code cache is trusted input (a
 * crafted one is native code in the child), so the directory and the file are checked at every use
 * — before a child is given the file and before every store — and not used when the directory is
 * not a real one of ours closed to others, or the file is not a regular file of ours closed to
 * others (the temp directory's cleaning may remove the directory of a long-running host, and
 * another user re-create it). The SES file's size, mtime and inode are checked at every use too:
 * when SES is replaced in place the hash is computed again. Children may read their cache file
 * (permission model) and write nothing. A cache V8 refuses is dropped and made again.
 */
export const sesCodeCaches = {
  /** The private directory's path (undefined: not looked for yet; null: no user ids here). */
  dir: undefined as string | null | undefined,
  /** Hash of the Node build and the SES bundle (computed again when the SES file changes). */
  key: "",
  /** Size, mtime and inode of the SES file when `key` was computed. */
  sesStamp: "",
  /** Heap size -> the cache file, once made or found (checked again at every use). */
  files: new Map<number, string>(),
  /** Heap size -> the file a starting child's cache is to be stored in. */
  making: new Map<number, string>(),
  /** Heap size -> attempts that gave no cache (the child died first, or the file could not be written). */
  failures: new Map<number, number>(),

  /** The cache file for children of `spec`, if made (here or by another host process of this user) and safe to use. */
  fileFor(spec: ChildSpec): string | undefined {
    // Not for a test's own child program; the child's modules (a benchmark's comparison with the
    // bundle) load SES as the bundle does.
    if (spec.entry !== undefined && spec.entry !== CHILD_MODULES_ENTRY) return undefined;
    const current = this.path(spec); // the directory checked, the key current
    if (current === null) return undefined;
    let file = this.files.get(spec.heapMb);
    // One named for a SES file replaced since is not used.
    if (file !== undefined && dirname(file) === this.dir && file !== current) file = undefined;
    file ??= this.making.has(spec.heapMb) ? undefined : current;
    if (file === undefined) {
      this.files.delete(spec.heapMb);
      return undefined;
    }
    // A file set elsewhere (tests) needs its own directory checked.
    const fits = dirname(file) === this.dir || isPrivateDir(dirname(file));
    if (fits && isPrivateFile(file)) {
      this.files.set(spec.heapMb, file);
      return file;
    }
    this.files.delete(spec.heapMb);
    return undefined;
  },

  /** Where the cache for `spec` is kept, or null when there is no safe private directory now. */
  path(spec: ChildSpec): string | null {
    if (this.dir === undefined) this.dir = privateCacheDirPath();
    if (this.dir === null || !ensurePrivateDir(this.dir)) return null;
    try {
      const st = statSync(SES_PATH);
      const stamp = `${st.size}:${st.mtimeMs}:${st.ino}`;
      if (!this.key || stamp !== this.sesStamp) {
        this.key = createHash("sha256")
          .update(`${process.version}\0${process.execPath}\0${process.arch}\0`)
          .update(readFileSync(SES_PATH))
          .digest("hex")
          .slice(0, 24);
        this.sesStamp = stamp;
      }
    } catch {
      return null; // SES being replaced: no cache for this child
    }
    return join(this.dir, `ses-${this.key}-${spec.heapMb}.cache`);
  },

  /** True when a child of `spec` starting now is to make its heap size's cache (then it is recorded as making it). */
  begin(spec: ChildSpec): boolean {
    const heap = spec.heapMb;
    if (spec.entry !== undefined || this.files.has(heap) || this.making.has(heap)) return false;
    if ((this.failures.get(heap) ?? 0) >= MAX_CODE_CACHE_ATTEMPTS) return false;
    const file = this.path(spec);
    if (file === null) return false;
    this.making.set(heap, file);
    return true;
  },

  /** Stores the cache a child of `spec` made (base64); false if it could not be stored. */
  store(spec: ChildSpec, base64: string): boolean {
    const file = this.making.get(spec.heapMb) ?? this.path(spec);
    this.making.delete(spec.heapMb);
    // Written whole, then renamed (another host process never reads half a file), under a name
    // no one can predict, created exclusively (never through a planted symlink), 0600.
    const partial = `${file}.${process.pid}.${threadId}.${randomBytes(8).toString("hex")}.partial`;
    let created = false;
    try {
      if (file === null || !isPrivateDir(dirname(file)))
        throw new Error("no safe directory for code caches");
      writeFileSync(partial, Buffer.from(base64, "base64"), { mode: 0o600, flag: "wx" });
      created = true;
      renameSync(partial, file);
      this.files.set(spec.heapMb, file);
      return true;
    } catch {
      if (created) rmSync(partial, { force: true });
      this.failed(spec);
      return false;
    }
  },

  /** The child making `spec`'s cache ended without one. */
  failed(spec: ChildSpec): void {
    if (!this.making.delete(spec.heapMb) && this.files.has(spec.heapMb)) return;
    this.failures.set(spec.heapMb, (this.failures.get(spec.heapMb) ?? 0) + 1);
  },

  /** V8 refused `file`, given to a child of `spec`: the next child makes a new one. */
  refused(spec: ChildSpec, file: string): void {
    if (this.files.get(spec.heapMb) !== file) return;
    this.files.delete(spec.heapMb);
    if (file === this.path(spec)) rmSync(file, { force: true });
    this.failures.set(spec.heapMb, (this.failures.get(spec.heapMb) ?? 0) + 1);
  },
};

/** `codehop-sandbox-<uid>` in the temp directory; null where there are no user ids or no temp directory. */
function privateCacheDirPath(): string | null {
  const uid = process.getuid?.();
  if (uid === undefined) return null;
  try {
    return join(realpathSync(tmpdir()), `codehop-sandbox-${uid}`);
  } catch {
    return null;
  }
}

/** Makes `dir` 0700 if absent; true when it is then safe to trust (see isPrivate). */
function ensurePrivateDir(dir: string): boolean {
  if (isPrivateDir(dir)) return true;
  try {
    mkdirSync(dir, { mode: 0o700 }); // fails (EEXIST) when anything is there already
    return isPrivateDir(dir);
  } catch {
    return false;
  }
}

/** True when `path` (not followed if a symlink) is ours, closed to others, and a directory or a regular file as asked. */
function isPrivate(path: string, kind: "dir" | "file"): boolean {
  try {
    const st = lstatSync(path);
    return (
      (kind === "dir" ? st.isDirectory() : st.isFile()) &&
      st.uid === process.getuid?.() &&
      (st.mode & 0o077) === 0
    );
  } catch {
    return false;
  }
}
const isPrivateDir = (dir: string) => isPrivate(dir, "dir");
const isPrivateFile = (file: string) => isPrivate(file, "file");

/** Children that may fail to make a heap size's code cache before no more are asked to. */
const MAX_CODE_CACHE_ATTEMPTS = 3;
