import { findConfigFile, readConfigFile } from "../config/config-file.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { Team } from "../framework/team.ts";
import type { CodeTool } from "../tools/define-tool.ts";
import type { McpServerOptions } from "../tools/mcp.ts";
import type { RunOptions } from "./app.ts";
import type { AppConfig } from "./config.ts";

/** The MCP tools of one run: by agent name for the run context, and how to close the servers. */
export interface RunMcp {
  agentTools: Record<string, CodeTool<any>[]>;
  close(): Promise<void>;
}

/**
 * The MCP servers a run uses: the configuration file's (src/config/config-file.ts), then the
 * API's `mcpServers`, which win by server name.
 */
export function mcpServersFor(
  config: AppConfig,
  options: Pick<RunOptions, "mcpServers">,
): Record<string, McpServerOptions> {
  const path = findConfigFile({ explicit: config.configFile, home: config.home });
  const fromFile = path ? (readConfigFile(path).mcpServers ?? {}) : {};
  return { ...fromFile, ...(options.mcpServers ?? {}) };
}

/**
 * Connects the run's MCP servers and gives each server's tools to its agents (its `agents`, else
 * the team's root agent). Undefined when no server is configured. Tools that could not be offered
 * as configured are reported through `options.onWarning`.
 */
export async function openRunMcp(
  config: AppConfig,
  options: RunOptions,
  team: Team,
): Promise<RunMcp | undefined> {
  const servers = mcpServersFor(config, options);
  if (!Object.keys(servers).length) return undefined;
  const agents = new Set(team.members.map((m) => m.name));
  for (const [name, server] of Object.entries(servers)) {
    const unknown = (server.agents ?? []).filter((a) => !agents.has(a));
    if (unknown.length) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `MCP server "${name}": no agent ${unknown.map((a) => `"${a}"`).join(", ")} in app "${team.name}" (agents: ${[...agents].join(", ")})`,
      );
    }
  }
  // The MCP SDK only for a run with servers: every other run (and command) starts without it.
  const { connectMcpServers } = await import("../tools/mcp.ts");
  const set = await connectMcpServers(servers);
  for (const problem of set.problems) options.onWarning?.(problem);
  const agentTools: Record<string, CodeTool<any>[]> = {};
  for (const server of set.servers)
    for (const agent of server.agents ?? [team.root])
      (agentTools[agent] ??= []).push(...server.tools);
  return { agentTools, close: () => set.close() };
}
