/**
 * Restore is data, not code: which saved declarations (function and class sources of earlier
 * actions) can be installed again before an action runs without running any code the model wrote,
 * and in which order.
 *
 * Creating a function runs nothing, so every function source is restorable. Creating a class runs
 * code: its `extends` expression, computed keys, static field initializers and static blocks. A
 * class is restored only when none of those can run model code — no static block, static fields
 * initialized with literals only, computed keys that are literals, and an `extends` that names a
 * standard constructor or another restored declaration (installed before it). Any other class is
 * not carried over, with a note saying why; the action that defines it can still use it.
 */
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

/** Parses a stored declaration source as a single function/class expression, or says why not. */
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
  if (!isFunctionLike(node)) return "declaration source is not a function or class";
  return node;
}

/** Evaluating this expression runs no code and reads nothing (a literal, `-1`, a plain template). */
function isInert(expr: AnyNode): boolean {
  if (expr == null) return true;
  if (expr.type === "Literal") return true;
  if (expr.type === "TemplateLiteral") return expr.expressions.length === 0;
  if (expr.type === "UnaryExpression" && ["-", "+", "!", "~"].includes(expr.operator))
    return expr.argument.type === "Literal" && !expr.argument.regex;
  return false;
}

/**
 * Why creating this class would run code the model wrote (null if it would not, apart from its
 * `extends` name, which {@link planDeclarations} checks against what is restored).
 */
function classCodeProblem(node: AnyNode): string | null {
  const s = node.superClass;
  if (s != null && s.type !== "Identifier" && !(s.type === "Literal" && s.value === null))
    return "its `extends` is an expression";
  for (const member of node.body.body) {
    if (member.type === "StaticBlock") return "it has a static block";
    if (member.computed && !isInert(member.key)) return "it has a computed member name";
    if (member.type === "PropertyDefinition" && member.static && !isInert(member.value))
      return "a static field is initialized with code";
  }
  return null;
}

/** One declaration to install, in order. */
export interface PlannedDeclaration {
  name: string;
  source: string;
  /** The parsed function or class expression (fresh: the caller may rewrite it). */
  node: AnyNode;
  /** For a class extending a standard constructor: its name (read from the guest's globals). */
  extendsGlobal: string | null;
}

/**
 * The declarations of a snapshot that can be restored as data, in an order that keeps every
 * `extends` valid (functions first; a class after the class or function it extends), and the
 * others with the reason they are not carried over.
 * @param excluded names never restored (tools and built-ins), reported as such
 */
export function planDeclarations(
  declarations: Record<string, unknown>,
  excluded: ReadonlySet<string>,
): { order: PlannedDeclaration[]; problems: Record<string, string> } {
  const problems: Record<string, string> = {};
  const functions: PlannedDeclaration[] = [];
  const classes = new Map<string, PlannedDeclaration & { base: string | null }>();
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
    const entry = { name, source: source as string, node, extendsGlobal: null };
    if (node.type !== "ClassExpression") {
      functions.push(entry);
      continue;
    }
    const problem = classCodeProblem(node);
    if (problem) {
      problems[name] =
        `class not carried over: ${problem}, which would run again before every later step (define it in the step that uses it)`;
      continue;
    }
    const base = node.superClass?.type === "Identifier" ? (node.superClass.name as string) : null;
    classes.set(name, { ...entry, base });
  }
  // Classes in dependency order: each after its base; a class whose base is missing, not a
  // function or class, or part of a cycle is not carried over.
  const order = [...functions];
  const placed = new Set(functions.map((f) => f.name));
  const pending = new Map(classes);
  for (let progress = true; progress && pending.size > 0;) {
    progress = false;
    for (const [name, entry] of pending) {
      if (
        entry.base === null ||
        placed.has(entry.base) ||
        isExtendableGlobal(entry.base, classes)
      ) {
        if (entry.base !== null && !placed.has(entry.base)) entry.extendsGlobal = entry.base;
        order.push(entry);
        placed.add(name);
        pending.delete(name);
        progress = true;
      } else if (!classes.has(entry.base)) {
        problems[name] =
          `class not carried over: it extends ${entry.base}, which is not a carried-over function or class`;
        pending.delete(name);
        progress = true;
      }
    }
  }
  for (const [name, entry] of pending)
    problems[name] = `class not carried over: it extends ${entry.base}, which is not carried over`;
  return { order, problems };
}

function isExtendableGlobal(name: string, declared: ReadonlyMap<string, unknown>): boolean {
  return !declared.has(name) && EXTENDABLE_GLOBALS.has(name);
}
