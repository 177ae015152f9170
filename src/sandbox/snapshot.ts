/**
 * The variables snapshot on the host: what a caller passes in is checked before anything is sent
 * to a child (a snapshot comes from a checkpoint, which may be old, edited or crafted), and what an
 * action leaves is assembled from the child's reports under host-side limits.
 *
 * Values the sandbox has checked are deep-frozen and remembered with their JSON size: a value seen
 * again (the same object, carried from one action to the next) is neither walked nor serialized
 * again, and since it is frozen it cannot have changed in between.
 */
import {
  SNAPSHOT_BUDGET_FACTOR,
  overBytes,
  utf8Bytes,
  type BindingReport,
} from "./child/protocol.mjs";
import {
  isBindableName,
  type JsonValue,
  type SandboxLimits,
  type VariablesSnapshot,
} from "./contract.ts";
import { planDeclarations } from "./restore.ts";
import { UNDEFINED_NOTE, type BuiltAction } from "./transform.ts";

/** Longest note kept for a name that is not carried over. */
const MAX_NOTE_CHARS = 500;
/** Longest declaration source accepted from a snapshot (a whole action's code is at most this). */
const MAX_DECLARATION_CHARS = 200_000;

/** An empty snapshot (the first action of a run). */
export function emptySnapshot(): VariablesSnapshot {
  return { values: {}, declarations: {}, unserializable: {} };
}

/** A child broke the protocol (the action's process is killed). */
export class ProtocolViolation extends Error {}

/** Checked values (deep-frozen) with their JSON text. */
const checked = new WeakMap<object, string>();

/**
 * JSON size of `value` if it is plain JSON data within the limits, else why not. Objects are
 * deep-frozen on the way (and remembered: the same object is not walked again).
 */
export function checkValue(
  value: unknown,
  limits: Pick<SandboxLimits, "maxValueBytes" | "maxValueDepth">,
): number | string {
  if (value !== null && typeof value === "object") {
    const known = checked.get(value);
    if (known !== undefined) return utf8Bytes(known);
  }
  // Iterative: a crafted value nested a million levels deep must not overflow the host's stack.
  const stack: [unknown, number][] = [[value, 0]];
  const seen: object[] = [];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v === "string" || typeof v === "boolean") continue;
    if (typeof v === "number") {
      if (!Number.isFinite(v)) return "value contains a number JSON cannot hold";
      continue;
    }
    if (typeof v !== "object") return `value contains a ${typeof v}, which is not JSON`;
    if (checked.has(v)) continue;
    if (depth >= limits.maxValueDepth)
      return `value is nested too deeply (more than ${limits.maxValueDepth} levels)`;
    const proto = Object.getPrototypeOf(v);
    if (Array.isArray(v) ? proto !== Array.prototype : proto !== Object.prototype && proto !== null)
      return "value is not plain JSON data";
    seen.push(v);
    for (const key of Reflect.ownKeys(v)) {
      const d = Object.getOwnPropertyDescriptor(v, key)!;
      if (typeof key !== "string" || !("value" in d)) return "value is not plain JSON data";
      stack.push([d.value, depth + 1]);
    }
  }
  const json = JSON.stringify(value) ?? "null";
  if (overBytes(json, limits.maxValueBytes))
    return `value is too large (over ${limits.maxValueBytes} bytes as JSON)`;
  for (const o of seen) Object.freeze(o);
  if (value !== null && typeof value === "object") checked.set(value, json);
  return utf8Bytes(json);
}

/**
 * Records `value`, parsed from `json` (a child's report), as checked: deep-frozen, with that text.
 * Returns its size, or why it is not acceptable.
 */
function checkParsed(
  value: unknown,
  json: string,
  limits: Pick<SandboxLimits, "maxValueBytes" | "maxValueDepth">,
): number | string {
  if (value !== null && typeof value === "object") {
    const problem = freezeWithin(value, limits.maxValueDepth);
    if (problem) return problem;
    checked.set(value, json);
  }
  return utf8Bytes(json);
}

