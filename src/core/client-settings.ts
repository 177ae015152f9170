import { z } from "zod";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { contextSchemaOf } from "./pregel-internals.ts";

/**
 * Who may set what in a served graph's run. A graph served to clients (`codehop serve` and its
 * workers, Studio's `langgraph dev`) takes its run context from any client: `context` and
 * `config.configurable` of a run request. Some keys only shape the client's own run (a
 * temperature, how many chat rounds stay verbatim); others decide what the operator's machine does
 * and pays for (the model endpoint and its key, a corpus path, the sandbox, token and time
 * limits). Those are the operator's: environment, configuration file, code.
 *
 * Each app's run-context schema says which of its keys a client may set by marking them with
 * {@link clientSettable}; a key without a mark is the operator's. A client that sends an
 * operator's key, or a key the schema does not know, gets an error naming it
 * (CODEHOP_CLIENT_SETTING_REFUSED; `codehop serve` answers 403 / 422 before the run exists): the
 * value is never silently dropped, never used. A client-settable limit above the operator's value
 * is lowered to it; a name outside the operator's allow-list (models, knowledge sources) is
 * refused.
 *
 * Code is never a client: the CLI, `ask()`, `chat()` and tests give graphs any run context. Served
 * graphs are guarded by {@link guardClientRuns} (src/graphs/entries.ts wraps every graph of
 * langgraph.json), and `codehop serve` vets each run request with {@link vetClientRun}.
 */

/** How a client may set one run-context key (the key's schema still validates the value). */
export type ClientAccess =
  /** Any value the schema accepts. */
  | { readonly kind: "any" }
  /** A number, lowered to the operator's maximum (`operator` says where that comes from). */
  | { readonly kind: "upTo"; readonly max: () => number; readonly operator: string }
  /** A name from the operator's allow-list (`operator` says where that list comes from). */
  | {
      readonly kind: "oneOf";
      readonly allowed: () => readonly string[];
      readonly operator: string;
    };

// One registry per process, whatever copy of this module marks or reads it: a server running
// codehop's build serves graphs of a langgraph.json that may import its sources.
const REGISTRY = Symbol.for("codehop.client-settings.registry");
const clientAccess = ((globalThis as Record<symbol, unknown>)[REGISTRY] ??=
  z.registry<ClientAccess>()) as ReturnType<typeof z.registry<ClientAccess>>;

/** Any value the key's schema accepts. */
export const ANY_VALUE: ClientAccess = Object.freeze({ kind: "any" });

/** A number a client may only lower: above `max()` it becomes `max()`. */
export function upTo(max: () => number, operator: string): ClientAccess {
  return { kind: "upTo", max, operator };
}

/** A name a client may choose from the operator's list `allowed()`. */
export function oneOf(allowed: () => readonly string[], operator: string): ClientAccess {
  return { kind: "oneOf", allowed, operator };
}

/**
 * Marks a run-context key's schema as settable by clients (`access`, default any valid value) and
 * returns it. Mark the schema that goes into the object's shape (after `.optional()` /
 * `.describe()`), or the fields of a settings object before `.partial()`.
 */
export function clientSettable<T extends z.ZodType>(
  schema: T,
  access: ClientAccess = ANY_VALUE,
): T {
  clientAccess.add(schema, access);
  return schema;
}

/** Marks fields of an object schema as client-settable (`access` per field; default any value). */
export function clientSettableFields<S extends z.ZodObject>(
  schema: S,
  access: Partial<Record<keyof S["shape"], ClientAccess>> | "all",
): S {
  const shape = schema.shape as Record<string, z.ZodType>;
  const entries =
    access === "all"
      ? Object.keys(shape).map((k) => [k, ANY_VALUE] as const)
      : Object.entries(access as Record<string, ClientAccess>);
  for (const [key, a] of entries) clientSettable(shape[key], a);
  return schema;
}

/** Why a client's setting was refused. */
export type RefusalReason =
  /** The key is the operator's. */
  | "operator"
  /** The graph's run context has no such key. */
  | "unknown"
  /** The value is not one the key's schema accepts. */
  | "invalid"
  /** The value is valid but not on the operator's allow-list. */
  | "not_allowed";

/** A client's run setting refused, naming the key (`path`, e.g. `context.modelSettings.baseURL`). */
export class ClientSettingError extends CodehopError {
  constructor(
    readonly path: string,
    readonly reason: RefusalReason,
    message: string,
  ) {
    super(ErrorCodes.CLIENT_SETTING_REFUSED, `${message} [${ErrorCodes.CLIENT_SETTING_REFUSED}]`);
    this.name = "ClientSettingError";
  }

