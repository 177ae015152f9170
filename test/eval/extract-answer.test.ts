import { describe, expect, it } from "vitest";
import { formatSeconds } from "../../src/eval/runner.ts";
import { formatPassages } from "../../src/eval/system-baselines.ts";
import { extractAnswer } from "../../src/eval/system.ts";

describe("extractAnswer (baseline replies → short answer)", () => {
  it.each([
    ["Norway", "Norway"],
    ["  Norway.\n", "Norway."],
    ["Answer: Norway", "Norway"],
    ["The pavilion was designed by Halvorsen.\nAnswer: Norway\n", "Norway"],
    ["Final answer: 40 metres", "40 metres"],
    ["answer: first\nANSWER: second", "second"],
    ["**Norway**", "Norway"],
    ['"Norway"', "Norway"],
    ["“Norway”", "Norway"],
    ["<think>Bergen is in Norway.\nAnswer: Bergen</think>\nNorway", "Norway"],
    ["Norway\nBecause Bergen is in Norway.", "Norway"],
    ["", ""],
  ])("%j → %j", (reply, expected) => {
    expect(extractAnswer(reply)).toBe(expected);
  });
});

describe("formatPassages", () => {
  it("numbers passages with title and section", () => {
    expect(
      formatPassages([
        { title: "A", section: "", text: " one ", score: 2 },
        { title: "B", section: "History", text: "two", score: 1 },
      ]),
    ).toBe("[1] A\none\n\n[2] B — History\ntwo");
    expect(formatPassages([])).toBe("(no passages found)");
  });
});

describe("formatSeconds (progress ETA)", () => {
  it("formats durations for progress lines", () => {
    expect([
      formatSeconds(42.4),
      formatSeconds(185),
      formatSeconds(3720),
      formatSeconds(-1),
    ]).toEqual(["42s", "3m 05s", "1h 02m", "0s"]);
  });
});
