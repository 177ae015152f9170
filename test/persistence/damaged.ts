import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, onTestFinished } from "vitest";
import { ask } from "../../src/apps/qa/app.ts";
import { DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import type { Persistence } from "../../src/persistence/index.ts";
import type { DemoWorld } from "../app/fixtures.ts";

// Damaged databases for the tests of corrupt stored data (corrupt.test.ts, check.test.ts): two
// finished QA threads, "good" and "bad", and copies of their SQLite file with the bad thread's
// rows damaged.

/** Runs two finished QA threads, "good" and "bad", into `persistence`. */
export async function twoThreads(world: DemoWorld, persistence: Persistence): Promise<void> {
  for (const [threadId, question] of [
    ["good", DEMO_QUESTIONS.towers],
    ["bad", DEMO_QUESTIONS.plywood],
  ] as const) {
    const result = await ask(question, { threadId, config: world.config(), persistence });
    expect(result.status).toBe("final_answer");
  }
}

/**
 * A new data directory holding a copy of `home`'s checkpoints.db with `damage` done to it (given
 * the database and the ns_id of the bad thread's root namespace).
 */
export function damagedHome(
  home: string,
  damage: (db: Database.Database, ns: number) => void,
): string {
  const copy = mkdtempSync(join(tmpdir(), "codehop-damaged-home-"));
  // (called in a test: the copy goes with it)
  onTestFinished(() => rmSync(copy, { recursive: true, force: true }));
  copyFileSync(join(home, "checkpoints.db"), join(copy, "checkpoints.db"));
  const db = new Database(join(copy, "checkpoints.db"));
  const { ns_id } = db
    .prepare("SELECT ns_id FROM lgi_namespaces WHERE thread_id = 'bad' AND checkpoint_ns = ''")
    .get() as { ns_id: number };
  damage(db, ns_id);
  db.close();
  return copy;
}

/** The id of a namespace's latest checkpoint row. */
export function latestCheckpoint(db: Database.Database, ns: number): string {
  return (
    db
      .prepare(
        "SELECT checkpoint_id FROM lgi_checkpoints WHERE ns_id = ? ORDER BY checkpoint_id DESC LIMIT 1",
      )
      .get(ns) as { checkpoint_id: string }
  ).checkpoint_id;
}