/** Deep-freezes parsed JSON data, or says it is nested deeper than `maxDepth`. */
function freezeWithin(value: object, maxDepth: number): string | null {
  const stack: [object, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [o, depth] = stack.pop()!;
    if (depth >= maxDepth) return `value is nested too deeply (more than ${maxDepth} levels)`;
    Object.freeze(o);
    for (const v of Object.values(o))
      if (v !== null && typeof v === "object") stack.push([v, depth + 1]);
  }
  return null;
}

/**
 * The JSON text of a checked value (the text it was parsed from or checked with; values are
 * frozen, so it still holds), else its JSON.stringify.
 */
export function valueJson(value: unknown): string {
  if (value !== null && typeof value === "object") {
    const known = checked.get(value);
    if (known !== undefined) return known;
  }
  return JSON.stringify(value) ?? "null";
}

/** The value is one the sandbox checked and froze (or a primitive): it cannot have changed. */
export function isSettled(value: unknown): boolean {
  return value === null || typeof value !== "object" || checked.has(value);
}

/** A note as the framework prints it: one line, no control characters, capped. */
export function sanitizeNote(note: unknown): string {
  const text = typeof note === "string" ? note : "could not be copied";
  const line = text.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (c) =>
    JSON.stringify(c).slice(1, -1),
  );
  return line.length > MAX_NOTE_CHARS ? `${line.slice(0, MAX_NOTE_CHARS)}...` : line;
}

/** A name as a key of the notes: a variable name as is, anything else quoted (it may be any text). */
export function noteKey(name: string): string {
  return isBindableName(name) ? name : JSON.stringify(name.slice(0, 200));
}

/** A key {@link noteKey} could have made: a variable name, or a quoted string. */
function isNoteKey(key: string): boolean {
  return isBindableName(key) || (key.startsWith('"') && noteName(key) !== key);
}

/** The name a note is about: its key, unquoted if {@link noteKey} quoted it. */
export function noteName(key: string): string {
  if (!key.startsWith('"')) return key;
  try {
    const name: unknown = JSON.parse(key);
    return typeof name === "string" ? name : key;
  } catch {
    return key;
  }
}

/**
 * The snapshot's budget: values, declarations and notes, with their names, together at most
 * SNAPSHOT_BUDGET_FACTOR x maxValueBytes, in UTF-8 bytes (what a checkpoint stores).
 */
class SnapshotBudget {
  private left: number;
  constructor(readonly limits: Pick<SandboxLimits, "maxValueBytes">) {
    this.left = limits.maxValueBytes * SNAPSHOT_BUDGET_FACTOR;
  }

  /** Takes `size` bytes plus the name's for an entry; false (nothing taken) when they do not fit. */
  take(name: string, size: number): boolean {
    const cost = utf8Bytes(name) + size;
    if (cost > this.left) return false;
    this.left -= cost;
    return true;
  }

  /** The note for an entry that did not fit. */
  get note(): string {
    return overBudget(this.limits);
  }
}

/** Why a name cannot be a carried-over variable (null if it can). */
function nameProblem(name: string, shadowable: ReadonlySet<string>): string | null {
  if (name === "__proto__")
    return "__proto__ cannot be carried over (the name is special in JavaScript objects): use another name";
  if (!isBindableName(name)) return "not a valid variable name";
  if (shadowable.has(name)) return "shadows a built-in or tool name; not carried over";
  return null;
}

/**
 * The snapshot a caller passed in, checked: entries that are not plain data within the limits
 * (values), not strings of acceptable size (declarations), or over the snapshot's total budget are
 * moved to `unserializable` with the reason, so the next action explains them when used.
 */
