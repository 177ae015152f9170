/**
 * `codehop check` on PostgreSQL (check.ts has the report, the SQLite side and what both share):
 * every thread's checkpoints and call-journal rows read back; with `repair`, the damaged threads'
 * rows moved, in one transaction, into tables of the same names in the schema `<schema>_damaged`.
 * A module of its own so that checking a SQLite file never loads the Postgres driver.
 */
import { LINEAR_TABLES } from "@codehop/checkpoint-postgres";
import { JOURNAL_TABLE } from "../core/journal.ts";
import { damageOf, journalDamage, type CheckReport, type DamagedRow } from "./check.ts";
import { inTransaction, type PostgresLocation } from "./postgres-database.ts";
import { journalRowFromSql as postgresJournalRow } from "./postgres-journal.ts";
import { openPostgresPersistence } from "./postgres.ts";

/** The tables of a thread's rows in a codehop Postgres schema, and the column naming the thread. */
const POSTGRES_TABLES = [
  ...LINEAR_TABLES,
  "checkpoints",
  "checkpoint_blobs",
  "checkpoint_writes",
  JOURNAL_TABLE,
  "codehop_threads",
] as const;

/** Checks (and with `repair`, repairs) the codehop tables of a PostgreSQL database. */
export async function checkPostgres(
  location: PostgresLocation,
  options: { repair?: boolean } = {},
): Promise<CheckReport> {
  const p = await openPostgresPersistence(location);
  const report: CheckReport = {
    kind: "postgres",
    location: `${p.location} (schema ${p.schema})`,
    integrity: [],
    threads: [],
  };
  const table = (name: string) => `"${p.schema}".${name}`;
  try {
    const { rows: others } = await p.pool.query<{ thread_id: string }>(
      `SELECT thread_id FROM ${table(JOURNAL_TABLE)}
       UNION SELECT thread_id FROM ${table("codehop_threads")}`,
    );
    const ids = [
      ...new Set([...(await p.checkpointer.threadIds()), ...others.map((r) => r.thread_id)]),
    ].sort();
    for (const threadId of ids) {
      const found = new Map<string, DamagedRow>();
      for (const c of await p.checkpointer.checkpointKeys(threadId)) {
        try {
          await p.checkpointer.getTuple({ configurable: { thread_id: threadId, ...c } });
        } catch (err) {
          const d = damageOf(err);
          found.set(`${d.table}\u0000${d.row}\u0000${d.problem}`, d);
        }
      }
      const { rows } = await p.pool.query(
        `SELECT * FROM ${table(JOURNAL_TABLE)} WHERE thread_id = $1`,
        [threadId],
      );
      const damage = [
        ...found.values(),
        ...journalDamage(rows.map((r) => () => postgresJournalRow(r))),
      ];
      report.threads.push({ threadId, damage });
    }
    const damaged = report.threads.filter((t) => t.damage.length).map((t) => t.threadId);
    if (options.repair && damaged.length) {
      const aside = `${p.schema}_damaged`;
      await inTransaction(p.pool, async (client) => {
        await client.query(`CREATE SCHEMA IF NOT EXISTS "${aside}"`);
        for (const name of POSTGRES_TABLES) {
          // (The official layout's tables exist only in schemas it wrote.)
          const { rows: exists } = await client.query(`SELECT to_regclass($1) AS t`, [table(name)]);
          if (exists[0]?.t == null) continue;
          await client.query(`CREATE TABLE IF NOT EXISTS "${aside}".${name} (LIKE ${table(name)})`);
          await client.query(
            `INSERT INTO "${aside}".${name} SELECT * FROM ${table(name)} WHERE thread_id = ANY($1)`,
            [damaged],
          );
          await client.query(`DELETE FROM ${table(name)} WHERE thread_id = ANY($1)`, [damaged]);
        }
      });
      report.repaired = { threads: damaged, copy: `schema ${aside} of ${p.location}` };
    }
    return report;
  } finally {
    await p.close();
  }
}
