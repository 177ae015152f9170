import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { ensureDir } from "../util/fs-safe.ts";

/** File name of the SQLite database (checkpoints, call journal, thread registry) inside CODEHOP_HOME. */
export const CHECKPOINT_DB_FILE = "checkpoints.db";

/** Absolute path of the checkpoint database for a data directory. */
export function checkpointDbPath(home: string): string {
  return join(resolve(home), CHECKPOINT_DB_FILE);
}

/** Options for {@link openCodehopDatabase}. */
export interface OpenDatabaseOptions {
  /** Fail with DB_INVALID instead of creating the data directory / database when missing. */
  mustExist?: boolean;
}

/**
 * Opens (creating if needed) `<home>/checkpoints.db`. Every way this can go wrong — home is a
 * file, no permission, the file is not SQLite — becomes a CodehopError DB_INVALID naming the path,
 * because better-sqlite3 otherwise reports "file is not a database" only at the first query.
 */
export function openCodehopDatabase(
  home: string,
  options: OpenDatabaseOptions = {},
): Database.Database {
  const dir = resolve(home);
  const path = checkpointDbPath(home);
  const hint =
    "Set CODEHOP_HOME to a writable directory (default: .codehop in the current directory).";
  let dirStat: ReturnType<typeof statSync> | undefined;
  try {
    dirStat = statSync(dir);
  } catch {
    dirStat = undefined;
  }
  if (dirStat && !dirStat.isDirectory()) {
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `Data directory ${dir} is not a directory. ${hint}`,
    );
  }
  if (!dirStat) {
    if (options.mustExist) {
      throw new CodehopError(
        ErrorCodes.DB_INVALID,
        `No codehop data directory at ${dir} (nothing has run there yet). ${hint}`,
      );
    }
    ensureDir(dir, { code: ErrorCodes.DB_INVALID, what: "data directory", hint });
  }
  let fileExists = true;
  try {
    if (!statSync(path).isFile()) {
      throw new CodehopError(
        ErrorCodes.DB_INVALID,
        `Checkpoint database ${path} is not a file. ${hint}`,
      );
    }
  } catch (err) {
    if (CodehopError.isInstance(err)) throw err;
    fileExists = false;
  }
  if (!fileExists && options.mustExist) {
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `No checkpoint database at ${path} (nothing has run there yet). ${hint}`,
    );
  }
  let db: Database.Database | undefined;
  try {
    db = new Database(path);
    // WAL keeps committed checkpoints and journal rows durable across kill -9 and lets the CLI
    // read history while another process writes.
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("busy_timeout = 5000");
    // Touch the schema so "file is not a database" surfaces here, not mid-run.
    db.prepare("SELECT count(*) FROM sqlite_master").get();
    return db;
  } catch (err) {
    db?.close();
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `Cannot open checkpoint database ${path}: ${(err as Error).message}. ${hint}`,
      { cause: err },
    );
  }
}
