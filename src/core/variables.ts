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
  /** Values set, as data. */
  values?: Record<string, JsonValue>;
  /**
   * Values set, as their JSON text: those the checkpoint serializer would not read back as written
   * (see {@link storedAsText}). A name is in `values` or here, never both.
   */
  json?: Record<string, string>;
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

/** Sets an own entry, whatever the name (`__proto__` included: never the prototype). */
function setEntry<T>(target: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(target, name, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/** Copies `from`'s own entries into `into` as own entries (Object.assign would call setters). */
function mergeEntries<T>(into: Record<string, T>, from: Record<string, T> | undefined): void {
  if (from && typeof from === "object")
    for (const [k, v] of Object.entries(from)) setEntry(into, k, v);
}

/**
 * LangGraph's checkpoint serializer (JsonPlusSerializer) reads an object back key by key with
 * assignments, and turns objects shaped like its own records back into what they encode: a key
 * `__proto__` becomes the object's prototype, `{ lc: 2, type: "constructor", id: ["Map"], ... }` a
 * Map, `{ lc: 2, type: "undefined" }` nothing, and `{ lc: 1, type: "constructor", ... }` is loaded as
 * a LangChain object (failing the whole read when it names none). Guest values are data: a value
 * with such a key, or named so, is stored as its JSON text (a string the serializer leaves alone).
 * In JSON.stringify's output `"key":` only ever opens a key (quotes inside strings are escaped).
 */
function storedAsText(name: string, json: string): boolean {
  return (
    name === "lc" || name === "__proto__" || json.includes('"lc":') || json.includes('"__proto__":')
  );
}

/** Values parsed from a stored delta's `json` (per delta object: the log's entries live on). */
const parsedText = new WeakMap<VariablesDelta, Record<string, JsonValue>>();

/** Note for a stored value whose text does not parse (a damaged or hand-edited checkpoint). */
export const UNREADABLE_VALUE_NOTE = "its stored value could not be read back (not valid JSON)";

/** `d.json` as values (parsed once per delta); text that does not parse is reported in `bad`. */
function textValues(d: VariablesDelta, bad: string[]): Record<string, JsonValue> {
  let values = parsedText.get(d);
  if (!values) {
    values = {};
    for (const [name, text] of Object.entries(d.json ?? {})) {
      try {
        if (typeof text !== "string") throw new TypeError("not text");
        setEntry(values, name, JSON.parse(text) as JsonValue);
      } catch {
        bad.push(name);
      }
    }
    if (bad.length === 0) parsedText.set(d, values);
  }
  return values;
}

/** The snapshot a log encodes (null when nothing was ever carried over). */
export function foldVariables(value: unknown): VariablesSnapshot | null {
  const log = asVariablesLog(value);
  if (!log.length) return null;
  const out = emptySnapshot();
  for (const d of log) {
    if (!d || typeof d !== "object") continue;
    for (const name of Array.isArray(d.removed) ? d.removed : []) {
      delete out.values[name];
      delete out.declarations[name];
      delete out.unserializable[name];
    }
    mergeEntries(out.values, d.values);
    if (d.json && typeof d.json === "object") {
      const bad: string[] = [];
      mergeEntries(out.values, textValues(d, bad));
      for (const name of bad) {
        delete out.values[name];
        setEntry(out.unserializable, name, UNREADABLE_VALUE_NOTE);
      }
    }
    mergeEntries(out.declarations, d.declarations);
    mergeEntries(out.unserializable, d.unserializable);
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
    setEntry(out, name, value);
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
  const delta: VariablesDelta = {};
  const values = changed(
    from.values,
    after.values,
    (a, b) => a === b || jsonText(a) === jsonText(b),
  );
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
  // (Own entries only: `toString in {}` is true.)
  const kinds = (s: VariablesSnapshot, n: string) =>
    [s.values, s.declarations, s.unserializable].map((m) => Object.hasOwn(m, n));
  for (const n of now) {
    const wasIn = kinds(from, n);
    const isIn = kinds(after, n);
    if (wasIn.some((was, i) => was && !isIn[i])) removed.push(n);
  }
  if (values) {
    // Values the serializer would not read back as written are stored as text (storedAsText).
    for (const [name, value] of Object.entries(values)) {
      const text = jsonText(value);
      if (!storedAsText(name, text)) continue;
      delete values[name];
      setEntry((delta.json ??= {}), name, text);
    }
    if (Object.keys(values).length) delta.values = values;
  }
  if (delta.json) {
    // Folding this delta gives back the very objects of `after`: the sandbox knows which values
    // its process holds by their identity.
    const own: Record<string, JsonValue> = {};
    for (const name of Object.keys(delta.json)) setEntry(own, name, after.values[name]);
    parsedText.set(delta, own);
  }
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
  if (!Array.isArray(current) && current != null) return new Overwrite([wholeDelta(after)]);
  if (!delta) return undefined;
  if (log.length + 1 >= COMPACT_AFTER_ENTRIES) {
    const logSize = log.reduce((n, d) => n + deltaSize(d), 0) + deltaSize(delta);
    if (logSize > COMPACT_SIZE_FACTOR * deltaSize(after)) return new Overwrite([wholeDelta(after)]);
  }
  return delta;
}

/** The whole snapshot as one log entry. */
function wholeDelta(after: VariablesSnapshot): VariablesDelta {
  return variablesDelta(null, after) ?? {};
}

function valueSize(value: JsonValue): number {
  return jsonText(value).length;
}

/**
 * JSON text of values, remembered per object: a value carried over many steps is the same object
 * in every snapshot (the sandbox freezes the values it returns), so it is serialized once (for the
 * comparison, the text check and the size), not at every step.
 */
const valueTexts = new WeakMap<object, string>();

function jsonText(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  let text = valueTexts.get(value);
  if (text === undefined) {
    text = JSON.stringify(value) ?? "null";
    valueTexts.set(value, text);
  }
  return text;
}

/** About the JSON size of a delta (or a snapshot): enough to tell when the log outgrew it. */
function deltaSize(d: VariablesDelta): number {
  let size = 2;
  for (const [name, value] of Object.entries(d.values ?? {}))
    size += name.length + 4 + valueSize(value);
  for (const part of [d.json, d.declarations, d.unserializable])
    for (const [name, text] of Object.entries(part ?? {})) size += name.length + text.length + 6;
  for (const name of d.removed ?? []) size += name.length + 3;
  return size;
}
