import { createHash } from "node:crypto";
import type { Statement } from "better-sqlite3";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { type ChunkOptions, type Chunk, Chunker } from "../store/chunking.ts";
import {
  type CorpusDb,
  ensureVectorTable,
  hasVectorTable,
  openCorpusDb,
  setMeta,
} from "../store/corpus-db.ts";
import { type Embedder, passageEmbeddingText } from "../store/embeddings.ts";
import { caseVariantKey, exactTitle, foldedKey, titleKey } from "../store/text.ts";
import { TitleIndex } from "../store/titles.ts";
import type { IngestDocument, ReaderItem, SkippedRecord } from "./types.ts";

/** Options for {@link ingestDocuments}. */
export interface IngestOptions extends ChunkOptions {
  /** Embeds passages into sqlite-vec vectors (hybrid retrieval). Omit for BM25 only. */
  embedder?: Embedder;
  /** Documents per transaction (default 200). A crash loses at most one batch, which a re-run redoes. */
  batchSize?: number;
  /**
   * Identifies the input for resuming (e.g. file path + size + mtime). With it, an interrupted run
   * records how far it got and the next run with the same key skips that many records.
   */
  sourceKey?: string;
  /** Stops after the current batch is committed; the report then has `interrupted: true`. */
  signal?: AbortSignal;
  /** Called after every committed batch. */
  onProgress?: (progress: IngestProgress) => void;
  /** `source` for documents that have none. */
  defaultSource?: string;
}

/** Progress after a batch. */
export interface IngestProgress {
  /** Records consumed from the input so far (including skipped and resumed-over ones). */
  records: number;
  added: number;
  updated: number;
  unchanged: number;
  skipped: number;
  passages: number;
  elapsedMs: number;
}

/** What an ingest did. */
export interface IngestReport extends IngestProgress {
  /** Redirects stored as aliases. */
  aliases: number;
  /** Passages embedded. */
  vectors: number;
  /** Records skipped because they were malformed, with their position. */
  skippedRecords: SkippedRecord[];
  /** Records skipped because an earlier interrupted run already ingested them (0 = fresh run). */
  resumedFrom: number;
  /** True when stopped by the signal before the input ended (re-run to resume). */
  interrupted: boolean;
}

const MAX_TITLE = 512;

function isReaderItem(x: unknown): x is ReaderItem {
  return typeof x === "object" && x !== null && "kind" in x && "where" in x;
}

/** Validates a document; returns a reason when it cannot be ingested. */
export function validateDocument(doc: unknown): string | undefined {
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return "not an object";
  const d = doc as Record<string, unknown>;
  if (typeof d.title !== "string" || !d.title.trim())
    return 'missing or empty "title" (a string is required)';
  if (d.title.length > MAX_TITLE) return `"title" is longer than ${MAX_TITLE} characters`;
  if (typeof d.text !== "string") return 'missing "text" (a string is required)';
  if (!d.text.trim()) return 'empty "text"';
  if (d.source !== undefined && typeof d.source !== "string") return '"source" must be a string';
  if (
    d.metadata !== undefined &&
    (typeof d.metadata !== "object" || d.metadata === null || Array.isArray(d.metadata))
  )
    return '"metadata" must be an object';
  if (
    d.aliases !== undefined &&
    (!Array.isArray(d.aliases) || d.aliases.some((a) => typeof a !== "string"))
  )
    return '"aliases" must be an array of strings';
  return undefined;
}

interface Prepared {
  doc: IngestDocument;
  hash: string;
  chunks: Chunk[];
  vectors?: number[][];
}

/**
 * Ingests documents into the corpus at `dbPath` (created if needed): stores each document, splits
 * it into passages (section-aware recursive splitter), indexes them in FTS5 and, with an
 * embedder, in sqlite-vec. Idempotent: a title already present with the same content (and chunk
 * settings) is left alone, a changed one is replaced. Streams: memory is bounded by one batch.
 *
 * Accepts plain documents or reader items (from {@link openReader}); malformed records are skipped
 * and listed in the report, never fatal.
 */
