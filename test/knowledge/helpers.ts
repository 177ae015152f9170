import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { IngestDocument } from "../../src/ingest/types.ts";

/** Repository paths of the shipped demo data. */
export const DEMO_CORPUS = join(import.meta.dirname, "../../data/demo-corpus.jsonl");
export const DEMO_QUERIES = join(import.meta.dirname, "../../data/demo-queries.json");

/** The demo corpus as documents. */
export function demoDocuments(): IngestDocument[] {
  return readFileSync(DEMO_CORPUS, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as IngestDocument);
}

/** A fresh temporary directory and a cleanup function. */
export function tempDir(prefix = "codehop-kb-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
