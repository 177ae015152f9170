import { mkdirSync, mkdtempSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import ipaddr from "ipaddr.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { attachToThread, threadFiles } from "../../src/apps/chat/app.ts";
import {
  LOCAL_USER_ACCESS,
  grantChatAccess,
  type ChatAccess,
} from "../../src/apps/chat/conversation/access.ts";
import type { AttachmentResult } from "../../src/apps/chat/conversation/attachments.ts";
import {
  chatSettingsFromEnv,
  chatSettingsOf,
  type ChatSettings,
} from "../../src/apps/chat/conversation/settings.ts";
import { ChatFiles } from "../../src/apps/chat/conversation/knowledge-base.ts";
import { createChatGraph } from "../../src/apps/chat/team.ts";
import { chat as servedChat } from "../../src/graphs/entries.ts";
import { fetchDocument, isPublicAddress } from "../../src/ingest/fetch-url.ts";
import { startHttpServer } from "./documents.ts";

// What a conversation may reach on the machine running it. A served chat graph (the langgraph.json
// entry behind Studio's server and `codehop serve`) takes its input from any client: it must not
// read the server's files (`attach: [{ path }]`) nor fetch the server's own network (loopback,
// private and link-local addresses, after DNS and on every redirect). Code grants more (the CLI,
// chat()); a client cannot, whatever it sends in its context or configurable.

const PAGE =
  "<html><head><title>Tolls</title></head><body><h2>Cars</h2><p>A car pays 4 dollars.</p></body></html>";
let web: Awaited<ReturnType<typeof startHttpServer>>;
let secret: string;
let home: string;

beforeAll(async () => {
  web = await startHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(PAGE);
  });
  const dir = mkdtempSync(join(tmpdir(), "codehop-access-"));
  secret = join(dir, "secret.md");
  writeFileSync(secret, "# Server secrets\n\nThe database password is swordfish.\n");
  home = mkdtempSync(join(tmpdir(), "codehop-access-home-"));
});

afterAll(async () => {
  await web?.close();
});

afterEach(() => {
  delete process.env.CODEHOP_CHAT_ALLOW_PRIVATE_URLS;
  delete process.env.CODEHOP_CHAT_FILES_ROOT;
  delete process.env.CODEHOP_CHAT_MAX_FILE_MB;
});

/**
 * Runs a served graph's first step (attach_files) on a new thread with `attach`, as a LangGraph
 * server would (its checkpointer attached, the client's context and configurable passed on).
 */
async function attachThrough(
  graph: typeof servedChat,
  attach: unknown[],
  extra: { context?: Record<string, unknown>; configurable?: Record<string, unknown> } = {},
): Promise<{ results: AttachmentResult[]; files: ChatFiles; thread: string }> {
  const files = new ChatFiles(home);
  const thread = `t-${Math.random().toString(36).slice(2)}`;
  (graph as { checkpointer?: unknown }).checkpointer = new MemorySaver();
  const state = await graph.invoke(
    { messages: [new HumanMessage("Read this.")], attach } as any,
    {
      configurable: { thread_id: thread, ...extra.configurable },
      context: { chatFiles: files, ...extra.context },
      interruptBefore: ["respond", "summarize"],
    } as any,
  );
  return { results: state.attachments as AttachmentResult[], files, thread };
}

