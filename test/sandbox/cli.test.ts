/** Black-box: `node bin/sandbox.mjs` (what `npm run --silent sandbox --` runs), and host-process lifetime. */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const exec = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "codehop-sandbox-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, code: string): string {
  const path = join(dir, name);
  writeFileSync(path, code);
  return path;
}

async function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(
      process.execPath,
      [join(root, "bin/sandbox.mjs"), ...args],
      { cwd: root, timeout: 150_000 },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

// The CLI runs are bounded generously (a loaded machine starts processes slowly); so are the tests.
describe("npm run sandbox", { timeout: 180_000 }, () => {
  it("runs each file as one action of one run and prints one JSON line per file", async () => {
    const a = file(
      "a.js",
      'const q = "paris";\nconst hit = await search(q);\nprint(hit.includes(q));',
    );
    const b = file("b.js", "const n = 2;\nfunction twice(x) { return x * n }\nnull.boom;");
    const c = file("c.js", "final_answer({ q, n: twice(21) })");
    const { code, stdout } = await runCli([a, b, c]);
    expect(code).toBe(0);
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      // The original keys in their order; `unserializable` was added after them.
      expect(Object.keys(line)).toEqual([
        "ok",
        "logs",
        "finalAnswer",
        "isFinalAnswer",
        "error",
        "variables",
        "durationMs",
        "unserializable",
      ]);
    }
    expect(lines[0]).toMatchObject({
      ok: true,
      logs: "true\n",
      finalAnswer: null,
      isFinalAnswer: false,
      error: null,
    });
    expect(lines[0].variables.q).toBe("paris");
    expect(lines[1]).toMatchObject({
      ok: false,
      error: { name: "TypeError", line: 3 },
      variables: { q: "paris", n: 2 },
    });
    expect(lines[2]).toMatchObject({
      ok: true,
      finalAnswer: { q: "paris", n: 42 },
      isFinalAnswer: true,
    });
  });

  it("lists values that could not be carried over by name, and the next file gets a clear error", async () => {
    const a = file(
      "m.js",
      "const m = new Map([[1, 2]]);\nconst obj = { a: 1, d: new Date(0) };\nlet u;",
    );
    const b = file("m2.js", "m.get(1)");
    const c = file("m3.js", "let x = 1;\nx +* 2");
    const lines = (await runCli([a, b, c])).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({
      ok: true,
      variables: { obj: { a: 1, d: "1970-01-01T00:00:00.000Z" } },
      unserializable: { m: "Map is not JSON-serializable" },
    });
    expect(lines[1].error).toEqual({
      name: "ReferenceError",
      message:
        "m is not defined (its value could not be carried over: Map is not JSON-serializable)",
      line: 1,
      column: null,
    });
    expect(lines[2].error).toEqual({
      name: "SyntaxError",
      message: "Unexpected token (line 2, column 4)",
      line: 2,
      column: 4,
    });
  });

  it("exits 0 whatever the guest did, and the host survives escape attempts", async () => {
    const files = [
      file("exit.js", "process.exit(1)"),
      file("kill.js", "({}).constructor.constructor('return process')().kill(process.ppid)"),
      file("cp.js", "require('child_process').execSync('touch /tmp/pwned')"),
      file("syntax.js", "let let = 1"),
    ];
    const { code, stdout, stderr } = await runCli(files);
    expect(code, `stderr: ${stderr}\nstdout: ${stdout}`).toBe(0);
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.ok, l.error?.name])).toEqual([
      [false, "ReferenceError"],
      [false, "TypeError"],
      [false, "ReferenceError"],
      [false, "SyntaxError"],
    ]);
  });

  it("usage errors exit non-zero", async () => {
    expect((await runCli([])).code).toBe(2);
    const missing = await runCli([join(dir, "does-not-exist.js")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read/);
  });
});

describe("host process lifetime", { timeout: 180_000 }, () => {
  it("an idle sandbox that was never closed does not keep the host process alive", async () => {
    const script = file(
      "idle.mts",
      `import { createSandbox } from ${JSON.stringify(join(root, "src/sandbox/index.ts"))};\n` +
        "const sb = createSandbox({ poolSize: 2 });\n" +
        "const r = await sb.run({ code: 'final_answer(1)', tools: {} });\n" +
        "console.log(JSON.stringify(r.finalAnswer));\n",
    );
    // A host kept alive never exits: exec kills it at the timeout and rejects.
    const { stdout } = await exec(process.execPath, ["--import", "tsx", script], {
      cwd: root,
      timeout: 150_000,
    });
    expect(stdout.trim()).toBe("1");
  });
});
