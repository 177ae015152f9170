import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  benchBlock,
  benchNames,
  machineDescription,
  mergeDoc,
  runBenchFile,
  textTable,
} from "../../bench/run-all.ts";

const section = {
  title: "T",
  description: "D",
  columns: ["name", "ms"],
  rows: [
    ["a", 1.5],
    ["bb", 10],
  ],
  verdicts: ["x <= 2: MET"],
};
const when = new Date("2026-11-22T10:00:00Z");

describe("bench runner (npm run bench)", () => {
  it("finds every bench/*.bench.ts and filters by name", () => {
    expect(benchNames()).toContain("eval");
    expect(benchNames("eva")).toEqual(["eval"]);
    expect(benchNames("no-such-bench")).toEqual([]);
  });

  it("describes the machine with CPU model, cores, RAM and Node version", () => {
    expect(machineDescription()).toMatch(/.+, \d+ cores, [\d.]+ GB RAM, .+Node v\d+/);
  });

  it("renders a block stamped with date and machine, tables and verdicts", () => {
    const block = benchBlock("sandbox", { sections: [section], ms: 1200 }, when, "CPU X, 2 cores");
    expect(block).toContain("<!-- bench:sandbox -->");
    expect(block).toContain("_Ran 2026-11-22 10:00 UTC in 1.2 s on CPU X, 2 cores._");
    expect(block).toContain("| name | ms |\n| --- | --- |\n| a | 1.5 |\n| bb | 10 |");
    expect(block).toContain("- x <= 2: MET");
    expect(benchBlock("x", { error: "boom `1`", ms: 5 }, when, "m")).toContain(
      "**FAILED:** `boom '1'`",
    );
  });

  it("a filtered run replaces only its own blocks and drops blocks of deleted bench files", () => {
    const a1 = benchBlock("a", { sections: [section], ms: 1 }, when, "old machine");
    const b1 = benchBlock("b", { sections: [section], ms: 1 }, when, "old machine");
    const gone = benchBlock("gone", { sections: [section], ms: 1 }, when, "old machine");
    const doc1 = mergeDoc(
      "",
      new Map([
        ["a", a1],
        ["b", b1],
        ["gone", gone],
      ]),
      ["a", "b", "gone"],
    );
    const b2 = benchBlock("b", { sections: [section], ms: 1 }, when, "new machine");
    const doc2 = mergeDoc(doc1, new Map([["b", b2]]), ["a", "b"]);
    expect(doc2).toContain(a1);
    expect(doc2).toContain(b2);
    expect(doc2).not.toContain(b1);
    expect(doc2).not.toContain("bench:gone");
    expect(doc2.startsWith("# Benchmarks")).toBe(true);
    expect(doc2.indexOf("bench:a")).toBeLessThan(doc2.indexOf("bench:b"));
  });

  it("aligns terminal tables", () => {
    expect(textTable(section)).toBe("name   ms\n----  ---\na     1.5\nbb     10");
  });
});

describe("bench timeout", () => {
  it("fails a bench that does not finish in time, and passes through one that does", async () => {
    const { withTimeout } = await import("../../bench/run-all.ts");
    await expect(withTimeout(new Promise(() => undefined), 20, "bench/x.bench.ts")).rejects.toThrow(
      "bench/x.bench.ts did not finish within 0.02 s",
    );
    await expect(withTimeout(Promise.resolve(7), 1000, "y")).resolves.toBe(7);
  });
});

describe("running one bench file", () => {
  it("returns sections, an error, or the reason a bench skipped itself (data absent)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "codehop-bench-"));
    try {
      const lib = JSON.stringify(join(import.meta.dirname, "../../bench/lib.ts"));
      writeFileSync(
        join(dir, "ok.bench.ts"),
        'export default async () => ({ title: "T", description: "D", columns: ["a"], rows: [[1]] });',
      );
      writeFileSync(
        join(dir, "skip.bench.ts"),
        `import { BenchSkipped } from ${lib};\nexport default async () => { throw new BenchSkipped("sample not in /x"); };`,
      );
      writeFileSync(
        join(dir, "boom.bench.ts"),
        'export default async () => { throw new Error("boom"); };',
      );
      writeFileSync(join(dir, "none.bench.ts"), "export const x = 1;");
      expect((await runBenchFile("ok", dir)).sections?.[0].rows).toEqual([[1]]);
      const skipped = await runBenchFile("skip", dir);
      expect(skipped.skipped).toBe("sample not in /x");
      expect(skipped.error).toBeUndefined();
      expect((await runBenchFile("boom", dir)).error).toBe("boom");
      expect((await runBenchFile("none", dir)).error).toMatch(/must default-export/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
