import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { cliCommand, placeholder } from "../../config/cli-command.ts";
import { readEnv } from "../../config/env.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";
import type { IngestReport } from "../../ingest/ingest.ts";
import type { IngestFormat } from "../../ingest/readers.ts";
import { FORMAT_HINT } from "../../ingest/types.ts";
import { withSnakeCaseKeys } from "../cli-support.ts";
import { stopOnCtrlC } from "../interrupt.ts";

function int(name: string, min = 0) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) {
      throw new InvalidArgumentError(
        min === 0
          ? `${name} must be a non-negative integer`
          : `${name} must be an integer >= ${min}`,
      );
    }
    return n;
  };
}

const FORMATS: Record<string, IngestFormat> = {
  jsonl: "jsonl",
  folder: "folder",
  xml: "mediawiki-xml",
  "mediawiki-xml": "mediawiki-xml",
  document: "document",
};

/**
 * Human-readable summary of an ingest report (the CLI's last lines). `failed`: the ingest stored
 * nothing (the command exits 2), so no next step is suggested.
 */
export function formatIngestReport(
  report: IngestReport,
  dbPath: string,
  maxSkipped = 20,
  failed = false,
): string {
  const secs = report.elapsedMs / 1000;
  const rate = secs > 0 ? Math.round((report.records - report.resumedFrom) / secs) : 0;
  // A failed ingest says so from its first line: never "Done" above "nothing was ingested".
  const outcome = report.interrupted ? "Interrupted" : failed ? "Nothing ingested" : "Done";
  const lines = [
    `${outcome}: ${report.records} records in ${secs.toFixed(1)} s (${rate}/s) into ${dbPath}`,
    `  ${report.added} added, ${report.updated} updated, ${report.unchanged} unchanged, ${report.skipped} skipped; ` +
      `${report.passages} passages, ${report.vectors} vectors, ${report.aliases} redirects`,
  ];
  if (report.resumedFrom > 0)
    lines.push(`  resumed after record ${report.resumedFrom} of an interrupted run`);
  if (report.skippedRecords.length > 0) {
    lines.push("Skipped records:");
    for (const s of report.skippedRecords.slice(0, maxSkipped))
      lines.push(`  ${s.where}: ${s.reason}`);
    if (report.skippedRecords.length > maxSkipped)
      lines.push(`  ... and ${report.skippedRecords.length - maxSkipped} more`);
  }
  if (report.interrupted) lines.push("Run the same command again to resume.");
  else if (!failed)
    lines.push(
      `Search it offline with CODEHOP_CORPUS=${dbPath}, or: ${cliCommand(["ask", placeholder("question"), "--corpus", dbPath])}`,
    );
  return lines.join("\n");
}

/**
 * `codehop ingest <path> --db <file>`: builds or updates a local corpus from a JSONL file, a
 * MediaWiki XML dump (.xml / .xml.bz2), a document (PDF, DOCX, HTML, Markdown, text: the reader
 * registry's formats) or a folder of documents, with a progress bar. Ctrl-C stops after the
 * current batch; re-running the same command resumes.
 */