export async function ingestDocuments(
  dbPath: string,
  input: AsyncIterable<IngestDocument | ReaderItem> | Iterable<IngestDocument | ReaderItem>,
  options: IngestOptions = {},
): Promise<IngestReport> {
  const chunker = new Chunker(options);
  const batchSize = options.batchSize ?? 200;
  const started = Date.now();
  const db = openCorpusDb(dbPath, { create: true });
  const report: IngestReport = {
    records: 0,
    added: 0,
    updated: 0,
    unchanged: 0,
    skipped: 0,
    passages: 0,
    elapsedMs: 0,
    aliases: 0,
    vectors: 0,
    skippedRecords: [],
    resumedFrom: 0,
    interrupted: false,
  };
  try {
    setMeta(db, "chunk_size", String(chunker.options.chunkSize));
    setMeta(db, "chunk_overlap", String(chunker.options.chunkOverlap));
    const writer = new CorpusWriter(db, options.embedder?.model);
    // A run resumes only with the same input *and* settings: records done with another chunk
    // size or embedding model must be redone, not skipped.
    const runKey = options.sourceKey
      ? `${options.sourceKey}|chunk=${chunker.options.chunkSize}/${chunker.options.chunkOverlap}|emb=${options.embedder?.model ?? ""}`
      : undefined;
    if (runKey) {
      const run = db
        .prepare("SELECT records_done, completed FROM ingest_runs WHERE source_key = ?")
        .get(runKey) as { records_done: number; completed: number } | undefined;
      if (run && !run.completed) report.resumedFrom = run.records_done;
    }
    const saveRun = db.prepare(
      `INSERT INTO ingest_runs (source_key, records_done, completed, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT(source_key) DO UPDATE SET records_done = excluded.records_done, completed = excluded.completed, updated_at = excluded.updated_at`,
    );

    let batch: Prepared[] = [];
    let redirects: { from: string; to: string }[] = [];
    const flush = async () => {
      if (options.embedder) await embedBatch(options.embedder, writer, batch);
      db.transaction(() => {
        for (const p of batch) {
          const outcome = writer.write(p, options.defaultSource);
          report[outcome]++;
          if (outcome !== "unchanged") report.passages += p.chunks.length;
          report.vectors += p.vectors?.length ?? 0;
        }
        for (const r of redirects) writer.alias(r.from, r.to, true);
        report.aliases = writer.redirectsStored();
        if (runKey) saveRun.run(runKey, report.records, 0, new Date().toISOString());
      })();
      batch = [];
      redirects = [];
      report.elapsedMs = Date.now() - started;
      options.onProgress?.({ ...report });
    };

    for await (const raw of input as AsyncIterable<IngestDocument | ReaderItem>) {
      report.records++;
      if (report.records <= report.resumedFrom) continue;
      const item: ReaderItem = isReaderItem(raw)
        ? raw
        : { kind: "document", doc: raw, where: `record ${report.records}` };
      if (item.kind === "skip") {
        report.skipped++;
        report.skippedRecords.push({ where: item.where, reason: item.reason });
      } else if (item.kind === "redirect") {
        redirects.push({ from: item.from, to: item.to });
      } else {
        const problem = validateDocument(item.doc);
        if (problem) {
          report.skipped++;
          report.skippedRecords.push({ where: item.where, reason: problem });
        } else {
          batch.push(await prepare(item.doc, chunker));
        }
      }
      if (batch.length + redirects.length >= batchSize) {
        await flush();
        if (options.signal?.aborted) {
          report.interrupted = true;
          return report;
        }
      }
    }
    await flush();
    if (runKey) saveRun.run(runKey, report.records, 1, new Date().toISOString());
    db.pragma("optimize");
    return report;
  } finally {
    report.elapsedMs = Date.now() - started;
    db.close();
  }
}

