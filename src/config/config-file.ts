import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * codehop's configuration file, `codehop.config.json`: what does not fit an environment variable
 * (MCP servers and their tools). Looked up, first found wins:
 *
 * 1. the file CODEHOP_CONFIG names (it must exist);
 * 2. `codehop.config.json` in the current directory (the project);
 * 3. `codehop.config.json` in the data directory (CODEHOP_HOME, default `.codehop`).
 *
 * JSON, validated by {@link CodehopConfigFileSchema}; a file that is not JSON or does not match
 * fails with CODEHOP_CONFIG_INVALID naming the file and every problem, when a run reads it.
 */

/** The configuration file's name. */
export const CONFIG_FILE_NAME = "codehop.config.json";

/** When a tool's calls need a human's approval: every call, none. */
const approvalWord = z.enum(["always", "never"]);

const serverCommon = {
  /**
   * Prefix of the server's tool names in code (`"fs_"` → `fs_read_file`). Default none: a tool's
   * name is its MCP name with characters JavaScript names cannot hold replaced by `_`.
   */
  prefix: z
    .string()
    .regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/, "must start a JavaScript name (letters, digits, _ or $)")
    .optional(),
  /** Only these tools (MCP names); default every tool the server lists. */
  tools: z.array(z.string().min(1)).optional(),
  /**
   * Human approval of calls: `"always"`, `"never"` (default), or per tool (MCP names) with
   * `"*"` for the others: `{ "write_file": "always", "*": "never" }`.
   */
  approval: z.union([approvalWord, z.record(z.string(), approvalWord)]).optional(),
  /** Agents whose code gets the tools (agent names); default the app's first agent. */
  agents: z.array(z.string().min(1)).min(1).optional(),
  /** Milliseconds one tool call may take (default 60000). */
  timeoutMs: z.number().int().positive().optional(),
  /** Milliseconds to start and list the tools (default 20000). */
  connectTimeoutMs: z.number().int().positive().optional(),
};

/** An MCP server started as a child process speaking over stdin/stdout. */
export const McpStdioServerSchema = z.strictObject({
  /** The program, e.g. "npx" or "node". */
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  /** Environment variables for the server (added to a minimal safe environment). */
  env: z.record(z.string(), z.string()).optional(),
  /** Working directory (default the current one). */
  cwd: z.string().optional(),
  ...serverCommon,
});

/** An MCP server reached over streamable HTTP. */
export const McpHttpServerSchema = z.strictObject({
  /** The MCP endpoint, e.g. "http://127.0.0.1:3001/mcp". */
  url: z.url({ protocol: /^https?$/ }),
  /** HTTP headers sent with every request (e.g. Authorization). */
  headers: z.record(z.string(), z.string()).optional(),
  ...serverCommon,
});

/** One MCP server: `command` (stdio) or `url` (streamable HTTP). */
export const McpServerConfigSchema = z.union([McpStdioServerSchema, McpHttpServerSchema]);

/** One MCP server's configuration (see {@link McpServerConfigSchema}). */
export type McpServerConfig = z.infer<typeof McpServerConfigSchema>;

/** Server names: letters, digits, `_` and `-` (they label tools and messages). */
const serverName = z.string().regex(/^[A-Za-z0-9_-]+$/, "letters, digits, _ and - only");

/**
 * A knowledge source the operator names for clients of served graphs (`context.source` picks it
 * by name): a corpus DB made by `codehop ingest` (a relative path is relative to the
 * configuration file), online Wikipedia (`true`, or a MediaWiki API URL for a mirror), or a list of
 * sources (`web`, `wikipedia`, `corpus`: the open web, and mixes such as web + a corpus).
 */
export const KnowledgeSourceConfigSchema = z.union([
  z.strictObject({ corpus: z.string().min(1) }),
  z.strictObject({ wikipedia: z.union([z.literal(true), z.url({ protocol: /^https?$/ })]) }),
  // The open web and mixes (`{ "sources": ["web", "corpus"], "corpus": "docs.db" }`): searched with
  // the operator's web settings and domain lists (CODEHOP_SEARCH_*, CODEHOP_WEB_*).
  z.strictObject({
    sources: z.array(z.enum(["web", "wikipedia", "corpus"])).min(1),
    corpus: z.string().min(1).optional(),
  }),
]);

/** One named knowledge source (see {@link KnowledgeSourceConfigSchema}). */
export type KnowledgeSourceConfig = z.infer<typeof KnowledgeSourceConfigSchema>;

/** The configuration file's schema. */
export const CodehopConfigFileSchema = z.strictObject({
  /** Optional JSON Schema reference for editors. */
  $schema: z.string().optional(),
  /**
   * MCP servers by name, in the format other MCP clients use (`command`/`args`/`env`, or `url`),
   * plus codehop's keys (`prefix`, `tools`, `approval`, `agents`, `timeoutMs`).
   */
  mcpServers: z.record(serverName, McpServerConfigSchema).optional(),
  /**
   * The operator's registry of knowledge sources, by name: what a client of a served graph may
   * choose with `context.source` (clients never give paths).
   */
  knowledgeSources: z.record(serverName, KnowledgeSourceConfigSchema).optional(),
});

/** The configuration file's content. */
export type CodehopConfigFile = z.infer<typeof CodehopConfigFileSchema>;

/** Which configuration file applies: the explicit one, else the project's, else the home's. */
export function findConfigFile(where: {
  /** CODEHOP_CONFIG, when set. */
  explicit?: string;
  /** The project directory (default the current one). */
  cwd?: string;
  /** The data directory (CODEHOP_HOME). */
  home: string;
}): string | undefined {
  if (where.explicit) {
    const path = resolve(where.explicit);
    if (!existsSync(path)) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `CODEHOP_CONFIG names ${path}, which does not exist.`,
      );
    }
    return path;
  }
  for (const dir of [where.cwd ?? process.cwd(), where.home]) {
    const path = resolve(join(dir, CONFIG_FILE_NAME));
    if (existsSync(path)) return path;
  }
  return undefined;
}

/**
 * Reads and validates a configuration file. CODEHOP_CONFIG_INVALID names the file and each problem
 * (`mcpServers.fs.command: ...`) when it is not JSON or does not match the schema.
 */
export function readConfigFile(path: string): CodehopConfigFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Cannot read the configuration file ${path}: ${(err as Error).message}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `The configuration file ${path} is not valid JSON: ${(err as Error).message}`,
    );
  }
  return parseConfig(json, path);
}

/** Validates a configuration object (`where` names it in messages). */
export function parseConfig(value: unknown, where = "configuration"): CodehopConfigFile {
  const parsed = CodehopConfigFileSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => {
    const path = i.path.join(".") || "(top level)";
    // A server that matches neither form: say what each needs instead of zod's union dump.
    if (i.code === "invalid_union" && i.path[0] === "knowledgeSources")
      return `${path}: a knowledge source is { "corpus": "<db path>" } or { "wikipedia": true | "<MediaWiki API URL>" }`;
    if (i.code === "invalid_union" && i.path[0] === "mcpServers")
      return `${path}: a server needs "command" (stdio) or "url" (streamable HTTP), and only the keys of that form`;
    return `${path}: ${i.message}`;
  });
  throw new CodehopError(
    ErrorCodes.CONFIG_INVALID,
    `Invalid ${where}:\n  ${problems.join("\n  ")}`,
  );
}
