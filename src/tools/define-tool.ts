import { z } from "zod";

/**
 * Context given to a tool's host implementation for one call made from a code action.
 * `callIndex` is the position of the call within its action (assigned in the guest, in the order
 * the code made the calls), which makes calls addressable for the call journal (resume/replay).
 */
export interface ToolCallContext {
  /** 0-based index of this call within the current code action. */
  callIndex: number;
  /**
   * 0-based index of this call among the action's calls of the same tool whose arguments were
   * valid (calls served from the call journal included), in call order: the same on every run of
   * the action, unlike a count of the calls that reach `invoke`. Set by the act node; absent when
   * a tool is called outside an agent.
   */
  toolCallIndex?: number;
  /** Aborted when the action ends (timeout, final answer, crash) so long calls can stop early. */
  signal: AbortSignal;
  /** LangGraph RunnableConfig of the act node that runs the action (for nested agent invokes). */
  config?: unknown;
  /**
   * Reports metadata back to the calling agent's act node: `usage` (tokens per agent name, e.g. a
   * sub-agent's rolled-up usage) is added to the caller's usage, `sources` to its sources. Set by
   * the code-agent act node; absent when a tool is called outside an agent.
   */
  report?: (report: ToolReport) => void;
}

/** What a tool can report to the agent that called it (see {@link ToolCallContext.report}). */
export interface ToolReport {
  /** Token usage per agent name ({ calls, inputTokens, outputTokens, cachedInputTokens }). */
  usage?: Record<
    string,
    { calls: number; inputTokens: number; outputTokens: number; cachedInputTokens: number }
  >;
  /** Metadata of what the tool used, e.g. `{ title: "Rome", url: "..." }` (JSON values only). */
  sources?: Record<string, any>[];
}

/**
 * A tool callable from an agent's JavaScript as `await name(arg1, arg2)` (positional arguments in
 * the order of the schema's keys) or `await name({ arg1, arg2 })`.
 *
 * The same zod schema validates arguments and renders the tool into the prompt as a JS signature
 * with JSDoc, so the documentation the model reads can never drift from what is accepted.
 */
export interface CodeTool<Shape extends z.ZodRawShape = z.ZodRawShape> {
  /** JS identifier the guest code calls. */
  readonly name: string;
  /** One or two sentences for the prompt: what it does and what it returns. */
  readonly description: string;
  /** Parameters, in positional order; `.describe()` on each field documents it in the prompt. */
  readonly parameters: z.ZodObject<Shape>;
  /** TypeScript-style return type for the prompt, e.g. "string". */
  readonly returns: string;
  /** Host implementation; receives validated arguments. Its return value must be JSON-serializable. */
  readonly invoke: (args: z.infer<z.ZodObject<Shape>>, ctx: ToolCallContext) => Promise<unknown>;
  /**
   * Compiled LangGraph graphs this tool invokes (set for agents wrapped as tools), so the parent's
   * act node can declare them as subgraphs for drawing and `getState({ subgraphs: true })`.
   */
  readonly subgraphs?: readonly unknown[];
  /** True for tools that wrap another agent (rendered under "team members" in prompts). */
  readonly isAgent?: boolean;
  /**
   * Human approval before a call runs (src/core/approval.ts): `"always"`, `"never"` (the default)
   * or a predicate on the validated arguments (`(args) => args.path.startsWith("/etc")`; one that
   * throws counts as true). A call that needs approval pauses the run with LangGraph's
   * `interrupt()`; the run resumes with the decision (approve, edit the arguments, reject with a
   * reason that becomes the call's error).
   */
  readonly approval?: ApprovalPolicy<z.infer<z.ZodObject<Shape>>>;
  /**
   * JSON Schema of the parameters when the tool was built from one (MCP tools), shown to UIs that
   * edit arguments; otherwise it is derived from `parameters`.
   */
  readonly parametersJsonSchema?: Record<string, unknown>;
  /**
   * Where a tool that codehop did not define comes from (an MCP server's tool, by the server's
   * name in codehop.config.json and the tool's own name), for messages such as a name clash.
   */
  readonly origin?: { mcpServer: string; mcpTool: string };
}

/** When a tool's calls need human approval (see {@link CodeTool.approval}). */
export type ApprovalPolicy<Args = Record<string, unknown>> =
  "always" | "never" | ((args: Args) => boolean);

