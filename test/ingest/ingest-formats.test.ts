import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ingestPath } from "../../src/ingest/index.ts";
import { extractDocument } from "../../src/ingest/documents.ts";
import { chunkDocument } from "../../src/store/chunking.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { makeDocx, makePdf } from "../chat/documents.ts";
import { tempDir } from "../knowledge/helpers.ts";

// Issue 29: `codehop ingest` takes every format chat reads, through the same readers, files or
// folders of mixed formats; what it cannot read is skipped with the reason and counted; Markdown
// sections come from setext and ATX headings alike.

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const bin = join(import.meta.dirname, "../../bin/codehop.mjs");
const run = promisify(execFile);
/** `codehop ingest ...args` as a user runs it: exit code, stdout, stderr. */
const codehop = (...args: string[]) =>
  run(process.execPath, [bin, "ingest", ...args], {
    env: { ...process.env, CODEHOP_HOME: tmp.dir, CODEHOP_ENV_FILE: "none", NO_COLOR: "1" },
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }),
  );

/** procps's bugs.md from Debian when this machine has it (LGPL), else a file of its shape. */
function bugsMd(): string {
  const real = "/usr/share/doc/procps/bugs.md";
  if (existsSync(real)) return readFileSync(real, "utf8");
  return [
    "BUG REPORTS",
    "===========",
    "",
    "The following is information for reporting bugs.",
    "",
    "Where to send",
    "-------------",
    "You can raise issues on the GitLab issues tracker.",
    "",
    "What to send",
    "------------",
    "strace and ltrace output are very helpful:",
    "",
    "> strace -o output-file ps --blah",
    "",
    "Patches",
    "-------",
    "While merge requests are preferred, patches are also welcome.",
    "",
  ].join("\n");
}

describe("Markdown sections", () => {
  it("setext headings (Title / =====, Sub / -----) name sections, as ATX ones do", async () => {
    const doc = await extractDocument({ name: "bugs.md" }, Buffer.from(bugsMd()));
    expect(doc.title).toBe("BUG REPORTS");
    const sections = new Set((await chunkDocument(doc.text)).map((c) => c.section));
    expect(sections).toContain("Where to send");
    expect(sections).toContain("What to send");
    expect(sections).toContain("Patches");
    expect([...sections].filter((s) => /^[=-]+$/.test(s))).toEqual([]);
  });

  it("heading-like lines in code, and inline markup in headings, do not make odd sections", async () => {
    const md = [
      "Intro",
      "=====",
      "",
      "```sh",
      "# not a heading: a shell comment",
      "=====",
      "```",
      "",
      "## The *`ps`* command",
      "",
      "body",
    ].join("\n");
    const doc = await extractDocument({ name: "a.md" }, Buffer.from(md));
    const chunks = await chunkDocument(doc.text);
    expect(chunks.map((c) => c.section)).toEqual(["Intro", "The ps command"]);
    expect(chunks[0].text).toContain("# not a heading: a shell comment");
  });
});

