/**
 * A small MCP server for tests, built with the official SDK's low-level `Server` (so every tool's
 * JSON Schema is exactly as written here): reachable over streamable HTTP in-process
 * ({@link startMcpTestServer}) or over stdio as a child process (run this file with
 * `node --import tsx src/testing/mcp-test-server.ts`, see {@link MCP_TEST_SERVER_STDIO}).
 *
 * Its tools cover what codehop must survive: a plain tool, one that reports an error, schemas that
 * cannot be rendered as is (top-level `oneOf`, a dangling `$ref`), structured output, a slow call,
 * a name that is reserved in guest code (`print`), a tool whose call kills the server.
 */
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

/** Command and arguments that start the test server over stdio (from the repository root). */
export const MCP_TEST_SERVER_STDIO = {
  command: process.execPath,
  args: ["--import", "tsx", fileURLToPath(import.meta.url)],
};

const TOOLS = [
  {
    name: "lookup_word",
    description: "Looks a word up in the test dictionary.\n\nSecond paragraph, not for the prompt.",
    inputSchema: {
      type: "object",
      properties: {
        word: { type: "string", description: "the word" },
        limit: { type: "integer", description: "max senses" },
      },
      required: ["word"],
    },
  },
  {
    name: "fail_always",
    description: "Always reports an error.",
    inputSchema: { type: "object", properties: {} },
  },
  {
    name: "odd-schema",
    description: "Takes one of two argument shapes.",
    inputSchema: {
      type: "object",
      oneOf: [
        { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
        { type: "object", properties: { b: { type: "number" } }, required: ["b"] },
      ],
    },
  },
  {
    name: "weird_param",
    description: "Has a parameter whose schema points nowhere.",
    inputSchema: {
      type: "object",
      properties: {
        q: { type: "string" },
        filter: { $ref: "#/definitions/missing" },
      },
      required: ["q"],
    },
  },
  {
    name: "double",
    description: "Doubles a number (structured output).",
    inputSchema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
    outputSchema: {
      type: "object",
      properties: { double: { type: "number" } },
      required: ["double"],
    },
  },
  {
    name: "slow",
    description: "Waits before answering.",
    inputSchema: { type: "object", properties: { ms: { type: "number" } }, required: ["ms"] },
  },
  {
    name: "print",
    description: "A tool whose name guest code already has.",
    inputSchema: { type: "object", properties: {} },
  },
  {
    name: "exit_now",
    description: "Stops the server (stdio only).",
    inputSchema: { type: "object", properties: {} },
  },
];

const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] });

/** A new test server (one per connection: the SDK binds a Server to one transport). */
export function createMcpTestServer(): Server {
  const server = new Server(
    { name: "codehop-test", version: "1.0.0" },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS as any }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const args = (request.params.arguments ?? {}) as Record<string, any>;
    switch (request.params.name) {
      case "lookup_word":
        return text(`${args.word}: a word (${args.limit ?? "all"} senses)`);
      case "fail_always":
        return { ...text("quota exceeded for today"), isError: true };
      case "odd-schema":
      case "weird_param":
        return text(JSON.stringify(args));
      case "double":
        return {
          ...text(String(args.n * 2)),
          structuredContent: { double: args.n * 2 },
        };
      case "slow":
        await new Promise((r) => setTimeout(r, Number(args.ms)));
        return text("done");
      case "exit_now":
        process.exit(1);
        break;
      case "print":
        return text("printed");
    }
    return { ...text(`unknown tool ${request.params.name}`), isError: true };
  });
  return server;
}

/** A running HTTP test server. */
export interface McpTestServer {
  /** Its MCP endpoint, e.g. http://127.0.0.1:PORT/mcp. */
  url: string;
  close(): Promise<void>;
}

/** Starts the test server over streamable HTTP on 127.0.0.1 (stateless: a server per request). */
export async function startMcpTestServer(): Promise<McpTestServer> {
  const http: HttpServer = createServer(async (req, res) => {
    if (!req.url?.startsWith("/mcp")) {
      res.writeHead(404).end();
      return;
    }
    const server = createMcpTestServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

// Run as a program: serve over stdio.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await createMcpTestServer().connect(new StdioServerTransport());
}
