import { Command } from "commander";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { loadAppConfig, persistenceLocation } from "../../runs/config.ts";

/** `codehop threads`: threads in the data directory, most recent first. */
export default function threadsCommand(): Command {
  return new Command("threads")
    .description("list threads (question, status, checkpoints), most recent first")
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--limit <n>", "show at most n threads", "20")
    .option("--json", "print JSON")
    .action(async (flags: RunFlags & { limit: string }) => {
      const { openPersistenceFor } = await import("../../persistence/index.ts");
      const config = loadAppConfig(configFromFlags(flags));
      const p = await openPersistenceFor(persistenceLocation(config), { mustExist: true });
      try {
        const limit = Math.max(1, Number.parseInt(flags.limit, 10) || 20);
        const threads = (await p.threads.list()).slice(0, limit);
        if (flags.json) {
          process.stdout.write(`${JSON.stringify(threads)}\n`);
          return;
        }
        if (!threads.length) {
          process.stdout.write(`No threads in ${p.location}.\n`);
          return;
        }
        const lines = threads.map((t) => {
          const q = (t.question ?? "(started through the graph API)").replace(/\s+/g, " ");
          return `${t.threadId.padEnd(38)} ${t.status.padEnd(8)} ${String(t.checkpoints).padStart(4)} ckpts  ${(t.updatedAt ?? "").slice(0, 19).padEnd(19)}  ${q.length > 70 ? `${q.slice(0, 69)}…` : q}`;
        });
        process.stdout.write(`${lines.join("\n")}\n\n(${p.location})\n`);
      } finally {
        await p.close();
      }
    });
}
