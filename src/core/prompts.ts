import { existsSync } from "node:fs";
import { join } from "node:path";
import { PROMPTS_DIR, loadPrompt, renderTemplate } from "../prompts/render.ts";
import { type CodeTool, renderToolDoc } from "../tools/define-tool.ts";

/**
 * The prompt templates of one code agent. Defaults live in prompts/code_agent/ and
 * prompts/managed_agent/; an agent can override any of them with its own folder
 * (`loadPromptSet("manager")` reads prompts/manager/<file>, falling back per file) or with template
 * text. All are rendered strictly: a missing or unknown placeholder throws CODEHOP_PROMPT_TEMPLATE.
 */
export interface CodeAgentPrompts {
  /** system.md — {{agent_name}} {{agent_description}} {{capabilities}} {{tool_docs}} {{managed_agents}} */
  system: string;
  /** task.md — first user message: {{task}} */
  task: string;
  /** planning.md — system prompt of planning steps: {{agent_name}} {{agent_description}} {{tool_docs}} {{managed_agents}} */
  planning: string;
  /** final_answer.md — system prompt of the final-answer prompt: {{agent_name}} {{agent_description}} */
  finalAnswer: string;
  /** final_answer_request.md — last user message of the final-answer prompt: {{task}} */
  finalAnswerRequest: string;
  /** managed_agent/task.md — wraps a manager's task for an agent used as a tool: {{name}} {{task}} */
  managedTask: string;
}

/** File name of each prompt inside a prompt folder. */
export const PROMPT_FILES: Record<keyof CodeAgentPrompts, string> = {
  system: "system.md",
  task: "task.md",
  planning: "planning.md",
  finalAnswer: "final_answer.md",
  finalAnswerRequest: "final_answer_request.md",
  managedTask: "task.md",
};

/**
 * Loads a prompt set. `dir` (a folder under prompts/) overrides the defaults file by file;
 * `managedTask` comes from `<dir>/managed_task.md` or prompts/managed_agent/task.md.
 */
export function loadPromptSet(dir?: string): CodeAgentPrompts {
  const pick = (file: string, fallback: string) =>
    dir && existsSync(join(PROMPTS_DIR, dir, file))
      ? loadPrompt(join(dir, file))
      : loadPrompt(fallback);
  return {
    system: pick("system.md", "code_agent/system.md"),
    task: pick("task.md", "code_agent/task.md"),
    planning: pick("planning.md", "code_agent/planning.md"),
    finalAnswer: pick("final_answer.md", "code_agent/final_answer.md"),
    finalAnswerRequest: pick("final_answer_request.md", "code_agent/final_answer_request.md"),
    managedTask: pick("managed_task.md", "managed_agent/task.md"),
  };
}

/** What the agent's prompts are rendered from. */
export interface PromptContext {
  agentName: string;
  agentDescription: string;
  tools: readonly CodeTool<any>[];
  capabilities: readonly string[];
}

/** Plain tools as JSDoc + signatures ("(no tools: use plain JavaScript)" when there are none). */
export function renderToolDocs(tools: readonly CodeTool<any>[]): string {
  const plain = tools.filter((t) => !t.isAgent);
  const docs = plain.map(renderToolDoc);
  docs.push("/** Ends the task with this answer. */\nfunction final_answer(answer: any): void");
  return docs.join("\n\n");
}

/** The "team members" section for agents wrapped as tools ("" when there are none). */
export function renderManagedAgents(tools: readonly CodeTool<any>[]): string {
  const agents = tools.filter((t) => t.isAgent);
  if (!agents.length) return "";
  return (
    "\nTeam members: other agents you call like tools. Give each a complete task in natural language " +
    "(they don't see your task); each returns its answer.\n```js\n" +
    agents.map(renderToolDoc).join("\n\n") +
    "\n```\n"
  );
}

function common(ctx: PromptContext) {
  return { agent_name: ctx.agentName, agent_description: ctx.agentDescription };
}

/** The system prompt of action steps. */
export function renderSystemPrompt(prompts: CodeAgentPrompts, ctx: PromptContext): string {
  return renderTemplate(
    prompts.system,
    {
      ...common(ctx),
      capabilities: ctx.capabilities.map((c) => `- ${c}`).join("\n"),
      tool_docs: renderToolDocs(ctx.tools),
      managed_agents: renderManagedAgents(ctx.tools),
    },
    `${ctx.agentName}/system`,
  );
}

/** The system prompt of planning steps. */
export function renderPlanningPrompt(prompts: CodeAgentPrompts, ctx: PromptContext): string {
  return renderTemplate(
    prompts.planning,
    {
      ...common(ctx),
      tool_docs: renderToolDocs(ctx.tools),
      managed_agents: renderManagedAgents(ctx.tools),
    },
    `${ctx.agentName}/planning`,
  );
}

/** The first user message. */
export function renderTaskMessage(
  prompts: CodeAgentPrompts,
  task: string,
  agentName = "agent",
): string {
  return renderTemplate(prompts.task, { task }, `${agentName}/task`);
}

/** System prompt and last user message of the final-answer prompt. */
export function renderFinalAnswerPrompts(
  prompts: CodeAgentPrompts,
  ctx: PromptContext,
  task: string,
): { system: string; request: string } {
  return {
    system: renderTemplate(prompts.finalAnswer, common(ctx), `${ctx.agentName}/final_answer`),
    request: renderTemplate(
      prompts.finalAnswerRequest,
      { task },
      `${ctx.agentName}/final_answer_request`,
    ),
  };
}

/** The task a manager's call becomes for an agent used as a tool. */
export function renderManagedTask(prompts: CodeAgentPrompts, name: string, task: string): string {
  return renderTemplate(prompts.managedTask, { name, task }, `${name}/managed_task`);
}

/** Renders every prompt of a set (used by the render-all test and `codehop` debugging). */
export function renderAllPrompts(
  prompts: CodeAgentPrompts,
  ctx: PromptContext,
  task: string,
): Record<keyof CodeAgentPrompts, string> {
  const fa = renderFinalAnswerPrompts(prompts, ctx, task);
  return {
    system: renderSystemPrompt(prompts, ctx),
    task: renderTaskMessage(prompts, task, ctx.agentName),
    planning: renderPlanningPrompt(prompts, ctx),
    finalAnswer: fa.system,
    finalAnswerRequest: fa.request,
    managedTask: renderManagedTask(prompts, ctx.agentName, task),
  };
}
