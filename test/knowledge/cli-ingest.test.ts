import { execFile, spawn } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
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
  const cmd = ingestCommand()
    .exitOverride()
    .configureOutput({ writeErr: (s) => (out += s), writeOut: (s) => (out += s) });
  await cmd.parseAsync(args, { from: "user" });
  vi.restoreAllMocks();
  return out;
}

describe("codehop ingest (CLI)", () => {
  it("ingests JSONL with chunking flags, reports skipped lines, and prints JSON on request", async () => {
    const file = join(tmp.dir, "in.jsonl");
    writeFileSync(
      file,
      `${JSON.stringify({ title: "A", text: "alpha ".repeat(100) })}\nnot json\n`,
    );
    const db = join(tmp.dir, "cli.db");
    const human = await ingest([file, "--db", db, "--chunk-size", "100", "--chunk-overlap", "20"]);
    expect(human).toMatch(/Done: 2 records/);
    expect(human).toMatch(/1 added, 0 updated, 0 unchanged, 1 skipped/);
    expect(human).toMatch(/line 2: invalid JSON/);
    expect(human).toContain(`CODEHOP_CORPUS=${db}`);
    const s = CorpusSource.open(db);
    expect(s.stats()).toMatchObject({ documents: 1, chunkSize: 100, chunkOverlap: 20 });
    expect(s.stats().passages).toBeGreaterThan(4);
    await s.close();

    const report = JSON.parse(await ingest([DEMO_CORPUS, "--db", db, "--json"]));
    expect(report).toMatchObject({ db, added: 63, skipped: 0, interrupted: false });
  });

  it("fails clearly on an unknown extension, bad flags and --embeddings without an endpoint", async () => {
    const odd = join(tmp.dir, "data.xyz");
    writeFileSync(odd, "a,b");
    await expect(ingest([odd, "--db", join(tmp.dir, "x.db")])).rejects.toThrow(
      /--format jsonl\|folder\|xml\|document/,
    );
    await expect(ingest([DEMO_CORPUS, "--chunk-size", "abc"])).rejects.toThrow(
      /--chunk-size must be a non-negative integer/,
    );
    await expect(
      ingest([
        DEMO_CORPUS,
        "--db",
        join(tmp.dir, "y.db"),
        "--chunk-size",
        "100",
        "--chunk-overlap",
        "100",
      ]),
    ).rejects.toThrow(/chunk overlap must be/);
    await expect(
      ingest([DEMO_CORPUS, "--db", join(tmp.dir, "z.db"), "--embeddings"]),
    ).rejects.toThrow(/CODEHOP_EMBEDDINGS_BASE_URL/);
  });

  it("shows a progress bar with records, rate and ETA on a terminal", async () => {
    let err = "";
    const tty = Object.getOwnPropertyDescriptor(process.stderr, "isTTY");
    Object.defineProperty(process.stderr, "isTTY", { value: true, configurable: true });
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: any) => {
      err += String(chunk);
      return true;
    });
    try {
      let out = "";
      vi.spyOn(process.stdout, "write").mockImplementation((chunk: any) => {
        out += String(chunk);
        return true;
      });
      await ingestCommand().parseAsync(
        [DEMO_CORPUS, "--db", join(tmp.dir, "bar.db"), "--batch-size", "10"],
        { from: "user" },
      );
      expect(out).toMatch(/Done: 63 records/);
    } finally {
      vi.restoreAllMocks();
      if (tty) Object.defineProperty(process.stderr, "isTTY", tty);
      else delete (process.stderr as any).isTTY;
    }
    expect(err).toMatch(/ingest .*100% \| 63 records \| \d+\/s \| ETA/);
  });

  it("defaults the database to <CODEHOP_HOME>/corpus.db", async () => {
    expect(await ingest([DEMO_CORPUS])).toContain(join(tmp.dir, "corpus.db"));
  });

  it("Ctrl-C stops after the current batch; running the same command again resumes", async () => {
    const file = join(tmp.dir, "big.jsonl");
    writeFileSync(
      file,
      Array.from({ length: 8000 }, (_, i) =>
        JSON.stringify({ title: `T${i}`, text: `Text number ${i}.` }),
      ).join("\n"),
    );
    const db = join(tmp.dir, "sigint.db");
    const bin = join(import.meta.dirname, "../../bin/codehop.mjs");
    const child = spawn(process.execPath, [bin, "ingest", file, "--db", db, "--batch-size", "1"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    // Wait until some batches are committed, then interrupt.
    const count = () => {
      if (!existsSync(db)) return 0;
      try {
        const c = new Database(db, { readonly: true });
        try {
          return (c.prepare("SELECT count(*) AS n FROM documents").get() as { n: number }).n;
        } finally {
          c.close();
        }
      } catch {
        return 0;
      }
    };
    const deadline = Date.now() + 20_000;
    while (count() < 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    expect(stdout).toMatch(/^Interrupted: /);
    expect(stdout).toMatch(/Run the same command again to resume/);
    const done = count();
    expect(done).toBeGreaterThan(0);
    expect(done).toBeLessThan(8000);

    const resumed = JSON.parse(await ingest([file, "--db", db, "--batch-size", "500", "--json"]));
    expect(resumed.resumedFrom).toBe(done);
    expect(resumed.added).toBe(8000 - done);
    expect(count()).toBe(8000);
  });

  it("is discovered by the codehop binary, which prints coded errors without a stack", async () => {
    const run = promisify(execFile);
    const bin = join(import.meta.dirname, "../../bin/codehop.mjs");
    const err = await run(process.execPath, [
      bin,
      "ingest",
      join(tmp.dir, "nope.jsonl"),
      "--db",
      join(tmp.dir, "n.db"),
    ]).catch((e) => e);
    expect(err.code).toBe(2);
    expect(err.stderr).toMatch(
      /^codehop: input .*nope\.jsonl does not exist \[CODEHOP_INPUT_INVALID\]\n$/,
    );
  });

  it("exits non-zero with a clear message when nothing was stored", async () => {
    const run = promisify(execFile);
    const bin = join(import.meta.dirname, "../../bin/codehop.mjs");
    const codehop = (...args: string[]) =>
      run(process.execPath, [bin, "ingest", ...args]).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }),
      );
    const empty = join(tmp.dir, "empty.jsonl");
    writeFileSync(empty, "");
    const garbage = join(tmp.dir, "garbage.jsonl");
    writeFileSync(garbage, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)));
    const xmlAsJsonl = join(tmp.dir, "dump.xml");
    writeFileSync(xmlAsJsonl, "<mediawiki><page><title>A</title></page></mediawiki>\n");
    const db = join(tmp.dir, "nothing.db");

    const e = await codehop(empty, "--db", db);
    expect(e.code).toBe(2);
    expect(e.stderr).toMatch(
      /nothing was ingested: .*empty\.jsonl has no records.*\[CODEHOP_INPUT_INVALID\]/,
    );
    // A failed ingest suggests no next step and leaves no database of its own behind.
    expect(e.stdout).not.toContain("Search it offline");
    expect(e.stdout).not.toContain("--corpus");
    expect(existsSync(db)).toBe(false);

    const g = await codehop(garbage, "--db", db);
    expect(g.code).toBe(2);
    expect(g.stdout).toMatch(/0 added/);
    expect(g.stdout).not.toContain("Search it offline");
    expect(readdirSync(tmp.dir).filter((f) => f.startsWith("nothing.db"))).toEqual([]);
    expect(g.stderr).toMatch(/none of its \d+ record\(s\) could be stored \(first: line 1: /);

    const w = await codehop(xmlAsJsonl, "--db", db, "--format", "jsonl", "--json");
    expect(w.code).toBe(2);
    expect(JSON.parse(w.stdout)).toMatchObject({ added: 0, skipped: 1 });
    expect(w.stderr).toMatch(/read as jsonl — if that is wrong, pass --format/);

    // Something stored: success, also when every record was already there.
    const ok = await codehop(DEMO_CORPUS, "--db", db);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`Search it offline with CODEHOP_CORPUS=${db}`);
    expect((await codehop(DEMO_CORPUS, "--db", db)).code).toBe(0);
    // A failed ingest into a database that was there before keeps it, and what it holds.
    const again = await codehop(empty, "--db", db);
    expect(again.code).toBe(2);
    expect(again.stdout).not.toContain("Search it offline");
    expect(existsSync(db)).toBe(true);
    const kept = new Database(db, { readonly: true });
    expect((kept.prepare("SELECT count(*) AS n FROM documents").get() as { n: number }).n).toBe(63);
    kept.close();
  });
});
