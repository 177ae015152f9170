import { existsSync, statSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { wholeNumberOption } from "../option-values.ts";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { cliCommand } from "../../config/cli-command.ts";
import { colorsFor } from "../../config/colors.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import type { Persistence, ThreadRecord, ThreadStatus } from "../../persistence/port.ts";

/** Statuses `--prune` may delete (a thread a live process is running is never deleted). */
const PRUNABLE: ReadonlyArray<ThreadStatus | "unknown"> = [
  "done",
  "failed",
  "interrupted",
  "unknown",
];

const UNIT_MS: Record<string, number> = {
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** `--older-than`: "0", or a whole number of minutes, hours, days or weeks ("90m", "12h", "30d", "2w"). */
export function parseAge(value: string): number {
  if (value.trim() === "0") return 0;
  const m = /^(\d+)\s*([mhdw])$/.exec(value.trim());
  if (!m)
    throw new InvalidArgumentError(
      'expected an age such as 90m, 12h, 30d or 2w (or 0 for "any age")',
    );
  return Number(m[1]) * UNIT_MS[m[2]];
}

function statusList(value: string): Array<ThreadStatus | "unknown"> {
  const names = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = names.filter((n) => !PRUNABLE.includes(n as ThreadStatus));
  if (!names.length || bad.length)
    throw new InvalidArgumentError(
      `expected a comma-separated subset of ${PRUNABLE.join(",")}${bad.length ? `, got ${bad.join(",")}` : ""}`,
    );
  return names as Array<ThreadStatus | "unknown">;
}

/**
 * The threads `--prune` deletes: not running, status in `statuses`, and last updated more than
 * `olderThanMs` before `now`. A thread with no recorded time (started through the graph API, no
 * registry row) has no age: it is pruned only when `olderThanMs` is 0.
 */
export function threadsToPrune(
  threads: ThreadRecord[],
  options: { olderThanMs: number; statuses: ReadonlyArray<ThreadStatus | "unknown">; now?: number },
): ThreadRecord[] {
  const now = options.now ?? Date.now();
  return threads.filter((t) => {
    if (t.status === "running" || !options.statuses.includes(t.status)) return false;
    if (options.olderThanMs === 0) return true;
    const updated = t.updatedAt ? Date.parse(t.updatedAt) : Number.NaN;
    return Number.isFinite(updated) && now - updated > options.olderThanMs;
  });
}

/**
 * A thread as `threads --json` prints it: snake_case like every other JSON codehop prints. The
 * camelCase names of earlier versions (threadId, forkedFrom, createdAt, updatedAt, durationMs)
 * are kept beside them for scripts written against those.
 */
export function threadJson(t: ThreadRecord): Record<string, unknown> {
  return {
    thread_id: t.threadId,
    question: t.question,
    status: t.status,
    answer: t.answer,
    error: t.error,
    options: t.options,
    forked_from: t.forkedFrom
      ? { thread_id: t.forkedFrom.threadId, checkpoint_id: t.forkedFrom.checkpointId }
      : null,
    created_at: t.createdAt,
    updated_at: t.updatedAt,
    checkpoints: t.checkpoints,
    pid: t.pid,
    duration_ms: t.durationMs,
    threadId: t.threadId,
    forkedFrom: t.forkedFrom,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    durationMs: t.durationMs,
  };
}

/**
 * Deletes `threads`: what their apps keep outside the persistence (a conversation's attached
 * files), then their checkpoints, journal rows and registry row through the persistence port.
 */
async function deleteAll(p: Persistence, threads: ThreadRecord[], home: string): Promise<string[]> {
  const { deleteThread } = await import("../../apps/index.ts");
  const deleted: string[] = [];
  for (const t of threads) {
    await deleteThread(t.threadId, { config: { home }, persistence: p });
    deleted.push(t.threadId);
  }
  return deleted;
}

interface ThreadsFlags extends RunFlags {
  limit: number;
  delete?: string[];
  prune?: boolean;
  olderThan: number;
  status: Array<ThreadStatus | "unknown">;
  dryRun?: boolean;
}

/**
 * `codehop threads`: threads in the data directory, most recent first; `--delete <id...>` and
 * `--prune` remove threads (every checkpoint, call-journal row and registry row) through the
 * persistence port.
 */
export default function threadsCommand(): Command {
  return (
    new Command("threads")
      .description(
        "list threads (question, status, checkpoints), most recent first; or delete them (--delete, --prune)",
      )
      .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
      .option("--limit <n>", "show at most n threads", wholeNumberOption("--limit", 1), 20)
      .option("--json", "print JSON")
      .option(
        "--delete <id...>",
        "delete these threads: their checkpoints, call-journal rows, registry rows and a conversation's files",
      )
      .option(
        "--prune",
        "delete every thread not updated for --older-than whose status is in --status (never a running one)",
      )
      // Defaults shown as they are typed (30d, done,failed,...), not as the parsed value.
      .addOption(
        new Option(
          "--older-than <age>",
          "with --prune: minimum age, e.g. 12h, 30d, 2w; 0 = any age",
        )
          .argParser(parseAge)
          .default(parseAge("30d"), "30d"),
      )
      .addOption(
        new Option("--status <list>", "with --prune: statuses to delete, comma-separated")
          .argParser(statusList)
          .default([...PRUNABLE], PRUNABLE.join(",")),
      )
      .option("--dry-run", "with --delete / --prune: list what would be deleted, delete nothing")
      .action(async (flags: ThreadsFlags) => {
        if (flags.delete && flags.prune)
          throw new CodehopError(ErrorCodes.CONFIG_INVALID, "Use --delete or --prune, not both.");
        const { checkpointDbPath } = await import("../../persistence/sqlite-database.ts");
        const { loadAppConfig, persistenceLocation } = await import("../../runs/config.ts");
        const config = loadAppConfig(configFromFlags(flags));
        // Nothing has run here yet (no database; a home that is a file still fails when opened).
        // With CODEHOP_DATABASE_URL the threads are in Postgres, whatever the home holds.
        const fresh =
          !config.databaseUrl &&
          !existsSync(checkpointDbPath(config.home)) &&
          (!existsSync(config.home) || statSync(config.home).isDirectory());
        if (fresh && !flags.delete) {
          const where = checkpointDbPath(config.home);
          if (flags.json)
            process.stdout.write(
              flags.prune
                ? `${JSON.stringify({ deleted: [], dry_run: Boolean(flags.dryRun) })}\n`
                : "[]\n",
            );
          else process.stdout.write(`No threads in ${where} (nothing has run there yet).\n`);
          return;
        }
        if (flags.delete || flags.prune) {
          const { openPersistenceFor } = await import("../../persistence/open.ts");
          const p = await openPersistenceFor(persistenceLocation(config), { mustExist: true });
          try {
            const all = await p.threads.list();
            let chosen: ThreadRecord[];
            if (flags.delete) {
              chosen = [];
              for (const id of flags.delete) {
                const t = all.find((x) => x.threadId === id);
                if (!t)
                  throw new CodehopError(
                    ErrorCodes.THREAD_NOT_FOUND,
                    `No thread "${id}" in ${p.location}. List threads with \`${cliCommand(["threads"], { home: flags.home })}\`.`,
                  );
                if (t.status === "running")
                  throw new CodehopError(
                    ErrorCodes.CONFIG_INVALID,
                    `Thread "${id}" is being run by process ${t.pid ?? "(unknown)"}: stop it first.`,
                  );
                chosen.push(t);
              }
            } else {
              chosen = threadsToPrune(all, {
                olderThanMs: flags.olderThan,
                statuses: flags.status,
              });
            }
            const deleted = flags.dryRun
              ? chosen.map((t) => t.threadId)
              : await deleteAll(p, chosen, config.home);
            if (flags.json) {
              process.stdout.write(
                `${JSON.stringify({ deleted, dry_run: Boolean(flags.dryRun) })}\n`,
              );
              return;
            }
            const verb = flags.dryRun ? "Would delete" : "Deleted";
            const lines = [
              `${verb} ${deleted.length} thread${deleted.length === 1 ? "" : "s"} in ${p.location}.`,
            ];
            for (const t of chosen)
              lines.push(
                `  ${t.threadId}  ${t.status}  ${(t.updatedAt ?? "").slice(0, 19)}  ${(t.question ?? "").replace(/\s+/g, " ").slice(0, 60)}`,
              );
            process.stdout.write(`${lines.join("\n")}\n`);
            return;
          } finally {
            await p.close();
          }
        }
        // Listing reads the threads only: on SQLite without loading the checkpointer (a fast start).
        const { openThreadListing } = await import("../../persistence/thread-listing.ts");
        const p = await openThreadListing(persistenceLocation(config), { mustExist: true });
        try {
          const threads = (await p.list()).slice(0, flags.limit);
          if (flags.json) {
            process.stdout.write(`${JSON.stringify(threads.map(threadJson))}\n`);
            return;
          }
          if (!threads.length) {
            process.stdout.write(`No threads in ${p.location}.\n`);
            return;
          }
          const c = colorsFor(process.stdout);
          const tint: Record<string, (s: string) => string> = {
            done: c.green,
            failed: c.red,
            interrupted: c.yellow,
            running: c.cyan,
          };
          const lines = threads.map((t) => {
            const q = (t.question ?? "(started through the graph API)").replace(/\s+/g, " ");
            return `${t.threadId.padEnd(38)} ${(tint[t.status] ?? String)(t.status.padEnd(11))} ${String(t.checkpoints).padStart(4)} ckpts  ${(t.updatedAt ?? "").slice(0, 19).padEnd(19)}  ${q.length > 70 ? `${q.slice(0, 69)}…` : q}`;
          });
          process.stdout.write(`${lines.join("\n")}\n\n(${p.location})\n`);
        } finally {
          await p.close();
        }
      })
  );
}
