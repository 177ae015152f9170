/**
 * Restore is data, not code: which saved declarations (function and class sources of earlier
 * actions) can be installed again before an action runs without running any code the model wrote,
 * and in which order.
 *
 * Creating a function runs nothing, so every function source is restorable. Creating a class runs
 * code: its `extends` expression, computed keys, static field initializers and static blocks. A
 * class is restored only when none of those can run model code — no static block; static fields
 * initialized with data (literals, arrays and object literals of data, functions and arrows, which
 * are created and not called, classes that pass the same test, and names of carried-over values,
 * functions and classes, which are read from plain bindings); computed keys that are literals or
 * well-known symbols (`[Symbol.iterator]`); and an `extends` that names a standard constructor or
 * another restored declaration. Everything a class reads is restored before it, whatever order the
 * source had. Any other class is not carried over, with a note saying why; the action that defines
 * it can still use it. A name that holds another carried-over function or class
 * (`const alias = helper`) is restored as that name, after it. */
import * as acorn from "acorn";
import { GUEST_ECMA_VERSION } from "./ecma-version.ts";
import { isBindableName } from "./contract.ts";

type AnyNode = any;

/** Standard constructors a restored class may extend (read from the guest's global object). */
export const EXTENDABLE_GLOBALS: ReadonlySet<string> = new Set([
  "Object",
  "Array",
  "Map",
  "Set",
  "WeakMap",
  "WeakSet",
  "Promise",
  "RegExp",
  "Date",
  "Number",
  "String",
  "Boolean",
  "ArrayBuffer",
  "DataView",
  "Int8Array",
  "Int16Array",
  "Int32Array",
  "Uint8Array",
  "Uint8ClampedArray",
  "Uint16Array",
  "Uint32Array",
  "BigInt64Array",
  "BigUint64Array",
  "Error",
  "TypeError",
  "RangeError",
  "ReferenceError",
  "SyntaxError",
  "EvalError",
  "URIError",
  "AggregateError",
]);

/** A function or class expression node (what a declaration source must parse to). */
export function isFunctionLike(node: AnyNode): boolean {
  return (
    node != null &&
    (node.type === "ArrowFunctionExpression" ||
      node.type === "FunctionExpression" ||
      node.type === "ClassExpression")
  );
}

/**
 * Parses a stored declaration source as a single function/class expression, or a name (another
 * name for a carried-over function or class), or says why not.
 */
export function parseDeclarationSource(source: unknown): AnyNode | string {
  if (typeof source !== "string") return "declaration source is not a string";
  let node: AnyNode;
  try {
    node = acorn.parseExpressionAt(source, 0, { ecmaVersion: GUEST_ECMA_VERSION });
  } catch (err) {
    if (err instanceof RangeError) return "declaration source is nested too deeply";
    return `declaration source does not parse: ${(err as Error).message}`;
  }
  if (source.slice(node.end).trim() !== "") return "declaration source has trailing code";
  // Another name for a carried-over function or class (`const alias = helper`).
  if (node.type === "Identifier" && isBindableName(node.name)) return node;
  if (!isFunctionLike(node)) return "declaration source is not a function or class";
  return node;
}

/** Evaluating this expression runs no code and reads nothing (a literal, `-1`, a plain template). */
function isInert(expr: AnyNode): boolean {
  if (expr == null) return true;
  if (expr.type === "Literal") return true;
  if (expr.type === "TemplateLiteral") return expr.expressions.length === 0;
  if (expr.type === "UnaryExpression" && ["-", "+", "!", "~", "void"].includes(expr.operator))
    return expr.argument.type === "Literal" && !expr.argument.regex;
  return false;
}

/** Well-known symbols a restored class may use as a computed member name (`[Symbol.iterator]`). */
const WELL_KNOWN_SYMBOLS: ReadonlySet<string> = new Set(
  Object.getOwnPropertyNames(Symbol).filter((k) => typeof (Symbol as any)[k] === "symbol"),
);

/** What creating a class at restore reads and needs rewritten (see {@link classCodeProblem}). */
interface ClassReads {
  /** Names a static initializer reads: carried-over values, functions or classes (restored first). */
  names: Set<string>;
  /** `Symbol` identifiers of `[Symbol.x]` member names: read from the guest's globals on restore. */
  symbols: AnyNode[];
}

