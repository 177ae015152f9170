import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDataset } from "../../src/eval/datasets.ts";
import { gaiaScore, normalizeNumberStr, normalizeStr } from "../../src/eval/gaia.ts";

// GAIA's question_scorer, case by case as the leaderboard's scorer.py decides them.
describe("GAIA scorer", () => {
  it("compares numbers as numbers, without $, % and thousands commas", () => {
    expect(gaiaScore("17", "17")).toBe(true);
    expect(gaiaScore("17.0", "17")).toBe(true);
    expect(gaiaScore("$1,234", "1234")).toBe(true);
    expect(gaiaScore("85%", "85")).toBe(true);
    expect(gaiaScore(" 3 ", "3")).toBe(true);
    expect(gaiaScore("3 apples", "3")).toBe(false);
    expect(gaiaScore("three", "3")).toBe(false);
    expect(gaiaScore("1e3", "1000")).toBe(true);
    expect(normalizeNumberStr("abc")).toBe(Infinity);
  });

  it("compares comma- or semicolon-separated lists element by element", () => {
    expect(gaiaScore("apple, banana, cherry", "apple, banana, cherry")).toBe(true);
    expect(gaiaScore("Apple,Banana;Cherry", "apple, banana, cherry")).toBe(true);
    expect(gaiaScore("1, 2.0; 3", "1, 2, 3")).toBe(true);
    expect(gaiaScore("apple, banana", "apple, banana, cherry")).toBe(false);
    expect(gaiaScore("banana, apple, cherry", "apple, banana, cherry")).toBe(false);
    // Strings in lists keep their punctuation.
    expect(gaiaScore("st. louis, paris", "St Louis, Paris")).toBe(false);
  });

  it("compares strings without whitespace, punctuation and case", () => {
    expect(gaiaScore("The Eiffel Tower.", "the eiffel tower")).toBe(true);
    expect(gaiaScore("Saint-Petersburg", "saint petersburg")).toBe(true);
    expect(gaiaScore("Paris", "London")).toBe(false);
    expect(gaiaScore(null, "None")).toBe(true);
    expect(normalizeStr("A b.C", false)).toBe("ab.c");
  });
});

describe("GAIA dataset layout", () => {
  it("reads metadata.jsonl with its levels and attachments; unscorable records are skipped with the reason", () => {
    const dir = mkdtempSync(join(tmpdir(), "codehop-gaia-layout-"));
    writeFileSync(join(dir, "sheet.csv"), "a,b\n1,2\n");
    writeFileSync(
      join(dir, "metadata.jsonl"),
      [
        { task_id: "t1", Question: "What is 2+2?", Level: 1, "Final answer": "4", file_name: "" },
        {
          task_id: "t2",
          Question: "Sum column a.",
          Level: "2",
          "Final answer": "1",
          file_name: "sheet.csv",
        },
        { task_id: "t3", Question: "Hidden?", Level: 3, "Final answer": "?", file_name: "" },
        {
          task_id: "t4",
          Question: "Missing file?",
          Level: 1,
          "Final answer": "x",
          file_name: "gone.pdf",
        },
        {
          task_id: "t5",
          Question: "Escape?",
          Level: 1,
          "Final answer": "x",
          file_name: "../../etc/passwd",
        },
      ]
        .map((r) => JSON.stringify(r))
        .join("\n"),
    );
    for (const path of [dir, join(dir, "metadata.jsonl")]) {
      const ds = loadDataset(path);
      expect(ds.format).toBe("gaia");
      expect(
        ds.examples.map((e) => [e.id, e.kind, e.answers, e.files?.map((f) => f.split("/").pop())]),
      ).toEqual([
        ["t1", "1", ["4"], undefined],
        ["t2", "2", ["1"], ["sheet.csv"]],
      ]);
      expect(ds.bad.map((b) => b.reason)).toEqual([
        expect.stringMatching(/test split hides/),
        expect.stringMatching(/attachment "gone.pdf" is not in/),
        expect.stringMatching(/attachment "..\/..\/etc\/passwd" is not in/),
      ]);
    }
  });
});