  /** The HTTP status a server answers: 403 for what the client may not set, 422 for what is wrong. */
  get status(): number {
    return this.reason === "operator" || this.reason === "not_allowed" ? 403 : 422;
  }
}

/**
 * `configurable` keys the LangGraph API itself gives meaning to, which a client may send: the
 * thread and the checkpoint to run from. (The server sets `thread_id`, `run_id`, `assistant_id`
 * and `graph_id` itself, whatever a client sends.)
 */
const LANGGRAPH_CLIENT_KEYS = new Set([
  "thread_id",
  "checkpoint_id",
  "checkpoint_ns",
  "checkpoint_map",
  "run_id",
  "assistant_id",
  "graph_id",
]);

/**
 * `configurable` keys a LangGraph API server adds to a run before the graph sees it (the
 * authenticated user, request headers, tracing): the server's, not the client's. `codehop serve`
 * refuses them in a request; a guarded graph lets them through.
 */
function isServerKey(key: string): boolean {
  return (
    key.startsWith("langgraph_") ||
    key.startsWith("langsmith_") ||
    key.startsWith("x-") ||
    key === "user-agent" ||
    key === "user_id"
  );
}

/** Options of {@link vetClientRun}. */
export interface VetOptions {
  /**
   * Let through values JSON cannot carry (functions, class instances, symbol-marked grants): code
   * put them there (a worker's call journal and upload store), not a client. Off for a request
   * body, which is all JSON.
   */
  codeValues?: boolean;
  /**
   * Let through the `configurable` keys a LangGraph API server adds (langgraph_auth_user, x-*
   * headers ...): true inside a served graph, false for a client's request.
   */
  serverKeys?: boolean;
}

/** A client's run context, vetted: the same keys, limits lowered to the operator's. */
export interface VettedRun {
  context?: Record<string, unknown>;
  configurable?: Record<string, unknown>;
}

/**
 * Vets what a client sent for a run of a graph whose run-context schema is `schema`: every key of
 * `context` and of `configurable` must be one a client may set, with a value the schema and the
 * operator allow. Returns them with client-settable limits lowered to the operator's; throws a
 * {@link ClientSettingError} naming the first key refused.
 */
export function vetClientRun(
  schema: z.ZodObject | undefined,
  run: { context?: unknown; configurable?: unknown },
  options: VetOptions = {},
): VettedRun {
  const shape = (schema?.shape ?? {}) as Record<string, z.ZodType>;
  const out: VettedRun = {};
  if (run.context !== undefined && run.context !== null) {
    if (!isPlainObject(run.context))
      throw new ClientSettingError("context", "invalid", "`context` must be an object.");
    out.context = vetObject(shape, run.context, "context", options);
  }
  if (run.configurable !== undefined && run.configurable !== null) {
    if (!isPlainObject(run.configurable))
      throw new ClientSettingError(
        "config.configurable",
        "invalid",
        "`config.configurable` must be an object.",
      );
    const configurable: Record<string, unknown> = {};
    const own: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(run.configurable)) {
      const path = `config.configurable.${key}`;
      if (options.codeValues && isCodeValue(value)) configurable[key] = value;
      else if (LANGGRAPH_CLIENT_KEYS.has(key)) {
        if (key === "checkpoint_map" ? !isPlainObject(value) : typeof value !== "string")
          throw new ClientSettingError(path, "invalid", `\`${path}\` must be a string.`);
        configurable[key] = value;
      } else if (isServerKey(key)) {
        if (!options.serverKeys)
          throw new ClientSettingError(
            path,
            "operator",
            `\`${path}\` is set by the server (the authenticated user, request headers), not by a client.`,
          );
        configurable[key] = value;
      } else if (key.startsWith("__")) {
        throw new ClientSettingError(path, "operator", `\`${path}\` is LangGraph's own key.`);
      } else own[key] = value;
    }
    // The other keys are run-context keys (configurable is read as run context too).
    Object.assign(configurable, vetObject(shape, own, "config.configurable", options));
    out.configurable = configurable;
  }
  return out;
}

function vetObject(
  shape: Record<string, z.ZodType>,
  value: Record<string, unknown>,
  path: string,
  options: VetOptions,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const at = `${path}.${key}`;
    const field = Object.hasOwn(shape, key) ? shape[key] : undefined;
    if (!field) {
      if (options.codeValues && isCodeValue(v)) {
        out[key] = v;
        continue;
      }
      throw new ClientSettingError(
        at,
        "unknown",
        `\`${at}\` is not a setting of this graph's run context. A client may set: ${settableList(shape) || "nothing"}.`,
      );
    }
    out[key] = vetValue(field, v, at, options);
  }
  return out;
}

