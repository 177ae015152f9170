import { Command } from "commander";
import {
  leaveBundleForOperatorCode,
  serverFlags,
  serverFlagsToOptions,
  type ServerFlags,
  untilStopped,
  wholeNumber,
} from "../server-support.ts";

/** `codehop worker`: executes queued runs (and distributed eval questions) with this machine's sandbox pool. */
export default function workerCommand(): Command {
  return serverFlags(
    new Command("worker")
      .description(
        "take runs (and `eval --queue` questions) from the Postgres queue and execute them; start any number, on any machine",
      )
      .option(
        "--concurrency <n>",
        "runs executed at once by this worker",
        wholeNumber("--concurrency"),
        16, // DEFAULT_WORKER_CONCURRENCY (src/server/worker.ts, loaded only when the command runs)
      )
      .option("--worker-id <id>", "this worker's id in the runs it holds (default: a new UUID)")
      .option("-q, --quiet", "no log line per run"),
  ).action(
    async (flags: ServerFlags & { concurrency: number; workerId?: string; quiet?: boolean }) => {
      await leaveBundleForOperatorCode(flags.graphs);
      const { startWorker } = await import("../../server/worker.ts");
      const { evalQueueHandlers } = await import("../../server/eval-queue.ts");
      const { deleteAppThreadData } = await import("../../apps/index.ts");
      const log = (line: string) => {
        if (!flags.quiet) process.stderr.write(`codehop worker: ${line}\n`);
      };
      const worker = await startWorker({
        ...serverFlagsToOptions(flags),
        concurrency: Math.max(1, flags.concurrency),
        workerId: flags.workerId,
        extraQueues: evalQueueHandlers({ concurrency: Math.max(1, flags.concurrency), log }),
        // A thread deleted through `codehop serve`: this worker's own data of it goes too.
        onThreadDeleted: async (threadId) => {
          await deleteAppThreadData(threadId);
        },
        log,
      });
      const { graphs, persistence } = worker.backend;
      process.stderr.write(
        `codehop worker: ${worker.workerId} ready (concurrency ${Math.max(1, flags.concurrency)}; graphs ${graphs.ids.join(", ")}; database ${persistence.location})\n`,
      );
      await untilStopped(() => worker.stop());
    },
  );
}
