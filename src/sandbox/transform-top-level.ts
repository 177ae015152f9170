/**
 * Phase 4 of the action transform (transform.ts): the current code's top-level bindings become
 * assignments to the wrapper's bindings — function declarations hoisted, `var` in nested blocks
 * and loops included, functions and classes recorded with their source — the last expression
 * statement becomes the REPL echo, and every top-level return is boxed.
 */
import { isFunctionLike } from "./restore.ts";
import {
  assign,
  Bindings,
  exprStmt,
  id,
  isFunctionBoundary,
  patternNames,
  str,
  walk,
  type AnyNode,
  type WrapperNames,
} from "./transform-ast.ts";

function boxTopLevelReturns(root: AnyNode): void {
  walk(root, (n) => {
    if (isFunctionBoundary(n) || n.type === "ClassBody") return false;
    if (n.type === "ReturnStatement") {
      n.argument = { type: "ArrayExpression", elements: [n.argument ?? id("undefined")] };
      return false;
    }
    return undefined;
  });
}

/** `print(...)`, `console.x(...)`, `final_answer(...)` (optionally awaited): nothing to echo. */
function isOutputCall(expr: AnyNode): boolean {
  const e = expr.type === "AwaitExpression" ? expr.argument : expr;
  if (e.type !== "CallExpression") return false;
  const c = e.callee;
  if (c.type === "Identifier") return c.name === "print" || c.name === "final_answer";
  return (
    c.type === "MemberExpression" && c.object.type === "Identifier" && c.object.name === "console"
  );
}

/** The current action's statements after phase 4. */
export interface RewrittenCode {
  /** Function declarations, installed before anything else runs (hoisting). */
  hoisted: AnyNode[];
  body: AnyNode[];
}

/**
 * Phase 4: the current code's top-level bindings become assignments to the wrapper's bindings
 * (function declarations hoisted, `var` in nested blocks and loops included), the last expression
 * statement becomes the REPL echo, and every top-level return is boxed.
 */
export function rewriteTopLevel(
  program: AnyNode,
  source: string,
  bindings: Bindings,
  declarationSources: Record<string, string>,
  names: WrapperNames,
): RewrittenCode {
  const hoisted: AnyNode[] = [];
  const body: AnyNode[] = [];
  const last = program.body[program.body.length - 1];
  for (const stmt of program.body) {
    if (stmt.type === "FunctionDeclaration") {
      bindings.add(stmt.id.name);
      declarationSources[stmt.id.name] = source.slice(stmt.start, stmt.end);
      hoisted.push(
        declStatement(stmt.id.name, { ...stmt, type: "FunctionExpression" }, names.decl, stmt.loc),
      );
    } else if (stmt.type === "ClassDeclaration") {
      bindings.add(stmt.id.name);
      declarationSources[stmt.id.name] = source.slice(stmt.start, stmt.end);
      body.push(
        declStatement(stmt.id.name, { ...stmt, type: "ClassExpression" }, names.decl, stmt.loc),
      );
    } else if (stmt.type === "VariableDeclaration") {
      body.push(
        rewriteDeclaration(stmt, true, source, bindings.add, declarationSources, names.decl) ?? {
          type: "EmptyStatement",
        },
      );
    } else if (
      stmt === last &&
      stmt.type === "ExpressionStatement" &&
      !isOutputCall(stmt.expression)
    ) {
      // REPL echo: the last expression's value becomes run()'s result (same evaluation, same order).
      body.push({ type: "ReturnStatement", argument: stmt.expression, loc: stmt.loc });
    } else body.push(stmt);
  }
  // Every top-level return (ours and the guest's) returns its value boxed in an array, so an
  // async run() never adopts a returned promise: `search(q)` as the last line is echoed as a
  // Promise, not silently awaited (and a rejected one doesn't become the action's error).
  for (const stmt of body) boxTopLevelReturns(stmt);
  // `var` nested in top-level blocks and loops is top-level too (function scoped).
  for (const stmt of body)
    rewriteNestedVars(stmt, source, bindings.add, declarationSources, names.decl);
  // A name redeclared as a plain value in this action is no longer a declaration.
  for (const stmt of program.body) {
    if (stmt.type !== "VariableDeclaration") continue;
    for (const d of stmt.declarations) {
      if (d.id.type === "Identifier" && isFunctionLike(d.init)) continue;
      const ns: string[] = [];
      patternNames(d.id, ns);
      for (const n of ns) delete declarationSources[n];
    }
  }
  // After that: `let f; f = () => ...` records f (what the binding holds at the end decides).
  for (const stmt of program.body)
    recordAssignedFunction(stmt, source, declarationSources, names.decl);
  return { hoisted, body };
}

