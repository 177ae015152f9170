import { Transform, type TransformCallback } from "node:stream";
import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { type CodehopEnv, readEnv, SERVE_LIMIT_ENV } from "../config/env.ts";

/**
 * What one user may make `codehop serve` do, with the defaults in this one place. Bodies are
 * checked as they arrive, before any JSON parser sees them (a body of two million keys is refused
 * after its first hundred thousand, not parsed for a minute); runs, uploads and requests are
 * counted per authenticated user.
 */
export interface ServerLimits {
  /** Largest request body, in bytes (uploads travel base64 inside the JSON). */
  maxBodyBytes: number;
  /** Deepest nesting of objects and arrays in a JSON body. */
  maxJsonDepth: number;
  /** Most object keys plus array items in a JSON body. */
  maxJsonMembers: number;
  /** Requests per user per minute (429 with Retry-After beyond). 0: no limit. */
  requestsPerMinute: number;
  /** Runs of one user pending or running at once (429 beyond). 0: no limit. */
  maxActiveRuns: number;
  /** Runs of one user executing at once; the others wait in the queue. 0: no limit. */
  maxRunningRuns: number;
  /** Bytes of uploaded files one thread keeps. 0: no limit. */
  maxThreadUploadBytes: number;
  /** Bytes of uploaded files one user keeps, over all their threads. 0: no limit. */
  maxUserUploadBytes: number;
}

const MB = 1024 * 1024;

/** The defaults of every limit. */
export const DEFAULT_LIMITS: Readonly<ServerLimits> = {
  maxBodyBytes: 64 * MB,
  maxJsonDepth: 64,
  maxJsonMembers: 100_000,
  requestsPerMinute: 1200,
  maxActiveRuns: 20,
  maxRunningRuns: 4,
  maxThreadUploadBytes: 200 * MB,
  maxUserUploadBytes: 1000 * MB,
};

/** Limits as the operator writes them (CODEHOP_SERVE_* and `codehop serve`'s flags; sizes in MB). */
export type LimitSettings = CodehopEnv["serveLimits"];

/**
 * The limits of `settings` (flags), then of the environment (CODEHOP_SERVE_*), then the defaults.
 */
export function resolveLimits(
  settings: LimitSettings = {},
  env: LimitSettings = readEnv().serveLimits,
): ServerLimits {
  const s = { ...env, ...settings };
  const mb = (n: number | undefined) => (n === undefined ? undefined : Math.round(n * MB));
  const out: ServerLimits = { ...DEFAULT_LIMITS };
  const set = <K extends keyof ServerLimits>(key: K, value: number | undefined) => {
    if (value !== undefined) out[key] = value;
  };
  set("maxBodyBytes", mb(s.maxBodyMb));
  set("maxJsonDepth", s.maxJsonDepth);
  set("maxJsonMembers", s.maxJsonMembers);
  set("requestsPerMinute", s.requestsPerMinute);
  set("maxActiveRuns", s.maxActiveRuns);
  set("maxRunningRuns", s.maxRunningRuns);
  set("maxThreadUploadBytes", mb(s.maxThreadUploadMb));
  set("maxUserUploadBytes", mb(s.maxUserUploadMb));
  return out;
}

/** The variable that sets a limit (named in refusals so an operator knows what to raise). */
export const limitVariable = (key: keyof LimitSettings) => SERVE_LIMIT_ENV[key];

