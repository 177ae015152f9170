import { mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openPersistence } from "../../src/persistence/index.ts";
import { ensureDir } from "../../src/util/fs-safe.ts";
import { cliEnv, runCli } from "./cli-helpers.ts";

// Node 20's recursive mkdir spins forever under /proc: these tests must end in seconds.
describe("creating user-given directories", { timeout: 60_000 }, () => {
  it("CODEHOP_HOME under /proc fails fast with DB_INVALID naming the path", () => {
    const started = Date.now();
    expect(() => openPersistence("/proc/nope/x")).toThrow(
      expect.objectContaining({
        code: "CODEHOP_DB_INVALID",
        message: expect.stringContaining("/proc/nope/x"),
      }),
    );
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("`CODEHOP_HOME=/proc/nope codehop ask` exits 2 at once with a clear message", async () => {
    const run = await runCli(
      ["ask", "How tall is the Eiffel Tower?"],
      cliEnv({
        OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
        CODEHOP_MODEL: "m",
        CODEHOP_HOME: "/proc/nope",
      }),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("Cannot create data directory /proc/nope");
    expect(run.stderr).toContain("[CODEHOP_DB_INVALID]");
  });

  it("creates missing levels, accepts existing directories, and names a file in the way", () => {
    const root = mkdtempSync(join(tmpdir(), "codehop-fs-"));
    const deep = join(root, "a", "b", "c");
    expect(ensureDir(deep)).toBe(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    expect(ensureDir(deep)).toBe(deep);
    writeFileSync(join(root, "file"), "x");
    expect(() => ensureDir(join(root, "file", "sub"), { what: "output directory" })).toThrow(
      expect.objectContaining({
        code: "CODEHOP_DB_INVALID",
        message: expect.stringMatching(/output directory .*file\/sub: .*file is not a directory/),
      }),
    );
  });
});
