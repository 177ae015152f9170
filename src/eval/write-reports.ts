import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { htmlReport } from "./html.ts";
import { markdownReport, summarize, type EvalReport } from "./report.ts";
import type { ResultsStore } from "./results-store.ts";
import type { EvalRunOutcome } from "./run-options.ts";
import { exportTrajectories } from "./trajectories.ts";
import type { LoadedDataset, SystemName } from "./types.ts";

/**
 * The report files of an evaluation run (report.json, report.md, report.html and the trajectory
 * export), rebuilt from the results store after every run, each written whole or not at all.
 */

/** Rebuilds every report file from the stored results. */
export function writeReports(
  store: ResultsStore,
  ctx: { out: string; runId: string; dataset: LoadedDataset; systems: SystemName[] },
): Omit<EvalRunOutcome, "ran" | "skipped" | "interrupted"> {
  const selected = new Set(ctx.dataset.examples.map((e) => e.id));
  const results = store
    .all()
    .filter((r) => selected.has(r.questionId) && ctx.systems.includes(r.system));
  const expected = ctx.dataset.examples.length * ctx.systems.length;
  const report: EvalReport = {
    runId: ctx.runId,
    generatedAt: new Date().toISOString(),
    partial: results.length < expected,
    progress: { expected, done: results.length },
    dataset: {
      path: ctx.dataset.path,
      format: ctx.dataset.format,
      questions: ctx.dataset.examples.length,
      bad: ctx.dataset.bad,
      source: store.getMeta<Record<string, unknown> | null>("source") ?? undefined,
    },
    config: store.getMeta<Record<string, unknown>>("config") ?? {},
    systems: ctx.systems.map((s) => summarize(s, results)),
    results,
  };
  const transcriptsOf = (r: { system: SystemName; questionId: string }) =>
    store.transcripts(r.system, r.questionId);
  const files = {
    json: join(ctx.out, "report.json"),
    md: join(ctx.out, "report.md"),
    html: join(ctx.out, "report.html"),
    trajectories: exportTrajectories(join(ctx.out, "trajectories"), results, transcriptsOf),
  };
  // Write to a temp name and rename, so a reader never sees half a report.
  writeAtomic(files.json, JSON.stringify(report, null, 2) + "\n");
  writeAtomic(files.md, markdownReport(report));
  writeAtomic(files.html, htmlReport(report, transcriptsOf, { outDir: ctx.out }));
  return { report, files };
}

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}
