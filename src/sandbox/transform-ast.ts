/**
 * What the phases of the action transform (transform.ts) share: the AST walk, pattern names, node
 * builders, and the wrapper's own names and bindings.
 */
import { stringLiteralRaw } from "./ses-escape.ts";

/** An ESTree node as acorn produces it (the phases check `type` themselves). */
export type AnyNode = any;

/** A function of any kind: its own scope for `var`, `return` and `arguments`. */
export function isFunctionBoundary(node: AnyNode): boolean {
  return (
    node.type === "FunctionDeclaration" ||
    node.type === "FunctionExpression" ||
    node.type === "ArrowFunctionExpression"
  );
}

/** Visits every node (pre-order). `enter` returning false skips the node's children. */
export function walk(
  node: AnyNode,
  enter: (n: AnyNode, parent: AnyNode) => boolean | void,
  parent: AnyNode = null,
): void {
  // Iterative to survive deeply nested (hostile) code without a host stack overflow.
  const stack: [AnyNode, AnyNode][] = [[node, parent]];
  while (stack.length > 0) {
    const [n, p] = stack.pop()!;
    if (enter(n, p) === false) continue;
    for (const key of Object.keys(n)) {
      if (key === "loc") continue;
      const v = n[key];
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--)
          if (v[i] && typeof v[i].type === "string") stack.push([v[i], n]);
      } else if (v && typeof v === "object" && typeof v.type === "string") stack.push([v, n]);
    }
  }
}

/** Appends the names a binding pattern binds (defaults and computed keys are not names). */
export function patternNames(pattern: AnyNode, out: string[]): void {
  switch (pattern.type) {
    case "Identifier":
      out.push(pattern.name);
      break;
    case "ObjectPattern":
      for (const p of pattern.properties)
        patternNames(p.type === "RestElement" ? p.argument : p.value, out);
      break;
    case "ArrayPattern":
      for (const el of pattern.elements) if (el) patternNames(el, out);
      break;
    case "RestElement":
      patternNames(pattern.argument, out);
      break;
    case "AssignmentPattern":
      patternNames(pattern.left, out);
      break;
  }
}

/** Node builders for the wrapper (no `loc`: they map to no guest line unless given one). */
export const id = (name: string): AnyNode => ({ type: "Identifier", name });
export const str = (value: string): AnyNode => ({
  type: "Literal",
  value,
  raw: stringLiteralRaw(value),
});
export const assign = (left: AnyNode, right: AnyNode, loc?: AnyNode): AnyNode => ({
  type: "AssignmentExpression",
  operator: "=",
  left,
  right,
  loc,
});
export const exprStmt = (expression: AnyNode, loc?: AnyNode): AnyNode => ({
  type: "ExpressionStatement",
  expression,
  loc,
});

/** `key: value` in an object literal. */
export function prop(key: string, value: AnyNode): AnyNode {
  return {
    type: "Property",
    key: id(key),
    value,
    kind: "init",
    method: false,
    shorthand: false,
    computed: false,
  };
}

/** Adds every identifier name in `root` to `used`. */
export function collectIdentifiers(root: AnyNode, used: Set<string>): void {
  walk(root, (n) => {
    if (n.type === "Identifier") used.add(n.name);
  });
}

/** The wrapper's own parameter names, fresh for each action (see {@link wrapperNames}). */
export interface WrapperNames {
  restore: string;
  decl: string;
  ref: string;
  regexp: string;
  template: string;
}

/** The persistent binding names of one action, in first-seen order (what `read()` returns). */
export class Bindings {
  readonly names: string[] = [];
  private readonly seen = new Set<string>();
  add = (name: string): void => {
    if (this.seen.has(name)) return;
    this.seen.add(name);
    this.names.push(name);
  };
}
