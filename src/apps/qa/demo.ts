import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureDir } from "../../util/fs-safe.ts";
import { ingestDocuments } from "../../ingest/ingest.ts";
import type { IngestDocument } from "../../ingest/types.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
  type Responder,
  type TrajectoryRule,
} from "../../testing/scripted-openai-server.ts";
import { demoRules } from "./demo-trajectories.ts";

/** data/demo-corpus.jsonl shipped with the package. */
export const DEMO_CORPUS_JSONL = resolve(
  dirname(fileURLToPath(import.meta.url)),
  "../../../data/demo-corpus.jsonl",
);

/**
 * Builds (once) the demo corpus DB `<home>/demo-corpus.db` from data/demo-corpus.jsonl with the
 * real ingestion code, and returns its path.
 */
export async function ensureDemoCorpus(home: string): Promise<string> {
  const dbPath = join(resolve(home), "demo-corpus.db");
  const text = readFileSync(DEMO_CORPUS_JSONL, "utf8");
  // Rebuilt when data/demo-corpus.jsonl changes (its hash is kept next to the DB).
  const hash = createHash("sha256").update(text).digest("hex");
  const hashFile = `${dbPath}.sha256`;
  if (existsSync(dbPath) && existsSync(hashFile) && readFileSync(hashFile, "utf8").trim() === hash)
    return dbPath;
  ensureDir(dirname(dbPath), { what: "data directory" });
  const docs: IngestDocument[] = text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as IngestDocument);
  // Build under a temporary name so an interrupted build never leaves a half corpus behind.
  const tmp = `${dbPath}.building-${process.pid}`;
  await ingestDocuments(tmp, docs);
  // ingestDocuments closes its connection, which checkpoints the WAL; move any leftovers along.
  for (const suffix of ["-wal", "-shm", ""]) {
    rmSync(`${dbPath}${suffix}`, { force: true });
    if (existsSync(`${tmp}${suffix}`)) renameSync(`${tmp}${suffix}`, `${dbPath}${suffix}`);
  }
  writeFileSync(hashFile, `${hash}\n`);
  return dbPath;
}

/** Options of {@link startDemoModelServer}. */
export interface DemoServerOptions {
  rules?: TrajectoryRule[];
  /** A whole responder instead of `rules` (e.g. the QA and research demos together). */
  responder?: Responder;
  /** Port (0 = a free port). */
  port?: number;
  /** Simulated model latency per reply, so the live tree can be watched (default 0). */
  delayMs?: number;
}

/** Starts the local OpenAI-compatible server replaying the demo trajectories. */
export async function startDemoModelServer(
  options: DemoServerOptions = {},
): Promise<ScriptedOpenAIServer> {
  const { rules = demoRules(), port = 0, delayMs = 0 } = options;
  const replay = options.responder ?? trajectoryResponder(rules);
  return ScriptedOpenAIServer.start({
    port,
    responder: async (req, ctx) => {
      const reply = await replay(req, ctx);
      if (!delayMs || typeof reply !== "object" || !("content" in reply)) return reply;
      return { ...reply, delayMs: reply.delayMs ?? delayMs };
    },
  });
}
