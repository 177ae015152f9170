import { answerText } from "./result.ts";
/**
 * A live view of a run: turns `graph.stream(..., { subgraphs: true, streamMode: ["updates",
 * "tasks"] })` events into a tree of agents and their steps (thought, code, observation), with the
 * sub-agents an action called nested under that action. Pure data + text rendering, so it is unit
 * tested without a terminal; src/runs/tree-renderer.ts draws it live.
 */

/** One stream event of `graph.stream(..., { subgraphs: true, streamMode: [...] })`. */
export type StreamEvent = [namespace: string[], mode: string, chunk: unknown];

/** One action of an agent as shown in the tree. */
export interface StepView {
  step: number;
  thought: string;
  code: string | null;
  observation?: string;
  error?: string;
  isFinal?: boolean;
  /** Sub-agents this action called (in call order). */
  children: AgentView[];
}

/** One agent run (the manager, or one sub-agent call). */
export interface AgentView {
  /** Namespace key ("" for the top-level agent). */
  key: string;
  name: string;
  depth: number;
  task: string;
  phase: "thinking" | "planning" | "running code" | "observing" | "done" | "failed" | "interrupted";
  /** Why the agent failed (a readable sentence), when it did. */
  error?: string;
  steps: StepView[];
  plan?: string;
  answer?: string;
  status?: string;
  /**
   * What the graph's plain (non-agent) nodes reported, in order: the `stage` line a pipeline node
   * writes (e.g. "verified 12 claims: 11 supported, 1 dropped").
   */
  stages?: string[];
}

/** Options for {@link RunProgress}. */
export interface RunProgressOptions {
  /**
   * Name of the top agent until its own stamp arrives (sub-agents are named by the stamp their
   * state carries: the `agent` channel, in their input and first update).
   */
  rootName?: string;
  /**
   * What the top agent's line shows as its task, instead of the task it was given (the chat's
   * agent is given the whole conversation; its tree shows the user's message).
   */
  rootTask?: string;
  /** Called with one plain text line per notable event (for non-TTY output). */
  onLine?: (line: string) => void;
}

/** Named segments of a namespace ("act:<id>"), dropping the numeric suffixes of concurrent calls. */
function agentSegments(ns: string[]): string[] {
  return ns.filter((s) => s.includes(":"));
}