/** `[Symbol.iterator]` and the like: reading a well-known symbol off the frozen `Symbol`. */
function isWellKnownSymbolKey(key: AnyNode): boolean {
  return (
    key.type === "MemberExpression" &&
    !key.computed &&
    !key.optional &&
    key.object.type === "Identifier" &&
    key.object.name === "Symbol" &&
    key.property.type === "Identifier" &&
    WELL_KNOWN_SYMBOLS.has(key.property.name)
  );
}

/** Nested literals deeper than this are not examined (treated as code). */
const MAX_DATA_DEPTH = 32;

/**
 * True when evaluating `expr` runs no code the model wrote: literals, arrays and object literals of
 * such values (no spread, no computed or `__proto__` keys), function and arrow expressions (created,
 * not called), classes that pass {@link classCodeProblem} themselves, and names (a name is read
 * from a plain binding: the names are collected in `reads`, and must be carried over too).
 */
function isData(expr: AnyNode, reads: ClassReads, depth = 0): boolean {
  if (isInert(expr)) return true;
  if (depth > MAX_DATA_DEPTH) return false;
  switch (expr.type) {
    case "Identifier":
      if (expr.name !== "undefined") reads.names.add(expr.name);
      return true;
    case "FunctionExpression":
    case "ArrowFunctionExpression":
      return true;
    case "ClassExpression":
      return classCodeProblem(expr, reads, depth + 1) === null;
    case "ArrayExpression":
      return expr.elements.every(
        (el: AnyNode) =>
          el === null || (el.type !== "SpreadElement" && isData(el, reads, depth + 1)),
      );
    case "ObjectExpression":
      return expr.properties.every(
        (p: AnyNode) =>
          p.type === "Property" &&
          !p.computed &&
          !(p.key.type === "Identifier"
            ? p.key.name === "__proto__"
            : p.key.value === "__proto__") &&
          isData(p.value, reads, depth + 1),
      );
  }
  return false;
}

/**
 * Why creating this class would run code the model wrote (null if it would not). What it reads
 * apart from its `extends` name — names in static initializers, well-known symbols in member
 * names — is added to `reads`; {@link planDeclarations} checks those and the `extends` name
 * against what is restored, and restores them first.
 */
function classCodeProblem(node: AnyNode, reads: ClassReads, depth = 0): string | null {
  const s = node.superClass;
  if (s != null && s.type !== "Identifier" && !(s.type === "Literal" && s.value === null))
    return "its `extends` is an expression";
  // A nested class's `extends` is read like a static initializer's name.
  if (depth > 0 && s?.type === "Identifier") reads.names.add(s.name);
  for (const member of node.body.body) {
    if (member.type === "StaticBlock") return "it has a static block";
    if (member.computed && !isInert(member.key)) {
      if (!isWellKnownSymbolKey(member.key)) return "it has a computed member name";
      reads.symbols.push(member.key.object);
    }
    if (
      member.type === "PropertyDefinition" &&
      member.static &&
      !isData(member.value, reads, depth)
    )
      return "a static field is initialized with code";
  }
  return null;
}

/** One declaration to install, in order. */
export interface PlannedDeclaration {
  name: string;
  source: string;
  /** The parsed function or class expression, or the name it is another name for (fresh: the caller may rewrite it). */
  node: AnyNode;
  /** For a class extending a standard constructor: its name (read from the guest's globals). */
  extendsGlobal: string | null;
  /** `Symbol` identifiers in the class's member names, to be read from the guest's globals. */
  symbols: AnyNode[];
}

/** A planned class or alias, with what must be in place before it. */
type Pending = PlannedDeclaration & { base: string | null; reads: Set<string>; alias: boolean };

/**
 * The declarations of a snapshot that can be restored as data, in an order that keeps every read
 * at restore valid, and the others with the reason they are not carried over. Values are restored
 * before any declaration; then functions (creating one runs nothing); then each class after what
 * its `extends` and static initializers name (a function, a class, or a restored value), and each
 * other name for a function or class (`const alias = helper`) after it. A class is not carried over
 * when something it needs is not (missing, not a function or class, or part of a cycle).
 * @param excluded names never restored (tools and built-ins), reported as such
 * @param values names restored as values (a static initializer may read them)
 */
