import { RecursiveCharacterTextSplitter } from "@langchain/textsplitters";
import { describe, expect, it } from "vitest";
import { chunkDocument, splitSections } from "../../src/store/chunking.ts";
import { CodehopError } from "../../src/errors.ts";

describe("chunking", () => {
  it("splits at Markdown and MediaWiki headings and keeps each passage's heading", async () => {
    const text =
      "Lead paragraph.\n\n## History\nFounded long ago.\n\n== Geography ==\nHills.\n\n### Rivers ###\nOne river.";
    expect(splitSections(text)).toEqual([
      { heading: "", body: "Lead paragraph." },
      { heading: "History", body: "Founded long ago." },
      { heading: "Geography", body: "Hills." },
      { heading: "Rivers", body: "One river." },
    ]);
    const chunks = await chunkDocument(text);
    expect(chunks.map((c) => c.section)).toEqual(["", "History", "Geography", "Rivers"]);
  });

  it("never lets a passage straddle two sections, and drops empty sections", async () => {
    const chunks = await chunkDocument("## Empty\n\n## Full\nText here.", {
      chunkSize: 64,
      chunkOverlap: 0,
    });
    expect(chunks).toEqual([{ section: "Full", text: "Text here." }]);
  });

  it("cuts a word longer than a passage (no space, no newline) as LangChain's splitter does, overlap included", async () => {
    for (const [length, chunkSize, chunkOverlap] of [
      [5_000, 512, 0],
      [5_000, 512, 64],
      [100_003, 300, 299],
      [513, 512, 100],
    ]) {
      const word = Array.from({ length }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
      const ours = await chunkDocument(word, { chunkSize, chunkOverlap });
      const theirs = await new RecursiveCharacterTextSplitter({
        chunkSize,
        chunkOverlap,
      }).splitText(word);
      expect(ours.map((c) => c.text)).toEqual(theirs);
    }
  });

  it("cuts long sections into passages no longer than chunkSize that overlap", async () => {
    const sentences = Array.from(
      { length: 60 },
      (_, i) => `Sentence number ${i} talks about towers.`,
    ).join(" ");
    const chunks = await chunkDocument(`## Long\n${sentences}`, {
      chunkSize: 200,
      chunkOverlap: 80,
    });
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) {
      expect(c.section).toBe("Long");
      expect(c.text.length).toBeLessThanOrEqual(200);
    }
    // Overlap: the end of one passage reappears at the start of the next.
    const tail = chunks[0].text.split(" ").slice(-3).join(" ");
    expect(chunks[1].text).toContain(tail);
    // Nothing is lost.
    for (let i = 0; i < 60; i++)
      expect(chunks.some((c) => c.text.includes(`number ${i} `))).toBe(true);
  });

  it("rejects nonsensical settings with CONFIG_INVALID", async () => {
    await expect(chunkDocument("x", { chunkSize: 100, chunkOverlap: 100 })).rejects.toSatisfy(
      (e: unknown) => CodehopError.isInstance(e) && e.code === "CODEHOP_CONFIG_INVALID",
    );
    await expect(chunkDocument("x", { chunkSize: 0 })).rejects.toThrow(/chunk size/);
  });
});