describe("a served chat graph does not read the server's files", () => {
  it("no grant: the path is refused and nothing is indexed", async () => {
    const { results, files, thread } = await attachThrough(servedChat, [{ path: secret }]);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ ok: false, code: "CODEHOP_INPUT_INVALID" });
    expect(results[0].error).toMatch(
      /secret\.md: local paths are not read in this conversation .*upload the file instead/,
    );
    expect(results[0].error).not.toContain("swordfish");
    expect(files.list(thread)).toEqual([]);
    expect(await files.search(thread, "password")).toEqual([]);
  });

  it("a grant forged in configurable (JSON) is refused before the run starts, naming the key", async () => {
    const files = new ChatFiles(home);
    (servedChat as { checkpointer?: unknown }).checkpointer = new MemorySaver();
    await expect(
      servedChat.invoke(
        { messages: [new HumanMessage("Read this.")], attach: [{ path: secret }] },
        {
          configurable: {
            thread_id: "forged-configurable",
            chatAccess: { localFiles: true, privateNetwork: true },
          },
          context: { chatFiles: files },
        } as any,
      ),
    ).rejects.toThrow(/config\.configurable\.chatAccess` is an operator setting/);
    expect(files.list("forged-configurable")).toEqual([]);
  });

  it("a grant forged in the context (JSON) fails the run's context validation", async () => {
    const files = new ChatFiles(home);
    (servedChat as { checkpointer?: unknown }).checkpointer = new MemorySaver();
    const forgedContext = {
      chatFiles: files,
      chatAccess: { localFiles: true, privateNetwork: true },
    };
    for (const attach of [[{ path: secret }], [{ url: web.url("/page.html") }]]) {
      await expect(
        servedChat.invoke(
          { messages: [new HumanMessage("Read this.")], attach } as any,
          {
            configurable: { thread_id: "forged" },
            context: forgedContext,
          } as any,
        ),
      ).rejects.toThrow(/chatAccess[\s\S]*a grant made by grantChatAccess \(code only\)/);
    }
    expect(files.list("forged")).toEqual([]);
  });

  it("code grants it: in the run context, or to the graph", async () => {
    const byContext = await attachThrough(servedChat, [{ path: secret }], {
      context: { chatAccess: LOCAL_USER_ACCESS },
    });
    expect(byContext.results[0]).toMatchObject({ ok: true, name: "secret.md" });
    const own = createChatGraph({ access: grantChatAccess({ localFiles: true }) });
    const byGraph = await attachThrough(own, [{ path: secret }]);
    expect(byGraph.results[0]).toMatchObject({ ok: true, name: "secret.md" });
    // The API is the user's own: attachToThread reads local files.
    const config = { home };
    const [viaApi] = await attachToThread("api-thread", [secret], { config });
    expect(viaApi).toMatchObject({ ok: true });
    expect(threadFiles("api-thread", { config }).map((f) => f.name)).toEqual(["secret.md"]);
  });
});

describe("the operator's shared directory (CODEHOP_CHAT_FILES_ROOT)", () => {
  it("a served graph reads files under it, and nothing outside (.., absolute, symlinks)", async () => {
    const root = mkdtempSync(join(tmpdir(), "codehop-access-root-"));
    mkdirSync(join(root, "docs"));
    writeFileSync(join(root, "docs", "tolls.md"), "# Tolls\n\nA car pays 4 dollars.\n");
    symlinkSync(secret, join(root, "docs", "escape.md"));
    process.env.CODEHOP_CHAT_FILES_ROOT = root;
    const { results, files, thread } = await attachThrough(servedChat, [
      { path: "docs/tolls.md" },
      { path: join(root, "docs", "tolls.md") },
      { path: "../" + secret.split("/").slice(-2).join("/") },
      { path: secret },
      { path: "docs/escape.md" },
      { path: "docs/missing.md" },
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, true, false, false, false, false]);
    for (const refused of results.slice(2, 5)) {
      expect(refused.error).toMatch(
        /local paths are not read in this conversation .*except those in the directory the server shares for it; upload the file instead/,
      );
    }
    expect(results[5].error).toMatch(/docs\/missing\.md does not exist/);
    expect(JSON.stringify(results)).not.toContain("swordfish");
    expect(files.list(thread).map((f) => f.name)).toEqual(["tolls.md"]);
    expect(await files.search(thread, "password")).toEqual([]);
  });
});

describe("a served run's `chat` settings cannot override the operator's", () => {
  // What a client of a served graph may ask for in its context's `chat` (Studio's form, the SDK).
  const asking: Partial<ChatSettings> = {
    keepRounds: 1,
    summaryBatch: 2,
    summaryWords: 50,
    searchResults: 3,
    maxFileBytes: 10 ** 12,
    maxUrlBytes: 10 ** 12,
    urlTimeoutMs: 10 ** 9,
    maxRedirects: 100,
    filesRetentionDays: 0.00001,
  };

  it("a served run chooses its conversation's settings, gets the operator's limits and retention", () => {
    const operator = chatSettingsFromEnv();
    expect(chatSettingsOf({ context: { chat: asking } } as any)).toEqual({
      ...operator,
      keepRounds: 1,
      summaryBatch: 2,
      summaryWords: 50,
      searchResults: 3,
    });
    // Lowering a limit is the run's choice.
    const lower = { maxFileBytes: 10, maxUrlBytes: 20, urlTimeoutMs: 30, maxRedirects: 0 };
    expect(chatSettingsOf({ context: { chat: lower } } as any)).toEqual({ ...operator, ...lower });
    // A grant forged in configurable changes nothing; an invalid value is still an error.
    const forged = { chatAccess: { localFiles: true, privateNetwork: true }, chat: asking };
    expect(chatSettingsOf({ configurable: forged } as any).maxFileBytes).toBe(
      operator.maxFileBytes,
    );
    expect(() => chatSettingsOf({ context: { chat: { maxFileBytes: -1 } } } as any)).toThrow(
      /Invalid chat setting in the run context's `chat`: maxFileBytes/,
    );
    // Code with a grant (the CLI, chat()) chooses every setting.
    const granted = { context: { chat: asking, chatAccess: LOCAL_USER_ACCESS } };
    expect(chatSettingsOf(granted as any)).toEqual({ ...operator, ...asking });
  });

  it("a tiny retention asked by a served run does not delete other conversations' files", async () => {
    const dir = mkdtempSync(join(tmpdir(), "codehop-access-retention-"));
    const seed = new ChatFiles(dir);
    await seed.add("other", { name: "o.md", kind: "markdown", source: "/o.md", text: "omega" });
    const yesterday = new Date(Date.now() - 24 * 60 * 60 * 1000);
    utimesSync(seed.pathFor("other"), yesterday, yesterday);
    const tiny = { chat: { filesRetentionDays: 0.00001 } };
    // A fresh store each time: the sweep is due on its first round. A served run asking for a
    // retention is refused before it starts, naming the key (the retention is the operator's).
    await expect(
      attachThrough(servedChat, [], { context: { ...tiny, chatFiles: new ChatFiles(dir) } }),
    ).rejects.toThrow(/context\.chat\.filesRetentionDays` is an operator setting/);
    expect(seed.has("other")).toBe(true);
    expect(seed.list("other").map((f) => f.name)).toEqual(["o.md"]);
    // The user's own code keeps the say over its own store.
    await attachThrough(servedChat, [], {
      context: { ...tiny, chatFiles: new ChatFiles(dir), chatAccess: LOCAL_USER_ACCESS },
    });
    expect(seed.has("other")).toBe(false);
  });

  it("a served run cannot raise the file-size limit, may lower it; granted code may raise it", async () => {
    const root = mkdtempSync(join(tmpdir(), "codehop-access-limit-"));
    writeFileSync(join(root, "tolls.md"), "# Tolls\n\nA car pays 4 dollars.\n");
    process.env.CODEHOP_CHAT_FILES_ROOT = root;
    const big = { chat: { maxFileBytes: 10 ** 9 } };
    const lowered = await attachThrough(servedChat, [{ path: "tolls.md" }], {
      context: { chat: { maxFileBytes: 10 } },
    });
    expect(lowered.results[0]).toMatchObject({ ok: false, code: "CODEHOP_INPUT_INVALID" });
    expect(lowered.results[0].error).toMatch(/tolls\.md is .*, over the .* limit/);
    process.env.CODEHOP_CHAT_MAX_FILE_MB = "0.00001";
    const raised = await attachThrough(servedChat, [{ path: "tolls.md" }], { context: big });
    expect(raised.results[0]).toMatchObject({ ok: false, code: "CODEHOP_INPUT_INVALID" });
    expect(raised.results[0].error).toMatch(/tolls\.md is .*, over the .* limit/);
    expect(raised.files.list(raised.thread)).toEqual([]);
    const granted = await attachThrough(servedChat, [{ path: join(root, "tolls.md") }], {
      context: { ...big, chatAccess: LOCAL_USER_ACCESS },
    });
    expect(granted.results[0]).toMatchObject({ ok: true, name: "tolls.md" });
  });
});

