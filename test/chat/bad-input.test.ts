import {
  closeSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { chat, threadFiles } from "../../src/apps/chat/app.ts";
import { LOCAL_USER_ACCESS } from "../../src/apps/chat/conversation/access.ts";
import { attachAll, type AttachmentInput } from "../../src/apps/chat/conversation/attachments.ts";
import { ChatFiles } from "../../src/apps/chat/conversation/knowledge-base.ts";
import { CHAT_DEFAULTS, type ChatSettings } from "../../src/apps/chat/conversation/settings.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { chatResponder, type DemoRound } from "../../src/apps/chat/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { makeDocx, makePdf, startHttpServer } from "./documents.ts";

// Bad attachments: each comes back as a failed result with a clear message, the others are still
// attached, and the conversation goes on with nothing lost. Links are served by a local HTTP
// server only.

const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d4948445200000001000000010806000000" +
    "1f15c4890000000d4944415478da63fcffff3f0300050001ff2e5a6f0000000049454e44ae426082",
  "hex",
);

let dir: string;
let web: Awaited<ReturnType<typeof startHttpServer>>;
const settings: ChatSettings = { ...CHAT_DEFAULTS, urlTimeoutMs: 400, maxUrlBytes: 1024 * 1024 };
const files: Record<string, string> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "codehop-bad-"));
  const write = (name: string, data: Buffer | string) => {
    files[name] = join(dir, name);
    writeFileSync(files[name], data);
  };
  const pdf = await makePdf(["The bridge opened in 1932."]);
  write("good.pdf", pdf);
  write("notes.md", "# Notes\n\n## Budget\nThe budget is 4 million.\n");
  write("secret.pdf", await makePdf(["Top secret figures."], { password: "hunter2" }));
  write("broken.pdf", pdf.subarray(0, Math.floor(pdf.length * 0.4)));
  write("fake.pdf", "this is plain text pretending to be a PDF");
  write("broken.docx", (await makeDocx([{ heading: "A", paragraphs: ["b"] }])).subarray(0, 300));
  write("sheet.xlsx", await makeDocx([{ heading: "A", paragraphs: ["b"] }]));
  write("photo.png", PNG);
  write("blob.bin", Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)));
  write("empty.txt", "");
  // 200 MB without writing 200 MB: a sparse file has the size and no blocks.
  files["huge.pdf"] = join(dir, "huge.pdf");
  const fd = openSync(files["huge.pdf"], "w");
  ftruncateSync(fd, 200 * 1024 * 1024);
  closeSync(fd);
  mkdirSync(join(dir, "folder"));
  files.folder = join(dir, "folder");

  web = await startHttpServer((req, res) => {
    const path = req.url ?? "/";
    if (path === "/page.html") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(
        "<html><head><title>Tolls</title></head><body><h2>Cars</h2><p>A car pays 4 dollars.</p></body></html>",
      );
    } else if (path === "/moved") {
      res.writeHead(302, { location: "/page.html" });
      res.end();
    } else if (path.startsWith("/loop")) {
      res.writeHead(302, { location: `/loop${path.length}` });
      res.end();
    } else if (path === "/slow") {
      // Never answers: the download's deadline ends it.
    } else if (path === "/image") {
      res.writeHead(200, { "content-type": "image/png" });
      res.end(PNG);
    } else if (path === "/download") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.end(Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)));
    } else if (path === "/big") {
      // 2 MB of text with no Content-Length: the limit is enforced while reading.
      res.writeHead(200, { "content-type": "text/plain" });
      const chunk = "x".repeat(64 * 1024);
      for (let i = 0; i < 32; i++) res.write(chunk);
      res.end();
    } else if (path === "/big-declared") {
      res.writeHead(200, {
        "content-type": "text/plain",
        "content-length": String(2 * 1024 * 1024),
      });
      res.end("x".repeat(2 * 1024 * 1024));
    } else {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found");
    }
  });
});

afterAll(async () => {
  await web?.close();
});

async function attachOne(input: AttachmentInput, options: Partial<ChatSettings> = {}) {
  const home = mkdtempSync(join(tmpdir(), "codehop-bad-home-"));
  onTestFinished(() => rmSync(home, { recursive: true, force: true }));
  const store = new ChatFiles(home);
  // The user's own machine (as the CLI and chat()): local paths and the local test server.
  const [result] = await attachAll(
    store,
    "t",
    [input],
    { ...settings, ...options },
    { access: LOCAL_USER_ACCESS },
  );
  return { result, store };
}

describe("bad files get a clear message", () => {
  it.each([
    [
      "secret.pdf",
      /secret\.pdf is an encrypted \(password-protected\) PDF; codehop cannot read it\. Remove the password/,
    ],
    ["broken.pdf", /broken\.pdf is a corrupt or truncated PDF/],
    ["fake.pdf", /fake\.pdf is not a PDF \(it does not start with %PDF-\)/],
    ["broken.docx", /broken\.docx is a corrupt DOCX file/],
    // A Word file renamed .xlsx: read as the workbook it claims to be, which it is not.
    ["sheet.xlsx", /sheet\.xlsx is not a readable spreadsheet \(Could not find workbook\)/],
    ["photo.png", /photo\.png is an image \(\.png\); codehop reads text/],
    ["blob.bin", /blob\.bin is binary content \(\.bin\), not a supported document/],
    ["empty.txt", /empty\.txt is empty: it has no text to search/],
    [
      "huge.pdf",
      /huge\.pdf is 200 MB, over the 50 MB limit for attached files \(CODEHOP_CHAT_MAX_FILE_MB\)/,
    ],
    ["folder", /is a directory; attach the files in it one by one/],
  ])("%s", async (name, message) => {
    const { result, store } = await attachOne({ path: files[name] });
    expect(result.ok).toBe(false);
    expect(result.code).toBe("CODEHOP_INPUT_INVALID");
    expect(result.error).toMatch(message);
    expect(store.list("t")).toEqual([]);
  });

  it("a missing file", async () => {
    const { result } = await attachOne({ path: join(dir, "nope.pdf") });
    expect(result).toMatchObject({ ok: false, error: `${join(dir, "nope.pdf")} does not exist.` });
  });
});