describe("codehop ingest of documents", () => {
  it("a folder of mixed formats: PDF pages, DOCX and Markdown sections, HTML titles; the rest skipped and counted", async () => {
    const dir = join(tmp.dir, "docs");
    mkdirSync(join(dir, "web"), { recursive: true });
    writeFileSync(
      join(dir, "report.pdf"),
      await makePdf(["Revenue grew 12 percent.", "Costs fell in the north."]),
    );
    writeFileSync(
      join(dir, "budget.docx"),
      await makeDocx([{ heading: "Staff", paragraphs: ["Two engineers are hired."] }]),
    );
    writeFileSync(join(dir, "bugs.md"), bugsMd());
    writeFileSync(join(dir, "notes.txt"), "# 1 is not a heading here\nThe meeting is on Tuesday.");
    writeFileSync(
      join(dir, "web", "tolls.html"),
      "<html><head><title>Toll tables</title></head><body><h2>Cars</h2><p>A car pays 4 dollars.</p></body></html>",
    );
    writeFileSync(join(dir, "logo.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]));
    writeFileSync(join(dir, "broken.pdf"), "%PDF-1.7\nnot really a pdf");
    const db = join(tmp.dir, "mixed.db");
    const r = await codehop(dir, "--db", db, "--json");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ records: 7, added: 5, skipped: 2 });
    const skipped = Object.fromEntries(
      (report.skipped_records as { where: string; reason: string }[]).map((s) => [
        s.where,
        s.reason,
      ]),
    );
    expect(skipped["logo.png"]).toMatch(/^unsupported format \(\.png\): codehop ingests PDF/);
    expect(skipped["broken.pdf"]).toMatch(/corrupt or truncated PDF/);

    const s = CorpusSource.open(db);
    try {
      const pdf = await s.retrievePassages("report", "costs north");
      expect(pdf.passages[0]).toMatchObject({ section: "p. 2" });
      const docx = await s.retrievePassages("budget", "engineers");
      expect(docx.passages[0]).toMatchObject({ section: "Staff" });
      const md = await s.retrievePassages("BUG REPORTS", "strace ltrace output");
      expect(md.passages[0].section).toBe("What to send");
      expect((await s.search("car pays dollars"))[0].title).toBe("Toll tables");
      const notes = await s.getPage("notes");
      expect(notes.status).toBe("found");
    } finally {
      await s.close();
    }
  }, 180_000);

  it("one PDF file is ingested as a document with its page numbers", async () => {
    const file = join(tmp.dir, "annual report.pdf");
    writeFileSync(file, await makePdf(["Page one text.", "The dividend is 3 euros."]));
    const db = join(tmp.dir, "one.db");
    const report = await ingestPath(db, file);
    expect(report).toMatchObject({ added: 1, skipped: 0 });
    const s = CorpusSource.open(db);
    try {
      const { passages } = await s.retrievePassages("annual report", "dividend");
      expect(passages[0]).toMatchObject({ section: "p. 2" });
    } finally {
      await s.close();
    }
  }, 120_000);

  it("--format xml on a PDF says what it is and what to do, and prints no Done line", async () => {
    const file = join(tmp.dir, "paper.pdf");
    writeFileSync(file, await makePdf(["Some text."]));
    const db = join(tmp.dir, "xml.db");
    const r = await codehop(file, "--db", db, "--format", "xml");
    expect(r.code).toBe(2);
    expect(r.stdout).not.toContain("Done");
    expect(r.stderr).toMatch(
      /paper\.pdf is a PDF, not a MediaWiki XML dump; ingest it as a document: leave out --format/,
    );
    expect(existsSync(db)).toBe(false);
  }, 120_000);

  it("a folder of nothing readable: 'Nothing ingested', every file listed with its reason", async () => {
    const dir = join(tmp.dir, "images");
    mkdirSync(dir);
    writeFileSync(join(dir, "a.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0]));
    writeFileSync(join(dir, "b.jpg"), Buffer.from([0xff, 0xd8, 0xff, 0, 0]));
    const db = join(tmp.dir, "images.db");
    const r = await codehop(dir, "--db", db);
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/^Nothing ingested: 2 records/);
    expect(r.stdout).not.toContain("Done");
    expect(r.stdout).toContain("a.png: unsupported format (.png)");
    expect(r.stderr).toMatch(/none of its 2 record\(s\) could be stored/);
    expect(r.stderr).not.toContain("mediawiki-xml");
  }, 120_000);

  it("an unknown single file names the formats and the --format choices the docs use", async () => {
    const odd = join(tmp.dir, "data.xyz");
    writeFileSync(odd, "a,b");
    const r = await codehop(odd, "--db", join(tmp.dir, "odd.db"));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--format jsonl|folder|xml|document");
    expect(r.stderr).not.toContain("mediawiki-xml");
  }, 60_000);
});