export function planDeclarations(
  declarations: Record<string, unknown>,
  excluded: ReadonlySet<string>,
  values: ReadonlySet<string> = new Set(),
): { order: PlannedDeclaration[]; problems: Record<string, string> } {
  const problems: Record<string, string> = {};
  const functions: PlannedDeclaration[] = [];
  const pending = new Map<string, Pending>();
  for (const [name, source] of Object.entries(declarations)) {
    if (!isBindableName(name) || name === "__proto__") {
      problems[name] = "not a valid variable name";
      continue;
    }
    if (excluded.has(name)) {
      problems[name] = "shadows a built-in or tool name; not carried over";
      continue;
    }
    const node = parseDeclarationSource(source);
    if (typeof node === "string") {
      problems[name] = node;
      continue;
    }
    const entry = { name, source: source as string, node, extendsGlobal: null, symbols: [] };
    if (node.type === "Identifier") {
      pending.set(name, { ...entry, base: null, reads: new Set([node.name]), alias: true });
      continue;
    }
    if (node.type !== "ClassExpression") {
      functions.push(entry);
      continue;
    }
    const reads: ClassReads = { names: new Set(), symbols: [] };
    const problem = classCodeProblem(node, reads);
    if (problem) {
      problems[name] =
        `class not carried over: ${problem}, which would run again before every later step (define it in the step that uses it)`;
      continue;
    }
    // The class's own name inside its body is its own binding, set before static initializers run.
    if (node.id) reads.names.delete(node.id.name);
    const base = node.superClass?.type === "Identifier" ? (node.superClass.name as string) : null;
    pending.set(name, { ...entry, symbols: reads.symbols, base, reads: reads.names, alias: false });
  }
  const declared = new Set(Object.keys(declarations));
  const order = [...functions];
  const placed = new Set(functions.map((f) => f.name));
  const functionLike = (n: string) => placed.has(n) || pending.has(n);
  /** Why `entry` can never be placed (null: it can be, now or once what it needs is placed). */
  const blocker = (entry: Pending): string | null => {
    if (entry.alias) {
      const target = [...entry.reads][0];
      return functionLike(target)
        ? null
        : `it is another name for ${target}, which is not a carried-over function or class`;
    }
    if (
      entry.base !== null &&
      !functionLike(entry.base) &&
      !isExtendableGlobal(entry.base, declared)
    )
      return `class not carried over: it extends ${entry.base}, which is not a carried-over function or class`;
    for (const read of entry.reads)
      if (!functionLike(read) && !values.has(read))
        return `class not carried over: a static field reads ${read}, which is not carried over`;
    return null;
  };
  const ready = (entry: Pending): boolean =>
    (entry.base === null || placed.has(entry.base) || isExtendableGlobal(entry.base, declared)) &&
    [...entry.reads].every(
      (r) => placed.has(r) || (!entry.alias && !pending.has(r) && values.has(r)),
    );
  for (let progress = true; progress && pending.size > 0;) {
    progress = false;
    for (const [name, entry] of pending) {
      const blocked = blocker(entry);
      if (blocked !== null) {
        problems[name] = blocked;
        pending.delete(name);
        progress = true;
      } else if (ready(entry)) {
        if (entry.base !== null && !placed.has(entry.base)) entry.extendsGlobal = entry.base;
        order.push(entry);
        placed.add(name);
        pending.delete(name);
        progress = true;
      }
    }
  }
  // What is left waits on itself: a cycle of classes (or names) that need each other.
  for (const [name, entry] of pending)
    problems[name] = entry.alias
      ? `it is another name for ${[...entry.reads][0]}, which is not carried over`
      : entry.base !== null && pending.has(entry.base)
        ? `class not carried over: it extends ${entry.base}, which is not carried over`
        : "class not carried over: it needs a class that needs it (a cycle)";
  return {
    order: order.map(({ name, source, node, extendsGlobal, symbols }) => ({
      name,
      source,
      node,
      extendsGlobal,
      symbols,
    })),
    problems,
  };
}

function isExtendableGlobal(name: string, declared: ReadonlySet<string>): boolean {
  return !declared.has(name) && EXTENDABLE_GLOBALS.has(name);
}