/** An error a request gets before its handler runs (its status and message). */
export class RequestRefused extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    /** The field at fault (invalid strings), for the client's JSON body. */
    readonly field?: string,
  ) {
    super(message);
    this.name = "RequestRefused";
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * A pass-through stream that measures the JSON flowing through it, byte by byte (a tokenizer of
 * strings and brackets, nothing more): it fails the request with 413 once the body has more than
 * `maxMembers` keys and array items, or with 422 once it nests deeper than `maxDepth`. It never
 * holds more than the chunk it is given.
 */
export function jsonShapeGuard(limits: Pick<ServerLimits, "maxJsonDepth" | "maxJsonMembers">) {
  let inString = false;
  let escaped = false;
  let depth = 0;
  let members = 0;
  // Per open container: whether it is an array holding a first item yet.
  const arrays: boolean[] = [];
  const items: boolean[] = [];
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      for (let i = 0; i < chunk.length; i++) {
        const c = chunk[i];
        if (inString) {
          if (escaped) escaped = false;
          else if (c === BACKSLASH) escaped = true;
          else if (c === QUOTE) inString = false;
          continue;
        }
        if (c === QUOTE) {
          inString = true;
          if (arrays[depth - 1] && !items[depth - 1]) {
            items[depth - 1] = true;
            members++;
          }
        } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
          if (arrays[depth - 1] && !items[depth - 1]) {
            items[depth - 1] = true;
            members++;
          }
          depth++;
          if (depth > limits.maxJsonDepth)
            return done(
              new RequestRefused(
                422,
                `The JSON body nests deeper than ${limits.maxJsonDepth} levels.`,
              ),
            );
          arrays[depth - 1] = c === OPEN_BRACKET;
          items[depth - 1] = false;
        } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
          depth = Math.max(0, depth - 1);
        } else if (c === COLON) {
          members++;
        } else if (c === COMMA) {
          if (arrays[depth - 1]) members++;
        } else if (
          arrays[depth - 1] &&
          !items[depth - 1] &&
          c !== 0x20 &&
          c !== 0x0a &&
          c !== 0x0d &&
          c !== 0x09
        ) {
          items[depth - 1] = true;
          members++;
        }
        if (members > limits.maxJsonMembers)
          return done(
            new RequestRefused(
              413,
              `The JSON body has more than ${limits.maxJsonMembers} keys and array items.`,
            ),
          );
      }
      done(null, chunk);
    },
  });
}

/** A NUL, or a UTF-16 surrogate without its pair (what PostgreSQL and UTF-8 cannot hold). */
// (With the u flag a surrogate pair is one code point: the class matches only unpaired ones.)
const INVALID = /\u0000|[\ud800-\udfff]/u;

/** What is wrong with a string, or undefined when nothing is. */
export function invalidText(text: string): string | undefined {
  const m = INVALID.exec(text);
  if (!m) return undefined;
  return m[0] === "\u0000"
    ? "contains a NUL character (\\u0000)"
    : "contains an unpaired UTF-16 surrogate (not valid Unicode)";
}

/**
 * The first string (value or key) in `value` that PostgreSQL and UTF-8 cannot store, with its
 * path (`input.messages.0.content.1.metadata.filename`), or undefined.
 */
