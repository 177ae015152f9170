/**
 * Fuzzing the document readers and the MediaWiki XML reader (fast-check, issue 22): random
 * mutations of real files — bytes flipped, slices deleted, duplicated or cut, markup inserted —
 * always end in a result or a clear error (CODEHOP_INPUT_INVALID / CODEHOP_INPUT_LIMIT), within a
 * time bound, never a crash or a hang; memory is bounded by the readers' own limits (a reader
 * process past its memory is killed and the file refused, which the property accepts). An input
 * fuzzing finds is kept in REGRESSIONS and read on every run (a campaign of 2,000 document and
 * 3,000 dump mutations, 2026-11-28, found none; the cases there are hand-picked edges).
 */
import { Readable } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { extractDocument } from "../../src/ingest/documents.ts";
import { readMediaWikiXml } from "../../src/ingest/mediawiki-xml.ts";
import type { ReaderItem } from "../../src/ingest/types.ts";
import { makeDocx, makePdf } from "../chat/documents.ts";
import { makeDump } from "../knowledge/fixtures/make-dump.ts";
import { zipFiles } from "./hostile-files.ts";
import { makeEpub, makeOdt, makePptx, makeWorkbook } from "./office-files.ts";

/** Real files of every format the readers read (made by the same libraries as the format tests). */
async function seeds(): Promise<Record<string, Uint8Array>> {
  const text = (s: string) => new TextEncoder().encode(s);
  return {
    "r.pdf": await makePdf(["The bridge opened in 1932.", "It is 2 km long."]),
    "b.docx": await makeDocx([{ heading: "Staff", paragraphs: ["Two engineers.", "One chair."] }]),
    "s.xlsx": makeWorkbook({
      Budget: [
        ["Item", "Cost"],
        ["Desk", 300],
      ],
    }),
    "s.ods": makeWorkbook(
      {
        Budget: [
          ["Item", "Cost"],
          ["Desk", 300],
        ],
      },
      "ods",
    ),
    "s.xls": makeWorkbook(
      {
        Budget: [
          ["Item", "Cost"],
          ["Desk", 300],
        ],
      },
      "biff8",
    ),
    "p.pptx": await makePptx([{ title: "Plan", lines: ["Ship it"], notes: "Say why." }]),
    "m.odt": makeOdt([{ h: 1, text: "Minutes" }, { text: "We met." }]),
    "t.epub": makeEpub("A Tale", ["<h1>One</h1><p>It was.</p>", "<p>Two.</p>"]),
    "a.zip": zipFiles({ "docs/a.md": "# A\n\nbody", "d.csv": "a,b\n1,2" }),
    "p.html": text(
      "<html><head><title>T</title></head><body><h2>Tolls</h2><ul><li>car <b>4</b><li>truck 12</ul><table><tr><td>a<td>b</table></body></html>",
    ),
    "n.md": text("Title\n=====\n\nIntro *text*.\n\nSub\n---\n\n```\n# code\n```\n\n- a\n- b\n"),
    "n.txt": text("Plain notes.\n# 1 not a heading\n"),
    "d.csv": text('name,age\nAnn,31\n"Bob, Jr",40\n'),
    "d.json": text('{"a":[1,2,{"b":"c"}],"d":null}'),
    "d.xml": text('<?xml version="1.0"?><root><item id="1">x &amp; y</item><![CDATA[z]]></root>'),
  };
}

/** Pieces of markup and structure that mutations insert. */
const TOKENS = [
  "<",
  ">",
  "</",
  '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]>',
  "&a;",
  "<div>",
  "[",
  "{",
  '"',
  ",",
  "\n",
  "=====\n",
  "# ",
  "PK\u0003\u0004",
  "%PDF-",
  "obj",
  "endobj",
  "stream\n",
  "R",
  "\u0000",
  "\uFEFF",
];

/** One edit of a file's bytes. */
const edit = fc.oneof(
  fc.record({
    kind: fc.constant("flip" as const),
    at: fc.nat(),
    value: fc.integer({ min: 0, max: 255 }),
  }),
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.nat({ max: 64 }) }),
  fc.record({
    kind: fc.constant("duplicate" as const),
    at: fc.nat(),
    length: fc.nat({ max: 256 }),
  }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    text: fc.constantFrom(...TOKENS),
  }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
);
type Edit = typeof edit extends fc.Arbitrary<infer T> ? T : never;

