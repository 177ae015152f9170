import type { FastifyRequest } from "fastify";
import type { z } from "zod";
import type { AuthFilters } from "./auth.ts";
import type { ClientSettingError } from "../core/client-settings.ts";
import type { ApiThread, RunRecord } from "./store.ts";

/**
 * What the routes of `codehop serve` share of a request and its answer: the HTTP error a client
 * gets, bodies parsed or refused with a 422, the checkpoint keys a client may give, the JSON of
 * threads and runs, and the authorization filters applied in memory.
 */

/** An HTTP error with the status and message the client gets (plus fields for its JSON body). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** `checkpoint` keys a client may give (a run's or a state read's checkpoint on its own thread). */
const CHECKPOINT_KEYS = new Set(["checkpoint_id", "checkpoint_ns", "checkpoint_map"]);

/**
 * A client's checkpoint object, or a 422 naming a key it may not carry: the thread comes from the
 * URL, and LangGraph's private keys (`__pregel_*`) are never a client's.
 */
export function clientCheckpoint(
  checkpoint: Record<string, unknown> | null | undefined,
  field: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(checkpoint ?? {})) {
    if (key === "thread_id") continue; // the URL's thread wins (the SDK echoes it back)
    if (!CHECKPOINT_KEYS.has(key))
      throw new HttpError(
        422,
        `${field}.${key}: not a checkpoint key (use checkpoint_id, checkpoint_ns, checkpoint_map).`,
      );
    if (key === "checkpoint_map" ? typeof value !== "object" : typeof value !== "string")
      throw new HttpError(422, `${field}.${key}: must be a string.`);
    out[key] = value;
  }
  return out;
}

/**
 * A whole number of the query string (`?limit=10`) within `[min, max]`, `fallback` when absent,
 * or a 422 naming the parameter: never NaN, a repeated parameter or a number PostgreSQL's bigint
 * cannot hold passed on to a query.
 */
export function queryInt(
  value: unknown,
  name: string,
  bounds: { min: number; max: number; fallback: number },
): number {
  if (value === undefined || value === "") return bounds.fallback;
  const n = typeof value === "string" && /^-?\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < bounds.min || n > bounds.max)
    throw new HttpError(
      422,
      `query.${name}: expected a whole number from ${bounds.min} to ${bounds.max}.`,
      { field: `query.${name}` },
    );
  return n;
}

/** A refused client setting as the HTTP error the client gets (403 / 422, naming the key). */
export function settingRefused(err: ClientSettingError): HttpError {
  return new HttpError(err.status, err.message, { code: err.code, key: err.path });
}

/** Parses a body with a schema, or a 422 naming what is wrong. */
export function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (!r.success) {
    throw new HttpError(
      422,
      r.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "),
    );
  }
  return r.data;
}

const iso = (d: Date | string | null | undefined) =>
  d ? (d instanceof Date ? d.toISOString() : d) : null;

/** A thread as the API answers it. */
export function threadJson(t: ApiThread) {
  return {
    thread_id: t.thread_id,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
    metadata: t.metadata,
    status: t.status,
    values: t.values ?? null,
    interrupts: t.interrupts ?? {},
    config: {},
  };
}

/** A run as the API answers it. */
export function runJson(r: RunRecord) {
  return {
    run_id: r.run_id,
    thread_id: r.thread_id,
    assistant_id: r.assistant_id,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    status: r.status,
    metadata: r.metadata,
    kwargs: r.kwargs,
    multitask_strategy: r.multitask_strategy,
  };
}

/** A Fetch API request of a Fastify request's method, URL and headers, for `Auth.authenticate`. */
export function fetchRequest(req: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    try {
      headers.set(name, Array.isArray(value) ? value.join(", ") : String(value));
    } catch {
      // a header value the Fetch API refuses: the handler does not see it
    }
  }
  let url: string;
  try {
    url = new URL(req.url, `http://${req.headers.host ?? "localhost"}`).href;
  } catch {
    url = new URL(req.url.replace(/[^\x21-\x7e]/g, ""), "http://localhost").href;
  }
  return new Request(url, { method: req.method, headers });
}

/** Whether metadata matches an authorization handler's filters (for the in-memory assistants). */
export function matchesFilters(
  metadata: Record<string, unknown>,
  filters: AuthFilters | undefined,
) {
  for (const [key, condition] of Object.entries(filters ?? {})) {
    const value = metadata[key];
    if (condition && typeof condition === "object" && !Array.isArray(condition)) {
      const c = condition as { $eq?: unknown; $contains?: unknown };
      if ("$eq" in c && JSON.stringify(value) !== JSON.stringify(c.$eq)) return false;
      if ("$contains" in c) {
        const wanted = Array.isArray(c.$contains) ? c.$contains : [c.$contains];
        if (!Array.isArray(value) || !wanted.every((w) => value.includes(w))) return false;
      }
    } else if (value !== condition) return false;
  }
  return true;
}
