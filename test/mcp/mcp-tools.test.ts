import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import {
  MCP_TEST_SERVER_STDIO,
  type McpTestServer,
  startMcpTestServer,
} from "../../src/testing/mcp-test-server.ts";
import { renderToolDoc, type CodeTool } from "../../src/tools/define-tool.ts";
import { connectMcpServers, type McpToolSet } from "../../src/tools/mcp.ts";

// MCP servers' tools as code tools: a real server package from npm over stdio
// (@modelcontextprotocol/server-everything), and codehop's test server (the official SDK) over
// streamable HTTP and over stdio. What a prompt shows, what a call returns, and what goes wrong.

const EVERYTHING = {
  command: process.execPath,
  args: [join(process.cwd(), "node_modules/@modelcontextprotocol/server-everything/dist/index.js")],
};

const ctx = () => ({ callIndex: 0, signal: new AbortController().signal });
const byName = (set: McpToolSet, name: string) => {
  const tool = set.tools.find((t) => t.name === name);
  expect(tool, `tool ${name}`).toBeDefined();
  return tool as CodeTool<any>;
};

describe("an npm MCP server over stdio (server-everything)", { timeout: 60_000 }, () => {
  let set: McpToolSet;
  beforeAll(async () => {
    set = await connectMcpServers({ everything: EVERYTHING });
  });
  afterAll(() => set?.close());

  it("renders its tools like native ones, with JS names", () => {
    expect(renderToolDoc(byName(set, "echo"))).toBe(
      "/** Echoes back the input string\n * @param message - Message to echo */\nasync function echo(message: string): Promise<string>",
    );
    // "get-sum" is not a JavaScript name: it becomes get_sum.
    expect(set.tools.map((t) => t.name)).toContain("get_sum");
    expect(renderToolDoc(byName(set, "get_annotated_message"))).toContain(
      'async function get_annotated_message(messageType: "error" | "success" | "debug", includeImage?: boolean): Promise<string>',
    );
  });

  it("calls them (positional arguments are mapped to the schema's keys)", async () => {
    expect(await byName(set, "echo").invoke({ message: "hi" }, ctx())).toBe("Echo: hi");
    expect(await byName(set, "get_sum").invoke({ a: 2, b: 3 }, ctx())).toMatch(/\b5\b/);
  });
});

describe.each([
  ["streamable HTTP", "http"],
  ["stdio", "stdio"],
] as const)("codehop's test MCP server over %s", (_label, kind) => {
  let http: McpTestServer | undefined;
  let set: McpToolSet;
  beforeAll(async () => {
    if (kind === "http") http = await startMcpTestServer();
    set = await connectMcpServers({
      test:
        kind === "http"
          ? { url: http!.url, timeoutMs: 2000 }
          : { ...MCP_TEST_SERVER_STDIO, timeoutMs: 2000 },
    });
  }, 60_000);
  afterAll(async () => {
    await set?.close();
    await http?.close();
  });

  it("offers every tool it can, with the first paragraph of the description", () => {
    expect(set.tools.map((t) => t.name)).toEqual([
      "lookup_word",
      "fail_always",
      "odd_schema",
      "weird_param",
      "double",
      "slow",
      "exit_now",
    ]);
    expect(renderToolDoc(byName(set, "lookup_word"))).toBe(
      "/** Looks a word up in the test dictionary.\n * @param word - the word\n * @param limit - max senses */\nasync function lookup_word(word: string, limit?: number): Promise<string>",
    );
    expect(set.problems).toEqual([
      'MCP server "test", tool "odd-schema": its input schema is not a plain object: one parameter `args` (an object)',
      expect.stringMatching(
        /^MCP server "test", tool "weird_param": parameter "filter": schema not rendered \(.+\); typed any$/,
      ),
      'MCP server "test": tool "print" skipped: tool name "print" is reserved: guest code already has a global of that name (set a "prefix")',
    ]);
  });

  it("passes calls through and returns text or structured content", async () => {
    expect(await byName(set, "lookup_word").invoke({ word: "hop", limit: 2 }, ctx())).toBe(
      "hop: a word (2 senses)",
    );
    expect(await byName(set, "double").invoke({ n: 21 }, ctx())).toEqual({ double: 42 });
    expect(renderToolDoc(byName(set, "double"))).toContain("Promise<{ double: number }>");
    expect(await byName(set, "odd_schema").invoke({ args: { b: 1 } }, ctx())).toBe('{"b":1}');
    expect(await byName(set, "weird_param").invoke({ q: "x", filter: [1] }, ctx())).toBe(
      '{"q":"x","filter":[1]}',
    );
  });

  it("a tool's error, a timeout: the call's error, with the tool's own message", async () => {
    await expect(byName(set, "fail_always").invoke({}, ctx())).rejects.toThrow(
      "fail_always() failed: quota exceeded for today",
    );
    await expect(byName(set, "slow").invoke({ ms: 5000 }, ctx())).rejects.toThrow(
      /slow\(\) failed: MCP server "test" returned an error: .*timed out/i,
    );
  });
});

describe("servers that fail", { timeout: 60_000 }, () => {
  it("a server that cannot start: CODEHOP_MCP_SERVER_FAILED naming it, with its stderr", async () => {
    const err = await connectMcpServers({
      broken: {
        command: process.execPath,
        args: ["-e", "console.error('missing API key'); process.exit(3)"],
      },
    }).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MCP_SERVER_FAILED);
    expect(err.message).toMatch(/^MCP server "broken" \(.+\) could not be started: /);
    expect(err.message).toContain("missing API key");
  });

  it("a program that does not exist, an HTTP endpoint nobody serves: the same, no crash", async () => {
    for (const config of [
      { command: "/nonexistent/mcp-server" },
      { url: "http://127.0.0.1:9/mcp", connectTimeoutMs: 3000 },
    ]) {
      const err = await connectMcpServers({ gone: config }).catch((e) => e);
      expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MCP_SERVER_FAILED);
      expect(err.message).toMatch(/^MCP server "gone" \(.+\) could not be started: /);
    }
  });

  it("a server that dies during a run: that call and later ones fail with a clear error", async () => {
    const set = await connectMcpServers({ test: MCP_TEST_SERVER_STDIO });
    try {
      await expect(byName(set, "exit_now").invoke({}, ctx())).rejects.toThrow(
        /exit_now\(\) failed: MCP server "test" is not running/,
      );
      await expect(byName(set, "lookup_word").invoke({ word: "x" }, ctx())).rejects.toThrow(
        /lookup_word\(\) failed: MCP server "test" is not running/,
      );
    } finally {
      await set.close();
    }
  });
});
