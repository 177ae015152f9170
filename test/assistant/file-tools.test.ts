import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zipSync, strToU8 } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCAL_ASSISTANT_ACCESS } from "../../src/apps/assistant/base/context.ts";
import { AssistantFiles } from "../../src/apps/assistant/base/files.ts";
import { makePdf, makeXlsx } from "../../src/apps/assistant/demo-files.ts";
import { createInspectFileTool } from "../../src/apps/assistant/tools/inspect-file.ts";
import { createVisualizerTool } from "../../src/apps/assistant/tools/visualizer.ts";
import { makeDocx } from "../chat/documents.ts";
import { makePptx, makeWorkbook } from "../ingest/office-files.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { WebTestServer } from "../../src/testing/web-test-server.ts";
import type { ToolReport } from "../../src/tools/define-tool.ts";

// inspect_file and visualizer on real files made here, with the model, the vision model and the
// transcription endpoint played by the scripted OpenAI-compatible server over HTTP.

/** A 1×1 red PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
  "base64",
);

/** A short WAV of silence (16 kHz mono PCM). */
function wav(): Buffer {
  const data = Buffer.alloc(3200);
  const header = Buffer.alloc(44);
  header.write("RIFF", 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write("WAVEfmt ", 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16000, 24);
  header.writeUInt32LE(32000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36);
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

let model: ScriptedOpenAIServer;
let web: WebTestServer;
let home: string;
const THREAD = "files-thread";
const reports: ToolReport[] = [];

beforeAll(async () => {
  model = await ScriptedOpenAIServer.start({
    responder: (req) => {
      const system = req.messages[0]?.content ?? "";
      const user = req.messages.filter((m) => m.role === "user");
      if (system.startsWith("You look at an image")) {
        const image = user[0]?.images?.[0] ?? "";
        return image.startsWith("data:image/png;base64,")
          ? "A single red pixel."
          : "no image received";
      }
      // The inspector: answers with what it was shown, so tests see the file's text reached it.
      return `1. Short answer: seen\n2. Evidence: ${user[0]?.content.slice(0, 400)}`;
    },
    transcribe: (req) =>
      req.fileName === "memo.wav" && req.bytes.length > 44
        ? "Buy 3 apples and 2 pears."
        : { status: 400 },
  });
  web = await WebTestServer.start({
    pages: { "/chart.png": { body: PNG, type: "image/png" }, "/page": { body: "<p>text</p>" } },
  });
  home = mkdtempSync(join(tmpdir(), "codehop-files-"));
  const files = new AssistantFiles(home);
  const dir = files.dir(THREAD);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "report.pdf"),
    makePdf("Report", ["Revenue in 2024 was 7 million euros."]),
  );
  writeFileSync(
    join(dir, "minutes.docx"),
    await makeDocx([
      {
        heading: "Board minutes",
        paragraphs: ["The board approved a budget of 4.2 million euros."],
      },
      { heading: "Next meeting", paragraphs: ["The next meeting is on 12 June."] },
    ]),
  );
  writeFileSync(join(dir, "data.json"), '{"tower":{"height":330}}');
  writeFileSync(
    join(dir, "feed.xml"),
    "<feed><title>News</title><entry>Tower reopened</entry></feed>",
  );
  writeFileSync(join(dir, "table.csv"), "city,population\nParis,2100000\nLyon,520000\n");
  writeFileSync(join(dir, "notes.txt"), "Remember: the answer is 42.");
  writeFileSync(join(dir, "pixel.png"), PNG);
  writeFileSync(join(dir, "memo.wav"), wav());
  writeFileSync(
    join(dir, "blob.bin"),
    Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37) % 256)),
  );
  writeFileSync(
    join(dir, "bundle.zip"),
    zipSync({
      "docs/readme.txt": strToU8("Inside the zip: the code is 7731."),
      "sheet.csv": strToU8("a,b\n1,2\n"),
    }),
  );
  writeFileSync(
    join(dir, "sheet.xlsx"),
    makeXlsx([
      {
        name: "Prices",
        rows: [
          ["Item", "Price"],
          ["Tea", 3],
        ],
      },
    ]),
  );
  writeFileSync(
    join(dir, "old.xls"),
    makeWorkbook(
      {
        Ledger: [
          ["Item", "Amount"],
          ["Rent", 1200],
        ],
      },
      "biff8",
    ),
  );
  writeFileSync(
    join(dir, "deck.pptx"),
    await makePptx([{ title: "Quarterly results", lines: ["Sales grew 12%", "Costs fell 3%"] }]),
  );
  symlinkSync("/etc/hostname", join(dir, "escape.txt"));
}, 60_000);
afterAll(async () => {
  await model?.close();
  await web?.close();
});

const config = (granted = true) => ({
  configurable: { thread_id: THREAD },
  context: {
    model: "scripted",
    modelSettings: { baseURL: model.baseURL, apiKey: "scripted", maxRetries: 0 },
    assistantFiles: new AssistantFiles(home),
    web: { allowPrivateAddresses: true },
    ...(granted ? { assistantAccess: LOCAL_ASSISTANT_ACCESS } : {}),
  },
});