function oneLine(text: string, max: number): string {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** Keeps the first `maxLines` lines (each cut to `width`) and says how many were left out. */
export function clip(text: string, maxLines: number, width: number): string[] {
  const lines = text.replace(/\s+$/, "").split("\n");
  const out = lines
    .slice(0, maxLines)
    .map((l) => (l.length > width ? `${l.slice(0, width - 1)}…` : l));
  if (lines.length > maxLines) out.push(`… (${lines.length - maxLines} more lines)`);
  return out;
}

/** The task as shown: a managed-agent wrapper ("...gave you this task:\n<task>\n...") is unwrapped. */
export function displayTask(task: string): string {
  const m = /task:\s*\n([^\n]+)/.exec(task);
  return m ? m[1] : task;
}

function asArray<T>(v: T | T[] | undefined | null): T[] {
  if (v == null) return [];
  return Array.isArray(v) ? v : [v];
}

/** Any value as display text (same rule as a run's answer). */
const str = answerText;

/**
 * A task's error as a sentence: its message (first line; the rest is the hint the CLI prints
 * once at the end). LangGraph hands stream consumers the error as an Error, as a serialized
 * `{ message, name }` object, or as that object's JSON text; none is shown raw.
 */
export function errorText(error: unknown): string {
  let e: unknown = error;
  if (typeof e === "string" && /^\s*\{/.test(e)) {
    try {
      e = JSON.parse(e);
    } catch {
      // not JSON: shown as it is
    }
  }
  const message =
    e && typeof e === "object" && typeof (e as { message?: unknown }).message === "string"
      ? (e as { message: string }).message
      : str(e);
  return message.split("\n")[0].trim() || "(no message)";
}

/** The styles the tree uses (picocolors' names); {@link PLAIN} leaves text as it is. */
export interface TreeColors {
  green(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
  bold(text: string): string;
  dim(text: string): string;
}

const same = (text: string) => text;
/** No colour. */
export const PLAIN: TreeColors = {
  green: same,
  red: same,
  yellow: same,
  cyan: same,
  bold: same,
  dim: same,
};

/** Whether a task error is the run's own abort (Ctrl-C, a caller's signal), not a failure. */
function isAbort(error: unknown): boolean {
  const text = typeof error === "string" ? error : JSON.stringify(error ?? "") + String(error);
  return /AbortError|CODEHOP_RUN_INTERRUPTED|interrupted \(Ctrl-C\)|\bAborted\b/.test(text);
}

/** Tree of a run built from stream events. */
export class RunProgress {
  /** Agents by namespace key. */
  readonly agents = new Map<string, AgentView>();
  root: AgentView | undefined;
  /** Model calls and tokens seen so far, over all agents (counted once per model call). */
  readonly totals = { calls: 0, inputTokens: 0, outputTokens: 0 };
  /** The final output of the top-level graph, once it arrived. */
  output: Record<string, unknown> | undefined;
  private readonly rootName: string;
  private readonly rootTask?: string;
  private readonly onLine?: (line: string) => void;

  constructor(options: RunProgressOptions = {}) {
    this.rootName = options.rootName ?? "agent";
    this.rootTask = options.rootTask;
    this.onLine = options.onLine;
  }

  private emit(agent: AgentView, text: string): void {
    this.onLine?.(`${"  ".repeat(Math.max(0, agent.depth - 1))}[${agent.name}] ${text}`);
  }

  private agentFor(ns: string[], task?: string, name?: string): AgentView {
    // The root graph is the manager agent itself (ns []); each nested agent runs inside its
    // parent's act node, one named segment ("act:<id>") deeper.
    const named = agentSegments(ns);
    const key = ns.join("|");
    let agent = this.agents.get(key);
    if (agent) {
      if (name && agent.name !== name) agent.name = name;
      return agent;
    }
    const depth = named.length + 1;
    agent = {
      key,
      name: name || (depth === 1 ? this.rootName : "agent"),
      depth,
      task: depth === 1 && this.rootTask !== undefined ? this.rootTask : displayTask(task ?? ""),
      phase: "thinking",
      steps: [],
    };
    this.agents.set(key, agent);
    // Parent: drop trailing numeric segments ("1" of a second concurrent call) and the act segment.
    const parentNs = [...ns];
    while (parentNs.length && !parentNs[parentNs.length - 1].includes(":")) parentNs.pop();
    parentNs.pop();
    const parent = depth > 1 ? this.agents.get(parentNs.join("|")) : undefined;
    if (parent) {
      let step = parent.steps[parent.steps.length - 1];
      if (!step) {
        step = { step: 0, thought: "", code: null, children: [] };
        parent.steps.push(step);
      }
      step.children.push(agent);
    } else if (!this.root) {
      this.root = agent;
    }
    this.emit(agent, `started: ${oneLine(agent.task, 160)}`);
    return agent;
  }

  /**
   * Starts the tree from a checkpointed manager state (a resumed or replayed run), so the steps
   * done before the crash are shown above the ones the stream brings.
   */
  seed(values: Record<string, unknown>): void {
    const task = typeof values.question === "string" ? values.question : String(values.task ?? "");
    const root = this.agentFor(
      [],
      task,
      typeof values.agent === "string" ? values.agent : undefined,
    );
    for (const rec of asArray<Record<string, any>>(values.steps as any)) {
      if (!rec || typeof rec !== "object" || rec.kind === "planning") continue;
      if (root.steps.some((s) => s.step === rec.step)) continue;
      root.steps.push({
        step: Number(rec.step),
        thought: str(rec.thought),
        code: rec.code ?? null,
        observation: str(rec.observation),
        ...(rec.error ? { error: `${rec.error.name ?? "Error"}: ${rec.error.message ?? ""}` } : {}),
        isFinal: !!rec.isFinalAnswer,
        children: [],
      });
      this.emit(root, `step ${rec.step} (done before): ${oneLine(str(rec.thought), 160)}`);
    }
  }

  /** Feeds one stream event. Unknown shapes are ignored (the view is best-effort, never fatal). */
  apply(event: StreamEvent): void {
    const [ns, mode, chunk] = event;
    if (!chunk || typeof chunk !== "object") return;
    if (mode === "tasks") return this.applyTask(ns, chunk as Record<string, any>);
    if (mode === "updates") return this.applyUpdates(ns, chunk as Record<string, any>);
  }

  private applyTask(ns: string[], task: Record<string, any>): void {
    const starting = "input" in task && !("result" in task);
    if (!starting) {
      if (task.error) {
        const agent = this.agentFor(ns);
        if (agent && agent.phase !== "interrupted") {
          if (isAbort(task.error)) {
            // Stopped by its user (Ctrl-C): resumable, not failed.
            this.interruptAgent(agent);
          } else {
            agent.phase = "failed";
            agent.error = errorText(task.error);
            this.emit(agent, `failed in ${task.name}: ${oneLine(agent.error, 200)}`);
          }
        }
      }
      return;
    }
    const input = (task.input ?? {}) as Record<string, unknown>;
    const text =
      typeof input.task === "string" && input.task
        ? input.task
        : typeof input.question === "string"
          ? input.question
          : undefined;
    const agent = this.agentFor(
      ns,
      text,
      typeof input.agent === "string" && input.agent ? input.agent : undefined,
    );
    if (!agent.task && text) agent.task = displayTask(text);
    if (task.name === "plan") agent.phase = "thinking";
    else if (task.name === "planning") agent.phase = "planning";
    else if (task.name === "act") agent.phase = "running code";
    else if (task.name === "observe") agent.phase = "observing";
    else if (task.name === "final_answer") agent.phase = "thinking";
  }

  private applyUpdates(ns: string[], updates: Record<string, any>): void {
    const stamp = Object.values(updates).find(
      (u) => u && typeof u === "object" && typeof u.agent === "string" && u.agent,
    )?.agent as string | undefined;
    const agent = this.agentFor(ns, undefined, stamp);
    if (ns.length === 0) {
      // Root updates accumulate into the run's output (answer, status ...).
      for (const value of Object.values(updates)) {
        if (value && typeof value === "object") this.output = { ...(this.output ?? {}), ...value };
      }
    }
    for (const [node, update] of Object.entries(updates)) {
      if (!update || typeof update !== "object") continue;
      const u = update as Record<string, any>;
      // Nodes that call the model write their own call's usage; act nodes only roll up children.
      // Plain nodes of app graphs write their own calls' usage as `nodeUsage` (their `usage` may
      // roll up agents they ran, already counted).
      const stage = typeof u.stage === "string" && u.stage ? u.stage : undefined;
      const own =
        node === "plan" || node === "planning" || node === "final_answer" ? u.usage : u.nodeUsage;
      if (own && typeof own === "object") {
        for (const x of Object.values(own as Record<string, any>)) {
          this.totals.calls += Number(x?.calls ?? 0);
          this.totals.inputTokens += Number(x?.inputTokens ?? 0);
          this.totals.outputTokens += Number(x?.outputTokens ?? 0);
        }
      }
      if (!agent.task && typeof u.task === "string") agent.task = displayTask(u.task);
      if (u.pending && typeof u.pending === "object") {
        const p = u.pending;
        const step: StepView = {
          step: Number(p.step ?? agent.steps.length + 1),
          thought: str(p.thought),
          code: p.code ?? null,
          children: [],
        };
        // A placeholder created when a child appeared before its parent's step is replaced.
        const lastStep = agent.steps[agent.steps.length - 1];
        if (lastStep && lastStep.step === 0 && !lastStep.code)
          Object.assign(lastStep, { ...step, children: lastStep.children });
        else agent.steps.push(step);
        // act follows plan at once: show it as running before its task event arrives.
        agent.phase = "running code";
        this.emit(agent, `step ${step.step} thought: ${oneLine(step.thought, 160)}`);
        if (step.code) for (const l of clip(step.code, 6, 120)) this.emit(agent, `  | ${l}`);
        else if (p.parseError) this.emit(agent, `  (no code: ${oneLine(str(p.parseError), 120)})`);
      }
      if (stage) {
        (agent.stages ??= []).push(stage);
        this.emit(agent, `${node}: ${oneLine(stage, 200)}`);
      }
      if (typeof u.plan === "string" && u.plan) {
        agent.plan = u.plan;
        this.emit(agent, `plan: ${oneLine(u.plan, 160)}`);
      }
      for (const rec of asArray<Record<string, any>>(u.steps)) {
        if (!rec || typeof rec !== "object" || rec.kind === "planning") continue;
        let step = agent.steps.find((s) => s.step === rec.step);
        if (!step) {
          step = {
            step: Number(rec.step),
            thought: str(rec.thought),
            code: rec.code ?? null,
            children: [],
          };
          agent.steps.push(step);
        }
        step.observation = str(rec.observation);
        if (rec.error) step.error = `${rec.error.name ?? "Error"}: ${rec.error.message ?? ""}`;
        step.isFinal = !!rec.isFinalAnswer;
        this.emit(
          agent,
          `step ${step.step} observation: ${oneLine(step.observation || step.error || "(nothing printed)", 200)}`,
        );
      }
      if (typeof u.status === "string" && u.status !== "running") {
        agent.status = u.status;
        agent.phase = "done";
        if (u.answer !== undefined) agent.answer = str(u.answer);
        this.emit(agent, `done (${u.status}): ${oneLine(agent.answer ?? "", 200)}`);
      } else if (node === "observe") {
        agent.phase = "thinking";
      }
    }
  }

  /**
   * Marks every agent still at work as interrupted (the run was stopped by its user, e.g. Ctrl-C):
   * the tree then shows where it stopped instead of agents that look busy or failed.
   */
  interrupt(): void {
    for (const agent of this.agents.values()) this.interruptAgent(agent);
  }

  /** Marks every agent still at work as failed with `error` (a run that ended with an error). */
  fail(error: unknown): void {
    for (const agent of this.agents.values()) {
      if (agent.phase === "done" || agent.phase === "failed" || agent.phase === "interrupted")
        continue;
      agent.phase = "failed";
      agent.error = errorText(error);
    }
  }

  private interruptAgent(agent: AgentView): void {
    if (agent.phase === "done" || agent.phase === "failed" || agent.phase === "interrupted") return;
    agent.phase = "interrupted";
    this.emit(agent, "interrupted (resumable)");
  }

  /**
   * The tree as text lines. `spinner` is the current frame shown next to agents that are waiting
   * on the model or running code. Finished sub-agents collapse to one line with their answer
   * unless `expand` is set.
   */
  render(
    spinner = "…",
    width = 110,
    options: { expand?: boolean; colors?: TreeColors } = {},
  ): string[] {
    const c = options.colors ?? PLAIN;
    const lines: string[] = [];
    const walk = (agent: AgentView, indent: string) => {
      const mark =
        agent.phase === "done"
          ? c.green("✓")
          : agent.phase === "failed"
            ? c.red("✗")
            : agent.phase === "interrupted"
              ? c.yellow("■")
              : c.cyan(spinner);
      const head = `${indent}${mark} ${c.bold(agent.name)}: ${oneLine(agent.task, Math.max(20, width - indent.length - agent.name.length - 4))}`;
      lines.push(head);
      const inner = `${indent}  `;
      if (agent.phase === "done" && agent.depth > 1 && !options.expand) {
        lines.push(
          `${inner}${c.green("→")} ${oneLine(agent.answer ?? "", Math.max(20, width - inner.length - 2))}`,
        );
        return;
      }
      for (const step of agent.steps) {
        if (step.step > 0 || step.thought) {
          lines.push(
            `${inner}${c.bold(`step ${step.step}:`)} ${oneLine(step.thought, Math.max(20, width - inner.length - 10))}`,
          );
        }
        if (step.code)
          for (const l of clip(step.code, 4, width - inner.length - 4))
            lines.push(c.dim(`${inner}  │ ${l}`));
        for (const child of step.children) walk(child, `${inner}  `);
        if (step.observation !== undefined || step.error) {
          const obs = step.error ?? step.observation ?? "";
          const shown = clip(obs || "(nothing printed)", 3, width - inner.length - 4);
          const tint = step.error ? c.red : (t: string) => t;
          lines.push(tint(`${inner}  ↳ ${shown[0]}`));
          for (const l of shown.slice(1)) lines.push(tint(`${inner}    ${l}`));
        }
      }
      for (const stage of agent.stages ?? [])
        lines.push(c.dim(`${inner}• ${oneLine(stage, Math.max(20, width - inner.length - 2))}`));
      if (agent.phase === "failed")
        lines.push(
          c.red(
            `${inner}failed: ${oneLine(agent.error ?? "", Math.max(20, width - inner.length - 8))}`,
          ),
        );
      else if (agent.phase === "interrupted")
        lines.push(c.yellow(`${inner}interrupted (resumable)`));
      else if (agent.phase !== "done") lines.push(`${inner}${c.cyan(spinner)} ${agent.phase}…`);
      if (agent.phase === "done")
        lines.push(
          `${inner}${c.green("answer:")} ${oneLine(agent.answer ?? "", Math.max(20, width - inner.length - 8))}`,
        );
    };
    if (this.root) walk(this.root, "");
    return lines;
  }
}