/** `bytes` after `edits` (positions taken modulo the current length). */
export function mutate(bytes: Uint8Array, edits: readonly Edit[]): Uint8Array {
  let b = Buffer.from(bytes);
  for (const e of edits) {
    const at = b.length ? e.at % b.length : 0;
    if (e.kind === "flip" && b.length) b[at] = e.value;
    else if (e.kind === "delete") b = Buffer.concat([b.subarray(0, at), b.subarray(at + e.length)]);
    else if (e.kind === "duplicate")
      b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + e.length), b.subarray(at)]);
    else if (e.kind === "insert")
      b = Buffer.concat([b.subarray(0, at), Buffer.from(e.text), b.subarray(at)]);
    else if (e.kind === "truncate") b = b.subarray(0, at);
  }
  return b;
}

/** The longest a mutated file may take to read or be refused (reader CPU is capped at 4 s). */
const READ_BOUND_MS = 60_000;

/** Reads `bytes` as `name`: resolves with what happened, fails on anything but a result or a clear error. */
async function readOrRefuse(name: string, bytes: Uint8Array): Promise<string> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${name} took over ${READ_BOUND_MS} ms`)),
      READ_BOUND_MS,
    );
  });
  try {
    const doc = await Promise.race([extractDocument({ name }, bytes), bound]);
    expect(typeof doc.text).toBe("string");
    return "read";
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== "CODEHOP_INPUT_INVALID" && code !== "CODEHOP_INPUT_LIMIT") throw err;
    // A clear error names the file (or the archive member) it is about.
    expect((err as Error).message).toContain(name.split(".")[0]);
    return code;
  } finally {
    clearTimeout(timer);
    expect(performance.now() - started).toBeLessThan(READ_BOUND_MS);
  }
}

/**
 * Regression cases: [seed file, edits], inputs found by fuzzing (fast-check prints the seed file
 * and the edits of a counterexample) and hand-picked edges. Each must end in a result or a clear
 * error like any other.
 */
const REGRESSIONS: [string, Edit[]][] = [
  // The ZIP's end record cut: yauzl's "end of central directory record signature not found".
  ["b.docx", [{ kind: "truncate", at: 200 }]],
  // An entity declaration inserted into an office XML part's first bytes (the ZIP then damaged).
  ["m.odt", [{ kind: "insert", at: 60, text: TOKENS[3] }]],
];

describe("fuzzing the document readers", () => {
  it("every mutated file of every format is read or refused clearly, within the bound", async () => {
    const files = await seeds();
    const names = Object.keys(files);
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...names),
        fc.array(edit, { minLength: 1, maxLength: 6 }),
        async (name, edits) => {
          const outcome = await readOrRefuse(name, mutate(files[name], edits));
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        },
      ),
      { numRuns: 120, interruptAfterTimeLimit: 150_000 },
    );
    // The mutations reach both ends: some files still read, some are refused.
    expect(outcomes.get("read")).toBeGreaterThan(0);
    expect(
      (outcomes.get("CODEHOP_INPUT_INVALID") ?? 0) + (outcomes.get("CODEHOP_INPUT_LIMIT") ?? 0),
    ).toBeGreaterThan(0);
  }, 240_000);

  it("the regression cases end in a result or a clear error", async () => {
    const files = await seeds();
    for (const [name, edits] of REGRESSIONS) await readOrRefuse(name, mutate(files[name], edits));
  }, 120_000);
});

describe("fuzzing the MediaWiki XML reader", () => {
  it("a mutated dump yields documents, redirects and skipped pages, and ends; never throws", async () => {
    const dump = new TextEncoder().encode(makeDump(6));
    await fc.assert(
      fc.asyncProperty(fc.array(edit, { minLength: 1, maxLength: 8 }), async (edits) => {
        const bytes = mutate(dump, edits);
        const started = performance.now();
        const items: ReaderItem[] = [];
        for await (const item of readMediaWikiXml(Readable.from([Buffer.from(bytes)])))
          items.push(item);
        expect(performance.now() - started).toBeLessThan(10_000);
        for (const item of items) {
          expect(["document", "redirect", "skip"]).toContain(item.kind);
          if (item.kind === "skip") expect(item.reason).toBeTruthy();
          if (item.kind === "document") expect(typeof item.doc.text).toBe("string");
        }
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
