import type { z } from "zod";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { CodeTool } from "../tools/define-tool.ts";
import type { CodeAgent, CodeAgentInputMapping } from "./code-agent.ts";

/** What a team member's `create` gets: the registry's facts about it and what it needs to build. */
export interface MemberBuild<Deps> {
  /** The member's name (agent name, graph name, usage key, label in trees and histories). */
  name: string;
  /** The member's prompt folder under prompts/. */
  prompts: string;
  /** The app's dependencies (model, sandbox, sources ...), as given to {@link buildTeam}. */
  deps: Deps;
  /** Its children's tools, in the registry's order: the agents its code may call. */
  children: readonly CodeTool<any>[];
  /** The app's input mapping when the member is built as the root of the app's graph. */
  input?: CodeAgentInputMapping<any>;
  /** The app's run-context schema (the team's `contextSchema`), if it has one. */
  contextSchema?: z.ZodObject;
}

/**
 * What every member passes on to createCodeAgent unchanged: its registry facts (name, prompts, the
 * root's input, the team's run-context schema) and the app's model, sandbox and fallback journal.
 */
export function memberBase<Deps extends { model?: unknown; sandbox?: unknown; journal?: unknown }>(
  build: MemberBuild<Deps>,
): {
  name: string;
  prompts: string;
  model?: Deps["model"];
  sandbox?: Deps["sandbox"];
  journal?: Deps["journal"];
  input?: CodeAgentInputMapping<any>;
  contextSchema?: z.ZodObject;
} {
  const { name, prompts, deps, input, contextSchema } = build;
  return {
    name,
    prompts,
    ...(contextSchema ? { contextSchema } : {}),
    ...(deps.model === undefined ? {} : { model: deps.model }),
    ...(deps.sandbox === undefined ? {} : { sandbox: deps.sandbox }),
    ...(deps.journal === undefined ? {} : { journal: deps.journal }),
    ...(input ? { input } : {}),
  };
}

/** One agent of a team, as its registry lists it. */
export interface TeamMember<Deps = any> {
  /** Agent name: letters, digits, _ and -; unique in the team. */
  readonly name: string;
  /** Prompt folder under prompts/ (each missing file falls back to prompts/code_agent/). */
  readonly prompts: string;
  /** Members this agent calls (as their `tool`), in the order its code sees them. */
  readonly children: readonly string[];
  /** Builds the agent. Pass `name`, `prompts` and `input` on to createCodeAgent. */
  create(build: MemberBuild<Deps>): CodeAgent<any, any>;
  /** How a parent calls this agent: a tool made from the built agent (needed for a child). */
  tool?(agent: CodeAgent, deps: Deps): CodeTool<any>;
}

/** A team registry: the agents of one app and who calls whom. */
export interface Team<Deps = any> {
  /** App name, e.g. "qa". */
  readonly name: string;
  /** The agent the app talks to. */
  readonly root: string;
  /** Every agent, each once. */
  readonly members: readonly TeamMember<Deps>[];
  /** The input of the app's root graph (e.g. `{ question }`), mapped to the root agent's task. */
  readonly input?: CodeAgentInputMapping<any>;
  /** The run-context schema of the app's agents: `RunContextSchema` extended with the app's keys. */
  readonly contextSchema?: z.ZodObject;
}

/**
 * Checks a team registry and returns it: unique valid names, a root that exists, children that
 * exist and have a `tool`, and no cycle (an agent cannot reach itself through its children).
 * Throws CODEHOP_CONFIG_INVALID naming the problem.
 */