function vetValue(schema: z.ZodType, value: unknown, path: string, options: VetOptions): unknown {
  if (value === undefined) return value;
  if (options.codeValues && isCodeValue(value)) return value;
  const access = accessOf(schema);
  if (access) return applyAccess(schema, access, value, path);
  const inner = unwrapped(schema);
  const def = inner._zod.def as { type: string; shape?: unknown; valueType?: z.ZodType };
  if (def.type === "object" && isPlainObject(value) && Object.keys(value).length) {
    return vetObject(
      (inner as z.ZodObject).shape as Record<string, z.ZodType>,
      value,
      path,
      options,
    );
  }
  if (def.type === "record" && isPlainObject(value) && def.valueType) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = vetValue(def.valueType, v, `${path}.${k}`, options);
    return out;
  }
  const what = inner.description ?? schema.description;
  throw new ClientSettingError(
    path,
    "operator",
    `\`${path}\` is an operator setting${what ? ` (${what})` : ""}: a client may not set it. The operator sets it on the server (environment, codehop.config.json, code); see docs/security.md.`,
  );
}

function applyAccess(
  schema: z.ZodType,
  access: ClientAccess,
  value: unknown,
  path: string,
): unknown {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${path}.${issue.path.join(".")}` : path;
    throw new ClientSettingError(where, "invalid", `\`${where}\`: ${issue?.message ?? "invalid"}.`);
  }
  if (access.kind === "upTo") {
    const max = access.max();
    return typeof value === "number" && value > max ? max : value;
  }
  if (access.kind === "oneOf") {
    const allowed = access.allowed();
    if (typeof value !== "string" || !allowed.includes(value)) {
      throw new ClientSettingError(
        path,
        "not_allowed",
        `\`${path}\` must be one of ${access.operator}: ${allowed.length ? allowed.map((a) => JSON.stringify(a)).join(", ") : "(none configured)"}.`,
      );
    }
  }
  return value;
}

/** The client access of a key's schema, looking through optional / nullable / default wrappers. */
function accessOf(schema: z.ZodType): ClientAccess | undefined {
  for (let s: z.ZodType | undefined = schema, i = 0; s && i < 8; s = innerOf(s), i++) {
    const found = clientAccess.get(s);
    if (found) return found;
  }
  return undefined;
}

function innerOf(schema: z.ZodType): z.ZodType | undefined {
  const def = schema._zod.def as { type: string; innerType?: z.ZodType };
  return ["optional", "nullable", "default", "prefault", "readonly", "catch"].includes(def.type)
    ? def.innerType
    : undefined;
}

function unwrapped(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (let next = innerOf(s); next; next = innerOf(s)) s = next;
  return s;
}

/** Whether any key under `schema` (an object's field, a record's values) is client-settable. */
function hasSettable(schema: z.ZodType, depth = 0): boolean {
  if (accessOf(schema)) return true;
  if (depth > 4) return false;
  const inner = unwrapped(schema);
  const def = inner._zod.def as { type: string; valueType?: z.ZodType };
  if (def.type === "object")
    return Object.values((inner as z.ZodObject).shape as Record<string, z.ZodType>).some((f) =>
      hasSettable(f, depth + 1),
    );
  if (def.type === "record" && def.valueType) return hasSettable(def.valueType, depth + 1);
  return false;
}

/** "model, modelSettings (temperature, maxTokens), ..." — what a client may set, for messages. */
function settableList(shape: Record<string, z.ZodType>): string {
  return Object.entries(shape)
    .filter(([, f]) => hasSettable(f))
    .map(([key, f]) => {
      if (accessOf(f)) return key;
      const inner = unwrapped(f);
      if (inner._zod.def.type !== "object") return key;
      const sub = Object.entries((inner as z.ZodObject).shape as Record<string, z.ZodType>)
        .filter(([, g]) => hasSettable(g))
        .map(([k]) => k);
      return `${key} (${sub.join(", ")})`;
    })
    .join(", ");
}

/**
 * The keys of a run-context schema with who may set them, for docs and messages:
 * `{ "modelSettings.baseURL": "operator", "modelSettings.maxTokens": "upTo" ... }`.
 */