/**
 * Removes a document (by title; one differing only in case when no exact one) and its passages,
 * index entries and vectors from the corpus at `dbPath`; returns whether it was there.
 */
export function removeDocument(dbPath: string, title: string): boolean {
  const db = openCorpusDb(dbPath);
  try {
    const writer = new CorpusWriter(db, undefined);
    return db.transaction(() => writer.remove(title))();
  } finally {
    db.close();
  }
}

async function prepare(doc: IngestDocument, chunker: Chunker): Promise<Prepared> {
  const { chunkSize, chunkOverlap } = chunker.options;
  const hash = createHash("sha1")
    .update(
      JSON.stringify([
        doc.title,
        doc.text,
        doc.source ?? "",
        doc.metadata ?? {},
        doc.aliases ?? [],
        chunkSize,
        chunkOverlap,
      ]),
    )
    .digest("hex");
  return { doc, hash, chunks: await chunker.chunk(doc.text) };
}

/** Embeds the passages of every changed document in the batch (and backfills unchanged ones lacking vectors). */
async function embedBatch(
  embedder: Embedder,
  writer: CorpusWriter,
  batch: Prepared[],
): Promise<void> {
  const todo = batch.filter((p) => writer.needsVectors(p));
  // Embed "heading: text" so a passage's section contributes to its meaning, as in BM25 weighting.
  const texts = todo.flatMap((p) =>
    p.chunks.map((c) => passageEmbeddingText(p.doc.title, c.section, c.text)),
  );
  if (texts.length === 0) return;
  const vectors = await embedder.embed(texts);
  let i = 0;
  for (const p of todo) {
    p.vectors = vectors.slice(i, i + p.chunks.length);
    i += p.chunks.length;
  }
}

interface VectorStatements {
  has: Statement;
  del: Statement;
  ins: Statement;
}

/** Prepared statements for writing documents; all calls happen inside a transaction. */
class CorpusWriter {
  private readonly insertDoc;
  private readonly updateDoc;
  private readonly docPassages;
  private readonly deletePassage;
  private readonly deleteFts;
  private readonly insertPassage;
  private readonly insertFts;
  private readonly deleteTitle;
  private readonly insertTitle;
  private readonly upsertAlias;
  private readonly deleteAlias;
  private readonly titles: TitleIndex;
  /** Keys of the redirects this ingest stored (and that still stand), for the report. */
  private readonly redirectKeys = new Set<string>();
  /** Documents this ingest has written or found unchanged: a bit per document id. */
  private seen = new Uint8Array(1024);
  /**
   * Statements on `passages_vec`, prepared once per ingest: undefined until first needed, null
   * while the corpus has no vector table (this writer creates it with the first vectors).
   */
  private vec: VectorStatements | null | undefined;
  /** Vector size already checked against the corpus's vector table (see ensureVectorTable). */
  private checkedDims?: number;

  constructor(
    private readonly db: CorpusDb,
    private readonly embeddingModel: string | undefined,
  ) {
    this.titles = new TitleIndex(db);
    this.insertDoc = db.prepare(
      "INSERT INTO documents (title, title_key, text, source, metadata, hash, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    this.updateDoc = db.prepare(
      "UPDATE documents SET title = ?, text = ?, source = ?, metadata = ?, hash = ?, updated_at = ? WHERE id = ?",
    );
    this.docPassages = db.prepare("SELECT id FROM passages WHERE doc_id = ?").pluck();
    this.deletePassage = db.prepare("DELETE FROM passages WHERE id = ?");
    this.deleteFts = db.prepare("DELETE FROM passages_fts WHERE rowid = ?");
    this.insertPassage = db.prepare(
      "INSERT INTO passages (doc_id, ord, section, text) VALUES (?, ?, ?, ?)",
    );
    this.insertFts = db.prepare(
      "INSERT INTO passages_fts (rowid, title, section, text) VALUES (?, ?, ?, ?)",
    );
    this.deleteTitle = db.prepare("DELETE FROM titles_fts WHERE rowid = ?");
    this.insertTitle = db.prepare("INSERT INTO titles_fts (rowid, title) VALUES (?, ?)");
    this.upsertAlias = db.prepare(
      "INSERT INTO aliases (alias_key, alias, target_key) VALUES (?, ?, ?) ON CONFLICT(alias_key) DO UPDATE SET alias = excluded.alias, target_key = excluded.target_key",
    );
    this.deleteAlias = db.prepare("DELETE FROM aliases WHERE alias_key = ?");
  }

