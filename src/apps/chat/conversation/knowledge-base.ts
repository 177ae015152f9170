import { createHash } from "node:crypto";
import { existsSync, readdirSync, rmSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { ingestDocuments, removeDocument } from "../../../ingest/ingest.ts";
import type { DocumentKind } from "../../../ingest/documents.ts";
import { getMeta, hasVectorTable, openCorpusDb } from "../../../store/corpus-db.ts";
import { CorpusSource } from "../../../store/corpus-source.ts";
import { createEmbedder, type Embedder } from "../../../store/embeddings.ts";
import type { EmbeddingsEndpoint } from "../../../store/endpoint.ts";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import { ensureDir } from "../../../util/fs-safe.ts";

/**
 * A conversation's files as a temporary knowledge base: one corpus DB per thread
 * (`<CODEHOP_HOME>/chat-files/<thread>.db`), written and searched with the corpus machinery every
 * knowledge source uses (src/ingest: section-aware chunking, FTS5 BM25, and vectors when an
 * embeddings endpoint is configured: then search is hybrid, as for a corpus; src/store). A file is one
 * document titled by its name; its passages keep the page (`p. 3`) or section they come from,
 * which is what answers cite.
 *
 * The DB exists only while the thread does: deleting the thread deletes it ({@link deleteThread}),
 * and {@link sweep} removes the ones idle longer than the retention setting (a file's mtime is
 * refreshed on every use).
 */

/** Folder of the per-thread file indexes, under the data directory. */
export const CHAT_FILES_DIR = "chat-files";

/** One attached file as the knowledge base lists it. */
export interface ThreadFile {
  /** Name the conversation knows it by (and answers cite). */
  name: string;
  kind: DocumentKind;
  /** Where it came from: a path, a URL, or "upload". */
  source: string;
  /** Pages of a PDF. */
  pages?: number;
  /** Passages indexed. */
  passages: number;
  /** True when only the first part of a very long text was indexed. */
  truncated?: boolean;
  /** When it was attached (ISO time). */
  addedAt: string;
}

/** A passage found by {@link ChatFiles.search}, with its citation label. */
export interface FilePassage {
  file: string;
  /** "p. 3", a section heading, or "" for text before the first heading. */
  section: string;
  /** PDF page number, when the section is a page. */
  page?: number;
  text: string;
  /** How the passage is cited: "report.pdf, p. 3", "notes.docx § Budget" or "notes.docx". */
  cite: string;
}

/** How a passage of `file` under `section` is cited. */
export function citeLabel(file: string, section: string): string {
  if (!section) return file;
  return /^p\. \d+$/.test(section) ? `${file}, ${section}` : `${file} § ${section}`;
}

/** The PDF page a section label names ("p. 3" → 3), if it names one. */
export function pageOf(section: string): number | undefined {
  const m = /^p\. (\d+)$/.exec(section);
  return m ? Number(m[1]) : undefined;
}

/** A text to add: extracted document text with its heading lines, and what the list shows. */
export interface FileDocument {
  name: string;
  kind: DocumentKind;
  source: string;
  text: string;
  pages?: number;
  truncated?: boolean;
}

/** Per-thread file indexes under one data directory. */
export class ChatFiles {
  /** Folder of the indexes. */
  readonly dir: string;

  /**
   * @param home the data directory (`<home>/chat-files/`).
   * @param options.embeddings the configured embeddings endpoint: attached files are embedded too
   *   and searched hybrid (BM25 + vectors, the index's own model); unset: BM25 only.
   */
  constructor(
    home: string,
    private readonly options: { embeddings?: EmbeddingsEndpoint } = {},
  ) {
    this.dir = join(home, CHAT_FILES_DIR);
  }

  /**
   * The embedder for a thread's index: the model its vectors were made with, else the endpoint's
   * configured model; none without an endpoint (or a model).
   */
  private embedderFor(path: string): Embedder | undefined {
    const endpoint = this.options.embeddings;
    if (!endpoint) return undefined;
    let model = endpoint.model;
    if (existsSync(path)) {
      const db = openCorpusDb(path, { readonly: true });
      try {
        if (hasVectorTable(db)) model = getMeta(db, "embedding_model") ?? model;
      } finally {
        db.close();
      }
    }
    return model ? createEmbedder({ ...endpoint, model }) : undefined;
  }

  /**
   * The index file of a thread. Thread ids become file names: other characters than letters,
   * digits, - and _ are replaced and a hash of the id is added, so two ids never share a file.
   */
  pathFor(threadId: string): string {
    const safe = threadId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 80);
    const name =
      safe === threadId
        ? safe
        : `${safe}-${createHash("sha256").update(threadId).digest("hex").slice(0, 12)}`;
    return join(this.dir, `${name}.db`);
  }

  /** Whether the thread has an index. */
  has(threadId: string): boolean {
    return existsSync(this.pathFor(threadId));
  }

  /**
   * Indexes a document for the thread under a name no other file of the thread uses ("report.pdf",
   * else "report (2).pdf"); the same file attached again from the same place replaces itself.
   * Returns what the list shows for it.
   */
  async add(threadId: string, doc: FileDocument): Promise<ThreadFile> {
    ensureDir(this.dir, { what: "chat files directory" });
    const path = this.pathFor(threadId);
    const taken = new Map(this.list(threadId).map((f) => [f.name.toLowerCase(), f.source]));
    let name = doc.name;
    for (
      let n = 2;
      taken.has(name.toLowerCase()) && taken.get(name.toLowerCase()) !== doc.source;
      n++
    )
      name = numbered(doc.name, n);
    const addedAt = new Date().toISOString();
    const metadata: Record<string, unknown> = { kind: doc.kind, addedAt };
    if (doc.pages !== undefined) metadata.pages = doc.pages;
    if (doc.truncated) metadata.truncated = true;
    const docs = [{ title: name, text: doc.text, source: doc.source, metadata }];
    const embedder = this.embedderFor(path);
    try {
      await ingestDocuments(path, docs, { embedder });
    } catch (err) {
      // Vectors only sharpen search: a dead embeddings endpoint still leaves the file searchable
      // (BM25). Embedding happens before anything is written, so nothing is half-stored.
      if (
        !embedder ||
        !(CodehopError.isInstance(err) && err.code === ErrorCodes.SOURCE_UNAVAILABLE)
      )
        throw err;
      await ingestDocuments(path, docs);
    }
    this.touch(threadId);
    const added = this.list(threadId).find((f) => f.name === name);
    return added ?? { name, kind: doc.kind, source: doc.source, passages: 0, addedAt };
  }

  /** The thread's files, in the order they were attached (none when it has no index). */
  list(threadId: string): ThreadFile[] {
    const path = this.pathFor(threadId);
    if (!existsSync(path)) return [];
    const db = openCorpusDb(path, { readonly: true });
    try {
      const rows = db
        .prepare(
          `SELECT d.title, d.source, d.metadata, (SELECT count(*) FROM passages p WHERE p.doc_id = d.id) AS passages
           FROM documents d ORDER BY d.id`,
        )
        .all() as Array<{ title: string; source: string; metadata: string; passages: number }>;
      return rows.map((r) => {
        const meta = safeJson(r.metadata);
        const file: ThreadFile = {
          name: r.title,
          kind: (meta.kind as DocumentKind) ?? "text",
          source: r.source,
          passages: r.passages,
          addedAt: typeof meta.addedAt === "string" ? meta.addedAt : "",
        };
        if (typeof meta.pages === "number") file.pages = meta.pages;
        if (meta.truncated === true) file.truncated = true;
        return file;
      });
    } finally {
      db.close();
    }
  }

  /** Removes one file (by name, case-insensitive) from the thread's index; false if it had none. */
  remove(threadId: string, name: string): boolean {
    const path = this.pathFor(threadId);
    if (!existsSync(path)) return false;
    const removed = removeDocument(path, name);
    if (removed) this.touch(threadId);
    return removed;
  }

  /**
   * The thread's passages best matching `query` (BM25 over text, section and file name; fused
   * with vector neighbours when the index has vectors and the endpoint is configured).
   */
  async search(threadId: string, query: string, k = 5): Promise<FilePassage[]> {
    const path = this.pathFor(threadId);
    if (!existsSync(path)) return [];
    const endpoint = this.options.embeddings;
    const source = CorpusSource.open(path, {
      embedderFor: endpoint ? (model) => createEmbedder({ ...endpoint, model }) : undefined,
    });
    try {
      const passages = await source.searchPassages(query, { k });
      this.touch(threadId);
      return passages.map((p) => {
        const hit: FilePassage = {
          file: p.title,
          section: p.section,
          text: p.text,
          cite: citeLabel(p.title, p.section),
        };
        const page = pageOf(p.section);
        if (page !== undefined) hit.page = page;
        return hit;
      });
    } finally {
      await source.close();
    }
  }

  /** Deletes the thread's index (its DB and WAL files); false if it had none. */
  deleteThread(threadId: string): boolean {
    const path = this.pathFor(threadId);
    const existed = existsSync(path);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
    return existed;
  }

  /**
   * Deletes the indexes not used for `retentionDays` (none when 0); returns the removed files.
   * Cheap (one stat per thread), so every chat session runs it when it starts. `active` names the
   * thread being talked in: its index is kept (and marked used), however long it was idle.
   */
  sweep(retentionDays: number, now = Date.now(), active?: string): string[] {
    if (!(retentionDays > 0) || !existsSync(this.dir)) return [];
    const cutoff = now - retentionDays * 24 * 60 * 60 * 1000;
    const removed: string[] = [];
    const kept = active === undefined ? undefined : this.pathFor(active);
    if (active !== undefined) this.touch(active);
    for (const entry of readdirSync(this.dir)) {
      if (!entry.endsWith(".db")) continue;
      const path = join(this.dir, entry);
      if (path === kept) continue;
      try {
        if (statSync(path).mtimeMs >= cutoff) continue;
      } catch {
        continue;
      }
      for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
      removed.push(path);
    }
    return removed;
  }

  private lastSweep = 0;

  /**
   * {@link sweep}, at most once per `intervalMs` (default an hour) for this store: what every
   * round calls (with its own thread as `active`), so a long-running server applies the
   * retention too.
   */
  sweepIfDue(
    retentionDays: number,
    intervalMs = 60 * 60 * 1000,
    now = Date.now(),
    active?: string,
  ): string[] {
    if (now - this.lastSweep < intervalMs) return [];
    this.lastSweep = now;
    return this.sweep(retentionDays, now, active);
  }

  /** Marks the thread's index as used now (what {@link sweep} measures idleness by). */
  private touch(threadId: string): void {
    const path = this.pathFor(threadId);
    const now = new Date();
    try {
      utimesSync(path, now, now);
    } catch {
      // Gone meanwhile (deleted by another process): nothing to mark.
    }
  }
}

/** "report.pdf" → "report (2).pdf". */
function numbered(name: string, n: number): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? `${name.slice(0, dot)} (${n})${name.slice(dot)}` : `${name} (${n})`;
}

function safeJson(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}