describe("bad links get a clear message (local HTTP server)", () => {
  // Only /slow is about the timeout (0.4 s); the others get 10 s, so that a loaded machine
  // streaming 1 MB (/big) is not taken for a server that does not answer.
  const patient = { urlTimeoutMs: 10_000 };
  it.each([
    ["/missing", patient, /answered HTTP 404 Not Found; check the link/],
    ["/slow", {}, /did not answer within 0\.4 s \(timed out\)/],
    ["/loop", patient, /redirects more than 5 times \(a redirect loop\?\)/],
    ["/image", patient, /is an image \(image\/png\); codehop reads text/],
    [
      "/download",
      patient,
      /is binary content \(application\/octet-stream\), not a supported document/,
    ],
    ["/big", patient, /is larger than the 1 MB limit/],
    ["/big-declared", patient, /is 2 MB, over the 1 MB limit/],
  ] as const)("%s", async (path, options, message) => {
    const started = Date.now();
    const { result } = await attachOne({ url: web.url(path) }, options);
    expect(result.ok).toBe(false);
    expect(result.code).toBe("CODEHOP_INPUT_INVALID");
    expect(result.error).toMatch(message);
    // The timeout is the settings' (0.4 s for /slow), not the OS's.
    expect(Date.now() - started).toBeLessThan(path === "/slow" ? 10_000 : 20_000);
  });

  it("a refused connection and a non-http URL", async () => {
    const closed = await startHttpServer(() => {});
    const url = closed.url("/x");
    await closed.close();
    expect((await attachOne({ url })).result.error).toMatch(/refused the connection/);
    expect((await attachOne({ url: "ftp://example.org/a.pdf" })).result.error).toMatch(
      /only http:\/\/ and https:\/\/ links/,
    );
  });

  it("follows a redirect to a page and names it by its title", async () => {
    const { result, store } = await attachOne({ url: web.url("/moved") });
    expect(result).toMatchObject({ ok: true, name: "Tolls" });
    expect((await store.search("t", "car pays"))[0]).toMatchObject({
      file: "Tolls",
      section: "Cars",
      cite: "Tolls § Cars",
    });
  });
});

describe("a round with bad attachments", () => {
  const rounds: DemoRound[] = [
    {
      message: "Here are my notes.",
      steps: [action("Acknowledge.", 'final_answer("Thanks, I have your notes.");')],
      expect: { reply: "Thanks", cites: [] },
    },
    {
      message: "And these files and links?",
      steps: [
        action(
          "Some attachments failed; I tell the user why and check the notes still work.",
          'console.log(await search_files("budget"));',
        ),
        action(
          "Answer.",
          'final_answer("The PDF is encrypted and the link is broken; your notes say the budget is 4 million [notes.md § Budget].");',
        ),
      ],
      expect: { reply: "encrypted", cites: ["notes.md § Budget"] },
    },
  ];
  let model: ScriptedOpenAIServer;
  let home: string;

  beforeAll(async () => {
    model = await ScriptedOpenAIServer.start({ responder: chatResponder(rounds) });
    home = mkdtempSync(join(tmpdir(), "codehop-bad-chat-"));
  });
  afterAll(async () => {
    await model?.close();
  });

  it("reports them, attaches the good ones, answers, and loses nothing", async () => {
    const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
    const first = await chat("bad", rounds[0].message, { config, files: [files["notes.md"]] });
    expect(first.attachments).toMatchObject([{ name: "notes.md", ok: true }]);
    const second = await chat("bad", rounds[1].message, {
      config,
      files: [files["secret.pdf"], files["good.pdf"], files["huge.pdf"]],
      urls: [web.url("/missing"), web.url("/loop")],
      settings: { urlTimeoutMs: 2000 },
    });
    expect(second.attachments.map((a) => [a.name, a.ok])).toEqual([
      ["secret.pdf", false],
      ["good.pdf", true],
      ["huge.pdf", false],
      [web.url("/missing"), false],
      [web.url("/loop"), false],
    ]);
    expect(second.status).toBe("done");
    expect(second.reply).toContain("encrypted");
    expect(second.citations.map((c) => c.cite)).toEqual(["notes.md § Budget"]);
    // The agent was told what failed and why.
    const task = model
      .requestsFor("chat:round2")[0]
      .request.messages.find((m) => m.role === "user")!.content;
    expect(task).toContain("Could not be attached this round (tell the user why):");
    expect(task).toMatch(/- secret\.pdf: secret\.pdf is an encrypted/);
    expect(task).toMatch(/redirects more than 5 times/);
    // Nothing lost: the earlier file, the earlier round, the new good file.
    expect(threadFiles("bad", { config }).map((f) => f.name)).toEqual(["notes.md", "good.pdf"]);
    expect(second.round).toBe(2);
    expect(task).toContain("User: Here are my notes.");
  });
});
