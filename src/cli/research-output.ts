import { writeFileSync } from "node:fs";
import { dirname, extname, resolve } from "node:path";
import type { ResearchResult } from "../apps/research/app.ts";
import { researchHtml } from "../apps/research/app.ts";
import { verificationLine } from "../apps/research/report/markdown.ts";
import { cliCommand, placeholder } from "../config/cli-command.ts";
import { ensureDir } from "../util/fs-safe.ts";
import type { AskResult } from "../runs/result.ts";

/** The flags that change how a report is printed (a subset of the CLI's run flags). */
export interface ResearchPrintFlags {
  json?: boolean;
  home?: string;
  /** `--out <file>`: the report goes to files instead of stdout. */
  out?: string;
}

/** A run result that carries a research report (research threads: `research`, `resume`, `replay`). */
export function isResearchResult(result: AskResult): result is ResearchResult {
  const r = result as Partial<ResearchResult>;
  return typeof r.report === "string" && Array.isArray(r.citations);
}

/** Where `--out <file>` puts the report: the Markdown at `file`, the HTML beside it (`.html`). */
export function reportPaths(out: string): { markdown: string; html: string } {
  const markdown = resolve(out);
  const ext = extname(markdown);
  const base =
    ext.toLowerCase() === ".md" || ext.toLowerCase() === ".markdown"
      ? markdown.slice(0, -ext.length)
      : markdown;
  return { markdown, html: `${base}.html` };
}

/** Writes the report's Markdown and self-contained HTML (`--out`); returns where. */
export function writeReport(
  result: ResearchResult,
  out: string,
): { markdown: string; html: string } {
  const paths = reportPaths(out);
  ensureDir(dirname(paths.markdown), { what: "report directory" });
  writeFileSync(paths.markdown, result.report);
  writeFileSync(paths.html, result.html ?? researchHtml(result));
  return paths;
}

/**
 * Prints a finished research run: with --json one JSON object (the result without its HTML);
 * else the report in Markdown on stdout (unless it went to --out files) and how the run went on
 * stderr, so `codehop research ... > report.md` keeps only the report.
 */
export async function printResearchResult(
  result: ResearchResult,
  flags: ResearchPrintFlags,
): Promise<void> {
  const written = flags.out ? writeReport(result, flags.out) : undefined;
  if (flags.json) {
    const { html: _html, ...json } = result;
    process.stdout.write(`${JSON.stringify(json)}\n`);
    return;
  }
  // The report alone on stdout (`> report.md` keeps it as is); the blank line that separates it
  // from the live tree in a terminal goes to stderr with the tree.
  if (!written) {
    process.stderr.write("\n");
    process.stdout.write(result.report);
  }
  const u = result.usage.total;
  // show / history / replay read the data directory.
  const home = { home: flags.home };
  const answered = result.questions.filter((q) => q.status === "answered").length;
  const lines = [
    "",
    ...(written ? [`Report written to ${written.markdown} and ${written.html}`] : []),
    `Sub-questions: ${result.questions.length} researched, ${answered} answered${result.questions.length > answered ? `, ${result.questions.length - answered} left as gaps` : ""}; ${result.citations.length} reference(s).`,
    ...(result.verification ? [verificationLine(result.verification).replace(/^_|_$/g, "")] : []),
    `Usage: ${u.calls} model calls, ${u.input_tokens} input tokens, ${u.output_tokens} output tokens — ` +
      Object.entries(result.usage.by_agent)
        .map(([a, x]) => `${a} ${x.calls}`)
        .join(", "),
    `Thread: ${result.thread_id} (status ${result.status}, ${(result.duration_ms / 1000).toFixed(1)} s); checkpoints: ${result.checkpoint_db}`,
    `  ${cliCommand(["show", result.thread_id], home)}   # the whole run as a tree`,
    `  ${cliCommand(["history", result.thread_id], home)}   # list checkpoints`,
    `  ${cliCommand(["replay", result.thread_id, "--checkpoint", placeholder("id")], home)}   # re-run from one (e.g. before write)`,
    "",
  ];
  process.stderr.write(lines.join("\n"));
}
