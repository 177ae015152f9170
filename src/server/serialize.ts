import { CodehopError } from "../errors.ts";

/**
 * JSON as the LangGraph API sends it: LangChain objects (messages ...) as their `toDict()` data
 * with a `type`, state snapshots as the API's ThreadState, errors as `{ error, message, code? }`.
 */

/** JSON text of a value, LangChain serializables flattened like the LangGraph server does. */
export function toJson(value: unknown): string {
  return (
    JSON.stringify(value, function (key, v) {
      const raw = (this as Record<string, unknown>)[key];
      if (raw && typeof raw === "object" && typeof (raw as any).toDict === "function") {
        const { type, data } = (raw as { toDict(): { type: string; data: object } }).toDict();
        return { ...data, type };
      }
      if (typeof v === "bigint") return v.toString();
      return v;
    }) ?? "null"
  );
}

/**
 * `value` as plain JSON data, LangChain serializables flattened by {@link toJson}: what a route
 * returns, since Fastify's own JSON.stringify would write messages in LangChain's constructor form
 * (`{ lc: 1, type: "constructor", ... }`), which clients such as agent-chat-ui cannot read.
 */
export function toPlainJson<T>(value: T): T {
  return JSON.parse(toJson(value)) as T;
}

/**
 * An error as the API reports it: `{ error, message }`, plus the stable `code` of a CodehopError
 * (the LangGraph server sends none; clients reading only `error` and `message` are unaffected).
 */
export function serializeError(err: unknown): { error: string; message: string; code?: string } {
  if (CodehopError.isInstance(err))
    return { error: err.name, message: err.message, code: err.code };
  if (err instanceof Error) return { error: err.name, message: err.message };
  return { error: "Error", message: typeof err === "string" ? err : JSON.stringify(err) };
}

/** A checkpoint reference of the API, from a LangGraph config. */
export function checkpointOf(config: any): Record<string, unknown> | null {
  const c = config?.configurable;
  if (!c?.thread_id || !c?.checkpoint_id) return null;
  return {
    thread_id: c.thread_id,
    checkpoint_id: c.checkpoint_id,
    checkpoint_ns: c.checkpoint_ns ?? "",
    checkpoint_map: c.checkpoint_map ?? null,
  };
}

/** The API's ThreadState of a task. */
export interface ApiTask {
  id: string;
  name: string;
  path?: unknown[];
  error: string | null;
  interrupts: unknown[];
  checkpoint: Record<string, unknown> | null;
  state: ApiThreadState | null;
  result: unknown;
}

/** The API's ThreadState (GET /threads/:id/state, history entries). */
export interface ApiThreadState {
  values: unknown;
  next: string[];
  tasks: ApiTask[];
  metadata: unknown;
  created_at: string | null;
  checkpoint: Record<string, unknown> | null;
  parent_checkpoint: Record<string, unknown> | null;
  interrupts: unknown[];
}

/**
 * A LangGraph StateSnapshot as the API's ThreadState (nested agents' states included when read),
 * as plain JSON data: messages as `{ type, content, id, ... }` dicts, like the LangGraph server.
 */
export function stateToThreadState(state: any): ApiThreadState {
  return toPlainJson(threadStateOf(state));
}

function threadStateOf(state: any): ApiThreadState {
  const tasks: ApiTask[] = (state.tasks ?? []).map((task: any) => {
    const nested = task.state && "values" in task.state && "next" in task.state;
    return {
      id: task.id,
      name: task.name,
      path: task.path,
      error: task.error ? serializeError(task.error).message : null,
      interrupts: task.interrupts ?? [],
      checkpoint: !nested && task.state?.configurable ? task.state.configurable : null,
      state: nested ? threadStateOf(task.state) : null,
      result: task.result ?? null,
    };
  });
  return {
    values: state.values ?? {},
    next: state.next ?? [],
    tasks,
    metadata: state.metadata ?? null,
    created_at: state.createdAt ?? null,
    checkpoint: checkpointOf(state.config),
    parent_checkpoint: checkpointOf(state.parentConfig),
    interrupts: tasks.flatMap((t) => t.interrupts),
  };
}
