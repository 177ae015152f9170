import { createHash } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { ingestDocuments } from "../ingest/ingest.ts";
import { ensureDir } from "../util/fs-safe.ts";
import type { IngestDocument } from "../ingest/types.ts";
import { CorpusSource } from "../store/corpus-source.ts";
import { createEmbedder } from "../store/embeddings.ts";
import { knowledgeSourceOptionsFromEnv, openKnowledgeSource } from "../store/open.ts";
import type { KnowledgeSource } from "../store/types.ts";
import { DEFAULT_WIKIPEDIA_API } from "../store/wikipedia-source.ts";
import type { EvalExample, LoadedDataset } from "./types.ts";

/** File name of the per-dataset corpus inside an eval output directory. */
export const DATASET_CORPUS_FILE = "corpus.db";

/**
 * The documents a dataset ships (distractor settings): one document per title, the distinct
 * paragraphs under that title joined by blank lines (MuSiQue has several paragraphs per title),
 * in order of first appearance. Built from every usable question of the file — not only the
 * --limit ones — so the corpus, and therefore retrieval, is the same however many questions a
 * run (or a resumed run) covers.
 */
export function datasetDocuments(examples: EvalExample[], source: string): IngestDocument[] {
  const byTitle = new Map<string, string[]>();
  for (const ex of examples) {
    for (const p of ex.paragraphs) {
      const title = p.title.trim();
      const text = p.text.trim();
      if (!title || !text) continue;
      const texts = byTitle.get(title) ?? byTitle.set(title, []).get(title)!;
      if (!texts.includes(text)) texts.push(text);
    }
  }
  return [...byTitle].map(([title, texts]) => ({ title, text: texts.join("\n\n"), source }));
}

/** Where retrieval comes from, as recorded in the report. */
export interface EvalSourceInfo {
  kind: "dataset-corpus" | "configured-corpus" | "wikipedia";
  path?: string;
  documents?: number;
  passages?: number;
  /** Content hash of the dataset documents (a changed dataset re-ingests). */
  hash?: string;
  ranking?: string;
}

/**
 * Opens the knowledge source for a run: when the dataset carries its own paragraphs, they are
 * ingested (once; reruns reuse it) into `<out>/corpus.db` so the run is offline and
 * reproducible; otherwise the configured source (CODEHOP_CORPUS, else online Wikipedia).
 */
export async function openEvalSource(
  dataset: LoadedDataset,
  allExamples: EvalExample[],
  out: string,
  env: CodehopEnv,
  log: (line: string) => void,
  previous?: EvalSourceInfo,
  signal?: AbortSignal,
): Promise<{ source: KnowledgeSource; info: EvalSourceInfo }> {
  // A corpus with vectors but no endpoint says so in the run's log, once.
  const sourceOptions = { ...knowledgeSourceOptionsFromEnv(env), onNotice: log };
  const docs = datasetDocuments(
    allExamples,
    `${dataset.format}:${dataset.path.split(/[\\/]/).pop()}`,
  );
  if (docs.length === 0) {
    const source = openKnowledgeSource(sourceOptions);
    const info: EvalSourceInfo = sourceOptions.corpus
      ? { kind: "configured-corpus", path: sourceOptions.corpus }
      : {
          kind: "wikipedia",
          path: sourceOptions.wikipediaApi ?? DEFAULT_WIKIPEDIA_API,
        };
    return { source, info };
  }
  ensureDir(out, { code: ErrorCodes.CONFIG_INVALID, what: "output directory" });
  const path = join(out, DATASET_CORPUS_FILE);
  const hash = createHash("sha256")
    .update(JSON.stringify(docs.map((d) => [d.title, d.text])))
    .digest("hex")
    .slice(0, 16);
  const embeddings = sourceOptions.embeddings;
  // Ingest needs a model name; a corpus is then queried with the model it stored.
  const embedModel = embeddings?.model;
  let info: EvalSourceInfo;
  if (previous?.kind === "dataset-corpus" && previous.hash === hash && existsSync(path)) {
    info = previous;
  } else {
    // The dataset file changed since the corpus was built: start it afresh, so no page of the
    // old version lingers. (No previous record at all = a first or interrupted ingest: continue it.)
    if (previous?.kind === "dataset-corpus" && previous.hash !== hash) {
      for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
    }
    log(
      `ingesting ${docs.length} dataset paragraphs' pages into ${path}${embedModel ? " (with embeddings)" : ""}`,
    );
    const report = await ingestDocuments(path, docs, {
      embedder:
        embeddings && embedModel ? createEmbedder({ ...embeddings, model: embedModel }) : undefined,
      // Ctrl-C stops after the current batch; the next run continues the ingest from there.
      sourceKey: `codehop-eval:${hash}`,
      signal,
    });
    if (report.interrupted) {
      throw new CodehopError(
        ErrorCodes.RUN_INTERRUPTED,
        `Interrupted while ingesting the dataset's paragraphs into ${path} (${report.records} of ${docs.length} pages done); rerun to continue`,
      );
    }
    for (const s of report.skippedRecords) log(`corpus: skipped ${s.where}: ${s.reason}`);
    info = {
      kind: "dataset-corpus",
      path,
      hash,
      ranking: embedModel ? `hybrid (${embedModel})` : "bm25",
    };
  }
  const source = openKnowledgeSource({ corpus: path, embeddings, onNotice: log });
  if (source instanceof CorpusSource) {
    const stats = source.stats();
    info = {
      ...info,
      documents: stats.documents,
      passages: stats.passages,
      // What the queries really use: a reused corpus may carry vectors of an earlier run.
      ranking: source.mode === "hybrid" ? `hybrid (${stats.embeddingModel})` : "bm25",
    };
  }
  return { source, info };
}
