import Database from "better-sqlite3";
import { ftsQuery } from "./text.ts";
import type { Passage } from "./types.ts";

/** A passage to rank in memory (no score yet). */
export interface Candidate {
  title: string;
  section: string;
  text: string;
  /** Stable passage id, carried into the ranked passage (see `Passage.id`). */
  id?: string;
  /** Document id, carried into the ranked passage (see `Passage.docId`). */
  docId?: string;
}

/**
 * Ranks passages that are not in a corpus index (e.g. chunks of a page fetched from Wikipedia)
 * with the same FTS5 BM25 and tokenizer the corpus uses, in a private in-memory SQLite database.
 * Best first, up to `k`; when fewer than `k` match, the rest is filled in page order with score 0.
 */
export class InMemoryRanker {
  private readonly db = new Database(":memory:");

  constructor() {
    this.db.exec(
      "CREATE VIRTUAL TABLE chunks USING fts5(section, text, tokenize='porter unicode61 remove_diacritics 2')",
    );
  }

  rank(candidates: Candidate[], query: string, k: number): Passage[] {
    const match = ftsQuery(query);
    let hits: { id: number; r: number }[] = [];
    // Synchronous from insert to query, so concurrent async callers never see each other's rows.
    this.db.transaction(() => {
      this.db.exec("DELETE FROM chunks");
      const ins = this.db.prepare("INSERT INTO chunks (rowid, section, text) VALUES (?, ?, ?)");
      candidates.forEach((c, i) => ins.run(i + 1, c.section, c.text));
      if (match) {
        hits = this.db
          .prepare(
            "SELECT rowid AS id, bm25(chunks, 3.0, 1.0) AS r FROM chunks WHERE chunks MATCH ? ORDER BY r LIMIT ?",
          )
          .all(match, k) as { id: number; r: number }[];
      }
      this.db.exec("DELETE FROM chunks");
    })();
    const out: Passage[] = hits.map((h) => ({ ...candidates[h.id - 1], score: -h.r }));
    const used = new Set(hits.map((h) => h.id - 1));
    for (let i = 0; i < candidates.length && out.length < k; i++) {
      if (!used.has(i)) out.push({ ...candidates[i], score: 0 });
    }
    return out;
  }

  close(): void {
    this.db.close();
  }
}
