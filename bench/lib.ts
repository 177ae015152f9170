/**
 * Shared benchmark contract. Every `bench/*.bench.ts` default-exports a function returning one or
 * more sections; `npm run bench` (bench/run-all.ts) runs them all in one process, prints each table
 * and rewrites docs/benchmarks.md with the figures and the machine they ran on.
 * A bench file can also be run alone: `npx tsx bench/run-all.ts sandbox` (name filter).
 */
export interface BenchSection {
  /** Heading in docs/benchmarks.md, e.g. "Sandbox: warm action latency". */
  title: string;
  /** What was measured and how, one short paragraph. */
  description: string;
  columns: string[];
  rows: (string | number)[][];
  /** Targets from the issues and whether they were met, e.g. "warm trivial p50 <= 3x node:vm: MET (2.1x)". */
  verdicts?: string[];
}

/**
 * Thrown by a bench that cannot run here (e.g. its data set is absent): the runner prints the
 * reason and keeps the figures already recorded in docs/benchmarks.md instead of failing.
 */
export class BenchSkipped extends Error {
  override readonly name = "BenchSkipped";
}

export type BenchFn = () => Promise<BenchSection | BenchSection[]>;

/** Percentile (0..100) of a list of numbers (nearest-rank). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** Formats a number with a fixed number of decimals (for tables). */
export function fmt(n: number, digits = 2): string {
  return Number.isFinite(n) ? n.toFixed(digits) : String(n);
}

/** Renders a section as a Markdown table. */
export function markdownTable(section: BenchSection): string {
  const head = `| ${section.columns.join(" | ")} |\n| ${section.columns.map(() => "---").join(" | ")} |`;
  const body = section.rows.map((r) => `| ${r.join(" | ")} |`).join("\n");
  return `${head}\n${body}`;
}