  /**
   * Deletes the document `title` leads to (exactly this title first, else one differing only in
   * case) and everything indexed for it; false if there is none.
   */
  remove(title: string): boolean {
    const existing = this.titles.find(title);
    if (!existing) return false;
    const vec = this.vectors();
    for (const pid of this.docPassages.all(existing.id) as number[]) {
      this.deleteFts.run(pid);
      vec?.del.run(BigInt(pid));
      this.deletePassage.run(pid);
    }
    this.deleteTitle.run(existing.id);
    this.db.prepare("DELETE FROM documents WHERE id = ?").run(existing.id);
    return true;
  }

  /** Redirects stored by this ingest that still stand (a page with the same title replaces one). */
  redirectsStored(): number {
    return this.redirectKeys.size;
  }

  /** True when the document is new/changed, or unchanged but stored without vectors. */
  needsVectors(p: Prepared): boolean {
    const existing = this.place(p.doc.title).doc;
    if (!existing || existing.hash !== p.hash) return true;
    const first = this.docPassages.get(existing.id) as number | undefined;
    if (first === undefined) return false;
    const vec = this.vectors();
    return !vec || !vec.has.get(BigInt(first));
  }

  /**
   * Inserts, replaces or leaves a document; returns which. A title that differs only in case
   * from a stored page's is another page (as on MediaWiki), stored beside it.
   */
  write(p: Prepared, defaultSource = ""): "added" | "updated" | "unchanged" {
    const { doc } = p;
    const now = new Date().toISOString();
    const { doc: existing, key } = this.place(doc.title);
    if (existing) this.markSeen(existing.id);
    if (existing && existing.hash === p.hash) {
      if (p.vectors) this.writeVectors(this.docPassages.all(existing.id) as number[], p.vectors);
      this.writeAliases(doc);
      return "unchanged";
    }
    const source = doc.source ?? defaultSource;
    const metadata = JSON.stringify(doc.metadata ?? {});
    let docId: number;
    if (existing) {
      docId = existing.id;
      const vec = this.vectors();
      for (const pid of this.docPassages.all(docId) as number[]) {
        this.deleteFts.run(pid);
        vec?.del.run(BigInt(pid));
        this.deletePassage.run(pid);
      }
      this.updateDoc.run(doc.title, doc.text, source, metadata, p.hash, now, docId);
      this.deleteTitle.run(docId);
    } else {
      docId = Number(
        this.insertDoc.run(doc.title, key, doc.text, source, metadata, p.hash, now).lastInsertRowid,
      );
      this.markSeen(docId);
      this.settleShadowedRedirect(key, doc.title);
    }
    this.insertTitle.run(docId, doc.title);
    const ids: number[] = [];
    p.chunks.forEach((c, ord) => {
      const pid = Number(this.insertPassage.run(docId, ord, c.section, c.text).lastInsertRowid);
      this.insertFts.run(pid, doc.title, c.section, c.text);
      ids.push(pid);
    });
    if (p.vectors) this.writeVectors(ids, p.vectors);
    this.writeAliases(doc);
    return existing ? "updated" : "added";
  }

  /**
   * {@link TitleIndex.place}: within one ingest, titles that differ only in case are different
   * pages (MediaWiki titles are case-sensitive after the first letter: "Red meat", "Red Meat");
   * a later ingest's title differing only in case from a stored page replaces it (a rename).
   */
  private place(title: string) {
    return this.titles.place(title, (page) => this.wasSeen(page.id));
  }

