/**
 * Black-box entry point: `npm run --silent sandbox -- a.js b.js ...` runs each file as one code
 * action of ONE agent run (variables persist from file to file) with a demo `search(q)` tool and
 * default limits, printing one JSON line per file. Exit code 0 whatever the guest did; 2 for usage
 * errors (no files, unreadable file).
 */
import { readFile } from "node:fs/promises";
import { createSandbox, UNDEFINED_NOTE } from "./index.ts";
import type { ActionResult, HostToolFn, VariablesSnapshot } from "./contract.ts";

/** The demo tool of the entry point: a short string containing the query. */
export const demoSearch: HostToolFn = async (args) => {
  const q = String(args[0] ?? "").slice(0, 10_000);
  return `Found 3 results for "${q}": [1] ${q} (overview) [2] ${q} (history) [3] ${q} (see also)`;
};

/** The JSON line printed per file (field order as specified in issue 4; `unserializable` and `error.column` added later). */
export function toJsonLine(r: ActionResult): string {
  return JSON.stringify({
    ok: r.ok,
    logs: r.logs,
    finalAnswer: r.finalAnswer === undefined ? null : r.finalAnswer,
    isFinalAnswer: r.isFinalAnswer,
    error: r.error
      ? {
          name: r.error.name,
          message: r.error.message,
          line: r.error.line ?? null,
          column: r.error.column ?? null,
        }
      : null,
    variables: r.variables,
    durationMs: Math.round(r.durationMs * 10) / 10,
    // Added after the original keys: names whose values could not be carried over, with the reason.
    unserializable: notCarried(r.snapshot),
  });
}

/** `snapshot.unserializable` without the names that merely hold `undefined` (those are carried over). */
function notCarried(snapshot: VariablesSnapshot | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, note] of Object.entries(snapshot?.unserializable ?? {}))
    if (note !== UNDEFINED_NOTE) out[name] = note;
  return out;
}

const USAGE = "usage: npm run --silent sandbox -- <file.js> [more.js ...]";

/** Runs the entry point; returns the process exit code. */
export async function runSandboxCli(
  argv: string[],
  io: { out: (line: string) => void; err: (line: string) => void },
): Promise<number> {
  if (argv.length === 0 || argv.includes("--help") || argv.includes("-h")) {
    io.err(USAGE);
    return argv.length === 0 ? 2 : 0;
  }
  const sources: string[] = [];
  for (const file of argv) {
    try {
      sources.push(await readFile(file, "utf8"));
    } catch (err) {
      io.err(`sandbox: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      io.err(USAGE);
      return 2;
    }
  }
  const sandbox = createSandbox({ poolSize: 1 });
  try {
    let snapshot: VariablesSnapshot | undefined;
    // One agent run: one session, so the files share a process (and the values it holds).
    const session = `cli:${process.pid}`;
    for (const code of sources) {
      const result = await sandbox.run({ code, tools: { search: demoSearch }, snapshot, session });
      snapshot = result.snapshot;
      io.out(toJsonLine(result));
    }
  } finally {
    await sandbox.close();
  }
  return 0;
}
