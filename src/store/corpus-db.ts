import { existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import * as sqliteVec from "sqlite-vec";
import { cliCommand, placeholder } from "../config/cli-command.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { ensureDir } from "../util/fs-safe.ts";

/** Bumped when the corpus schema changes incompatibly. */
export const CORPUS_SCHEMA_VERSION = 1;

/** A better-sqlite3 connection to a corpus file. */
export type CorpusDb = Database.Database;

// One file holds everything. `passages_fts` and `titles_fts` are contentless FTS5 indexes (the text
// lives once, in `passages`/`documents`), with `contentless_delete=1` so re-ingesting a title can
// remove its old rows. Vectors (`passages_vec`, sqlite-vec) are created on first use, when the
// embedding size is known.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  title_key TEXT NOT NULL UNIQUE,
  text TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  hash TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
  id INTEGER PRIMARY KEY,
  doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  section TEXT NOT NULL,
  text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_doc ON passages (doc_id, ord);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
  title, section, text, content='', contentless_delete=1,
  tokenize='porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS titles_fts USING fts5(
  title, content='', contentless_delete=1, tokenize='trigram'
);
CREATE TABLE IF NOT EXISTS aliases (alias_key TEXT PRIMARY KEY, alias TEXT NOT NULL, target_key TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ingest_runs (
  source_key TEXT PRIMARY KEY,
  records_done INTEGER NOT NULL,
  completed INTEGER NOT NULL,
  updated_at TEXT NOT NULL
);
`;

/**
 * Opens (and with `create`, initialises) a corpus database. Fails with DB_INVALID when the file is
 * missing (without `create`), is not SQLite, or has another schema version.
 */
export function openCorpusDb(
  path: string,
  options: { create?: boolean; readonly?: boolean } = {},
): CorpusDb {
  if (path !== ":memory:") {
    if (!options.create && !existsSync(path)) {
      throw new CodehopError(
        ErrorCodes.DB_INVALID,
        `corpus database ${path} does not exist; create it with \`${cliCommand(["ingest", placeholder("file"), "--db", path])}\``,
      );
    }
    // SQLite reports a directory as "disk I/O error" at the first query: name it instead.
    if (existsSync(path) && statSync(path).isDirectory()) {
      throw new CodehopError(
        ErrorCodes.DB_INVALID,
        `corpus database ${path} is a directory: give the path of a corpus file (e.g. ${resolve(path, "corpus.db")}), ` +
          `the file \`${cliCommand(["ingest", placeholder("file"), "--db", placeholder("corpus.db")])}\` creates`,
      );
    }
    // Like the data directory (--home): a new corpus's missing parent directories are created.
    if (options.create) ensureDir(dirname(resolve(path)), { what: "corpus directory" });
  }
  let db: CorpusDb;
  try {
    db = new Database(path, {
      readonly: options.readonly ?? false,
      fileMustExist: !options.create,
    });
    sqliteVec.load(db);
    if (!options.readonly) {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
    }
    db.pragma("foreign_keys = ON");
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `cannot open corpus database ${path}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  try {
    const hasMeta = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'")
      .get();
    if (!hasMeta) {
      if (!options.create) throw new Error("it is not a codehop corpus (no meta table)");
      const nonEmpty = db.prepare("SELECT count(*) AS n FROM sqlite_master").get() as { n: number };
      if (nonEmpty.n > 0)
        throw new Error("it is an existing SQLite database that is not a codehop corpus");
      db.exec(SCHEMA);
      db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', ?)").run(
        String(CORPUS_SCHEMA_VERSION),
      );
    } else {
      const version = getMeta(db, "schema_version");
      if (version !== String(CORPUS_SCHEMA_VERSION)) {
        throw new Error(
          `schema version ${version ?? "unknown"} (this codehop reads version ${CORPUS_SCHEMA_VERSION})`,
        );
      }
    }
  } catch (err) {
    db.close();
    if (CodehopError.isInstance(err)) throw err;
    throw new CodehopError(
      ErrorCodes.DB_INVALID,
      `cannot use ${path} as a corpus: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  return db;
}

/** Reads a `meta` value. */
export function getMeta(db: CorpusDb, key: string): string | undefined {
  const row = db.prepare("SELECT value FROM meta WHERE key = ?").get(key) as
    { value: string } | undefined;
  return row?.value;
}

/** Writes a `meta` value. */
export function setMeta(db: CorpusDb, key: string, value: string): void {
  db.prepare(
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
  ).run(key, value);
}

/** Whether the corpus has a vector table. */
export function hasVectorTable(db: CorpusDb): boolean {
  return !!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'passages_vec'").get();
}

/**
 * Creates the vector table for `dims`-dimensional embeddings of `model`, or checks that the
 * existing one matches (mixing models in one index would make distances meaningless).
 */
export function ensureVectorTable(db: CorpusDb, model: string, dims: number): void {
  const existingModel = getMeta(db, "embedding_model");
  const existingDims = getMeta(db, "embedding_dims");
  if (hasVectorTable(db)) {
    if (existingModel !== model || existingDims !== String(dims)) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `corpus vectors were made with model ${existingModel} (${existingDims} dims), not ${model} (${dims} dims); ` +
          "use the same embeddings model or ingest into a new database",
      );
    }
    return;
  }
  db.exec(
    `CREATE VIRTUAL TABLE passages_vec USING vec0(embedding float[${dims}] distance_metric=cosine)`,
  );
  setMeta(db, "embedding_model", model);
  setMeta(db, "embedding_dims", String(dims));
}

/** Counts of what a corpus holds. */
export interface CorpusStats {
  documents: number;
  passages: number;
  vectors: number;
  aliases: number;
  embeddingModel?: string;
  chunkSize?: number;
  chunkOverlap?: number;
}

/** Counts documents, passages and vectors. */
export function corpusStats(db: CorpusDb): CorpusStats {
  const n = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
  const chunkSize = getMeta(db, "chunk_size");
  const chunkOverlap = getMeta(db, "chunk_overlap");
  return {
    documents: n("SELECT count(*) AS n FROM documents"),
    passages: n("SELECT count(*) AS n FROM passages"),
    vectors: hasVectorTable(db) ? n("SELECT count(*) AS n FROM passages_vec") : 0,
    aliases: n("SELECT count(*) AS n FROM aliases"),
    embeddingModel: getMeta(db, "embedding_model"),
    chunkSize: chunkSize ? Number(chunkSize) : undefined,
    chunkOverlap: chunkOverlap ? Number(chunkOverlap) : undefined,
  };
}