/** JSON Schema of a tool's parameters (`{}` when the zod schema has no JSON form). */
export function toolParametersJsonSchema(tool: CodeTool<any>): Record<string, unknown> {
  if (tool.parametersJsonSchema) return tool.parametersJsonSchema;
  try {
    return z.toJSONSchema(tool.parameters, { unrepresentable: "any" }) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/** Defines a tool (identity helper that keeps the schema's inferred types). */
export function defineTool<Shape extends z.ZodRawShape>(tool: CodeTool<Shape>): CodeTool<Shape> {
  if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(tool.name)) {
    throw new Error(`Tool name "${tool.name}" is not a valid JavaScript identifier`);
  }
  const approval = tool.approval;
  if (
    approval !== undefined &&
    approval !== "always" &&
    approval !== "never" &&
    typeof approval !== "function"
  ) {
    throw new Error(
      `Tool "${tool.name}": approval must be "always", "never" or a function of the arguments, got ${JSON.stringify(approval)}`,
    );
  }
  return tool;
}

/** Thrown (host side) when a guest passes arguments that don't match the tool's schema. */
export class ToolArgumentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolArgumentError";
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Maps the guest's raw arguments (positional, or one object with the parameter names) onto the
 * schema and validates them. Errors name the tool and its signature so the model can fix its call.
 */
export function parseToolArgs(tool: CodeTool<any>, rawArgs: unknown[]): Record<string, unknown> {
  const keys = Object.keys(tool.parameters.shape);
  let candidate: Record<string, unknown>;
  // `tool({ query: "x" })` is accepted as named arguments when the object's keys are all
  // parameter names and it names at least one of them (so `tool({})` stays positional).
  const named =
    rawArgs.length === 1 &&
    isPlainObject(rawArgs[0]) &&
    Object.keys(rawArgs[0]).length > 0 &&
    Object.keys(rawArgs[0]).every((k) => keys.includes(k));
  if (named) {
    candidate = rawArgs[0] as Record<string, unknown>;
  } else {
    if (rawArgs.length > keys.length) {
      throw new ToolArgumentError(
        `${tool.name}() takes ${keys.length} argument(s) (${keys.join(", ")}) but got ${rawArgs.length}. Usage: ${renderSignature(tool)}`,
      );
    }
    candidate = {};
    keys.forEach((k, i) => {
      if (i < rawArgs.length) candidate[k] = rawArgs[i];
    });
  }
  return validateToolArgs(tool, candidate);
}

/**
 * Validates named arguments (`{ query: "x" }`) against the tool's schema; throws
 * {@link ToolArgumentError} naming the problems and the tool's signature.
 */
export function validateToolArgs(
  tool: CodeTool<any>,
  candidate: Record<string, unknown>,
): Record<string, unknown> {
  const parsed = tool.parameters.safeParse(candidate);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((iss) => `${iss.path.join(".") || "arguments"}: ${iss.message}`)
      .join("; ");
    throw new ToolArgumentError(
      `Invalid arguments for ${tool.name}(): ${problems}. Usage: ${renderSignature(tool)}`,
    );
  }
  return parsed.data as Record<string, unknown>;
}

/** A zod type rendered as a short TypeScript type for prompts. */
export function tsType(schema: z.ZodType): string {
  const def: any = (schema as any)._zod?.def ?? (schema as any).def;
  switch (def?.type) {
    case "string":
      return "string";
    case "number":
    case "int":
      return "number";
    case "boolean":
      return "boolean";
    case "optional":
    case "default":
      return tsType(def.innerType);
    case "nullable":
      return `${tsType(def.innerType)} | null`;
    case "array": {
      const element = tsType(def.element);
      return element.includes("|") ? `(${element})[]` : `${element}[]`;
    }
    case "enum":
      return Object.values(def.entries as Record<string, string>)
        .map((v) => JSON.stringify(v))
        .join(" | ");
    case "literal":
      return (def.values as unknown[]).map((v) => JSON.stringify(v)).join(" | ");
    case "object": {
      const shape = def.shape as Record<string, z.ZodType>;
      return `{ ${Object.entries(shape)
        .map(([k, v]) => `${k}${isOptional(v) ? "?" : ""}: ${tsType(v)}`)
        .join("; ")} }`;
    }
    case "union": {
      const options = (def.options as z.ZodType[]).map((o) => {
        const t = tsType(o);
        // Arrays of unions and functions need parentheses inside a union.
        return t.includes("=>") ? `(${t})` : t;
      });
      return [...new Set(options)].join(" | ");
    }
    case "record":
      return `Record<string, ${tsType(def.valueType)}>`;
    case "null":
      return "null";
    case "tuple":
      return `[${(def.items as z.ZodType[]).map(tsType).join(", ")}]`;
    case "pipe":
      return tsType(def.in);
    default:
      return "any";
  }
}

function isOptional(schema: z.ZodType): boolean {
  const t = ((schema as any)._zod?.def ?? (schema as any).def)?.type;
  return t === "optional" || t === "default";
}

/** `async function name(a: string, b?: number): Promise<string>` */
export function renderSignature(tool: CodeTool<any>): string {
  const params = Object.entries(tool.parameters.shape as Record<string, z.ZodType>)
    .map(([k, v]) => `${k}${isOptional(v) ? "?" : ""}: ${tsType(v)}`)
    .join(", ");
  return `async function ${tool.name}(${params}): Promise<${tool.returns}>`;
}

/**
 * Renders a tool for the prompt as JSDoc + signature, e.g.
 *
 *   /** Searches Wikipedia and returns up to 5 page titles with summaries.
 *    * @param query - what to search for *\/
 *   async function search_wikipedia(query: string): Promise<string>
 */
export function renderToolDoc(tool: CodeTool<any>): string {
  const lines = [`/** ${tool.description.trim().replace(/\n/g, "\n * ")}`];
  for (const [k, v] of Object.entries(tool.parameters.shape as Record<string, z.ZodType>)) {
    const desc = (v as any).description ?? (v as any)._zod?.def?.innerType?.description;
    lines.push(` * @param ${k}${desc ? ` - ${desc}` : ""}`);
  }
  lines[lines.length - 1] += " */";
  return `${lines.join("\n")}\n${renderSignature(tool)}`;
}
