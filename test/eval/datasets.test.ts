import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { detectFormat, loadDataset } from "../../src/eval/datasets.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";

const FIX = join(import.meta.dirname, "../fixtures/eval");
const tmp = mkdtempSync(join(tmpdir(), "codehop-ds-"));
const write = (name: string, text: string) => {
  const p = join(tmp, name);
  writeFileSync(p, text);
  return p;
};

describe("dataset loaders", () => {
  it("loads HotpotQA (pretty-printed JSON array) and reports the bad record with index and line", () => {
    const ds = loadDataset(join(FIX, "hotpotqa.json"));
    expect(ds.format).toBe("hotpotqa");
    expect(ds.examples.map((e) => e.id)).toEqual(["h1", "h2", "h3"]);
    expect(ds.bad).toEqual([
      { position: { index: 2, line: 82 }, reason: "missing or empty `answer`" },
    ]);
    const h1 = ds.examples[0];
    expect(h1.answers).toEqual(["Norway"]);
    expect(h1.paragraphs.map((p) => p.title)).toEqual([
      "Blue Pavilion",
      "Ingrid Halvorsen",
      "Green Bridge",
    ]);
    expect(h1.paragraphs[0].text).toBe(
      "The Blue Pavilion is an exhibition hall in Lisbon. It was designed by the architect Ingrid Halvorsen and opened in 1998.",
    );
    expect(h1.supportingTitles).toEqual(["Blue Pavilion", "Ingrid Halvorsen"]);
    expect(h1.kind).toBe("bridge/easy");
    // the record after the bad one keeps its own position
    expect(ds.examples[2].position).toEqual({ index: 3, line: 90 });
  });

  it("loads 2WikiMultiHopQA and isolates a record with a JSON syntax error inside the array", () => {
    const ds = loadDataset(join(FIX, "2wiki.json"));
    expect(ds.format).toBe("2wiki");
    expect(ds.examples.map((e) => e.id)).toEqual(["w1", "w2", "w3"]);
    expect(ds.bad).toHaveLength(1);
    expect(ds.bad[0].position).toEqual({ index: 1, line: 3 });
    expect(ds.bad[0].reason).toMatch(/^invalid JSON/);
    expect(ds.examples[2].answers).toEqual(["no"]);
  });

  it("loads MuSiQue JSONL with answer aliases and supporting paragraphs; a broken line is skipped", () => {
    const ds = loadDataset(join(FIX, "musique.jsonl"));
    expect(ds.format).toBe("musique");
    expect(ds.examples.map((e) => e.id)).toEqual(["2hop__1", "2hop__2", "2hop__3"]);
    expect(ds.examples[1].answers).toEqual(["40 metres", "40 m", "forty metres"]);
    expect(ds.examples[1].supportingTitles).toEqual(["Marek Zelny", "Red Tower"]);
    expect(ds.examples[1].kind).toBe("2hop");
    expect(ds.bad).toEqual([
      { position: { index: 1, line: 2 }, reason: expect.stringMatching(/^invalid JSON/) },
    ]);
  });

  it("loads plain JSONL with aliases; blank lines count for line numbers; missing question is reported", () => {
    const ds = loadDataset(join(FIX, "plain.jsonl"));
    expect(ds.format).toBe("jsonl");
    expect(ds.examples.map((e) => [e.id, e.answers])).toEqual([
      ["p1", ["Norway", "Kingdom of Norway"]],
      ["p2", ["40 metres", "40 m"]],
      ["p3", ["no"]],
    ]);
    expect(ds.examples.every((e) => e.paragraphs.length === 0)).toBe(true);
    expect(ds.bad).toEqual([
      { position: { index: 2, line: 4 }, reason: "missing or empty `question`" },
    ]);
  });

  it("loads FlashRAG's HotpotQA: golden_answers, the original fields under metadata, its ids", () => {
    const ds = loadDataset(join(FIX, "flashrag-hotpotqa.jsonl"));
    expect(ds.format).toBe("hotpotqa");
    expect(ds.examples.map((e) => [e.id, e.answers])).toEqual([
      ["fh1", ["Norway"]],
      ["fh2", ["40 metres", "40 m"]],
    ]);
    expect(ds.examples[0].paragraphs.map((p) => p.title)).toEqual([
      "Blue Pavilion",
      "Ingrid Halvorsen",
      "Green Bridge",
    ]);
    expect(ds.examples[0].supportingTitles).toEqual(["Blue Pavilion", "Ingrid Halvorsen"]);
    expect(ds.examples[1].kind).toBe("bridge/medium");
    expect(ds.bad).toEqual([
      { position: { index: 2, line: 3 }, reason: "missing or empty `answer`" },
    ]);
  });

  it("loads FlashRAG's 2WikiMultiHopQA (context as title/content) with every gold answer", () => {
    const ds = loadDataset(join(FIX, "flashrag-2wiki.jsonl"));
    expect(ds.format).toBe("2wiki");
    expect(ds.examples.map((e) => e.id)).toEqual(["fw1", "fw2"]);
    expect(ds.examples[0].answers).toEqual(["Norway", "Kingdom of Norway"]);
    expect(ds.examples[0].paragraphs[1]).toEqual({
      title: "Ingrid Halvorsen",
      text: "Ingrid Halvorsen (born 1961 in Bergen, Norway) is an architect. She is known for timber buildings.",
    });
    expect(ds.examples[1].supportingTitles).toEqual(["Blue Pavilion", "Red Tower"]);
    expect(ds.bad).toEqual([]);
  });

  it("loads Search-R1 rows: golden_answers, or reward_model.ground_truth.target", () => {
    const ds = loadDataset(join(FIX, "search-r1.jsonl"));
    expect(ds.format).toBe("jsonl");
    expect(ds.examples.map((e) => [e.id, e.answers])).toEqual([
      ["train_0", ["Norway"]],
      ["train_1", ["40 metres", "40 m"]],
    ]);
    expect(ds.bad).toEqual([]);
  });

  it("loads 2Wiki files whose answer is a list", () => {
    const ds = loadDataset(join(FIX, "2wiki-answer-list.json"));
    expect(ds.format).toBe("2wiki");
    expect(ds.examples.map((e) => [e.id, e.answers])).toEqual([
      ["wl1", ["Norway", "Kingdom of Norway"]],
      ["wl2", ["no"]],
    ]);
    expect(ds.examples[0].paragraphs.map((p) => p.title)).toEqual([
      "Blue Pavilion",
      "Ingrid Halvorsen",
    ]);
    expect(ds.bad).toEqual([]);
  });

  it("reads the id field a file uses (_id, id, qid, question_id), else the record index", () => {
    const p = write(
      "ids.jsonl",
      [
        { qid: "a1", question: "Q1?", answer: "x" },
        { question_id: 7, question: "Q2?", golden_answers: "y" },
        { question: "Q3?", answers: ["z"] },
      ]
        .map((r) => JSON.stringify(r))
        .join("\n"),
    );
    expect(loadDataset(p).examples.map((e) => [e.id, e.answers])).toEqual([
      ["a1", ["x"]],
      ["7", ["y"]],
      ["q2", ["z"]],
    ]);
  });

  it("--limit keeps the first N usable questions", () => {
    expect(loadDataset(join(FIX, "hotpotqa.json"), { limit: 2 }).examples.map((e) => e.id)).toEqual(
      ["h1", "h2"],
    );
  });

  it("detects formats from content", () => {
    expect(detectFormat(join(FIX, "hotpotqa.json"))).toBe("hotpotqa");
    expect(detectFormat(join(FIX, "2wiki.json"))).toBe("2wiki");
    expect(detectFormat(join(FIX, "musique.jsonl"))).toBe("musique");
    expect(detectFormat(join(FIX, "plain.jsonl"))).toBe("jsonl");
  });

  it("reads the Hugging Face layout (context as {title, sentences}) and ids that are numbers", () => {
    const p = write(
      "hf.jsonl",
      JSON.stringify({
        id: 7,
        question: "Q?",
        answer: "A",
        type: "bridge",
        context: { title: ["T1", "T2"], sentences: [["a ", "b"], ["c"]] },
        supporting_facts: { title: ["T2"], sent_id: [0] },
      }) + "\n",
    );
    const ds = loadDataset(p, { format: "hotpotqa" });
    expect(ds.examples[0]).toMatchObject({
      id: "7",
      paragraphs: [
        { title: "T1", text: "a b" },
        { title: "T2", text: "c" },
      ],
      supportingTitles: ["T2"],
    });
  });

  it("reports duplicate ids, non-object records, unanswerable MuSiQue questions and a truncated tail", () => {
    const p = write(
      "dup.json",
      '[{"_id":"a","question":"q","answer":"x","context":[]},\n 42,\n{"_id":"a","question":"q2","answer":"y","context":[]},\n{"_id":"b","question":"q3","answer":"z","context":[["T", ["s"]]]},\n{"_id":"c","question":"trunc',
    );
    const ds = loadDataset(p);
    expect(ds.examples.map((e) => e.id)).toEqual(["a", "b"]);
    expect(ds.bad.map((b) => [b.position.index, b.position.line, b.reason])).toEqual([
      [1, 2, "record is not a JSON object"],
      [2, 3, 'duplicate id "a"'],
      [4, 5, "truncated record (file ends inside it)"],
    ]);
    const m = write(
      "m.jsonl",
      JSON.stringify({ id: "u", question: "q", answer: "", answerable: false, paragraphs: [] }) +
        "\n" +
        JSON.stringify({
          id: "v",
          question: "q",
          answer: "x",
          paragraphs: [{ title: "T", paragraph_text: "p" }],
        }) +
        "\n",
    );
    const md = loadDataset(m);
    expect(md.examples.map((e) => e.id)).toEqual(["v"]);
    expect(md.bad[0].reason).toMatch(/unanswerable/);
  });

  it("accepts a list as the answer of a plain JSONL record (first = gold, rest = aliases)", () => {
    const p = write("list.jsonl", '{"question":"Where?","answer":["Norway","Norge"]}\n');
    const ds = loadDataset(p, { format: "jsonl" });
    expect(ds.bad).toEqual([]);
    expect(ds.examples[0].answers).toEqual(["Norway", "Norge"]);
  });

  it("keeps braces and brackets inside strings from confusing the array splitter", () => {
    const p = write("str.json", '[{"_id":"s","question":"what is \\"[{,}]\\"?","answer":"], {"}]');
    const ds = loadDataset(p, { format: "jsonl" });
    expect(ds.examples).toHaveLength(1);
    expect(ds.examples[0].question).toBe('what is "[{,}]"?');
    expect(ds.examples[0].answers).toEqual(["], {"]);
  });

  it.each([
    ["missing file", join(tmp, "nope.json"), /Cannot read dataset/],
    ["empty file", "empty.json", /is empty/],
    ["not JSON", "bad.txt", /neither a JSON array nor JSONL/],
    ["no usable record", "allbad.jsonl", /no usable record; first problem at record 0 \(line 1\)/],
  ])("fails the whole file with INPUT_INVALID: %s", (_name, file, message) => {
    const contents: Record<string, string> = {
      "empty.json": "  \n",
      "bad.txt": "question,answer\n",
      "allbad.jsonl": '{"question": 1}\n',
    };
    const p = file in contents ? write(file, contents[file]) : file;
    try {
      loadDataset(p);
      expect.unreachable();
    } catch (err) {
      expect(CodehopError.isInstance(err)).toBe(true);
      expect((err as CodehopError).code).toBe(ErrorCodes.INPUT_INVALID);
      expect((err as Error).message).toMatch(message);
    }
  });

  it("rejects an unknown --format with CONFIG_INVALID", () => {
    expect(() => loadDataset(join(FIX, "plain.jsonl"), { format: "squad" as any })).toThrow(
      /Unknown dataset format "squad"/,
    );
  });
});
