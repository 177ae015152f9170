/**
 * Files that change process-wide state must run in a process of their own: the "shared" vitest
 * project (vitest.config.ts) runs many files one after another in one worker process, so an
 * environment variable set (even if restored), a faked clock or a warning listener would reach
 * src/'s module-level caches or the files that run after it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ISOLATED_FILES } from "./isolated-files.ts";

const root = join(import.meta.dirname, "../..");

/** What makes a file unsafe to share a process with others (a pattern and why). */
const PROCESS_WIDE: ReadonlyArray<[RegExp, string]> = [
  [
    /\bvi\.(stubEnv|stubGlobal|mock|doMock|useFakeTimers)\(/,
    "vi.stubEnv/stubGlobal/mock/fake timers",
  ],
  [/process\.env(\.\w+|\[[^\]]+\])\s*=(?!=)/, "assigns process.env"],
  [/delete process\.env/, "deletes from process.env"],
  [/Object\.assign\(process\.env/, "assigns process.env"],
  [/process\.(on|once|addListener)\("warning"/, "listens for process warnings"],
  [/process\.chdir\(/, "changes the working directory"],
];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".test.ts"))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

const all = [
  ...testFiles(join(root, "test")),
  ...readdirSync(join(root, "packages")).flatMap((p) => {
    try {
      return testFiles(join(root, "packages", p, "test"));
    } catch {
      return [];
    }
  }),
];

describe("test isolation (test/vitest/isolated-files.ts)", () => {
  it("every file that changes process-wide state runs in a process of its own", () => {
    const missing = all
      .filter((f) => !ISOLATED_FILES.includes(f))
      .flatMap((f) => {
        const text = readFileSync(join(root, f), "utf8");
        return PROCESS_WIDE.filter(([re]) => re.test(text)).map(([, why]) => `${f}: ${why}`);
      });
    expect(missing).toEqual([]);
  });

  it("lists only files that exist", () => {
    expect(ISOLATED_FILES.filter((f) => !all.includes(f))).toEqual([]);
  });

  it("finds the files that edit the environment (the patterns match)", () => {
    // pool.test.ts points TMPDIR elsewhere; memory.test.ts uses vi.stubEnv
    for (const f of ["test/sandbox/pool.test.ts", "test/memory/memory.test.ts"]) {
      const text = readFileSync(join(root, f), "utf8");
      expect(
        PROCESS_WIDE.some(([re]) => re.test(text)),
        f,
      ).toBe(true);
    }
  });
});
