import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ingestPath } from "../../src/ingest/index.ts";
import { chunkDocument } from "../../src/store/chunking.ts";
import { tempDir } from "../knowledge/helpers.ts";

// Records `codehop ingest` reads itself (JSONL lines, MediaWiki export pages), crafted as an
// attacker would: nested 200,000 deep (the stack overflowed storing them: a raw RangeError ended
// the ingest), 2 million keys on one line (86 s, 1.2 GB), elements nested millions deep in an
// export (past 2 minutes and 1.6 GB), one 45 MB word (the text splitter overflowed the stack).
// Each is now a skipped record naming the limit, or ingested, and the rest of the file is kept.

const tmp = tempDir("codehop-hostile-records-");
afterAll(() => tmp.cleanup());
const file = (name: string, text: string) => {
  const path = join(tmp.dir, name);
  writeFileSync(path, text);
  return path;
};
const good = JSON.stringify({ title: "Kept", text: "A record after the hostile one is kept." });
const nested = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;

describe("hostile records of codehop ingest", { timeout: 120_000 }, () => {
  it("a JSONL record nested 200,000 deep or holding 2 million keys is skipped naming the limit; the next is kept", async () => {
    const deep = `{"title":"Deep","text":"x","metadata":{"x":${nested(200_000)}}}`;
    const keys = `{"title":"Keys","text":"x",${Array.from({ length: 2_000_000 }, (_, i) => `"k${i}":1`).join(",")}}`;
    // Brackets and commas inside strings are text.
    const tricky = JSON.stringify({ title: "Tricky", text: `${"[,".repeat(150_000)} end` });
    const path = file("hostile.jsonl", [deep, keys, tricky, good].join("\n"));
    const report = await ingestPath(join(tmp.dir, "a.db"), path);
    expect(report.skippedRecords.map((s) => [s.where, s.reason])).toEqual([
      ["line 1", "the record nests deeper than 256 levels [CODEHOP_INPUT_LIMIT]"],
      ["line 2", "the record has more than 100000 keys and array items [CODEHOP_INPUT_LIMIT]"],
    ]);
    expect(report.added).toBe(2);
  });

  it("a MediaWiki export nesting elements 2 million deep stops reading at the nesting limit", async () => {
    const page = (title: string, body: string) =>
      `<page><title>${title}</title><ns>0</ns><revision><text>${body}</text></revision></page>`;
    const path = file(
      "deep.xml",
      `<mediawiki>${page("Kept", "A page before the hostile one is kept.")}${page("Deep", "<a>".repeat(2_000_000))}</mediawiki>`,
    );
    const report = await ingestPath(join(tmp.dir, "b.db"), path);
    expect(report.added).toBe(1);
    expect(report.skippedRecords).toHaveLength(1);
    expect(report.skippedRecords[0].reason).toMatch(
      /stopped reading: the XML nests deeper than 256 levels .*\[CODEHOP_INPUT_LIMIT\]/,
    );
  });

  // (The overflow needs ~45 MB and 35 s to reproduce, too slow here: this checks that a word cut
  // into the splitter's slabs keeps every character and stays within the passage size.)
  it("one 12-million-character word is chunked into passages across slabs, every character kept", async () => {
    const chunks = await chunkDocument("x".repeat(12_000_000), { chunkSize: 512, chunkOverlap: 0 });
    expect(chunks.length).toBeGreaterThanOrEqual(12_000_000 / 512);
    expect(chunks.every((c) => c.text.length <= 512)).toBe(true);
    expect(chunks.reduce((n, c) => n + c.text.length, 0)).toBe(12_000_000);
  });

  it("the CLI says so without a stack trace", async () => {
    const path = file("cli.jsonl", `{"title":"D","text":"x","x":${nested(300_000)}}\n${good}\n`);
    const r = await promisify(execFile)(
      process.execPath,
      [
        join(import.meta.dirname, "../../bin/codehop.mjs"),
        "ingest",
        "--no-progress",
        "--db",
        join(tmp.dir, "c.db"),
        path,
      ],
      { env: { ...process.env, CODEHOP_HOME: tmp.dir, CODEHOP_ENV_FILE: "none", NO_COLOR: "1" } },
    );
    expect(r.stdout + r.stderr).toMatch(/line 1: the record nests deeper than 256 levels/);
    expect(r.stdout + r.stderr).not.toMatch(/RangeError|\n\s+at /);
  });
});
