/**
 * Tools from MCP servers as code tools: each tool a server lists becomes an async function the
 * agent's code calls (`await read_file({ path })`), rendered into the prompt like a native tool from
 * a zod schema converted from the tool's JSON Schema. Servers are reached with the official
 * TypeScript SDK (@modelcontextprotocol/sdk) over stdio (a child process) or streamable HTTP.
 *
 * Failures are the model's to handle where they can be: a tool that reports an error, a call that
 * times out, a server that died after the run started — each is the call's error (an observation).
 * A server that cannot be started or listed when a run opens it is a CODEHOP_MCP_SERVER_FAILED
 * error naming the server and why (with the end of its stderr). A tool whose schema cannot be
 * converted is still offered: the parameters that cannot be rendered are typed `any` and checked
 * by the server; the problems are listed in {@link McpToolSet.problems}.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { z } from "zod";
import type { McpServerConfig } from "../config/config-file.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { toolNameProblem } from "../sandbox/contract.ts";
import { type ApprovalPolicy, type CodeTool, defineTool, tsType } from "./define-tool.ts";

/** Default milliseconds one MCP tool call may take. */
export const MCP_CALL_TIMEOUT_MS = 60_000;
/** Default milliseconds to start a server and list its tools. */
export const MCP_CONNECT_TIMEOUT_MS = 20_000;
/** Characters of a tool's description kept for the prompt (small models, short prompts). */
const MAX_DESCRIPTION_CHARS = 600;
/** Characters of a stdio server's stderr kept for error messages. */
const STDERR_TAIL_CHARS = 2000;

/**
 * Approval of an MCP server's calls, from the API: a policy for every tool, or policies by tool
 * name (MCP name or its name in code; `"*"` for the others; default `"never"`).
 */
export type McpApproval = ApprovalPolicy | Readonly<Record<string, ApprovalPolicy>>;

/** One MCP server as the API takes it: the configuration file's form, approval may be a function. */
export type McpServerOptions = McpServerConfig extends infer C
  ? C extends unknown
    ? Omit<C, "approval"> & { approval?: McpApproval }
    : never
  : never;

/** The tools of one connected server. */
export interface McpServerTools {
  /** The server's name (its key in `mcpServers`). */
  readonly server: string;
  /** Its tools as code tools. */
  readonly tools: readonly CodeTool<any>[];
  /** The agents that get them (from the configuration; undefined = the app's default). */
  readonly agents?: readonly string[];
}