describe("a served chat graph does not fetch the server's own network", () => {
  const port = () => new URL(web.url("/")).port;
  const refused = [
    ["a loopback IP", () => web.url("/page.html"), "127.0.0.1"],
    ["a name resolving to loopback", () => `http://localhost:${port()}/page.html`, "localhost"],
    ["an IPv6 loopback literal", () => `http://[::1]:${port()}/page.html`, "[::1]"],
    ["a decimal IP", () => `http://2130706433:${port()}/page.html`, "127.0.0.1"],
    ["link-local (cloud metadata)", () => "http://169.254.169.254/latest/meta-data/", "169.254"],
    ["a private network", () => "http://10.0.0.1/", "10.0.0.1"],
  ] as const;
  it.each(refused)("%s is refused", async (_what, url, host) => {
    const { results, files, thread } = await attachThrough(servedChat, [{ url: url() }]);
    expect(results[0]).toMatchObject({ ok: false, code: "CODEHOP_INPUT_INVALID" });
    expect(results[0].error).toContain(host);
    expect(results[0].error).toMatch(
      /a private, loopback or link-local address, which is not fetched here .*CODEHOP_CHAT_ALLOW_PRIVATE_URLS=1/,
    );
    expect(files.list(thread)).toEqual([]);
  });

  it("the operator's setting or a code grant allows it", async () => {
    process.env.CODEHOP_CHAT_ALLOW_PRIVATE_URLS = "1";
    const allowed = await attachThrough(servedChat, [{ url: web.url("/page.html") }]);
    expect(allowed.results[0]).toMatchObject({ ok: true, name: "Tolls" });
    // Local paths stay refused: the setting is about links only.
    const path = await attachThrough(servedChat, [{ path: secret }]);
    expect(path.results[0].ok).toBe(false);
    delete process.env.CODEHOP_CHAT_ALLOW_PRIVATE_URLS;
    const granted = await attachThrough(servedChat, [{ url: web.url("/page.html") }], {
      context: { chatAccess: grantChatAccess({ privateNetwork: true }) satisfies ChatAccess },
    });
    expect(granted.results[0]).toMatchObject({ ok: true, name: "Tolls" });
  });
});

