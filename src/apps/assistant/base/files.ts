import { constants, existsSync, readdirSync, realpathSync, rmSync, statSync } from "node:fs";
import { copyFile, mkdir, readFile } from "node:fs/promises";
import { basename, isAbsolute, join, relative, resolve, sep } from "node:path";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import { safeFileName } from "../../../web/download.ts";

/**
 * The files of an assistant task: one folder per thread, `<home>/assistant-files/<thread>/`, holding
 * copies of the files attached to the task (`assist --file`, GAIA's attachments) and what
 * `download_file` saved. `inspect_file` and `visualizer` read only from there — never any other
 * path of the machine — so a served graph's client cannot make the agent read the server's files,
 * and a thread keeps its files when the originals move (a resume reads the same bytes).
 */
export class AssistantFiles {
  /** `<home>/assistant-files`. */
  readonly root: string;

  constructor(home: string) {
    this.root = join(resolve(home), "assistant-files");
  }

  /** The folder of a thread (its id made safe as a folder name). */
  dir(threadId: string): string {
    const safe = threadId.replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^\.+/, "_") || "_";
    return join(this.root, safe);
  }

  /**
   * Copies a local file into the thread's folder under its own name (made unique with a counter),
   * returning the name the agent uses. INPUT_INVALID for a path that is not a readable file.
   */
  async attach(threadId: string, path: string): Promise<string> {
    let st;
    try {
      st = statSync(path);
    } catch {
      throw new CodehopError(ErrorCodes.INPUT_INVALID, `--file ${path}: no such file.`);
    }
    if (!st.isFile())
      throw new CodehopError(ErrorCodes.INPUT_INVALID, `--file ${path}: not a regular file.`);
    const dir = this.dir(threadId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const wanted = safeFileName(basename(path));
    const dot = wanted.lastIndexOf(".");
    const [stem, ext] = dot > 0 ? [wanted.slice(0, dot), wanted.slice(dot)] : [wanted, ""];
    const content = await readFile(path);
    for (let n = 1; n < 1000; n++) {
      const name = n === 1 ? wanted : `${stem}-${n}${ext}`;
      // The same file attached again (a re-run of the task): the copy already there.
      const there = join(dir, name);
      if (
        existsSync(there) &&
        statSync(there).size === content.length &&
        (await readFile(there)).equals(content)
      )
        return name;
      try {
        await copyFile(path, join(dir, name), constants.COPYFILE_EXCL);
        return name;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    }
    throw new CodehopError(
      ErrorCodes.INPUT_INVALID,
      `--file ${path}: too many files of that name.`,
    );
  }

  /** The thread's files, by name (sorted). */
  list(threadId: string): string[] {
    const dir = this.dir(threadId);
    if (!existsSync(dir)) return [];
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(dir, join(e.parentPath, e.name)))
      .sort();
  }

  /**
   * The absolute path of `path` (a name or a path relative to the thread's folder; an absolute path
   * only when it lies inside it), after symbolic links, or an Error the agent reads: a path outside
   * the folder, or one that does not exist (naming the files there).
   */
  resolve(threadId: string, path: string): string {
    const dir = this.dir(threadId);
    const given = String(path ?? "").trim();
    if (!given)
      throw new Error("The path is empty: give the name of an attached or downloaded file.");
    const candidate = isAbsolute(given) ? given : resolve(dir, given.replace(/^\.\/+/, ""));
    const files = this.list(threadId);
    const known = files.length
      ? ` Files of this task: ${files.map((f) => JSON.stringify(f)).join(", ")}.`
      : " This task has no files yet (download_file(url) saves one).";
    let real: string;
    try {
      real = realpathSync(candidate);
    } catch {
      throw new Error(`No file "${given}".${known}`);
    }
    const realDir = existsSync(dir) ? realpathSync(dir) : dir;
    if (real !== realDir && !real.startsWith(realDir + sep))
      throw new Error(
        `"${given}" is outside this task's files: only attached and downloaded files can be read.${known}`,
      );
    if (!statSync(real).isFile()) throw new Error(`"${given}" is not a file.${known}`);
    return real;
  }

  /** Deletes a thread's folder; true when there was one. */
  deleteThread(threadId: string): boolean {
    const dir = this.dir(threadId);
    if (!existsSync(dir)) return false;
    rmSync(dir, { recursive: true, force: true });
    return true;
  }
}