/** Connected MCP servers and their tools. Close it when the run ends (stops stdio servers). */
export interface McpToolSet {
  readonly servers: readonly McpServerTools[];
  /** Every tool of every server. */
  readonly tools: readonly CodeTool<any>[];
  /** What could not be offered as configured (tools skipped, parameters typed `any`), one line each. */
  readonly problems: readonly string[];
  close(): Promise<void>;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A JavaScript name for an MCP tool name: characters a name cannot hold become `_`. */
export function codeNameOf(mcpName: string, prefix = ""): string {
  const name = `${prefix}${mcpName.replace(/[^A-Za-z0-9_$]/g, "_")}`;
  return /^[0-9]/.test(name) ? `_${name}` : name;
}

/** The first paragraph of a description, capped, for the prompt. */
function shortDescription(text: string | undefined, fallback: string): string {
  const first =
    (text ?? "")
      .trim()
      .split(/\n\s*\n/)[0]
      ?.replace(/\s+/g, " ") ?? "";
  if (!first) return fallback;
  if (first.length <= MAX_DESCRIPTION_CHARS) return first;
  const cut = first.slice(0, MAX_DESCRIPTION_CHARS);
  const sentence = cut.lastIndexOf(". ");
  return sentence > 100 ? cut.slice(0, sentence + 1) : `${cut}…`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Zod parameters for a tool's input JSON Schema, in the schema's property order. Each property is
 * converted with zod's `fromJSONSchema` (the whole schema first, so `$ref`s resolve); a property that
 * cannot be is typed `any` and left to the server to check. A schema that is not an object with
 * properties (e.g. a top-level `oneOf`) becomes one parameter `args`, passed through as the call's
 * arguments.
 */
export function parametersFromJsonSchema(schema: unknown): {
  parameters: z.ZodObject;
  /** Pass the `args` parameter through as the arguments (schema not an object with properties). */
  passThrough: boolean;
  problems: string[];
} {
  const problems: string[] = [];
  const root = isObject(schema) ? schema : {};
  const properties = isObject(root.properties) ? (root.properties as Record<string, unknown>) : {};
  const required = new Set(Array.isArray(root.required) ? root.required.map(String) : []);
  const composite = ["oneOf", "anyOf", "allOf", "$ref"].some((k) => k in root);
  if (composite || (Object.keys(properties).length === 0 && root.additionalProperties === true)) {
    problems.push("its input schema is not a plain object: one parameter `args` (an object)");
    return {
      parameters: z.object({
        args: z.record(z.string(), z.unknown()).describe("the arguments, as the server expects"),
      }),
      passThrough: true,
      problems,
    };
  }
  let converted: Record<string, z.ZodType> = {};
  try {
    const whole = z.fromJSONSchema({ ...root, type: "object" } as any) as z.ZodType;
    const shape = (whole as any)?._zod?.def?.shape;
    if (shape && typeof shape === "object") converted = shape as Record<string, z.ZodType>;
  } catch {
    // Property by property below.
  }
  const shape: Record<string, z.ZodType> = {};
  for (const [key, prop] of Object.entries(properties)) {
    let field = converted[key];
    if (!field) {
      try {
        field = z.fromJSONSchema(prop as any) as z.ZodType;
      } catch (err) {
        problems.push(`parameter "${key}": schema not rendered (${errorText(err)}); typed any`);
        field = z.any();
      }
    }
    const description =
      isObject(prop) && typeof prop.description === "string" ? prop.description : undefined;
    // fromJSONSchema makes non-required keys optional; make sure of it either way.
    const def = (field as any)._zod?.def;
    let inner = def?.type === "optional" ? (def.innerType as z.ZodType) : field;
    if (description && !(inner as any).description) inner = inner.describe(description);
    shape[key] = required.has(key) ? inner : inner.optional();
  }
  return { parameters: z.object(shape), passThrough: false, problems };
}

/** The TypeScript type shown for a JSON Schema (tool results), `object` when it cannot be told. */
function returnTypeOf(schema: unknown): string {
  if (!isObject(schema)) return "string";
  try {
    const type = tsType(z.fromJSONSchema(schema as any) as z.ZodType);
    return type === "any" ? "object" : type;
  } catch {
    return "object";
  }
}

/** The text of a tool result's content blocks (text as is, other blocks named). */
function contentText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .map((block: any) => {
      if (block?.type === "text") return String(block.text ?? "");
      if (block?.type === "image" || block?.type === "audio")
        return `[${block.type}: ${block.mimeType ?? "unknown type"}, ${String(block.data ?? "").length} base64 chars]`;
      if (block?.type === "resource")
        return block.resource?.text ?? `[resource: ${block.resource?.uri ?? "?"}]`;
      if (block?.type === "resource_link") return `[resource link: ${block.uri ?? "?"}]`;
      return `[${block?.type ?? "unknown"} content]`;
    })
    .join("\n");
}

function approvalFor(approval: McpApproval | undefined, mcpName: string, codeName: string) {
  if (approval === undefined || typeof approval === "string" || typeof approval === "function")
    return approval;
  return approval[mcpName] ?? approval[codeName] ?? approval["*"];
}

/** A live connection to one MCP server. */
interface Connection {
  client: Client;
  /** The end of a stdio server's stderr (for messages). */
  stderrTail(): string;
  close(): Promise<void>;
}

function transportFor(config: McpServerOptions): {
  transport: Transport;
  stderrTail(): string;
} {
  if ("url" in config) {
    return {
      transport: new StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: config.headers ? { headers: config.headers } : undefined,
      }),
      stderrTail: () => "",
    };
  }
  const transport = new StdioClientTransport({
    command: config.command,
    args: config.args ?? [],
    ...(config.env ? { env: config.env } : {}),
    ...(config.cwd ? { cwd: config.cwd } : {}),
    // Piped, not inherited: a server's log lines would tear the live tree apart.
    stderr: "pipe",
  });
  let tail = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
  });
  return { transport, stderrTail: () => tail.trim() };
}

async function connect(name: string, config: McpServerOptions): Promise<Connection> {
  const { transport, stderrTail } = transportFor(config);
  const client = new Client({ name: "codehop", version: "0.1.0" });
  const timeout = config.connectTimeoutMs ?? MCP_CONNECT_TIMEOUT_MS;
  try {
    await client.connect(transport, { timeout });
  } catch (err) {
    await client.close().catch(() => {});
    const where = "url" in config ? config.url : [config.command, ...(config.args ?? [])].join(" ");
    const tail = stderrTail();
    throw new CodehopError(
      ErrorCodes.MCP_SERVER_FAILED,
      `MCP server "${name}" (${where}) could not be started: ${errorText(err)}${tail ? `\nIts stderr ends with:\n${tail}` : ""}`,
      { cause: err },
    );
  }
  return { client, stderrTail, close: () => client.close().catch(() => {}) };
}

