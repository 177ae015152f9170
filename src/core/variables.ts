import { Overwrite } from "@langchain/langgraph";
import type { JsonValue, VariablesSnapshot } from "../sandbox/contract.ts";

/**
 * The sandbox variables in graph state, stored as a log of per-action changes instead of one
 * snapshot rewritten after every action: a checkpointer that stores only what a list appended
 * (codehop's default) then writes each action's change once, so a large value carried over many
 * steps is not written again at every step. The snapshot is the log folded ({@link foldVariables});
 * the log is compacted back to one entry when it grows past the snapshot it encodes.
 */

/** What one action changed: bindings set (or replaced), and names that no longer exist. */
export interface VariablesDelta {
  values?: Record<string, JsonValue>;
  declarations?: Record<string, string>;
  unserializable?: Record<string, string>;
  /** Names removed from all three maps. */
  removed?: string[];
}

/** The `variables` channel's value: deltas, oldest first (the first holds everything up to it). */
export type VariablesLog = VariablesDelta[];

/** Log entries kept before compaction is considered. */
const COMPACT_AFTER_ENTRIES = 16;
/** Compact when the log's JSON is this many times the snapshot's. */
const COMPACT_SIZE_FACTOR = 2;

/** An empty snapshot. */
function emptySnapshot(): VariablesSnapshot {
  return { values: {}, declarations: {}, unserializable: {} };
}

function isSnapshot(value: unknown): value is VariablesSnapshot {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as VariablesSnapshot).values === "object"
  );
}

/**
 * The channel value as a log, whatever was stored: a log, nothing, or the single snapshot threads
 * checkpointed by earlier versions kept in this channel.
 */
export function asVariablesLog(value: unknown): VariablesLog {
  if (Array.isArray(value)) return value as VariablesLog;
  if (isSnapshot(value)) return [{ ...value }];
  return [];
}

/** The snapshot a log encodes (null when nothing was ever carried over). */
export function foldVariables(value: unknown): VariablesSnapshot | null {
  const log = asVariablesLog(value);
  if (!log.length) return null;
  const out = emptySnapshot();
  for (const d of log) {
    for (const name of d.removed ?? []) {
      delete out.values[name];
      delete out.declarations[name];
      delete out.unserializable[name];
    }
    Object.assign(out.values, d.values);
    Object.assign(out.declarations, d.declarations);
    Object.assign(out.unserializable, d.unserializable);
  }
  return out;
}

/** Entries of `after` that are new or differ from `before` (values compared as JSON). */
function changed<T>(
  before: Record<string, T>,
  after: Record<string, T>,
  same: (a: T, b: T) => boolean,
): Record<string, T> | undefined {
  const out: Record<string, T> = {};
  let any = false;
  for (const [name, value] of Object.entries(after)) {
    if (Object.hasOwn(before, name) && same(before[name], value)) continue;
    out[name] = value;
    any = true;
  }
  return any ? out : undefined;
}

/** The change from `before` to `after` (null when nothing changed). */
export function variablesDelta(
  before: VariablesSnapshot | null,
  after: VariablesSnapshot,
): VariablesDelta | null {
  const from = before ?? emptySnapshot();
  const json = (v: JsonValue) => JSON.stringify(v);
  const delta: VariablesDelta = {};
  const values = changed(from.values, after.values, (a, b) => a === b || json(a) === json(b));
  const declarations = changed(from.declarations, after.declarations, (a, b) => a === b);
  const unserializable = changed(from.unserializable, after.unserializable, (a, b) => a === b);
  const names = (s: VariablesSnapshot) =>
    new Set([
      ...Object.keys(s.values),
      ...Object.keys(s.declarations),
      ...Object.keys(s.unserializable),
    ]);
  const now = names(after);
  const removed = [...names(from)].filter((n) => !now.has(n));
  // A name that moved between maps (a value became a function) is removed from the others first.
  for (const n of now) {
    const wasIn = [n in from.values, n in from.declarations, n in from.unserializable];
    const isIn = [n in after.values, n in after.declarations, n in after.unserializable];
    if (wasIn.some((was, i) => was && !isIn[i])) removed.push(n);
  }
  if (values) delta.values = values;
  if (declarations) delta.declarations = declarations;
  if (unserializable) delta.unserializable = unserializable;
  if (removed.length) delta.removed = removed;
  return Object.keys(delta).length ? delta : null;
}

/**
 * The `variables` update after an action that ended with `after`: the delta appended to the log,
 * or the log replaced by one snapshot entry when it has grown past what it encodes (a LangGraph
 * `Overwrite`). Undefined when nothing changed (no write: the checkpoint stores nothing new).
 */
export function variablesUpdate(
  current: unknown,
  after: VariablesSnapshot,
): VariablesDelta | Overwrite<VariablesLog> | undefined {
  const log = asVariablesLog(current);
  const before = foldVariables(log);
  const delta = variablesDelta(before, after);
  // A log written by an earlier version (one snapshot object) is turned into a log once.
  if (!Array.isArray(current) && current != null) return new Overwrite([{ ...after }]);
  if (!delta) return undefined;
  if (log.length + 1 >= COMPACT_AFTER_ENTRIES) {
    const logSize = log.reduce((n, d) => n + deltaSize(d), 0) + deltaSize(delta);
    if (logSize > COMPACT_SIZE_FACTOR * deltaSize(after)) return new Overwrite([{ ...after }]);
  }
  return delta;
}

/**
 * JSON size of values, remembered per object: a value carried over many steps is the same object
 * in every snapshot (the sandbox freezes the values it returns), so it is measured once, not at
 * every step.
 */
const valueSizes = new WeakMap<object, number>();

function valueSize(value: JsonValue): number {
  if (value === null || typeof value !== "object") return JSON.stringify(value)?.length ?? 4;
  let size = valueSizes.get(value);
  if (size === undefined) {
    size = JSON.stringify(value)?.length ?? 4;
    valueSizes.set(value, size);
  }
  return size;
}

/** About the JSON size of a delta (or a snapshot): enough to tell when the log outgrew it. */
function deltaSize(d: VariablesDelta): number {
  let size = 2;
  for (const [name, value] of Object.entries(d.values ?? {}))
    size += name.length + 4 + valueSize(value);
  for (const part of [d.declarations, d.unserializable])
    for (const [name, text] of Object.entries(part ?? {})) size += name.length + text.length + 6;
  for (const name of d.removed ?? []) size += name.length + 3;
  return size;
}