export function findInvalidString(
  value: unknown,
  path = "body",
): { path: string; problem: string } | undefined {
  const stack: Array<[unknown, string]> = [[value, path]];
  while (stack.length) {
    const [v, at] = stack.pop()!;
    if (typeof v === "string") {
      const problem = invalidText(v);
      if (problem) return { path: at, problem };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${at}.${i}`]);
    } else if (v && typeof v === "object") {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i];
        const problem = invalidText(key);
        if (problem)
          return { path: `${at}.${key.replace(INVALID, "?")}`, problem: `key ${problem}` };
        stack.push([child, `${at}.${key}`]);
      }
    }
  }
  return undefined;
}

/** How long a refused request may keep sending the rest of its body before its connection is cut. */
const DRAIN_DEADLINE_MS = 30_000;
const draining = new WeakSet<object>();

/**
 * Reads and drops the unread rest of a refused request's body so that a client still sending it
 * receives the refusal (413, 422) instead of a reset connection: closing a socket with unread
 * bytes makes the kernel answer with RST, and an HTTP client (Node 22's fetch) then fails before
 * it reads the response. Bounded: at most `maxBodyBytes` more bytes and 30 s, then the
 * connection is cut. Call it before sending the refusal; idempotent.
 */
export function drainRefusedBody(req: FastifyRequest, limits: ServerLimits): void {
  const raw = req.raw;
  if (raw.complete || raw.destroyed || draining.has(raw)) return;
  draining.add(raw);
  raw.unpipe();
  let drained = 0;
  const cut = () => raw.socket?.destroy();
  const deadline = setTimeout(cut, DRAIN_DEADLINE_MS);
  deadline.unref();
  raw.on("data", (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > limits.maxBodyBytes) {
      clearTimeout(deadline);
      cut();
    }
  });
  raw.once("end", () => clearTimeout(deadline));
  raw.once("close", () => clearTimeout(deadline));
  raw.resume();
}

const JSON_TYPE = /^\s*application\/([\w.+-]*\+)?json\b/i;

/**
 * Puts `limits` on every route of `app` (call before the routes are added): the request rate of
 * each user (`keyOf`: their identity), and the shape of JSON bodies as they stream in (size by
 * Fastify's bodyLimit, depth and keys by {@link jsonShapeGuard}) — all before the body is parsed;
 * then, once parsed, no string of the body, the path or the query may hold what PostgreSQL cannot
 * store (422 naming the field).
 */
export async function installLimits(
  app: FastifyInstance,
  limits: ServerLimits,
  keyOf: (req: FastifyRequest) => string,
): Promise<void> {
  app.addHook("preParsing", async (req, _reply, payload) => {
    if (!JSON_TYPE.test(req.headers["content-type"] ?? "")) return payload;
    const guard = jsonShapeGuard(limits);
    payload.on("error", (err) => guard.destroy(err));
    guard.on("error", () => {
      payload.unpipe(guard);
      drainRefusedBody(req, limits);
    });
    return payload.pipe(guard);
  });
  if (limits.requestsPerMinute > 0) {
    await app.register(rateLimit, {
      max: limits.requestsPerMinute,
      timeWindow: 60_000,
      // After authentication (onRequest), before the body is read.
      hook: "preParsing",
      keyGenerator: keyOf,
      allowList: (req) => req.url.split("?")[0] === "/ok",
      errorResponseBuilder: (_req, context) =>
        new RequestRefused(
          429,
          `Too many requests: at most ${context.max} a minute per user (${limitVariable("requestsPerMinute")}); retry in ${context.after}.`,
        ),
    });
  }
  app.addHook("preValidation", async (req) => {
    const bad =
      findInvalidString(req.params, "path") ??
      findInvalidString(req.query, "query") ??
      findInvalidString(req.body, "body");
    if (bad) throw new RequestRefused(422, `${bad.path}: ${bad.problem}.`, bad.path);
  });
}

/**
 * The status and message of a refusal that did not come from a handler: Fastify's body errors
 * (a body over the size limit, malformed JSON) and PostgreSQL's refusals of a value (a string it
 * cannot store that reached it some other way): a 4xx naming the limit, never a raw 500.
 */
export function refusalOf(
  err: Error & { code?: string; statusCode?: number },
  limits: ServerLimits,
): { status: number; message: string } | undefined {
  if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE")
    return {
      status: 413,
      message: `The request body is larger than ${limits.maxBodyBytes} bytes (${limitVariable("maxBodyMb")}).`,
    };
  // PostgreSQL: untranslatable character (NUL in jsonb), bad Unicode escape, invalid byte sequence.
  if (err.code === "22P05" || err.code === "22021")
    return {
      status: 422,
      message: "The request holds a value the database cannot store (a NUL or invalid Unicode).",
    };
  // PostgreSQL's other data exceptions (class 22: a number, date or interval out of range, a
  // value of the wrong type) come of a client's value the routes passed on: the client's error,
  // said without PostgreSQL's message (it quotes the value and names the database's types).
  if (typeof err.code === "string" && /^22[0-9A-Z]{3}$/.test(err.code) && "severity" in err)
    return {
      status: 422,
      message:
        "The request holds a value out of the range the database accepts (a number, date or duration).",
    };
  return undefined;
}
