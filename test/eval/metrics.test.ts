import { describe, expect, it } from "vitest";
import {
  coverExactMatch,
  exactMatch,
  f1Score,
  normalizeAnswer,
  scoreAnswer,
} from "../../src/eval/metrics.ts";

// Expected values below were worked out by hand with the official HotpotQA evaluation script's
// rules (SQuAD normalization + yes/no/noanswer F1 rule).
describe("normalizeAnswer", () => {
  it.each([
    ["The Eiffel Tower", "eiffel tower"],
    ["  A   tale of  an apple ", "tale of apple"],
    ["the the the", ""],
    ["Theatre", "theatre"], // "the" inside a word stays
    ["Anne of Green Gables", "anne of green gables"], // "an" inside a word stays
    ["U.S.A.", "usa"],
    ["rock-'n'-roll!", "rocknroll"],
    ["1,000", "1000"],
    ["3.14", "314"],
    ["“Quoted” — answer…", "quoted answer"], // Unicode punctuation
    ["Café", "café"], // diacritics kept, like the official script
    ["Cafe\u0301", "café"], // decomposed é composes (NFC) and matches the composed one
    ["añejo", "añejo"], // "a" before a non-ASCII letter is not an article
    ["São Paulo", "são paulo"],
    ["北京", "北京"],
    ["A", ""],
  ])("%j → %j", (input, expected) => {
    expect(normalizeAnswer(input)).toBe(expected);
  });
});

describe("exact match", () => {
  it("ignores case, articles, punctuation and spacing", () => {
    expect(exactMatch("the United Kingdom.", "United Kingdom")).toBe(1);
    expect(exactMatch("1,000", "1000")).toBe(1);
    expect(exactMatch("Cafe\u0301", "Café")).toBe(1);
  });
  it("does not map number words to digits or drop diacritics", () => {
    expect(exactMatch("two", "2")).toBe(0);
    expect(exactMatch("Cafe", "Café")).toBe(0);
    expect(exactMatch("United Kingdom of Great Britain", "United Kingdom")).toBe(0);
  });
});

describe("F1", () => {
  it("is token overlap F1 over normalized words", () => {
    // pred {tower,is,40,metres,tall} vs gold {40,metres}: P=2/5, R=1 → F1=4/7
    expect(f1Score("The tower is 40 metres tall.", "40 metres")).toBeCloseTo(4 / 7, 10);
    // pred {barack,obama} vs gold {barack,hussein,obama}: P=1, R=2/3 → 0.8
    expect(f1Score("Barack Obama", "Barack Hussein Obama")).toBeCloseTo(0.8, 10);
    expect(f1Score("Paris", "London")).toBe(0);
  });
  it("counts repeated tokens at most as often as they occur in the gold answer", () => {
    // pred {new,new,york} vs gold {new,york}: common 2, P=2/3, R=1 → 0.8
    expect(f1Score("new new york", "New York")).toBeCloseTo(0.8, 10);
  });
  it("gives 0 when yes/no/noanswer differ, even with token overlap (HotpotQA rule)", () => {
    expect(f1Score("yes", "no")).toBe(0);
    expect(f1Score("no", "no, they are not")).toBe(0);
    expect(f1Score("No.", "no")).toBe(1);
  });
});

describe("cover-EM", () => {
  it("accepts a verbose prediction containing the gold answer on word boundaries", () => {
    expect(coverExactMatch("It was designed by Gustave Eiffel in 1887.", "Gustave Eiffel")).toBe(1);
    expect(coverExactMatch("The answer is 1000 metres", "1,000")).toBe(1);
  });
  it("does not match inside a longer word or number", () => {
    expect(coverExactMatch("10000", "1000")).toBe(0);
    expect(coverExactMatch("Norwayan", "Norway")).toBe(0);
  });
});

describe("scoreAnswer", () => {
  it("takes the best score over the gold answer and its aliases", () => {
    expect(scoreAnswer("40 m", ["40 metres", "40 m"])).toEqual({ em: 1, f1: 1, coverEm: 1 });
    const s = scoreAnswer("about 40 metres high", ["40 metres", "forty metres"]);
    expect(s.em).toBe(0);
    expect(s.coverEm).toBe(1);
    expect(s.f1).toBeCloseTo((2 * (2 / 4) * 1) / (2 / 4 + 1), 10);
  });
  it("scores an empty or missing prediction as wrong", () => {
    expect(scoreAnswer("", ["the"])).toEqual({ em: 0, f1: 0, coverEm: 0 });
    expect(scoreAnswer(undefined, ["Paris"])).toEqual({ em: 0, f1: 0, coverEm: 0 });
  });
});
