import { resolve } from "node:path";
import { Command } from "commander";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { cliCommand } from "../../config/cli-command.ts";
import { colorsFor } from "../../config/colors.ts";

interface CheckFlags extends RunFlags {
  db?: string;
  repair?: boolean;
}

/**
 * `codehop check [--db <file> | $CODEHOP_DATABASE_URL] [--repair] [--json]`: verifies a checkpoint
 * database (SQLite integrity_check, then every checkpoint record, value, writes row, dictionary and
 * call-journal row of every thread read back) and reports what is damaged, per thread. Exit 0
 * when nothing is damaged (or, with --repair, when every damaged thread was moved aside), 1
 * otherwise.
 */
export default function checkCommand(): Command {
  return new Command("check")
    .description(
      "verify a checkpoint database: integrity, then every stored row of every thread; report what is damaged per thread (exit 1), --repair moves damaged threads aside (a copy is kept)",
    )
    .option(
      "--db <file>",
      "SQLite file to check (default: CODEHOP_DATABASE_URL's database, else <home>/checkpoints.db)",
    )
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option(
      "--repair",
      "move damaged threads aside so the rest keep working (SQLite: the file as it was is copied first; PostgreSQL: their rows go to schema <schema>_damaged)",
    )
    .option("--json", "print the report as JSON")
    .action(async (flags: CheckFlags) => {
      const { checkSqliteFile, isHealthy, isRepaired } = await import("../../persistence/check.ts");
      const { checkpointDbPath } = await import("../../persistence/sqlite-database.ts");
      const { loadAppConfig } = await import("../../runs/config.ts");
      const repair = Boolean(flags.repair);
      let report;
      if (flags.db) report = await checkSqliteFile(resolve(flags.db), { repair });
      else {
        const config = loadAppConfig(configFromFlags(flags));
        report = config.databaseUrl
          ? await (
              await import("../../persistence/check-postgres.ts")
            ).checkPostgres({ url: config.databaseUrl }, { repair })
          : await checkSqliteFile(checkpointDbPath(config.home), { repair });
      }
      const ok = repair ? isRepaired(report) : isHealthy(report);
      process.exitCode = ok ? 0 : 1;
      if (flags.json) {
        process.stdout.write(
          `${JSON.stringify({
            database: report.location,
            kind: report.kind,
            ok,
            integrity: report.integrity,
            threads: report.threads.map((t) => ({
              thread_id: t.threadId,
              ok: !t.damage.length,
              damage: t.damage,
            })),
            damaged: report.threads.filter((t) => t.damage.length).map((t) => t.threadId),
            repaired: report.repaired ?? null,
          })}\n`,
        );
        return;
      }
      const c = colorsFor(process.stdout);
      const damaged = report.threads.filter((t) => t.damage.length);
      const lines = [
        `${report.location} (${report.kind === "sqlite" ? "SQLite" : "PostgreSQL"}): ${
          report.kind === "sqlite"
            ? report.integrity.length
              ? c.red("integrity_check failed")
              : "integrity_check ok"
            : "tables read"
        }; ${report.threads.length} thread${report.threads.length === 1 ? "" : "s"}, ${
          report.threads.length - damaged.length
        } whole, ${damaged.length} damaged.`,
      ];
      for (const message of report.integrity) lines.push(`  ${c.red("file:")} ${message}`);
      for (const t of damaged) {
        lines.push(`${c.red("damaged")} thread ${JSON.stringify(t.threadId)}:`);
        for (const d of t.damage) lines.push(`  table ${d.table}, row ${d.row}: ${d.problem}`);
      }
      if (report.repaired)
        lines.push(
          `Moved aside: ${report.repaired.threads.map((t) => JSON.stringify(t)).join(", ")}; the copy: ${report.repaired.copy}.`,
        );
      else if (damaged.length)
        lines.push(
          `Next: \`${cliCommand(["check", ...(flags.db ? ["--db", flags.db] : []), "--repair"], { home: flags.home })}\` moves the damaged threads aside (a copy is kept); the others keep working.`,
        );
      if (report.integrity.length)
        lines.push(
          "The file's own structure is damaged: --repair moves damaged threads only; restore the file from a backup (or recover it with the sqlite3 shell's .recover).",
        );
      process.stdout.write(`${lines.join("\n")}\n`);
    });
}