export default function ingestCommand(): Command {
  return new Command("ingest")
    .description(
      "Ingest JSONL, a MediaWiki XML dump (.xml/.xml.bz2), a document (PDF, DOCX, HTML, Markdown, text) or a folder of documents into a local SQLite corpus",
    )
    .argument("<path>", "input file or folder")
    .option(
      "--db <file>",
      "corpus database to create or update (default: $CODEHOP_CORPUS or <CODEHOP_HOME>/corpus.db)",
    )
    .addOption(
      new Option("--format <format>", "input format (default: from the path)").choices(
        Object.keys(FORMATS),
      ),
    )
    .option("--chunk-size <chars>", "passage size in characters", int("--chunk-size"), 512)
    .option(
      "--chunk-overlap <chars>",
      "overlap between passages in characters",
      int("--chunk-overlap"),
      256,
    )
    .option("--batch-size <docs>", "documents per transaction", int("--batch-size", 1), 200)
    .option(
      "--embeddings",
      "also embed passages (CODEHOP_EMBEDDINGS_BASE_URL / CODEHOP_EMBEDDINGS_MODEL or the flags below)",
    )
    .option(
      "--embeddings-url <url>",
      "OpenAI-compatible embeddings base URL, e.g. http://localhost:8080/v1",
    )
    .option("--embeddings-model <name>", "embedding model name")
    .option("--no-progress", "no progress bar")
    .option("--json", "print the report as JSON")
    .action(async (path: string, opts) => {
      // The readers, the store and the progress bar load when an ingest runs, not with `--help`.
      const { ingestDocuments } = await import("../../ingest/ingest.ts");
      const { openReader } = await import("../../ingest/readers.ts");
      const { createEmbedder } = await import("../../store/embeddings.ts");
      const { default: cliProgress } = await import("cli-progress");
      const env = readEnv();
      const dbPath: string = opts.db ?? env.corpus ?? join(env.home, "corpus.db");
      let embedder;
      if (opts.embeddings || opts.embeddingsUrl || opts.embeddingsModel) {
        const baseUrl = opts.embeddingsUrl ?? env.embeddingsBaseUrl;
        const model = opts.embeddingsModel ?? env.embeddingsModel;
        if (!baseUrl || !model) {
          throw new CodehopError(
            ErrorCodes.CONFIG_INVALID,
            "--embeddings needs an endpoint and a model: set CODEHOP_EMBEDDINGS_BASE_URL and CODEHOP_EMBEDDINGS_MODEL or pass --embeddings-url and --embeddings-model",
          );
        }
        embedder = createEmbedder({ baseUrl, model, apiKey: env.embeddingsApiKey });
      }
      const reader = openReader(path, opts.format ? FORMATS[opts.format] : undefined);
      const showBar = opts.progress !== false && !opts.json && process.stderr.isTTY;
      const bar = showBar
        ? new cliProgress.SingleBar(
            {
              format: `ingest {bar} {percentage}% | {records} records | {rate}/s | ETA {eta_formatted}`,
              stream: process.stderr,
              hideCursor: true,
              etaBuffer: 50,
            },
            cliProgress.Presets.shades_classic,
          )
        : undefined;
      // A failed ingest removes a database it created (never one that was there before).
      const existedBefore = existsSync(dbPath);
      const total = reader.progress().total ?? 0;
      bar?.start(Math.max(total, 1), 0, { records: 0, rate: 0 });
      const ctrlC = stopOnCtrlC({
        onStop: () =>
          process.stderr.write(
            "\nStopping after the current batch (Ctrl-C again to quit now)...\n",
          ),
      });
      let report: IngestReport;
      try {
        report = await ingestDocuments(dbPath, reader.items, {
          chunkSize: opts.chunkSize,
          chunkOverlap: opts.chunkOverlap,
          batchSize: opts.batchSize,
          embedder,
          sourceKey: reader.sourceKey,
          defaultSource: path,
          signal: ctrlC.signal,
          onProgress: (p) => {
            const pos = reader.progress();
            if (pos.total && bar) bar.setTotal(pos.total);
            bar?.update(pos.done, {
              records: p.records,
              rate: Math.round(p.records / Math.max(p.elapsedMs / 1000, 0.001)),
            });
          },
        });
      } finally {
        ctrlC.dispose();
        bar?.stop();
      }
      const problem = report.interrupted ? undefined : nothingStored(report, path, reader.format);
      if (opts.json)
        process.stdout.write(
          `${JSON.stringify(withSnakeCaseKeys({ db: dbPath, ...report }), null, 2)}\n`,
        );
      else process.stdout.write(`${formatIngestReport(report, dbPath, undefined, !!problem)}\n`);
      if (report.interrupted) process.exitCode = 130;
      else if (problem) {
        if (!existedBefore) removeDatabase(dbPath);
        throw new CodehopError(ErrorCodes.INPUT_INVALID, problem);
      }
    });
}

/** Deletes a SQLite database and its WAL / shared-memory / journal files. */
function removeDatabase(dbPath: string): void {
  for (const suffix of ["", "-wal", "-shm", "-journal"])
    rmSync(`${dbPath}${suffix}`, { force: true });
}

/**
 * Why an ingest that finished stored nothing — an empty input, or one whose every record was
 * unreadable (binary data, the wrong --format, an encoding that cannot be decoded) — or
 * undefined when something was stored (added, updated, unchanged or a redirect).
 */
export function nothingStored(
  report: IngestReport,
  path: string,
  format: IngestFormat,
): string | undefined {
  if (report.added + report.updated + report.unchanged + report.aliases > 0) return undefined;
  if (report.resumedFrom > 0) return undefined;
  if (report.records === 0)
    return format === "folder"
      ? `nothing was ingested: ${path} has no files (hidden ones are left out)`
      : `nothing was ingested: ${path} has no records (is it empty?)`;
  const first = report.skippedRecords[0];
  return (
    `nothing was ingested from ${path}: none of its ${report.records} record(s) could be stored` +
    (first ? ` (first: ${first.where}: ${first.reason})` : "") +
    (format === "folder" || format === "document"
      ? ""
      : `; it was read as ${format === "mediawiki-xml" ? "xml" : format} — if that is wrong, pass ${FORMAT_HINT}`)
  );
}
