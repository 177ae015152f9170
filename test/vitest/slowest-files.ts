import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/** How many files the summary lists. */
const SHOWN = 10;

/**
 * Prints the slowest test files at the end of a run (after vitest's own summary), so a test that
 * makes the suite slow is seen when it lands. A file's time is its collection (importing the file)
 * plus its tests and hooks, as vitest measures them in the worker that ran it.
 */
export default class SlowestFilesReporter implements Reporter {
  private root = process.cwd();

  onInit(ctx: { config: { root: string } }): void {
    this.root = ctx.config.root;
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const rows = modules
      .map((m) => {
        const d = m.diagnostic();
        return { path: relative(this.root, m.moduleId), ms: d.collectDuration + d.duration };
      })
      .sort((a, b) => b.ms - a.ms)
      .slice(0, SHOWN);
    if (!rows.length) return;
    const lines = rows.map((r) => `  ${(r.ms / 1000).toFixed(1).padStart(6)} s  ${r.path}`);
    process.stdout.write(`\n Slowest ${rows.length} test files:\n${lines.join("\n")}\n`);
  }
}
