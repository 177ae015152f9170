/**
 * Fuzzing the call journal's decoding (fast-check): random mutations of the rows a journal stored
 * (outcomes as text and deflated, replay copies, approval decisions, a thread record) read back
 * through the core's journal: every read ends in a value or CODEHOP_CHECKPOINT_CORRUPT naming the
 * row, within a time bound, and `codehop check`'s row test says the same.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib";
import Database from "better-sqlite3";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type CallKey,
  createCallJournal,
  getThreadRecord,
  journalRowProblem,
  putThreadRecord,
} from "../../src/core/journal.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { journalRowFromSql, SqliteJournalRows } from "../../src/persistence/sqlite-journal.ts";

const KEYS: CallKey[] = [0, 1, 2].map((i) => ({
  threadId: "t",
  checkpointNs: `act:${i}`,
  step: i + 1,
  callIndex: 0,
  tool: "search",
  argsJson: `["q${i}"]`,
}));

let original: Buffer;

beforeAll(async () => {
  const db = new Database(":memory:");
  const rows = new SqliteJournalRows(db);
  const journal = createCallJournal(rows);
  await journal.put(KEYS[0], { ok: true, value: "short" });
  await journal.put(KEYS[1], { ok: true, value: "long ".repeat(200) }); // stored deflated
  await journal.put(KEYS[2], { ok: false, error: "failed" });
  await journal.putDecision("t", { approvalId: "a1", decision: "approve" });
  await journal.markAsked!("t", "a1");
  await putThreadRecord(rows, "t", "verification", { status: "verified" });
  original = db.serialize();
  db.close();
});

const TOKENS = ["{", "}", "[", "]", '"', ",", ":", "null", "true", '"ok"', '"ref"', "\u0000"];
const edit = fc.record({
  at: fc.nat(),
  cut: fc.nat({ max: 12 }),
  insert: fc.oneof(fc.constantFrom(...TOKENS), fc.string({ maxLength: 4 })),
});
const mutation = fc.record({
  row: fc.nat(),
  // Edit the JSON text (stored as text, or deflated again), or the stored bytes themselves.
  how: fc.constantFrom("text", "deflated", "bytes"),
  edits: fc.array(edit, { minLength: 1, maxLength: 4 }),
});

/** CPU milliseconds this process has used since `since` (a bound a loaded machine does not inflate). */
const cpuMsSince = (since: NodeJS.CpuUsage): number => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};

/** Reads everything of thread "t" through the core's journal; fails on anything but corruption. */
async function readAll(db: Database.Database): Promise<void> {
  const rows = new SqliteJournalRows(db);
  const reads: Array<() => unknown> = [
    ...KEYS.map((k) => () => createCallJournal(rows).get(k)),
    ...KEYS.map((k) => () => createCallJournal(rows, { matchAcrossForks: true }).get(k)),
    () => createCallJournal(rows).entries("t"),
    () => createCallJournal(rows).getDecision("t", "a1"),
    () => createCallJournal(rows).wasAsked("t", "a1"),
    () => getThreadRecord(rows, "t", "verification"),
  ];
  for (const read of reads) {
    const t0 = process.cpuUsage();
    try {
      await read();
    } catch (err) {
      expect(CodehopError.isInstance(err) && err.code, String(err)).toBe(
        ErrorCodes.CHECKPOINT_CORRUPT,
      );
      expect((err as Error).message).toMatch(/table codehop_call_journal, row thread_id "t"/);
    }
    expect(cpuMsSince(t0)).toBeLessThan(2_000);
  }
  // What `codehop check` asks of each row: a problem or none, never a throw of another kind.
  for (const r of db.prepare("SELECT * FROM codehop_call_journal").all() as Array<
    Record<string, unknown>
  >) {
    try {
      journalRowProblem(journalRowFromSql(r));
    } catch (err) {
      expect(CodehopError.isInstance(err) && err.code, String(err)).toBe(
        ErrorCodes.CHECKPOINT_CORRUPT,
      );
    }
  }
}

describe("call journal decoding fuzzing", () => {
  it("mutated rows read back or fail with CODEHOP_CHECKPOINT_CORRUPT", async () => {
    await fc.assert(
      fc.asyncProperty(mutation, async (m) => {
        const db = new Database(original);
        try {
          const rows = db
            .prepare("SELECT rowid AS r, outcome_json FROM codehop_call_journal ORDER BY rowid")
            .all() as Array<{ r: number; outcome_json: string | Buffer }>;
          const row = rows[m.row % rows.length];
          const stored = row.outcome_json;
          let text = Buffer.from(typeof stored === "string" ? stored : inflateRawSync(stored));
          for (const e of m.edits) {
            const at = e.at % (text.length + 1);
            text = Buffer.concat([
              text.subarray(0, at),
              Buffer.from(e.insert),
              text.subarray(at + e.cut),
            ]);
          }
          const value =
            m.how === "text"
              ? text.toString("utf8")
              : m.how === "deflated"
                ? deflateRawSync(text)
                : typeof stored === "string"
                  ? Buffer.from(text) // bytes that are not deflate data at all
                  : text;
          db.prepare("UPDATE codehop_call_journal SET outcome_json = ? WHERE rowid = ?").run(
            value,
            row.r,
          );
          await readAll(db);
        } finally {
          db.close();
        }
      }),
      { numRuns: 150 },
    );
  });
});