async function inspect(path: string, question?: string): Promise<string> {
  const tool = createInspectFileTool({});
  return (await tool.invoke(
    { path, ...(question ? { question } : {}) },
    {
      callIndex: 0,
      signal: new AbortController().signal,
      config: config(),
      report: (r) => reports.push(r),
    },
  )) as string;
}

describe("inspect_file", () => {
  it("reads a PDF, and answers a question from it with the inspector model", async () => {
    expect(await inspect("report.pdf")).toMatch(
      /^File: report\.pdf\n[\s\S]*Revenue in 2024 was 7 million euros/,
    );
    const answer = await inspect("report.pdf", "What was the revenue?");
    expect(answer).toMatch(/^1\. Short answer: seen/);
    expect(answer).toContain("Revenue in 2024 was 7 million euros");
    expect(reports.some((r) => r.usage?.inspector?.calls === 1)).toBe(true);
  });

  it("reads spreadsheets as Markdown tables under their sheet names, and slides", async () => {
    const xlsx = await inspect("sheet.xlsx");
    expect(xlsx).toContain("## Sheet: Prices");
    expect(xlsx).toContain("| Tea | 3 |");
    const xls = await inspect("old.xls");
    expect(xls).toContain("## Sheet: Ledger");
    expect(xls).toMatch(/\| Rent \| 1200 \|/);
    const slides = await inspect("deck.pptx");
    expect(slides).toContain("Quarterly results");
    expect(slides).toContain("Sales grew 12%");
  });

  it("reads a Word document with its headings, and answers from it", async () => {
    const text = await inspect("minutes.docx");
    expect(text).toMatch(/^File: minutes\.docx\n/);
    expect(text).toMatch(
      /#\s*Board minutes[\s\S]*4\.2 million euros[\s\S]*#\s*Next meeting[\s\S]*12 June/,
    );
    const answer = await inspect("minutes.docx", "When is the next meeting?");
    expect(answer).toMatch(/^1\. Short answer: seen/);
    expect(answer).toContain("12 June");
  });

  it("shows JSON pretty-printed, XML, CSV and text as text", async () => {
    expect(await inspect("data.json")).toContain('"height": 330');
    expect(await inspect("feed.xml")).toContain("Tower reopened");
    expect(await inspect("table.csv")).toMatch(/Paris\W+2100000/);
    expect(await inspect("notes.txt")).toContain("the answer is 42");
  });

  it("lists a ZIP archive, then reads its members", async () => {
    const listing = await inspect("bundle.zip");
    expect(listing).toContain("bundle.zip is a ZIP archive of 2 file(s):");
    expect(listing).toContain("- docs/readme.txt");
    expect(await inspect("bundle.zip/docs/readme.txt")).toContain("the code is 7731");
    await expect(inspect("bundle.zip/missing.txt")).rejects.toThrow(/has no member "missing.txt"/);
  });

  it("sends an image to the vision model and audio to the transcription endpoint", async () => {
    expect(await inspect("pixel.png")).toBe("A single red pixel.");
    expect(reports.some((r) => r.usage?.visualizer)).toBe(true);
    const memo = await inspect("memo.wav");
    expect(memo).toBe("File: memo.wav\nTranscript of memo.wav:\nBuy 3 apples and 2 pears.");
    expect(model.transcriptionLog.at(-1)).toMatchObject({
      model: "whisper-1",
      fileName: "memo.wav",
    });
    expect(await inspect("memo.wav", "How many apples?")).toContain("Buy 3 apples");
  });

  it("reads only the task's files: other paths, escaping links and unknown names are refused", async () => {
    await expect(inspect("/etc/passwd")).rejects.toThrow(/outside this task's files/);
    await expect(inspect("../../../../etc/passwd")).rejects.toThrow(/No file|outside/);
    await expect(inspect("escape.txt")).rejects.toThrow(/outside this task's files/);
    const missing = await inspect("nope.pdf").catch((e) => e.message);
    expect(missing).toMatch(/No file "nope\.pdf"\. Files of this task: .*"report\.pdf"/);
  });

  it("a format nothing reads is an error saying what can be read", async () => {
    await expect(inspect("blob.bin")).rejects.toThrow(/binary content|not a supported|unsupported/);
  });
});

describe("visualizer", () => {
  const look = (image: string, granted = true) =>
    createVisualizerTool({}).invoke(
      { image, question: "What colour is it?" },
      {
        callIndex: 0,
        signal: new AbortController().signal,
        config: config(granted),
        report: (r) => reports.push(r),
      },
    );

  it("answers about an image of the task or on the web", async () => {
    expect(await look("pixel.png")).toBe("A single red pixel.");
    expect(await look(web.url("/chart.png"))).toBe("A single red pixel.");
  });

  it("refuses what is not an image", async () => {
    await expect(look("notes.txt")).rejects.toThrow(/not an image/);
    await expect(look(web.url("/page"))).rejects.toThrow(/not an image/);
    await expect(look(web.url("/missing.png"))).rejects.toThrow(/HTTP 404/);
  });

  it("a run without a code grant cannot reach private addresses, whatever its context asks", async () => {
    // The context of this run asks for allowPrivateAddresses (config() sets it), as a client of a
    // served graph could: only a grant made in code allows it.
    await expect(look(web.url("/chart.png"), false)).rejects.toThrow(
      /CODEHOP_WEB_ALLOW_PRIVATE_URLS/,
    );
  });
});