export function acceptSnapshot(
  s: VariablesSnapshot | undefined,
  limits: SandboxLimits,
): VariablesSnapshot {
  const out = emptySnapshot();
  if (!s || typeof s !== "object") return out;
  const record = (v: unknown): Record<string, unknown> =>
    v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  const budget = new SnapshotBudget(limits);
  const notes: [string, string][] = [];
  const note = (name: string, why: unknown) => notes.push([noteKey(name), sanitizeNote(why)]);
  for (const [name, value] of Object.entries(record(s.values))) {
    const size = checkValue(value, limits);
    if (typeof size === "string") note(name, size);
    else if (!budget.take(name, size)) note(name, budget.note);
    else defineEntry(out.values, name, value as JsonValue);
  }
  for (const [name, source] of Object.entries(record(s.declarations))) {
    if (typeof source !== "string") note(name, "declaration source is not a string");
    else if (source.length > MAX_DECLARATION_CHARS)
      note(name, `declaration source is too long (over ${MAX_DECLARATION_CHARS} characters)`);
    else if (!budget.take(name, utf8Bytes(source))) note(name, budget.note);
    else defineEntry(out.declarations, name, source);
  }
  for (const [key, text] of Object.entries(record(s.unserializable)))
    notes.push([isNoteKey(key) ? key : noteKey(key), sanitizeNote(text)]);
  // Notes fit in what the entries left, in this order (first come first); the rest are dropped.
  for (const [key, text] of notes)
    if (!Object.hasOwn(out.unserializable, key) && budget.take(key, utf8Bytes(text)))
      defineEntry(out.unserializable, key, text);
  return out;
}

function overBudget(limits: Pick<SandboxLimits, "maxValueBytes">): string {
  return `the saved variables and functions exceed ${limits.maxValueBytes * SNAPSHOT_BUDGET_FACTOR} bytes in total`;
}