  private markSeen(id: number): void {
    if (id >> 3 >= this.seen.length) {
      const grown = new Uint8Array(Math.max(this.seen.length * 2, (id >> 3) + 1));
      grown.set(this.seen);
      this.seen = grown;
    }
    this.seen[id >> 3] |= 1 << (id & 7);
  }

  private wasSeen(id: number): boolean {
    return id >> 3 < this.seen.length && (this.seen[id >> 3] & (1 << (id & 7))) !== 0;
  }

  /**
   * Stores a redirect (or a document's alias) `from` → `to`, counted in the report when
   * `redirect`. Not stored when it would add nothing: `from` is a page's own title, or differs
   * only in case from a page or redirect that leads to the same target (lookups fold case).
   * One differing only in case and leading elsewhere is kept under its own key.
   */
  alias(from: string, to: string, redirect = false): boolean {
    if (!titleKey(from) || !titleKey(to) || exactTitle(from) === exactTitle(to)) return false;
    const targetKey = caseVariantKey(to);
    let key = titleKey(from);
    const page = this.titles.find(from);
    if (page) {
      if (exactTitle(page.title) === exactTitle(from)) return false;
      if (titleKey(page.title) === titleKey(to)) return false;
      key = caseVariantKey(from);
    } else {
      const existing = this.titles.alias(from);
      if (existing && exactTitle(existing.alias) === exactTitle(from)) key = existing.key;
      else if (existing && foldedKey(existing.targetKey) === titleKey(to)) return false;
      else if (existing) key = caseVariantKey(from);
    }
    this.upsertAlias.run(key, from, targetKey);
    if (redirect) this.redirectKeys.add(key);
    return true;
  }

  private writeAliases(doc: IngestDocument): void {
    for (const a of doc.aliases ?? []) this.alias(a, doc.title);
  }

  /**
   * A page just stored under `key` takes the place of a redirect stored under the same key: the
   * redirect goes, or, when its title differs only in case and it leads to another page, moves
   * to a key of its own.
   */
  private settleShadowedRedirect(key: string, title: string): void {
    const row = this.titles.alias(title);
    if (!row || row.key !== key) return;
    this.deleteAlias.run(key);
    const counted = this.redirectKeys.delete(key);
    if (exactTitle(row.alias) === exactTitle(title)) return;
    if (foldedKey(row.targetKey) === titleKey(title)) return;
    const own = caseVariantKey(row.alias);
    this.upsertAlias.run(own, row.alias, row.targetKey);
    if (counted) this.redirectKeys.add(own);
  }

  /** The vector statements, or null while the corpus has no vector table. */
  private vectors(): VectorStatements | null {
    if (this.vec === undefined) {
      this.vec = hasVectorTable(this.db)
        ? {
            has: this.db.prepare("SELECT 1 FROM passages_vec WHERE rowid = ?"),
            del: this.db.prepare("DELETE FROM passages_vec WHERE rowid = ?"),
            ins: this.db.prepare("INSERT INTO passages_vec (rowid, embedding) VALUES (?, ?)"),
          }
        : null;
    }
    return this.vec;
  }

  private writeVectors(ids: number[], vectors: number[][]): void {
    if (!this.embeddingModel || ids.length === 0) return;
    if (this.checkedDims !== vectors[0].length) {
      // Creates the table on the first vectors, or checks the model and size of the existing one.
      ensureVectorTable(this.db, this.embeddingModel, vectors[0].length);
      this.checkedDims = vectors[0].length;
      // A table created just now: prepare its statements on the next use.
      if (this.vec === null) this.vec = undefined;
    }
    const { del, ins } = this.vectors()!;
    ids.forEach((id, i) => {
      if (vectors[i].length !== vectors[0].length) {
        throw new CodehopError(
          ErrorCodes.SOURCE_UNAVAILABLE,
          "embeddings endpoint returned vectors of different sizes",
        );
      }
      del.run(BigInt(id));
      ins.run(BigInt(id), new Float32Array(vectors[i]));
    });
  }
}
