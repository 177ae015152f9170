import { CodehopError, ErrorCodes } from "../errors.ts";
import {
  type CorpusDb,
  type CorpusStats,
  corpusStats,
  getMeta,
  hasVectorTable,
  openCorpusDb,
} from "./corpus-db.ts";
import type { Embedder } from "./embeddings.ts";
import { IndexTerms } from "./stems.ts";
import { TitleIndex } from "./titles.ts";
import {
  contentTokens,
  ftsQuery,
  queryTokens,
  reciprocalRankFusion,
  summarize,
  titleSimilarity,
  trigramQuery,
} from "./text.ts";
import type { KnowledgeSource, Page, PageLookup, PageSummary, Passage } from "./types.ts";

/** Options for {@link CorpusSource.open}. */
export interface CorpusSourceOptions {
  /**
   * Embeds queries for hybrid ranking. Used only when the corpus has vectors; it must be the model
   * the corpus was ingested with.
   */
  embedder?: Embedder;
  /**
   * Makes the query embedder from the model the corpus's vectors were made with (its stored
   * `embedding_model`): how apps open a corpus when an embeddings endpoint is configured, so the
   * queries use the corpus's own model whatever model the environment names. Ignored when
   * `embedder` is given or the corpus has no vectors.
   */
  embedderFor?: (storedModel: string) => Embedder;
  /**
   * Told once when the corpus has vectors but no embedder can be had (no endpoint configured), so
   * the ranking falls back to BM25: {@link BM25_ONLY_NOTICE}.
   */
  onNotice?: (message: string) => void;
  /** Length of search summaries in characters (default 1,000). */
  summaryChars?: number;
  /**
   * "bm25" ignores the vectors even when an embedder is given (to compare, or when the embedding
   * model ranks worse than BM25); default: "hybrid" when the corpus has vectors and an embedder is given.
   */
  ranking?: RankingMode;
}

/** What a corpus with vectors opened without an embeddings endpoint says (once, on open). */
export const BM25_ONLY_NOTICE = "vectors stored but no embeddings endpoint; BM25 only";

/** How passages are ranked: BM25 alone, or BM25 + vectors fused with reciprocal rank fusion. */
export type RankingMode = "bm25" | "hybrid";

// BM25 column weights for (title, section, text): a query word in the page title or the section
// heading says more about a passage than the same word in its body.
const W_TITLE = 10;
const W_SECTION = 3;
const W_TEXT = 1;
/** Candidates taken from each ranker before fusion. */
const FUSION_DEPTH = 50;
/**
 * Page search: added to a page's relative passage score (0..1] when the query names the page. A
 * named page overtakes unnamed pages whose best passage scores up to a quarter higher. Chosen on
 * the real HotpotQA sample (bench/hotpotqa.bench.ts): 0.2–0.3 keep page search above passage
 * search on every metric of both splits; larger values start to put named but unhelpful pages
 * first.
 */
const NAMED_BONUS = 0.25;
/**
 * Page search: when the titles of only ONE page share a word with the query, that page gets the
 * named bonus too ("Which Chinese emperor reigned in 1453?" and "Jingtai Emperor" on the demo
 * corpus). On a real corpus a query's words are in many titles (HotpotQA's distractors were picked
 * for it), so this never fires there: the HotpotQA figures are the same with and without it.
 */
const ONLY_TITLE_BONUS = NAMED_BONUS;
/**
 * Hybrid page search: weight of a page's relative hybrid-passage score (RRF of BM25 and vectors,
 * divided by the best) added to its BM25 page score and bonuses. A sum of scores, not a second
 * rank fusion: fusing ranks undid the named-page bonus whenever the vectors ranked another page
 * first (demo MRR 0.957 with rank fusion, 0.988 with this; data/demo-queries.json).
 */
const HYBRID_WEIGHT = 0.3;
/** Share of the bonus for a named title whose qualifier ("(1944 film)") the query does not mention. */
const QUALIFIED_WEIGHT = 0.5;
/** A title's trailing qualifier in parentheses, as in "Mercury (planet)". */
const QUALIFIER = /\s*\(([^()]*)\)\s*$/;
/**
 * Common-term pruning for corpus-wide queries: on a corpus of at least PRUNE_MIN_PASSAGES, a query
 * word found in more than PRUNE_DF_SHARE of all passages is left out of the FTS5 query when rarer
 * words remain. Such words add little to BM25 (low IDF) but make FTS5 score most of the index —
 * the difference between ~40 ms and ~2 ms per query at 100k passages. Small corpora keep every word.
 */