export function defineTeam<Deps>(team: Team<Deps>): Team<Deps> {
  const fail = (why: string) =>
    new CodehopError(ErrorCodes.CONFIG_INVALID, `Team "${team.name}": ${why}`);
  const byName = new Map<string, TeamMember<Deps>>();
  for (const m of team.members) {
    if (!/^[A-Za-z][A-Za-z0-9_-]*$/.test(m.name ?? ""))
      throw fail(`agent name "${m.name}" must start with a letter (letters, digits, _ and -)`);
    if (byName.has(m.name)) throw fail(`two agents are named "${m.name}"`);
    byName.set(m.name, m);
  }
  if (!byName.has(team.root)) throw fail(`the root "${team.root}" is not a member`);
  for (const m of team.members) {
    for (const child of m.children) {
      const c = byName.get(child);
      if (!c) throw fail(`"${m.name}" calls "${child}", which is not a member`);
      if (!c.tool) throw fail(`"${m.name}" calls "${child}", which has no \`tool\``);
    }
  }
  const visiting = new Set<string>();
  const done = new Set<string>();
  const visit = (name: string, path: string[]) => {
    if (done.has(name)) return;
    if (visiting.has(name)) throw fail(`a cycle: ${[...path, name].join(" → ")}`);
    visiting.add(name);
    for (const child of byName.get(name)!.children) visit(child, [...path, name]);
    visiting.delete(name);
    done.add(name);
  };
  for (const m of team.members) visit(m.name, []);
  return team;
}

/** A member by name (CODEHOP_CONFIG_INVALID naming the members when there is none). */
export function teamMember<Deps>(team: Team<Deps>, name: string): TeamMember<Deps> {
  const member = team.members.find((m) => m.name === name);
  if (!member) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `Team "${team.name}" has no agent "${name}" (agents: ${team.members.map((m) => m.name).join(", ")})`,
    );
  }
  return member;
}

/**
 * Builds `name` (default: the root) and the agents below it, each once. The root of the team is
 * built with the team's input mapping when `withInput` is set (the app's graph); any other member
 * takes the default `{ task, context? }` input.
 */
export function buildTeamAgent<Deps>(
  team: Team<Deps>,
  deps: Deps,
  options: { name?: string; withInput?: boolean } = {},
): CodeAgent<any, any> {
  const name = options.name ?? team.root;
  const built = new Map<string, CodeAgent>();
  const build = (member: TeamMember<Deps>, input?: CodeAgentInputMapping<any>): CodeAgent => {
    const cached = input ? undefined : built.get(member.name);
    if (cached) return cached;
    const children = member.children.map((child) => {
      const c = teamMember(team, child);
      return c.tool!(build(c), deps);
    });
    const agent = member.create({
      name: member.name,
      prompts: member.prompts,
      deps,
      children,
      ...(input ? { input } : {}),
      ...(team.contextSchema ? { contextSchema: team.contextSchema } : {}),
    });
    if (agent.name !== member.name) {
      throw new CodehopError(
        ErrorCodes.CONFIG_INVALID,
        `Team "${team.name}": member "${member.name}" built an agent named "${agent.name}" (pass the registry's name to createCodeAgent)`,
      );
    }
    if (!input) built.set(member.name, agent);
    return agent;
  };
  const input = options.withInput && name === team.root ? team.input : undefined;
  return build(teamMember(team, name), input);
}

/** Every agent name of the team, depth first from the root, then members not reachable from it. */
export function teamAgentNames(team: Team): string[] {
  const out: string[] = [];
  const visit = (name: string) => {
    if (out.includes(name)) return;
    out.push(name);
    for (const child of teamMember(team, name).children) visit(child);
  };
  visit(team.root);
  for (const m of team.members) visit(m.name);
  return out;
}

/** The prompt folders the team renders from (its members', plus the defaults they fall back to). */
export function teamPromptFolders(team: Team): string[] {
  return [...new Set([...team.members.map((m) => m.prompts), "code_agent", "managed_agent"])];
}

/**
 * The team with one more member, called by `parent` (appended to its children) — how a test or an
 * app extends a registry without editing its agents' files.
 */
export function withTeamMember<Deps>(
  team: Team<Deps>,
  member: TeamMember<Deps>,
  options: { parent: string },
): Team<Deps> {
  teamMember(team, options.parent);
  return defineTeam({
    ...team,
    members: [
      ...team.members.map((m) =>
        m.name === options.parent ? { ...m, children: [...m.children, member.name] } : m,
      ),
      member,
    ],
  });
}