/**
 * `f = () => ...` or `C = class { ... }` as a top-level statement: the function is recorded with
 * its source, as `const f = () => ...` is (it is carried over while the binding still holds it).
 */
function recordAssignedFunction(
  stmt: AnyNode,
  code: string,
  declarationSources: Record<string, string>,
  DECL: string,
): void {
  if (stmt.type !== "ExpressionStatement") return;
  const e = stmt.expression;
  if (e.type !== "AssignmentExpression" || e.operator !== "=" || e.left.type !== "Identifier")
    return;
  if (!isFunctionLike(e.right)) return;
  declarationSources[e.left.name] = code.slice(e.right.start, e.right.end);
  // In place: the REPL echo may hold this node.
  const assignment = { ...e };
  for (const key of Object.keys(e)) delete e[key];
  Object.assign(e, namedDecl(assignment.left.name, assignment.right, DECL, assignment.loc));
}

/**
 * `(name = fn, DECL("name", name))`: the function is created by a plain assignment, so an
 * anonymous one gets its binding's name (`f.name === "f"`, as in `const f = () => ...`), then
 * recorded; the expression's value is the function.
 */
function namedDecl(name: string, fn: AnyNode, DECL: string, loc?: AnyNode): AnyNode {
  return {
    type: "SequenceExpression",
    expressions: [
      assign(id(name), fn, loc),
      {
        type: "CallExpression",
        callee: id(DECL),
        arguments: [str(name), id(name)],
        optional: false,
      },
    ],
    loc,
  };
}

/** `name = fn, DECL("name", name)` as a statement: a function or class recorded with its name (the host keeps its source). */
export function declStatement(name: string, fn: AnyNode, DECL: string, loc?: AnyNode): AnyNode {
  return exprStmt(namedDecl(name, fn, DECL, loc), loc);
}

/**
 * Turns a declaration into assignments to the wrapper's bindings. Returns an ExpressionStatement,
 * or null when nothing needs to happen (`var x;`). `topLevel` marks Program-level statements,
 * where `const f = () => ...` is recorded as a declaration.
 */
function rewriteDeclaration(
  decl: AnyNode,
  topLevel: boolean,
  code: string,
  addName: (n: string) => void,
  declarationSources: Record<string, string>,
  DECL: string,
): AnyNode | null {
  const assignments: AnyNode[] = [];
  for (const d of decl.declarations) {
    const ns: string[] = [];
    patternNames(d.id, ns);
    ns.forEach(addName);
    if (d.init == null) {
      // `let x;` (re)declares x as undefined; `var x;` keeps the current value, like JS.
      if (decl.kind !== "var")
        for (const n of ns) assignments.push(assign(id(n), id("undefined"), d.loc));
      continue;
    }
    if (topLevel && d.id.type === "Identifier" && isFunctionLike(d.init)) {
      declarationSources[d.id.name] = code.slice(d.init.start, d.init.end);
      assignments.push(namedDecl(d.id.name, d.init, DECL, d.loc));
      continue;
    }
    assignments.push(assign(d.id, d.init, d.loc));
  }
  if (assignments.length === 0) return null;
  const expression =
    assignments.length === 1
      ? assignments[0]
      : { type: "SequenceExpression", expressions: assignments };
  return exprStmt(expression, decl.loc);
}

/** Rewrites `var` declarations nested in top-level statements (not inside functions). */
function rewriteNestedVars(
  root: AnyNode,
  code: string,
  addName: (n: string) => void,
  declarationSources: Record<string, string>,
  DECL: string,
): void {
  walk(root, (n) => {
    if (isFunctionBoundary(n) || n.type === "ClassBody") return false;
    for (const key of Object.keys(n)) {
      if (key === "loc") continue;
      const v = n[key];
      const fix = (child: AnyNode): AnyNode => {
        if (!child || child.type !== "VariableDeclaration" || child.kind !== "var") return child;
        const isLoopHead =
          (n.type === "ForInStatement" || n.type === "ForOfStatement") && key === "left";
        if (isLoopHead) {
          const ns: string[] = [];
          patternNames(child.declarations[0].id, ns);
          ns.forEach(addName);
          return child.declarations[0].id;
        }
        const stmt = rewriteDeclaration(child, false, code, addName, declarationSources, DECL);
        if (n.type === "ForStatement" && key === "init") return stmt ? stmt.expression : null;
        return stmt ?? { type: "EmptyStatement" };
      };
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) v[i] = fix(v[i]);
      } else if (v && typeof v === "object" && typeof v.type === "string") {
        n[key] = fix(v);
      }
    }
    return undefined;
  });
}
