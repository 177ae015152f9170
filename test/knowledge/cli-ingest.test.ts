import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import ingestCommand from "../../src/cli/commands/ingest.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { DEMO_CORPUS, tempDir } from "./helpers.ts";

const tmp = tempDir();
const savedHome = process.env.CODEHOP_HOME;
beforeAll(() => {
  process.env.CODEHOP_HOME = tmp.dir;
  delete process.env.CODEHOP_CORPUS;
  delete process.env.CODEHOP_EMBEDDINGS_BASE_URL;
});
afterEach(() => vi.restoreAllMocks());
afterAll(() => {
  if (savedHome === undefined) delete process.env.CODEHOP_HOME;
  else process.env.CODEHOP_HOME = savedHome;
  tmp.cleanup();
});

/** Runs `codehop ingest ...args` in-process and returns what it printed. */
async function ingest(args: string[]): Promise<string> {
  let out = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: any) => {
    out += String(chunk);
    return true;
  });
  const cmd = ingestCommand().exitOverride().configureOutput({ writeErr: (s) => (out += s), writeOut: (s) => (out += s) });
  await cmd.parseAsync(args, { from: "user" });
  vi.restoreAllMocks();
  return out;
}

describe("codehop ingest (CLI)", () => {
  it("ingests JSONL with chunking flags, reports skipped lines, and prints JSON on request", async () => {
    const file = join(tmp.dir, "in.jsonl");
    writeFileSync(file, `${JSON.stringify({ title: "A", text: "alpha ".repeat(100) })}\nnot json\n`);
    const db = join(tmp.dir, "cli.db");
    const human = await ingest([file, "--db", db, "--chunk-size", "100", "--chunk-overlap", "20"]);
    expect(human).toMatch(/Done: 2 records/);
    expect(human).toMatch(/1 added, 0 updated, 0 unchanged, 1 skipped/);
    expect(human).toMatch(/line 2: invalid JSON/);
    const s = CorpusSource.open(db);
    expect(s.stats()).toMatchObject({ documents: 1, chunkSize: 100, chunkOverlap: 20 });
    expect(s.stats().passages).toBeGreaterThan(4);
    await s.close();

    const report = JSON.parse(await ingest([DEMO_CORPUS, "--db", db, "--json"]));
    expect(report).toMatchObject({ db, added: 63, skipped: 0, interrupted: false });
  });

  it("fails clearly on an unknown extension, bad flags and --embeddings without an endpoint", async () => {
    const odd = join(tmp.dir, "data.csv");
    writeFileSync(odd, "a,b");
    await expect(ingest([odd, "--db", join(tmp.dir, "x.db")])).rejects.toThrow(/--format jsonl\|folder\|mediawiki-xml/);
    await expect(ingest([DEMO_CORPUS, "--chunk-size", "abc"])).rejects.toThrow(/--chunk-size must be a non-negative integer/);
    await expect(ingest([DEMO_CORPUS, "--db", join(tmp.dir, "y.db"), "--chunk-size", "100", "--chunk-overlap", "100"])).rejects.toThrow(
      /chunk overlap must be/,
    );
    await expect(ingest([DEMO_CORPUS, "--db", join(tmp.dir, "z.db"), "--embeddings"])).rejects.toThrow(/CODEHOP_EMBEDDINGS_BASE_URL/);
  });

  it("defaults the database to <CODEHOP_HOME>/corpus.db", async () => {
    expect(await ingest([DEMO_CORPUS])).toContain(join(tmp.dir, "corpus.db"));
  });

  it("is discovered by the codehop binary, which prints coded errors without a stack", async () => {
    const run = promisify(execFile);
    const bin = join(import.meta.dirname, "../../bin/codehop.mjs");
    const err = await run(process.execPath, [bin, "ingest", join(tmp.dir, "nope.jsonl"), "--db", join(tmp.dir, "n.db")]).catch((e) => e);
    expect(err.code).toBe(2);
    expect(err.stderr).toMatch(/^codehop: input .*nope\.jsonl does not exist \[CODEHOP_INPUT_INVALID\]\n$/);
  });
});