const PRUNE_MIN_PASSAGES = 10_000;
const PRUNE_DF_SHARE = 0.05;

/** A passage in a corpus-wide ranking. */
interface RankedPassage {
  id: number;
  docId: number;
  score: number;
}

interface PassageRow {
  id: number;
  doc_id: number;
  title: string;
  section: string;
  text: string;
}

/**
 * The local corpus: one SQLite file made by `codehop ingest` / {@link ingestDocuments}. Pages are
 * documents, passages are their chunks; ranking is FTS5 BM25, or hybrid BM25 + sqlite-vec cosine
 * (reciprocal rank fusion) when the corpus has vectors and an embedder is given.
 */
export class CorpusSource implements KnowledgeSource {
  readonly kind = "corpus" as const;
  /** Ranking in use. */
  readonly mode: RankingMode;
  private readonly summaryChars: number;
  private readonly passageCount: number;
  /** Tokenizes words exactly like the index does (porter stemming); made on first use. */
  private terms?: IndexTerms;

  private constructor(
    /** The open database (read-only use; exposed for diagnostics and benchmarks). */
    readonly db: CorpusDb,
    private readonly embedder: Embedder | undefined,
    summaryChars: number,
    readonly path: string,
    ranking?: RankingMode,
  ) {
    this.summaryChars = summaryChars;
    this.mode = ranking !== "bm25" && embedder && hasVectorTable(db) ? "hybrid" : "bm25";
    this.passageCount = (db.prepare("SELECT count(*) AS n FROM passages").get() as { n: number }).n;
  }

