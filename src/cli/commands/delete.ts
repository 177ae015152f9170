import { Command } from "commander";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";

/** `codehop delete <thread...>`: deletes threads with everything kept about them. */
export default function deleteCommand(): Command {
  return new Command("delete")
    .description(
      "delete threads: their checkpoints, call journal, registry row and a conversation's attached files",
    )
    .argument("<thread...>", "thread ids (see `codehop threads`)")
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--json", "print one JSON object: { deleted, not_found }")
    .action(async (threads: string[], flags: RunFlags) => {
      const { deleteThread } = await import("../../apps/index.ts");
      const config = configFromFlags(flags);
      const deleted: string[] = [];
      const notFound: string[] = [];
      for (const id of threads)
        ((await deleteThread(id, { config })) ? deleted : notFound).push(id);
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({ deleted, not_found: notFound })}\n`);
      } else {
        for (const id of deleted) process.stdout.write(`deleted ${id}\n`);
      }
      if (notFound.length) {
        throw new CodehopError(
          ErrorCodes.THREAD_NOT_FOUND,
          `No thread ${notFound.map((t) => `"${t}"`).join(", ")} (list them with \`codehop threads\`).`,
        );
      }
    });
}
