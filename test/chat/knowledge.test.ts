import { existsSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { createChatGraph } from "../../src/apps/chat/team.ts";
import { takeUploads } from "../../src/apps/chat/conversation/attachments.ts";
import { ChatFiles, citeLabel } from "../../src/apps/chat/conversation/knowledge-base.ts";
import { withCitations } from "../../src/apps/chat/conversation/citations.ts";
import {
  DEMO_BUDGET_SECTIONS,
  DEMO_REPORT_PAGES,
  DEMO_VISITOR_PAGE,
} from "../../src/apps/chat/demo-trajectories.ts";
import { deleteThread } from "../../src/apps/index.ts";
import type { Source } from "../../src/core/state.ts";
import { extractDocument } from "../../src/ingest/documents.ts";
import { makeDocx, makePdf } from "./documents.ts";

const home = () => mkdtempSync(join(tmpdir(), "codehop-kb-"));

describe("text extraction keeps pages and sections", () => {
  it("a PDF: one `p. N` section per page, its lines kept", async () => {
    const doc = await extractDocument({ name: "r.pdf" }, await makePdf(DEMO_REPORT_PAGES));
    expect(doc).toMatchObject({ kind: "pdf", pages: 3, truncated: false });
    expect(
      doc.text
        .split(/^## /m)
        .filter(Boolean)
        .map((s) => s.split("\n")[0]),
    ).toEqual(["p. 1", "p. 2", "p. 3"]);
    expect(doc.text).toContain("Its main span is 503 metres long");
  });

  it("a DOCX: its headings become sections", async () => {
    const doc = await extractDocument({ name: "b.docx" }, await makeDocx(DEMO_BUDGET_SECTIONS));
    expect(doc.kind).toBe("docx");
    expect(doc.text).toBe(
      DEMO_BUDGET_SECTIONS.map((s) => `# ${s.heading}\n\n${s.paragraphs.join("\n\n")}`).join(
        "\n\n",
      ),
    );
  });

  it("HTML: title read, navigation dropped, headings kept, no Markdown escapes", async () => {
    const doc = await extractDocument(
      { name: "visit", mediaType: "text/html; charset=utf-8" },
      Buffer.from(DEMO_VISITOR_PAGE),
    );
    expect(doc.title).toBe("Harbor Bridge visitor information");
    expect(doc.text).not.toContain("Home | Visit");
    expect(doc.text).toContain("## Bridge climb\n\nA guided bridge climb takes 3 hours");
    const escaped = await extractDocument({ name: "e.html" }, Buffer.from("<p>1. a_b *c*</p>"));
    expect(escaped.text).toBe("1. a_b *c*");
  });

  it("a title's character references are decoded safely (out-of-range ones do not crash)", async () => {
    const page = Buffer.from(
      "<html><head><title>Tolls &#x110000; &#0; &#99999999999; &amp; &eacute;t&eacute; &lt;2024&gt;</title></head><body><p>Cars pay 4 dollars.</p></body></html>",
    );
    const doc = await extractDocument({ name: "t.html" }, page);
    expect(doc.title).toBe("Tolls \uFFFD \uFFFD \uFFFD & été <2024>");
    expect(doc.text).toBe("Cars pay 4 dollars.");
  });

  it("decodes text in its declared encoding: Content-Type's charset, else HTML's <meta>", async () => {
    // "Café crème" in windows-1252 (é = 0xE9, è = 0xE8): not valid UTF-8.
    const latin = (text: string) => Buffer.from(text, "latin1");
    const page = (meta: string) =>
      latin(`<html><head>${meta}<title>Café</title></head><body><p>Café crème</p></body></html>`);
    const byMeta = await extractDocument(
      { name: "menu.html", mediaType: "text/html" },
      page('<meta charset="windows-1252">'),
    );
    expect(byMeta).toMatchObject({ title: "Café", text: "Café crème" });
    const byHttpEquiv = await extractDocument(
      { name: "menu.html" },
      page('<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">'),
    );
    expect(byHttpEquiv.text).toBe("Café crème");
    const byHeader = await extractDocument(
      { name: "menu", mediaType: "text/html; charset=ISO-8859-1" },
      page(""),
    );
    expect(byHeader).toMatchObject({ title: "Café", text: "Café crème" });
    const text = await extractDocument(
      { name: "notes.txt", mediaType: "text/plain; charset=windows-1252" },
      latin("Crème brûlée"),
    );
    expect(text.text).toBe("Crème brûlée");
    // A page all in another script: not UTF-8, and not binary either.
    const russian = "Мост открыт в 1932 году. ".repeat(40);
    const cyrillic = await extractDocument(
      { name: "most.html", mediaType: "text/html; charset=windows-1251" },
      new Uint8Array(
        [...`<html><body><p>${russian}</p></body></html>`].map((ch) => {
          const code = ch.charCodeAt(0);
          return code < 128 ? code : code - 0x410 + 0xc0; // А..я → 0xC0..0xFF
        }),
      ),
    );
    expect(cyrillic.text).toBe(russian.trim());
    // Without a declaration, UTF-8 (an unknown label too).
    const utf8 = await extractDocument(
      { name: "notes.txt", mediaType: "text/plain; charset=no-such-charset" },
      Buffer.from("Crème brûlée"),
    );
    expect(utf8.text).toBe("Crème brûlée");
  });

  it("Markdown keeps its headings; plain text has none", async () => {
    const md = await extractDocument({ name: "a.md" }, Buffer.from("# T\n\n## S\nbody"));
    expect(md.text).toBe("# T\n\n## S\nbody");
    const txt = await extractDocument(
      { name: "a.txt" },
      Buffer.from("# 1 not a heading\n== nor this ==\nbody"),
    );
    expect(txt.text).toBe(" # 1 not a heading\n == nor this ==\nbody");
  });

  it("cuts very long text and says so", async () => {
    const doc = await extractDocument({ name: "a.txt" }, Buffer.from("word ".repeat(1000)), {
      maxChars: 100,
    });
    expect(doc.text).toHaveLength(100);
    expect(doc.truncated).toBe(true);
  });
});

describe("the per-thread knowledge base", () => {
  const doc = (name: string, text: string, source = `/src/${name}`) => ({
    name,
    kind: "markdown" as const,
    source,
    text,
  });

  it("keeps each thread's files apart, in one DB per thread under the data directory", async () => {
    const files = new ChatFiles(home());
    await files.add("a", doc("one.md", "## Tolls\nCars pay 4 dollars."));
    await files.add("b", doc("two.md", "## Tolls\nTrucks pay 9 dollars."));
    expect(files.list("a").map((f) => f.name)).toEqual(["one.md"]);
    expect(await files.search("a", "trucks")).toEqual([]);
    expect((await files.search("b", "trucks pay"))[0]).toMatchObject({
      file: "two.md",
      section: "Tolls",
      cite: "two.md § Tolls",
    });
    expect(files.pathFor("a")).toBe(join(files.dir, "a.db"));
    // Ids that are not file names never collide.
    expect(files.pathFor("x/y")).not.toBe(files.pathFor("x_y"));
    expect(files.pathFor("../../etc")).toMatch(/chat-files\/______etc-[0-9a-f]{12}\.db$/);
  });

  it("names a second file with the same name apart; the same file again replaces itself", async () => {
    const files = new ChatFiles(home());
    await files.add("t", doc("notes.md", "first", "/a/notes.md"));
    await files.add("t", doc("notes.md", "second", "/b/notes.md"));
    await files.add("t", doc("notes.md", "first, edited", "/a/notes.md"));
    expect(files.list("t").map((f) => [f.name, f.source])).toEqual([
      ["notes.md", "/a/notes.md"],
      ["notes (2).md", "/b/notes.md"],
    ]);
    expect((await files.search("t", "edited"))[0].file).toBe("notes.md");
  });

  it("removes one file, and deletes a thread's whole index", async () => {
    const files = new ChatFiles(home());
    await files.add("t", doc("a.md", "alpha"));
    await files.add("t", doc("b.md", "beta"));
    expect(files.remove("t", "A.MD")).toBe(true);
    expect(files.remove("t", "a.md")).toBe(false);
    expect(files.list("t").map((f) => f.name)).toEqual(["b.md"]);
    expect(await files.search("t", "alpha")).toEqual([]);
    expect(files.deleteThread("t")).toBe(true);
    expect(existsSync(files.pathFor("t"))).toBe(false);
    expect(files.list("t")).toEqual([]);
  });

  it("retention: removes the indexes idle longer than the setting, keeps the rest", async () => {
    const files = new ChatFiles(home());
    await files.add("old", doc("a.md", "alpha"));
    await files.add("new", doc("b.md", "beta"));
    const day = 24 * 60 * 60 * 1000;
    const past = new Date(Date.now() - 40 * day);
    utimesSync(files.pathFor("old"), past, past);
    expect(files.sweep(0)).toEqual([]);
    expect(files.sweep(30)).toEqual([files.pathFor("old")]);
    expect(files.has("old")).toBe(false);
    expect(files.has("new")).toBe(true);
    // Using an index (a search) refreshes it.
    utimesSync(files.pathFor("new"), past, past);
    await files.search("new", "beta");
    expect(files.sweep(30)).toEqual([]);
    // sweepIfDue runs at most once per interval.
    const t = Date.now();
    utimesSync(files.pathFor("new"), past, past);
    expect(files.sweepIfDue(30, 60_000, t)).toEqual([files.pathFor("new")]);
    await files.add("again", doc("c.md", "gamma"));
    utimesSync(files.pathFor("again"), past, past);
    expect(files.sweepIfDue(30, 60_000, t + 1_000)).toEqual([]);
    expect(files.has("again")).toBe(true);
    expect(files.sweepIfDue(30, 60_000, t + 61_000)).toEqual([files.pathFor("again")]);
  });

  it("retention keeps the conversation being continued, however long it was idle", async () => {
    const files = new ChatFiles(home());
    await files.add("back", doc("a.md", "alpha"));
    await files.add("other", doc("b.md", "beta"));
    const past = new Date(Date.now() - 40 * 24 * 60 * 60 * 1000);
    for (const t of ["back", "other"]) utimesSync(files.pathFor(t), past, past);
    expect(files.sweep(30, Date.now(), "back")).toEqual([files.pathFor("other")]);
    expect(files.has("back")).toBe(true);
    // A round on a thread idle for 40 days: its first step applies the retention, not to it.
    await files.add("other", doc("b.md", "beta"));
    for (const t of ["back", "other"]) utimesSync(files.pathFor(t), past, past);
    const graph = createChatGraph({ checkpointer: new MemorySaver() });
    await graph.invoke(
      { messages: [new HumanMessage("I am back. What was alpha?")] } as any,
      {
        configurable: { thread_id: "back" },
        context: { chatFiles: files, chat: { filesRetentionDays: 30 } },
        interruptBefore: ["respond", "summarize"],
      } as any,
    );
    expect(files.list("back").map((f) => f.name)).toEqual(["a.md"]);
    expect(files.has("other")).toBe(false);
  });

  it("deleteThread of the apps deletes a conversation's files even before its first round", async () => {
    const dir = home();
    const files = new ChatFiles(dir);
    await files.add("early", doc("a.md", "alpha"));
    expect(await deleteThread("early", { config: { home: dir } })).toBe(true);
    expect(files.has("early")).toBe(false);
    expect(await deleteThread("early", { config: { home: dir } })).toBe(false);
  });
});

describe("citations", () => {
  const sources: Source[] = [
    { file: "r.pdf", section: "p. 2", page: 2, cite: "r.pdf, p. 2" },
    { file: "r.pdf", section: "p. 3", page: 3, cite: "r.pdf, p. 3" },
    { file: "b.docx", section: "Budget", cite: "b.docx § Budget" },
  ];

  it("labels pages and sections", () => {
    expect(citeLabel("r.pdf", "p. 12")).toBe("r.pdf, p. 12");
    expect(citeLabel("b.docx", "Budget")).toBe("b.docx § Budget");
    expect(citeLabel("n.txt", "")).toBe("n.txt");
  });

  it("are the passages the answer cites", () => {
    expect(withCitations("It cost 9 [r.pdf, p. 3].", sources)).toEqual({
      content: "It cost 9 [r.pdf, p. 3].",
      citations: [sources[1]],
    });
  });

  it("an answer built on the files that cites nothing gets a Sources line", () => {
    expect(withCitations("It cost 9.", sources)).toEqual({
      content: "It cost 9.\n\nSources: r.pdf, p. 2; b.docx § Budget",
      citations: [sources[0], sources[2]],
    });
    expect(withCitations("Hello!", [])).toEqual({ content: "Hello!", citations: [] });
  });
});

describe("files uploaded inside a chat UI's message", () => {
  it("are taken out of the message, which keeps a note instead of the bytes", () => {
    const data = Buffer.from("# Hi\nthere").toString("base64");
    const { uploads, content } = takeUploads([
      { type: "text", text: "What is in it?" },
      { type: "file", mimeType: "application/pdf", data, metadata: { filename: "r.pdf" } },
      {
        type: "file",
        source_type: "base64",
        mime_type: "text/markdown",
        data,
        metadata: { filename: "n.md" },
      },
    ]);
    expect(uploads).toEqual([
      { name: "r.pdf", data, mediaType: "application/pdf" },
      { name: "n.md", data, mediaType: "text/markdown" },
    ]);
    expect(content).toEqual([
      { type: "text", text: "What is in it?" },
      { type: "text", text: "[attached file: r.pdf]" },
      { type: "text", text: "[attached file: n.md]" },
    ]);
    expect(takeUploads("plain text")).toEqual({ uploads: [], content: "plain text" });
  });

  it("unreadable uploads fail like files do", async () => {
    const dir = home();
    writeFileSync(join(dir, "x"), "");
    const { attachAll } = await import("../../src/apps/chat/conversation/attachments.ts");
    const { CHAT_DEFAULTS } = await import("../../src/apps/chat/conversation/settings.ts");
    const [r] = await attachAll(
      new ChatFiles(dir),
      "t",
      [{ name: "pic.png", data: "iVBORw0KGgo=", mediaType: "image/png" }],
      CHAT_DEFAULTS,
    );
    expect(r).toMatchObject({ ok: false, source: "upload" });
    expect(r.error).toMatch(/pic\.png is an image/);
  });
});