/** The code tools of one connected server. */
async function toolsOf(
  name: string,
  config: McpServerOptions,
  connection: Connection,
  problems: string[],
): Promise<CodeTool<any>[]> {
  let listed: Awaited<ReturnType<Client["listTools"]>>["tools"] = [];
  try {
    let cursor: string | undefined;
    do {
      const page = await connection.client.listTools(cursor ? { cursor } : undefined, {
        timeout: config.connectTimeoutMs ?? MCP_CONNECT_TIMEOUT_MS,
      });
      listed = listed.concat(page.tools);
      cursor = page.nextCursor;
    } while (cursor);
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.MCP_SERVER_FAILED,
      `MCP server "${name}" started but did not list its tools: ${errorText(err)}`,
      { cause: err },
    );
  }
  const wanted = config.tools ? new Set(config.tools) : undefined;
  if (wanted) {
    const missing = [...wanted].filter((t) => !listed.some((l) => l.name === t));
    if (missing.length)
      problems.push(
        `MCP server "${name}": no tool ${missing.map((t) => `"${t}"`).join(", ")} (it has ${listed.map((t) => t.name).join(", ")})`,
      );
  }
  const tools: CodeTool<any>[] = [];
  const taken = new Set<string>();
  for (const def of listed) {
    if (wanted && !wanted.has(def.name)) continue;
    const codeName = codeNameOf(def.name, config.prefix);
    const nameProblem = toolNameProblem(codeName);
    if (nameProblem || taken.has(codeName)) {
      problems.push(
        `MCP server "${name}": tool "${def.name}" skipped: ${nameProblem ?? `another of its tools is also named ${codeName}`} (set a "prefix")`,
      );
      continue;
    }
    taken.add(codeName);
    const {
      parameters,
      passThrough,
      problems: schemaProblems,
    } = parametersFromJsonSchema(def.inputSchema);
    for (const p of schemaProblems) problems.push(`MCP server "${name}", tool "${def.name}": ${p}`);
    const hasOutputSchema = isObject(def.outputSchema);
    const timeout = config.timeoutMs ?? MCP_CALL_TIMEOUT_MS;
    const approval = approvalFor(config.approval, def.name, codeName);
    tools.push(
      defineTool({
        name: codeName,
        description: shortDescription(
          def.description ?? def.title,
          `${def.name} (MCP server ${name})`,
        ),
        parameters,
        returns: hasOutputSchema ? returnTypeOf(def.outputSchema) : "string",
        parametersJsonSchema: isObject(def.inputSchema) ? def.inputSchema : undefined,
        origin: { mcpServer: name, mcpTool: def.name },
        ...(approval === undefined ? {} : { approval: approval as ApprovalPolicy<any> }),
        invoke: async (args, ctx) => {
          const callArgs = passThrough
            ? (args.args as Record<string, unknown>)
            : Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined));
          let result: Awaited<ReturnType<Client["callTool"]>>;
          try {
            result = await connection.client.callTool(
              { name: def.name, arguments: callArgs },
              undefined,
              { signal: ctx.signal, timeout },
            );
          } catch (err) {
            const tail = connection.stderrTail();
            throw new Error(
              `${codeName}() failed: MCP server "${name}" ${/closed|not connected/i.test(errorText(err)) ? "is not running" : "returned an error"}: ${errorText(err)}${tail && /closed|not connected/i.test(errorText(err)) ? ` (its stderr ends with: ${tail.slice(-300)})` : ""}`,
              { cause: err },
            );
          }
          if (result.isError) {
            throw new Error(
              `${codeName}() failed: ${contentText(result.content) || "the tool reported an error"}`,
            );
          }
          if (hasOutputSchema && result.structuredContent !== undefined)
            return result.structuredContent;
          return contentText(result.content);
        },
      }),
    );
  }
  return tools;
}

/**
 * Connects to MCP servers (all at once) and turns their tools into code tools. A server that
 * cannot be started or listed fails the whole call with CODEHOP_MCP_SERVER_FAILED (the others are
 * closed again).
 */
export async function connectMcpServers(
  servers: Readonly<Record<string, McpServerOptions>>,
): Promise<McpToolSet> {
  const entries = Object.entries(servers);
  const settled = await Promise.allSettled(entries.map(([name, config]) => connect(name, config)));
  const connections = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const close = async () => {
    await Promise.all(connections.map((c) => c.close()));
  };
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    await close();
    throw failed.reason;
  }
  const problems: string[] = [];
  try {
    const listed: McpServerTools[] = [];
    for (const [i, [name, config]] of entries.entries()) {
      const tools = await toolsOf(name, config, connections[i], problems);
      listed.push({ server: name, tools, ...(config.agents ? { agents: config.agents } : {}) });
    }
    return { servers: listed, tools: listed.flatMap((s) => s.tools), problems, close };
  } catch (err) {
    await close();
    throw err;
  }
}