/** Sets an own property, whatever the name (`__proto__` included: never the prototype). */
function defineEntry<T>(target: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(target, name, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/** What an action left, as the host assembles it from the child's report. */
export interface AssembledSnapshot {
  snapshot: VariablesSnapshot;
  /** Names this action left with a value that is not carried over, with the note. */
  notCarriedOver: Record<string, string>;
}

/**
 * The snapshot after an action. Each binding the child reported replaces its previous entry; a
 * binding it did not report (the action never ran: it did not compile) keeps what it had. Checked
 * here, whatever the child says: sizes (a value over `maxValueBytes` is a protocol violation; the
 * total of values and declarations over the snapshot budget is a note), names (`__proto__` and
 * other names that cannot be variables are refused with a note), declarations (a class whose
 * creation would run code is not carried over: restore.ts), and notes (one line, capped).
 * @throws ProtocolViolation when the report is malformed
 */
export function assembleSnapshot(options: {
  built: BuiltAction;
  previous: VariablesSnapshot;
  shadowable: ReadonlySet<string>;
  bindings: unknown;
  limits: SandboxLimits;
}): AssembledSnapshot {
  const { built, previous, shadowable, limits } = options;
  if (options.bindings === null || typeof options.bindings !== "object")
    throw new ProtocolViolation("bindings are not an object");
  const reports = options.bindings as Record<string, BindingReport>;
  const notCarriedOver: Record<string, string> = {};
  const noteNow = (name: string, why: string) =>
    defineEntry(notCarriedOver, noteKey(name), sanitizeNote(why));
  for (const [name, why] of Object.entries(built.dropped)) noteNow(name, why);
  const snapshot = emptySnapshot();
  const budget = new SnapshotBudget(limits);
  const bound = new Set(built.names);
  /** Names left holding undefined (bindings restored as undefined): kept as notes, counted here. */
  const undefinedNames: string[] = [];
  const keepValue = (name: string, value: JsonValue | undefined, size: number | string) => {
    if (typeof size !== "number") return;
    if (budget.take(name, size)) snapshot.values[name] = value as JsonValue;
    else noteNow(name, budget.note);
  };
  const keepDeclaration = (name: string, source: string) => {
    if (budget.take(name, utf8Bytes(source))) snapshot.declarations[name] = source;
    else noteNow(name, budget.note);
  };
  const aliases: [name: string, of: string][] = [];
  for (const name of built.names) {
    const problem = nameProblem(name, shadowable);
    if (problem) {
      noteNow(name, problem);
      continue;
    }
    if (!Object.hasOwn(reports, name)) {
      // Not reported: nothing of the action ran. What the name had before stays.
      if (Object.hasOwn(previous.values, name))
        keepValue(name, previous.values[name], checkValue(previous.values[name], limits));
      else if (Object.hasOwn(previous.declarations, name))
        keepDeclaration(name, previous.declarations[name]);
      else if (previous.unserializable[name] === UNDEFINED_NOTE) undefinedNames.push(name);
      continue;
    }
    const b = reports[name];
    if (b === null || typeof b !== "object") throw new ProtocolViolation(`binding ${name}`);
    if (b.kind === "value") {
      if (typeof b.json !== "string" || overBytes(b.json, limits.maxValueBytes))
        throw new ProtocolViolation(`value of ${name}`);
      let value: unknown;
      try {
        value = JSON.parse(b.json);
      } catch {
        throw new ProtocolViolation(`value of ${name} is not JSON`);
      }
      const size = checkParsed(value, b.json, limits);
      if (typeof size === "string") throw new ProtocolViolation(`value of ${name}: ${size}`);
      keepValue(name, value as JsonValue, size);
    } else if (b.kind === "same") {
      // Unchanged: the very value the action was restored with (no text crossed the boundary).
      if (!Object.hasOwn(previous.values, name)) throw new ProtocolViolation(`same ${name}`);
      keepValue(name, previous.values[name], checkValue(previous.values[name], limits));
    } else if (b.kind === "decl") {
      const source = built.declarationSources[name];
      if (typeof source !== "string") throw new ProtocolViolation(`declaration ${name}`);
      keepDeclaration(name, source);
    } else if (b.kind === "alias") {
      if (typeof b.of !== "string" || b.of === name || !bound.has(b.of))
        throw new ProtocolViolation(`alias ${name}`);
      aliases.push([name, b.of]);
    } else if (b.kind === "undefined") {
      undefinedNames.push(name);
    } else if (b.kind === "unserializable") {
      noteNow(name, typeof b.reason === "string" ? b.reason : "could not be copied");
    } else throw new ProtocolViolation(`binding ${name} has no known kind`);
  }
  // Another name for a function or class is carried over as that name, when it is carried over.
  for (const [name, of] of aliases) {
    if (Object.hasOwn(snapshot.declarations, of)) keepDeclaration(name, of);
    else noteNow(name, `it is another name for ${of}, which is not carried over`);
  }
  // Declarations that cannot be restored as data (a class whose creation runs code, or that needs
  // something not carried over) are noted now, in the step that wrote them, not discovered steps
  // later.
  const values = new Set([...Object.keys(snapshot.values), ...undefinedNames]);
  const { problems } = planDeclarations(snapshot.declarations, shadowable, values);
  for (const [name, why] of Object.entries(problems)) {
    delete snapshot.declarations[name];
    noteNow(name, why);
  }
  // Notes, in what the entries left: names holding undefined (they are bindings), this step's
  // notes, then those of names that stayed unbound in this action (not declared again), so using
  // such a name later still explains itself. What does not fit is dropped from the snapshot (this
  // step's notes are still reported).
  const notes: [string, string][] = [
    ...undefinedNames.map((n): [string, string] => [n, UNDEFINED_NOTE]),
    ...Object.entries(notCarriedOver),
  ];
  for (const [key, note] of Object.entries(previous.unserializable)) {
    const name = noteName(key);
    if (note !== UNDEFINED_NOTE && !bound.has(name) && !shadowable.has(name))
      notes.push([key, note]);
  }
  for (const [key, note] of notes)
    if (!Object.hasOwn(snapshot.unserializable, key) && budget.take(key, utf8Bytes(note)))
      defineEntry(snapshot.unserializable, key, note);
  return { snapshot, notCarriedOver };
}