describe("fetchDocument's address check: after DNS, on every redirect", () => {
  const loopbackOnly = (a: string) => ipaddr.process(a).range() === "loopback";
  let other: ReturnType<typeof createServer> | undefined;
  afterAll(() => other?.close());

  it("checks the addresses a name resolves to (allowed → fetched, refused → not)", async () => {
    const url = `http://localhost:${new URL(web.url("/")).port}/page.html`;
    const ok = await fetchDocument(url, { allowAddress: loopbackOnly });
    expect(Buffer.from(ok.bytes).toString()).toBe(PAGE);
    await expect(fetchDocument(url, { allowAddress: isPublicAddress })).rejects.toThrow(
      /leads to localhost \((127\.0\.0\.1|::1)\), a private, loopback or link-local address/,
    );
  });

  it("checks every redirect's target", async () => {
    // A second server on another loopback address; only 127.0.0.1 is allowed.
    other = createServer((_req, res) => res.end("secret admin page"));
    await new Promise<void>((ok) => other!.listen(0, "127.0.0.2", ok));
    const target = `http://127.0.0.2:${(other.address() as { port: number }).port}/admin`;
    const hopping = await startHttpServer((_req, res) => {
      res.writeHead(302, { location: target });
      res.end();
    });
    try {
      await expect(
        fetchDocument(hopping.url("/go"), { allowAddress: (a) => a === "127.0.0.1" }),
      ).rejects.toThrow(/leads to 127\.0\.0\.2 \(127\.0\.0\.2\)/);
      // Without the check the same redirect is followed (the test server is reachable).
      const followed = await fetchDocument(hopping.url("/go"));
      expect(Buffer.from(followed.bytes).toString()).toBe("secret admin page");
    } finally {
      await hopping.close();
    }
  });

  it("public addresses are public; everything special is not", () => {
    for (const a of ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"])
      expect(isPublicAddress(a)).toBe(true);
    for (const a of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "::",
      "fe80::1",
      "fc00::1",
      "::ffff:127.0.0.1",
      "64:ff9b::7f00:1",
      "2002:7f00:1::",
      "::7f00:1",
      "::a00:1",
      "224.0.0.1",
      "not an address",
    ])
      expect(isPublicAddress(a)).toBe(false);
  });
});
