import Database from "better-sqlite3";

/** The tokenizer of the corpus's passage index (src/store/corpus-db.ts). */
export const PASSAGE_TOKENIZER = "porter unicode61 remove_diacritics 2";

/**
 * Splits texts into the terms the passage index stores (lower-cased, diacritics removed, Porter
 * stems), by running SQLite's own FTS5 tokenizer in a private in-memory database — so words
 * compared here match exactly what BM25 matched ("albums" = "album", "Éire" = "eire").
 */
export class IndexTerms {
  private readonly db = new Database(":memory:");
  private readonly insert;
  private readonly terms;

  constructor(tokenizer = PASSAGE_TOKENIZER) {
    this.db.exec(
      `CREATE VIRTUAL TABLE t USING fts5(x, tokenize='${tokenizer}');
       CREATE VIRTUAL TABLE tv USING fts5vocab(t, 'instance');`,
    );
    this.insert = this.db.prepare("INSERT INTO t (rowid, x) VALUES (?, ?)");
    this.terms = this.db.prepare("SELECT doc, term FROM tv ORDER BY doc, offset");
  }

  /** Each text's terms, in text order (repeats kept). */
  of(texts: string[]): string[][] {
    const out = texts.map((): string[] => []);
    if (texts.length === 0) return out;
    this.db.transaction(() => {
      texts.forEach((x, i) => this.insert.run(i + 1, x));
      for (const r of this.terms.all() as { doc: number; term: string }[])
        out[r.doc - 1].push(r.term);
      this.db.exec("DELETE FROM t");
    })();
    return out;
  }

  close(): void {
    this.db.close();
  }
}