export function describeClientAccess(
  schema: z.ZodObject,
): Record<string, "operator" | ClientAccess["kind"]> {
  const out: Record<string, "operator" | ClientAccess["kind"]> = {};
  const walk = (shape: Record<string, z.ZodType>, prefix: string, depth: number) => {
    for (const [key, field] of Object.entries(shape)) {
      const access = accessOf(field);
      const inner = unwrapped(field);
      if (!access && inner._zod.def.type === "object" && depth < 3 && hasSettable(field))
        walk(
          (inner as z.ZodObject).shape as Record<string, z.ZodType>,
          `${prefix}${key}.`,
          depth + 1,
        );
      else {
        const value = (inner._zod.def as { valueType?: z.ZodType }).valueType;
        const recordAccess = !access && value ? accessOf(value) : undefined;
        out[`${prefix}${key}`] = (access ?? recordAccess)?.kind ?? "operator";
      }
    }
  };
  walk(schema.shape as Record<string, z.ZodType>, "", 0);
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * True for a value JSON cannot carry, so code put it there: a function, a class instance, an
 * object with symbol keys (a grant), or a plain object or array holding one (a few levels deep).
 */
export function isCodeValue(value: unknown, depth = 0): boolean {
  if (typeof value === "function" || typeof value === "symbol" || typeof value === "bigint")
    return true;
  if (typeof value !== "object" || value === null || depth > 3) return false;
  if (Array.isArray(value)) return value.slice(0, 50).some((v) => isCodeValue(v, depth + 1));
  if (!isPlainObject(value)) return true;
  if (Object.getOwnPropertySymbols(value).length) return true;
  return Object.values(value)
    .slice(0, 50)
    .some((v) => isCodeValue(v, depth + 1));
}

const OPERATOR_GRANT = Symbol.for("codehop.operator-grant");

/**
 * Marks an object code made (a grant such as the chat app's `grantChatAccess`) as proof that code,
 * not a client, built the run context holding it: a guarded graph runs such a context as it is.
 * JSON cannot carry the mark (a symbol), so no client can forge it.
 */
export function withOperatorMark<T extends object>(
  value: T,
): T & { readonly [OPERATOR_GRANT]: true } {
  return Object.assign(value, { [OPERATOR_GRANT]: true as const });
}

/** Whether a run context (or configurable) holds a value marked by {@link withOperatorMark}. */
function madeByCode(values: unknown): boolean {
  if (!isPlainObject(values)) return false;
  return Object.values(values).some(
    (v) =>
      typeof v === "object" &&
      v !== null &&
      (v as Record<symbol, unknown>)[OPERATOR_GRANT] === true,
  );
}

const GUARDED = Symbol.for("codehop.client-settings.schema");

/** Whether a graph was guarded by {@link guardClientRuns}. */
export function isGuarded(graph: unknown): boolean {
  return typeof graph === "object" && graph !== null && GUARDED in graph;
}

/** The run-context schema a served graph's clients are held to: its guard's, else its own. */
export function clientSchemaOf(graph: unknown): z.ZodObject | undefined {
  const guarded = (graph as Record<symbol, unknown> | null)?.[GUARDED];
  return (guarded as z.ZodObject | undefined) ?? contextSchemaOf(graph);
}

/**
 * Makes a compiled graph hold every run to what a client may set: before it streams (invoke,
 * stream and streamEvents all go through `stream`), its run context and configurable are vetted
 * with {@link vetClientRun} (values only code can make pass: a worker's journal and upload
 * store), and it runs with the vetted ones. A run context holding a grant
 * ({@link withOperatorMark}) is code's and runs as it is. For graphs any client can run: the graphs of
 * langgraph.json under Studio's server and `codehop worker`.
 */
export function guardClientRuns<G extends object>(graph: G, schema?: z.ZodObject): G {
  const g = graph as Record<string | symbol, unknown>;
  const stream = g.stream as (
    input: unknown,
    options?: Record<string, unknown>,
  ) => Promise<unknown>;
  if (typeof stream !== "function") return graph;
  const vetWith = schema ?? contextSchemaOf(graph);
  g[GUARDED] = vetWith;
  g.stream = async function (this: unknown, input: unknown, options?: Record<string, unknown>) {
    // Code that holds a grant (the CLI, chat(), a server's own code) sets what it likes.
    if (madeByCode(options?.context) || madeByCode(options?.configurable))
      return stream.call(this, input, options);
    const vetted = vetClientRun(
      vetWith,
      { context: options?.context, configurable: options?.configurable },
      { codeValues: true, serverKeys: true },
    );
    return stream.call(this, input, {
      ...options,
      ...(vetted.context ? { context: vetted.context } : {}),
      ...(vetted.configurable ? { configurable: vetted.configurable } : {}),
    });
  };
  return graph;
}