  /** Opens an existing corpus file (DB_INVALID if missing or not a corpus). */
  static open(path: string, options: CorpusSourceOptions = {}): CorpusSource {
    const db = openCorpusDb(path, { readonly: true });
    const model = getMeta(db, "embedding_model");
    const vectors = hasVectorTable(db);
    let embedder = options.embedder;
    if (!embedder && model && vectors && options.embedderFor) embedder = options.embedderFor(model);
    if (!embedder && vectors && options.ranking !== "bm25") {
      options.onNotice?.(
        `corpus ${path}: ${BM25_ONLY_NOTICE} (set CODEHOP_EMBEDDINGS_BASE_URL to rank with its ${model ?? "stored"} vectors too)`,
      );
    }
    if (embedder && model && embedder.model !== model) {
      db.close();
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `corpus ${path} was embedded with model "${model}" but queries would use "${embedder.model}"`,
      );
    }
    if (options.ranking === "hybrid" && !(embedder && vectors)) {
      db.close();
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        embedder
          ? `hybrid ranking needs vectors, but corpus ${path} has none; ingest it with --embeddings`
          : "hybrid ranking needs an embeddings endpoint (CODEHOP_EMBEDDINGS_BASE_URL / CODEHOP_EMBEDDINGS_MODEL)",
      );
    }
    return new CorpusSource(db, embedder, options.summaryChars ?? 1000, path, options.ranking);
  }

  /** Document/passage/vector counts. */
  stats(): CorpusStats {
    return corpusStats(this.db);
  }

  async search(query: string, options: { limit?: number } = {}): Promise<PageSummary[]> {
    const limit = options.limit ?? 5;
    if (limit <= 0) return [];
    // The pruned FTS query costs document-frequency lookups on big corpora: build it once.
    const match = this.prunedFtsQuery(query);
    const lexical = this.bm25Passages(match, FUSION_DEPTH * 2);
    // A page scores its best passage's BM25 relative to the best passage of all (0..1], plus a
    // bonus when the query names it. Passage scores saturate: a page that merely mentions
    // "Eiffel Tower" next to "construction" can outscore the Eiffel Tower page itself, and the
    // bonus says which pages are about the query's subject. Only pages the query names in full
    // get it: ranking titles by shared words instead promotes the distractors of real multi-hop
    // questions, which share a word or two of their titles with the question (see
    // docs/knowledge.md, "Quality and performance").
    const score = new Map<number, number>();
    const add = (docId: number, value: number) => score.set(docId, (score.get(docId) ?? 0) + value);
    const addRelative = (ranked: RankedPassage[], weight: number) => {
      const best = ranked[0]?.score || 1;
      const seen = new Set<number>();
      for (const r of ranked) {
        if (seen.has(r.docId)) continue;
        seen.add(r.docId);
        add(r.docId, (weight * r.score) / best);
      }
    };
    addRelative(lexical, 1);
    const titled = this.rankTitles(match);
    const named = this.namedPages(query, titled);
    for (const { docId, weight } of named) add(docId, NAMED_BONUS * weight);
    if (titled.length === 1 && named.length === 0) add(titled[0], ONLY_TITLE_BONUS);
    // Hybrid: plus the page's share of the hybrid passage ranking (see HYBRID_WEIGHT).
    if (this.mode === "hybrid")
      addRelative(await this.rankPassages(query, FUSION_DEPTH * 2, match, lexical), HYBRID_WEIGHT);
    const pages = [...score.entries()].sort((a, b) => b[1] - a[1]).map(([docId]) => docId);
    const docIds: number[] = [];
    // A query that is exactly a title (or alias) names that page: put it first.
    const exact = this.resolveDocId(query);
    if (exact !== undefined) docIds.push(exact);
    for (const docId of pages) {
      if (docIds.length >= limit) break;
      if (!docIds.includes(docId)) docIds.push(docId);
    }
    const head = this.db.prepare(
      "SELECT title, substr(text, 1, ?) AS head, json_extract(metadata, '$.url') AS url FROM documents WHERE id = ?",
    );
    return docIds.slice(0, limit).map((id) => {
      const row = head.get(this.summaryChars * 2, id) as {
        title: string;
        head: string;
        url: unknown;
      };
      const hit: PageSummary = {
        title: row.title,
        summary: summarize(row.head, this.summaryChars),
      };
      if (typeof row.url === "string") hit.url = row.url;
      return hit;
    });
  }

  async getPage(title: string): Promise<PageLookup> {
    return this.lookupPage(title).lookup;
  }

  /** {@link getPage} with the document id of a found page (resolved once for both). */
  private lookupPage(title: string): { lookup: PageLookup; docId?: number } {
    const id = this.resolveDocId(title);
    if (id === undefined)
      return { lookup: { status: "missing", title, suggestions: this.suggestTitles(title) } };
    const row = this.db
      .prepare("SELECT title, text, source, metadata FROM documents WHERE id = ?")
      .get(id) as {
      title: string;
      text: string;
      source: string;
      metadata: string;
    };
    const metadata = safeJson(row.metadata);
    if (metadata.disambiguation === true) {
      const options = Array.isArray(metadata.options) ? metadata.options.map(String) : [];
      return { lookup: { status: "disambiguation", title: row.title, options } };
    }
    const page: Page = { title: row.title, text: row.text, source: row.source || undefined };
    if (typeof metadata.url === "string") page.url = metadata.url;
    return { lookup: { status: "found", page }, docId: id };
  }

  async retrievePassages(
    title: string,
    query: string,
    options: { k?: number } = {},
  ): Promise<{ lookup: PageLookup; passages: Passage[] }> {
    const k = options.k ?? 5;
    const { lookup, docId } = this.lookupPage(title);
    if (lookup.status !== "found" || docId === undefined) return { lookup, passages: [] };
    const rows = this.db
      .prepare(
        "SELECT p.id, p.doc_id, d.title, p.section, p.text FROM passages p JOIN documents d ON d.id = p.doc_id WHERE p.doc_id = ? ORDER BY p.ord",
      )
      .all(docId) as PassageRow[];
    const byId = new Map(rows.map((r) => [r.id, r]));
    const lists: number[][] = [];
    const match = ftsQuery(query);
    if (match && rows.length > 0) {
      // A document's passages are inserted together, so their ids form one range; FTS5 can seek
      // to a rowid range instead of scoring every match in the corpus.
      const lo = Math.min(...rows.map((r) => r.id));
      const hi = Math.max(...rows.map((r) => r.id));
      const bm25 = this.db
        .prepare(
          `SELECT rowid AS id FROM passages_fts WHERE passages_fts MATCH ? AND rowid BETWEEN ? AND ?
           ORDER BY bm25(passages_fts, 0, ${W_SECTION}, ${W_TEXT})`,
        )
        .all(match, lo, hi) as { id: number }[];
      lists.push(bm25.map((r) => r.id).filter((id) => byId.has(id)));
    }
    if (this.mode === "hybrid" && query.trim() && rows.length > 0) {
      const [vector] = await this.embedder!.embed([query]);
      const q = new Float32Array(vector);
      const dist = this.db
        .prepare("SELECT vec_distance_cosine(embedding, ?) AS d FROM passages_vec WHERE rowid = ?")
        .pluck();
      const near = rows
        .map((r) => ({ id: r.id, d: dist.get(q, BigInt(r.id)) as number | undefined }))
        .filter((x): x is { id: number; d: number } => typeof x.d === "number")
        .sort((a, b) => a.d - b.d);
      lists.push(near.map((x) => x.id));
    }
    const fused = [...reciprocalRankFusion(lists).entries()].sort((a, b) => b[1] - a[1]);
    const passages: Passage[] = fused
      .slice(0, k)
      .map(([id, score]) => toPassage(byId.get(id)!, score));
    // Nothing (or too little) matched: fill up in page order so the agent still sees the page
    // rather than an empty list; these carry score 0, below every match.
    for (const row of rows) {
      if (passages.length >= k) break;
      if (!fused.some(([id]) => id === row.id)) passages.push(toPassage(row, 0));
    }
    return { lookup, passages };
  }

  async searchPassages(query: string, options: { k?: number } = {}): Promise<Passage[]> {
    const k = options.k ?? 5;
    if (k <= 0) return [];
    const ranked = await this.rankPassages(query, Math.max(FUSION_DEPTH, k));
    const get = this.db.prepare(
      "SELECT p.id, p.doc_id, d.title, p.section, p.text FROM passages p JOIN documents d ON d.id = p.doc_id WHERE p.id = ?",
    );
    return ranked.slice(0, k).map((r) => toPassage(get.get(r.id) as PassageRow, r.score));
  }

  /**
   * Close titles for a title that does not exist: trigram matches on titles plus word matches,
   * ordered by character-bigram similarity. Used for "did you mean" messages.
   */
  suggestTitles(title: string, limit = 5): string[] {
    const candidates = new Map<string, number>();
    const tq = this.prunedTrigramQuery(title);
    if (tq) {
      const rows = this.db
        .prepare(
          "SELECT d.title FROM titles_fts JOIN documents d ON d.id = titles_fts.rowid WHERE titles_fts MATCH ? ORDER BY bm25(titles_fts) LIMIT 30",
        )
        .all(tq) as { title: string }[];
      for (const r of rows) candidates.set(r.title, titleSimilarity(title, r.title));
    }
    const match = this.prunedFtsQuery(title);
    if (match) {
      const rows = this.db
        .prepare(
          `SELECT DISTINCT d.title FROM (SELECT rowid FROM passages_fts WHERE passages_fts MATCH ?
             ORDER BY bm25(passages_fts, ${W_TITLE}, ${W_SECTION}, ${W_TEXT}) LIMIT 20) m
           JOIN passages p ON p.id = m.rowid JOIN documents d ON d.id = p.doc_id`,
        )
        .all(match) as { title: string }[];
      // Word matches get a floor so a page about the topic is offered even with a different name.
      for (const r of rows)
        candidates.set(
          r.title,
          Math.max(candidates.get(r.title) ?? 0, titleSimilarity(title, r.title), 0.25),
        );
    }
    return [...candidates.entries()]
      .filter(([, s]) => s >= 0.25)
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([t]) => t);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
    this.terms?.close();
  }

  /** {@link ftsQuery} without very common words on large corpora (see PRUNE_DF_SHARE). */
  private prunedFtsQuery(query: string): string {
    const full = ftsQuery(query);
    if (this.passageCount < PRUNE_MIN_PASSAGES || !full) return full;
    const words = full.split(" OR ").map((w) => w.slice(1, -1));
    if (words.length < 2) return full;
    const stems = this.indexTerms().of(words);
    this.ensureVocab();
    const dfOf = this.db.prepare("SELECT doc FROM temp.passages_vocab WHERE term = ?").pluck();
    // Counting a common term's rows walks its whole doclist (~1 ms): remember the counts. They
    // only steer pruning, so a count gone stale under a concurrent ingest does no harm.
    const lookup = (term: string): number => {
      let n = this.dfCache.get(term);
      if (n === undefined) {
        n = (dfOf.get(term) as number | undefined) ?? 0;
        if (this.dfCache.size >= 10_000) this.dfCache.clear();
        this.dfCache.set(term, n);
      }
      return n;
    };
    const df = words.map((_, i) => (stems[i].length > 0 ? lookup(stems[i][0]) : 0));
    const limit = this.passageCount * PRUNE_DF_SHARE;
    let keep = words.filter((_, i) => df[i] <= limit);
    // Only common words: keep the two rarest rather than scoring the whole index.
    if (keep.length === 0)
      keep = words
        .map((w, i) => ({ w, d: df[i] }))
        .sort((a, b) => a.d - b.d)
        .slice(0, 2)
        .map((x) => x.w);
    return keep.map((w) => `"${w}"`).join(" OR ");
  }

  /**
   * {@link trigramQuery} without trigrams shared by many titles (e.g. "pag", "age" when most titles
   * start with "Page"), when enough rarer ones remain: same idea as PRUNE_DF_SHARE.
   */
  private prunedTrigramQuery(title: string): string {
    const full = trigramQuery(title);
    if (!full || this.docCount() < PRUNE_MIN_PASSAGES / 4) return full;
    this.db.exec(
      "CREATE VIRTUAL TABLE IF NOT EXISTS temp.titles_vocab USING fts5vocab(main, titles_fts, 'row')",
    );
    const dfOf = this.db.prepare("SELECT doc FROM temp.titles_vocab WHERE term = ?").pluck();
    const grams = full.split(" OR ").map((g) => g.slice(1, -1));
    const df = grams.map((g) => ({ g, d: (dfOf.get(g) as number | undefined) ?? 0 }));
    const limit = this.docCount() * PRUNE_DF_SHARE;
    let keep = df.filter((x) => x.d > 0 && x.d <= limit);
    if (keep.length < 2)
      keep = df
        .filter((x) => x.d > 0)
        .sort((a, b) => a.d - b.d)
        .slice(0, 3);
    return keep.map((x) => `"${x.g}"`).join(" OR ");
  }

  private indexTerms(): IndexTerms {
    this.terms ??= new IndexTerms();
    return this.terms;
  }

  private docs?: number;
  private docCount(): number {
    this.docs ??= (this.db.prepare("SELECT count(*) AS n FROM documents").get() as { n: number }).n;
    return this.docs;
  }

  private vocabReady = false;
  private readonly dfCache = new Map<string, number>();
  /** A temp fts5vocab view of the index (temp: the corpus file may be opened read-only). */
  private ensureVocab(): void {
    if (this.vocabReady) return;
    this.db.exec(
      "CREATE VIRTUAL TABLE IF NOT EXISTS temp.passages_vocab USING fts5vocab(main, passages_fts, 'row')",
    );
    this.vocabReady = true;
  }

  /** Documents whose titles match the (pruned FTS) query, best first (BM25 on the title column only). */
  private rankTitles(match: string): number[] {
    if (!match) return [];
    const rows = this.db
      .prepare(
        `SELECT p.doc_id AS docId FROM (SELECT rowid, bm25(passages_fts, 1, 0, 0) AS r FROM passages_fts
           WHERE passages_fts MATCH ? ORDER BY r LIMIT ?) m JOIN passages p ON p.id = m.rowid ORDER BY m.r`,
      )
      .all(`{title} : (${match})`, FUSION_DEPTH * 4) as { docId: number }[];
    return [...new Set(rows.map((r) => r.docId))].slice(0, FUSION_DEPTH);
  }

  /**
   * The documents among `docIds` whose title the query names, with the weight of their bonus. A
   * title is named when every content word of it, a trailing qualifier such as "(band)" left out,
   * occurs in the query (compared as index terms, so "albums" names "Album"): weight 1, or 1/2
   * when no word of the qualifier is in the query ("Nevada" names "Nevada (1944 film)" only
   * weakly, "the film Nevada" fully). A named title whose words are all part of a longer named title gets nothing: in
   * "birch plywood density", "Birch plywood" is named, not "Plywood" or "Birch".
   */
  private namedPages(query: string, docIds: number[]): { docId: number; weight: number }[] {
    const titleOf = this.db.prepare("SELECT title FROM documents WHERE id = ?").pluck();
    // Words sharing an index term share their start ("albums" / "album"): a cheap test on the
    // raw words leaves out most candidates before the exact comparison of index terms.
    const queryWords = plainWords(query);
    const mayBeNamed = (base: string[]) =>
      base.every((w) => queryWords.some((q) => sharedPrefix(w, q) >= Math.min(3, w.length - 1)));
    const candidates = docIds
      .map((docId) => {
        const title = titleOf.get(docId) as string;
        return { docId, title, base: contentTokens(title.replace(QUALIFIER, "")) };
      })
      .filter((c) => c.base.length > 0 && mayBeNamed(plainWords(c.base.join(" "))));
    if (candidates.length === 0) return [];
    const titles = candidates.map((c) => c.title);
    const qualifiers = titles.map((t) => QUALIFIER.exec(t)?.[1] ?? "");
    const bases = candidates.map((c) => c.base.join(" "));
    const [queryTerms, ...rest] = this.indexTerms().of([query, ...bases, ...qualifiers]);
    const inQuery = new Set(queryTerms);
    const qualifierNamed = (terms: string[]) =>
      terms.length === 0 || terms.some((t) => inQuery.has(t));
    const named = candidates
      .map(({ docId }, i) => ({
        docId,
        terms: new Set(rest[i]),
        weight: qualifierNamed(rest[titles.length + i]) ? 1 : QUALIFIED_WEIGHT,
      }))
      .filter((n) => n.terms.size > 0 && [...n.terms].every((t) => inQuery.has(t)));
    const within = (a: Set<string>, b: Set<string>) =>
      b.size > a.size && [...a].every((t) => b.has(t));
    return named.filter((n) => !named.some((m) => within(n.terms, m.terms)));
  }

  /**
   * Document id for a title or redirect: exact title first, then case-, underscore- and
   * space-insensitive (see TitleIndex.resolve).
   */
  private resolveDocId(title: string): number | undefined {
    this.titles ??= new TitleIndex(this.db);
    return this.titles.resolve(title)?.id;
  }

  private titles?: TitleIndex;

  /**
   * Passages across the corpus, best first (BM25, or RRF of BM25 and vector neighbours); pass
   * `lexical` when the BM25 ranking is at hand.
   */
  private async rankPassages(
    query: string,
    depth: number,
    match = this.prunedFtsQuery(query),
    lexical = this.bm25Passages(match, depth),
  ): Promise<RankedPassage[]> {
    if (this.mode === "bm25") return lexical;
    const near = await this.nearestPassages(query, depth);
    const docOf = new Map([...lexical, ...near].map((r) => [r.id, r.docId]));
    return [...reciprocalRankFusion([lexical.map((r) => r.id), near.map((r) => r.id)]).entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([id, score]) => ({ id, docId: docOf.get(id)!, score }));
  }

  /** Passages matching the (pruned) FTS query, best first; score = BM25 (higher is better). */
  private bm25Passages(match: string, depth: number): RankedPassage[] {
    if (!match) return [];
    return this.db
      .prepare(
        // Rank inside FTS5 first: joining before the LIMIT would look up every match's document.
        `SELECT m.id, p.doc_id AS docId, -m.r AS score FROM
           (SELECT rowid AS id, bm25(passages_fts, ${W_TITLE}, ${W_SECTION}, ${W_TEXT}) AS r FROM passages_fts
            WHERE passages_fts MATCH ? ORDER BY r LIMIT ?) m
         JOIN passages p ON p.id = m.id ORDER BY m.r`,
      )
      .all(match, depth) as RankedPassage[];
  }

  /** Nearest passages to the query's embedding (hybrid mode only), best first; score = 1 - cosine distance. */
  private async nearestPassages(query: string, depth: number): Promise<RankedPassage[]> {
    if (this.mode !== "hybrid" || !query.trim()) return [];
    const [vector] = await this.embedder!.embed([query]);
    // sqlite-vec scans every vector (no ANN index); a deeper k only costs sorting, but fusion
    // rarely promotes anything below the first FUSION_DEPTH neighbours.
    return this.db
      .prepare(
        `SELECT v.rowid AS id, p.doc_id AS docId, 1 - v.distance AS score FROM passages_vec v
         JOIN passages p ON p.id = v.rowid WHERE v.embedding MATCH ? AND k = ? ORDER BY v.distance`,
      )
      .all(new Float32Array(vector), Math.min(depth, FUSION_DEPTH)) as RankedPassage[];
  }
}

/** Lower-cased words without diacritics ("Éire" → "eire"), as the index folds them. */
function plainWords(text: string): string[] {
  return queryTokens(text.normalize("NFD").replace(/\p{M}/gu, ""));
}

/** Length of the common start of two words. */
function sharedPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

function toPassage(row: PassageRow, score: number): Passage {
  return {
    title: row.title,
    section: row.section,
    text: row.text,
    score,
    id: String(row.id),
    docId: String(row.doc_id),
  };
}

function safeJson(text: string): Record<string, any> {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}
