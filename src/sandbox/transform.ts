/**
 * Builds the evaluable wrapper around one code action from a parsed AST (acorn in, astring out).
 *
 * Guest code never gets pasted into a template: it is parsed, its top-level bindings are rewritten
 * into assignments to bindings the wrapper declares, and the wrapper is generated from the AST.
 * That gives REPL semantics across actions:
 * - every top-level `const` / `let` / `var` / function / class name lives in one wrapper scope, so a
 *   later action can declare the same name again and the newer value simply wins;
 * - values come back after the action through `read()` (the child serializes them);
 * - function and class declarations (and `const f = () => ...`) are recorded with their source so
 *   they can be re-installed from a snapshot, also in a fresh process.
 */
import * as acorn from "acorn";
import { generate } from "astring";
import {
  GUEST_STANDARD_GLOBALS,
  isBindableName,
  type GuestError,
  type VariablesSnapshot,
} from "./contract.ts";
import { GUEST_ECMA_VERSION } from "./ecma-version.ts";
import { isFunctionLike, planDeclarations, type PlannedDeclaration } from "./restore.ts";
import { escapeForSes, SES_SAFE_GENERATOR, stringLiteralRaw } from "./ses-escape.ts";

type AnyNode = any;

/** Output of {@link buildAction}: what the child evaluates and how to map its errors back. */
export interface BuiltAction {
  /**
   * Source of `(function (restore, decl, ref, regexp, template) { ... return { read, run } })`
   * (the child passes its helpers in that order).
   */
  source: string;
  /** Persistent binding names, in the order `read()` returns their values. */
  names: string[];
  /** Source of every function/class binding known after this action (previous + new). */
  declarationSources: Record<string, string>;
  /** Values to restore before the guest code runs (from the previous snapshot). */
  restoreValues: Record<string, unknown>;
  /**
   * Snapshot entries that could not be re-installed (bad names or sources, classes whose creation
   * runs code), with the reason. Kept out of the next snapshot, with that note.
   */
  dropped: Record<string, string>;
  /**
   * Every name written anywhere in this action's code and in the declarations it restores: a
   * persistent binding not in this set cannot have been read, assigned or mutated by the action.
   */
  mentioned: ReadonlySet<string>;
  /** Maps a 1-based line/column of the generated source to the 1-based guest line, if any. */
  mapLine(line: number, column: number): number | null;
}

/** Parse failure reported to the model. */
export interface BuildFailure {
  error: GuestError;
}

const STRICT_PREFIX = '"use strict"; ';

/** Note in `snapshot.unserializable` for names whose value was `undefined` (restored as undefined). */
export const UNDEFINED_NOTE = "value is undefined";

/** Looks like TypeScript syntax (only consulted after a parse error). */
const TYPESCRIPT_HINT =
  /(?:\b(?:const|let|var)\s+\w+|\(\s*\w+|,\s*\w+|\))\s*:\s*(?:string|number|boolean|any|unknown|void|never|object|Record<|Array<|Promise<|\{)|\binterface\s+\w+\s*\{|\btype\s+\w+\s*=|\bas\s+(?:const|string|number|any|unknown)\b/;

const PARSE_OPTIONS: acorn.Options = {
  // The child's own edition: syntax its V8 cannot compile is a syntax error with a position here.
  ecmaVersion: GUEST_ECMA_VERSION,
  sourceType: "script",
  allowAwaitOutsideFunction: true,
  allowReturnOutsideFunction: true,
  locations: true,
};

function isFunctionBoundary(node: AnyNode): boolean {
  return (
    node.type === "FunctionDeclaration" ||
    node.type === "FunctionExpression" ||
    node.type === "ArrowFunctionExpression"
  );
}

/** Visits every node (pre-order). `enter` returning false skips the node's children. */
function walk(
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

function patternNames(pattern: AnyNode, out: string[]): void {
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

const id = (name: string): AnyNode => ({ type: "Identifier", name });
const str = (value: string): AnyNode => ({ type: "Literal", value, raw: stringLiteralRaw(value) });
const assign = (left: AnyNode, right: AnyNode, loc?: AnyNode): AnyNode => ({
  type: "AssignmentExpression",
  operator: "=",
  left,
  right,
  loc,
});
const exprStmt = (expression: AnyNode, loc?: AnyNode): AnyNode => ({
  type: "ExpressionStatement",
  expression,
  loc,
});

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

function toGuestSyntaxError(err: unknown): GuestError {
  if (err instanceof SyntaxError && (err as any).loc) {
    const loc = (err as any).loc as { line: number; column: number };
    return {
      name: "SyntaxError",
      message: err.message.replace(/\s*\(\d+:\d+\)$/, ""),
      line: loc.line,
      column: loc.column + 1,
    };
  }
  if (err instanceof RangeError) {
    return {
      name: "SyntaxError",
      message: "The code is nested too deeply to parse",
      line: null,
      column: null,
    };
  }
  return {
    name: "SyntaxError",
    message: String((err as Error)?.message ?? err),
    line: null,
    column: null,
  };
}

/**
 * Parses `code` and builds the wrapper for one action.
 * @param previous snapshot of the previous action (its values are restored, declarations re-installed)
 * @param shadowable names of globals and tools — never restored from a snapshot
 * @param available names that exist in the guest's global scope (default: `shadowable`); other
 *   free names throw ReferenceError when read
 */
export function buildAction(
  code: string,
  previous: VariablesSnapshot | undefined,
  shadowable: ReadonlySet<string> = new Set(),
  available: ReadonlySet<string> = shadowable,
): BuiltAction | BuildFailure {
  let built: BuiltAction | BuildFailure;
  try {
    built = buildActionUnguarded(code, previous, shadowable, available);
  } catch (err) {
    // Hostile nesting can overflow any recursive step (parser, pattern walk, generator): that is a
    // property of the guest's code, reported to it, never a host crash.
    built = { error: toGuestSyntaxError(err) };
  }
  if ("error" in built) addPosition(built.error);
  return built;
}

/** Appends " (line L, column C)" to a syntax error's message (once): the message alone must say where. */
function addPosition(e: GuestError): void {
  if (typeof e.line !== "number" || typeof e.column !== "number") return;
  const position = ` (line ${e.line}, column ${e.column})`;
  if (!e.message.includes(position)) e.message += position;
}

/**
 * A `#!` first line (hashbang) becomes a `//` comment of the same length, so the code can get the
 * strict-mode prefix and line/column numbers stay the guest's own.
 */
function stripHashbang(code: string): string {
  return code.startsWith("#!") ? `//${code.slice(2)}` : code;
}

/** The wrapper's own parameter names, fresh for each action (see {@link wrapperNames}). */
interface WrapperNames {
  restore: string;
  decl: string;
  ref: string;
  regexp: string;
  template: string;
}

/** The persistent binding names of one action, in first-seen order (what `read()` returns). */
class Bindings {
  readonly names: string[] = [];
  private readonly seen = new Set<string>();
  add = (name: string): void => {
    if (this.seen.has(name)) return;
    this.seen.add(name);
    this.names.push(name);
  };
}

/** Phase 1: the guest's code parsed as strict script code (a `#!` line kept as a comment). */
function parseGuestCode(code: string): { program: AnyNode; source: string } | BuildFailure {
  // Guest code runs as strict code (SES). Parse it that way, so strict-only errors (`with`, octal
  // literals, `let eval`, ...) are reported here with a position instead of failing later without
  // one. The directive goes on line 1 without a newline: line numbers stay the guest's own.
  const source = STRICT_PREFIX + stripHashbang(code);
  let program: AnyNode;
  try {
    program = acorn.parse(source, PARSE_OPTIONS);
  } catch (err) {
    const e = toGuestSyntaxError(err);
    if (e.line === 1 && typeof e.column === "number")
      e.column = Math.max(1, e.column - STRICT_PREFIX.length);
    if (/'import' and 'export' may appear only/.test(e.message)) {
      e.message =
        "import/export statements are not available in the sandbox (no modules; use the provided tools)";
      addPosition(e);
    } else if (TYPESCRIPT_HINT.test(code)) {
      addPosition(e);
      // Models often write TypeScript; say so instead of leaving them at "Unexpected token".
      e.message += " (the sandbox runs JavaScript: remove TypeScript type annotations)";
    }
    return { error: e };
  }
  program.body.shift(); // the directive we added
  return { program, source };
}

/** Adds every identifier name in `root` to `used`. */
function collectIdentifiers(root: AnyNode, used: Set<string>): void {
  walk(root, (n) => {
    if (n.type === "Identifier") used.add(n.name);
  });
}

/**
 * Phase 2: syntax the sandbox refuses (import()), and every identifier the code uses (so the
 * wrapper's own names never collide with one).
 */
function scanGuestCode(program: AnyNode): { used: Set<string> } | BuildFailure {
  const used = new Set<string>();
  let failure: GuestError | null = null;
  walk(program, (n) => {
    if (failure) return false;
    if (n.type === "Identifier") used.add(n.name);
    if (n.type === "ImportExpression") {
      failure = {
        name: "SyntaxError",
        message: "import() is not available in the sandbox (no modules; use the provided tools)",
        line: n.loc.start.line,
        column: n.loc.start.column + 1,
      };
      return false;
    }
    return undefined;
  });
  return failure ? { error: failure } : { used };
}

/**
 * Fresh names for the wrapper's own parameters: never equal to anything the guest wrote, now or
 * in an earlier action (those names come back as bindings of this wrapper, or are written in the
 * declarations it restores).
 */
function wrapperNames(used: Set<string>): WrapperNames {
  const fresh = (base: string): string => {
    let name = base;
    for (let i = 0; used.has(name); i++) name = `${base}${i}`;
    used.add(name);
    return name;
  };
  return {
    restore: fresh("$restore"),
    decl: fresh("$decl"),
    ref: fresh("$ref"),
    regexp: fresh("$regexp"),
    template: fresh("$template"),
  };
}

/** What phase 3 restores from the previous snapshot. */
interface RestorePlan {
  /** Values by name (installed from the child's copy). */
  values: Record<string, unknown>;
  /** Declarations to install, in a hoisting-valid order (see restore.ts). */
  declarations: PlannedDeclaration[];
  /** Entries not restored, with the reason. */
  dropped: Record<string, string>;
}

/**
 * Phase 3: what the previous snapshot gives back, as data: values, names holding undefined, and
 * the declarations that can be installed without running model code (restore.ts), in order.
 * Names of tools and built-ins, invalid names and unusable sources are dropped with the reason.
 * Adds every name the restored declarations mention to `used`.
 */
function planRestore(
  previous: VariablesSnapshot | undefined,
  shadowable: ReadonlySet<string>,
  bindings: Bindings,
  used: Set<string>,
): RestorePlan {
  const plan: RestorePlan = { values: {}, declarations: [], dropped: {} };
  if (!previous) return plan;
  for (const part of [previous.values, previous.declarations, previous.unserializable]) {
    if (part && typeof part === "object") for (const k of Object.keys(part)) used.add(k);
  }
  for (const [name, value] of Object.entries(previous.values ?? {})) {
    if (!isBindableName(name) || name === "__proto__")
      plan.dropped[name] = "not a valid variable name";
    else if (shadowable.has(name))
      plan.dropped[name] = "shadows a built-in or tool name; not carried over";
    else {
      bindings.add(name);
      plan.values[name] = value;
    }
  }
  for (const [name, note] of Object.entries(previous.unserializable ?? {})) {
    // An undefined value is carried over as undefined. A value that could not be carried over is
    // left unbound: using it raises "m is not defined (its value could not be carried over: ...)"
    // instead of a puzzling error about undefined; declaring it again works as usual.
    if (note === UNDEFINED_NOTE && isBindableName(name) && !shadowable.has(name))
      bindings.add(name);
  }
  const { order, problems } = planDeclarations(previous.declarations ?? {}, shadowable);
  Object.assign(plan.dropped, problems);
  for (const d of order) {
    bindings.add(d.name);
    collectIdentifiers(d.node, used);
    plan.declarations.push(d);
  }
  return plan;
}

/** The restore statements: values from the restore object, then each declaration, in order. */
function restoreStatements(plan: RestorePlan, names: WrapperNames): AnyNode[] {
  const out: AnyNode[] = [];
  for (const name of Object.keys(plan.values)) {
    out.push(
      exprStmt(
        assign(id(name), {
          type: "MemberExpression",
          object: id(names.restore),
          property: str(name),
          computed: true,
          optional: false,
        }),
      ),
    );
  }
  for (const d of plan.declarations) {
    // A class extending a standard constructor reads it from the guest's globals: this action may
    // declare a binding of that name, which would otherwise be read (undefined) instead.
    if (d.extendsGlobal)
      d.node.superClass = {
        type: "CallExpression",
        callee: id(names.ref),
        arguments: [str(d.extendsGlobal)],
        optional: false,
      };
    out.push(declStatement(d.name, d.node, names.decl));
  }
  return out;
}

/** The current action's statements after phase 4. */
interface RewrittenCode {
  /** Function declarations, installed before anything else runs (hoisting). */
  hoisted: AnyNode[];
  body: AnyNode[];
}

/**
 * Phase 4: the current code's top-level bindings become assignments to the wrapper's bindings
 * (function declarations hoisted, `var` in nested blocks and loops included), the last expression
 * statement becomes the REPL echo, and every top-level return is boxed.
 */
function rewriteTopLevel(
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
  return { hoisted, body };
}

/**
 * Phase 7: the wrapper program — `(function (restore, decl, ref, regexp, template) { let
 * <bindings>; return { read, run } })` where `read()` returns the bindings' values and `run()` is an async function holding
 * the restore statements and the guest's code.
 */
function wrapperProgram(bindings: Bindings, names: WrapperNames, runBody: AnyNode[]): AnyNode {
  return {
    type: "Program",
    sourceType: "script",
    body: [
      exprStmt({
        type: "FunctionExpression",
        id: null,
        params: [
          id(names.restore),
          id(names.decl),
          id(names.ref),
          id(names.regexp),
          id(names.template),
        ],
        async: false,
        generator: false,
        body: {
          type: "BlockStatement",
          body: [
            ...(bindings.names.length > 0
              ? [
                  {
                    type: "VariableDeclaration",
                    kind: "let",
                    declarations: bindings.names.map((n) => ({
                      type: "VariableDeclarator",
                      id: id(n),
                      init: null,
                    })),
                  },
                ]
              : []),
            {
              type: "ReturnStatement",
              argument: {
                type: "ObjectExpression",
                properties: [
                  prop("read", {
                    type: "ArrowFunctionExpression",
                    params: [],
                    expression: true,
                    async: false,
                    body: { type: "ArrayExpression", elements: bindings.names.map(id) },
                  }),
                  // A real function (not an arrow) so guest `arguments` / `this` refer to nothing of ours.
                  prop("run", {
                    type: "FunctionExpression",
                    id: null,
                    params: [],
                    async: true,
                    generator: false,
                    body: { type: "BlockStatement", body: runBody },
                  }),
                ],
              },
            },
          ],
        },
      }),
    ],
  };
}

/**
 * Phase 8: source text of the wrapper (names written SES-safe), with a map from generated positions to guest lines
 * (astring reports a mapping for every node that carries a `loc`).
 */
function generateWithLineMap(
  wrapper: AnyNode,
): { source: string; mapLine: BuiltAction["mapLine"] } | BuildFailure {
  const mappings: { line: number; column: number; original: number }[] = [];
  let source: string;
  try {
    source = generate(wrapper, {
      generator: SES_SAFE_GENERATOR,
      sourceMap: {
        addMapping(m: {
          generated: { line: number; column: number };
          original: { line: number } | null;
        }) {
          if (m.original)
            mappings.push({
              line: m.generated.line,
              column: m.generated.column,
              original: m.original.line,
            });
        },
      } as any,
    });
  } catch (err) {
    return { error: toGuestSyntaxError(err) };
  }
  return {
    source,
    mapLine(line: number, column: number): number | null {
      // Last mapping at or before (line, column) on the same generated line; else the line's first.
      let best: number | null = null;
      for (const m of mappings) {
        if (m.line !== line) continue;
        if (m.column <= column) best = m.original;
        else if (best === null) best = m.original;
      }
      return best;
    },
  };
}

/** The phases of {@link buildAction}, in order. */
function buildActionUnguarded(
  code: string,
  previous: VariablesSnapshot | undefined,
  shadowable: ReadonlySet<string>,
  available: ReadonlySet<string>,
): BuiltAction | BuildFailure {
  const parsed = parseGuestCode(code);
  if ("error" in parsed) return parsed;
  const scanned = scanGuestCode(parsed.program);
  if ("error" in scanned) return scanned;
  const used = scanned.used;
  // Names the action can touch: its own code's and those of the declarations it restores (a
  // restored helper called by the action may change a binding its source mentions).
  const mentioned = new Set(used);
  const bindings = new Bindings();
  const restore = planRestore(previous, shadowable, bindings, used);
  for (const d of restore.declarations) collectIdentifiers(d.node, mentioned);
  const names = wrapperNames(used);
  const declarationSources: Record<string, string> = {};
  for (const d of restore.declarations) declarationSources[d.name] = d.source;
  const current = rewriteTopLevel(
    parsed.program,
    parsed.source,
    bindings,
    declarationSources,
    names,
  );
  // Phase 5: free names throw ReferenceError when read (SES alone would read them as undefined).
  const runBody = [...restoreStatements(restore, names), ...current.hoisted, ...current.body];
  try {
    guardFreeReferences(
      runBody,
      new Set([
        ...bindings.names,
        names.restore,
        names.decl,
        names.ref,
        names.regexp,
        names.template,
        ...available,
      ]),
      names.ref,
    );
  } catch (err) {
    return { error: toGuestSyntaxError(err) };
  }
  // Phase 6: literal and name text SES's source checks would reject, written another way.
  escapeForSes(runBody, { regexp: names.regexp, template: names.template });
  const generated = generateWithLineMap(wrapperProgram(bindings, names, runBody));
  if ("error" in generated) return generated;
  return {
    source: generated.source,
    names: bindings.names,
    declarationSources,
    restoreValues: restore.values,
    dropped: restore.dropped,
    mentioned,
    mapLine: generated.mapLine,
  };
}

function prop(key: string, value: AnyNode): AnyNode {
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

function declStatement(name: string, fn: AnyNode, DECL: string, loc?: AnyNode): AnyNode {
  return exprStmt(
    assign(
      id(name),
      { type: "CallExpression", callee: id(DECL), arguments: [str(name), fn], optional: false },
      loc,
    ),
    loc,
  );
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
      assignments.push(
        assign(
          id(d.id.name),
          {
            type: "CallExpression",
            callee: id(DECL),
            arguments: [str(d.id.name), d.init],
            optional: false,
          },
          d.loc,
        ),
      );
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

function collectDeclaredNames(root: AnyNode, out: Set<string>): void {
  walk(root, (n) => {
    switch (n.type) {
      case "VariableDeclarator": {
        const ns: string[] = [];
        patternNames(n.id, ns);
        ns.forEach((x) => out.add(x));
        break;
      }
      case "FunctionDeclaration":
      case "FunctionExpression":
      case "ArrowFunctionExpression": {
        if (n.id) out.add(n.id.name);
        const ns: string[] = [];
        for (const p of n.params) patternNames(p, ns);
        ns.forEach((x) => out.add(x));
        break;
      }
      case "ClassDeclaration":
      case "ClassExpression":
        if (n.id) out.add(n.id.name);
        break;
      case "CatchClause":
        if (n.param) {
          const ns: string[] = [];
          patternNames(n.param, ns);
          ns.forEach((x) => out.add(x));
        }
        break;
    }
  });
}

function guardFreeReferences(body: AnyNode[], known: Set<string>, REF: string): void {
  const bound = new Set<string>(known);
  for (const stmt of body) collectDeclaredNames(stmt, bound);
  const isFree = (name: string) => !bound.has(name) && !GUEST_STANDARD_GLOBALS.has(name);
  const refCall = (name: string, loc: AnyNode): AnyNode => ({
    type: "CallExpression",
    callee: id(REF),
    arguments: [str(name)],
    optional: false,
    loc,
  });

  // Returns a replacement for `node` when it is a free identifier in expression position.
  const visit = (node: AnyNode): AnyNode => {
    if (node == null || typeof node !== "object") return node;
    if (node.type === "Identifier") return isFree(node.name) ? refCall(node.name, node.loc) : node;
    switch (node.type) {
      case "MemberExpression":
        node.object = visit(node.object);
        if (node.computed) node.property = visit(node.property);
        return node;
      case "Property":
        // Only reached for object literals (patterns are skipped below).
        if (node.computed) node.key = visit(node.key);
        if (node.shorthand && node.value.type === "Identifier" && isFree(node.value.name)) {
          node.shorthand = false;
          node.value = refCall(node.value.name, node.value.loc);
        } else node.value = visit(node.value);
        return node;
      case "MethodDefinition":
      case "PropertyDefinition":
        if (node.computed) node.key = visit(node.key);
        node.value = visit(node.value);
        return node;
      case "UnaryExpression":
        // `typeof notDefined` must stay "undefined", not throw.
        if (node.operator === "typeof" && node.argument.type === "Identifier") return node;
        node.argument = visit(node.argument);
        return node;
      case "AssignmentExpression":
        // An undeclared assignment target already throws ReferenceError (SES's set trap).
        if (node.left.type === "MemberExpression") node.left = visit(node.left);
        else visitPattern(node.left);
        node.right = visit(node.right);
        return node;
      case "UpdateExpression":
        if (node.argument.type !== "Identifier") node.argument = visit(node.argument);
        return node;
      case "CallExpression":
        // SES rejects direct `eval(...)` (a regex over the source); an indirect `(0, eval)(...)`
        // evaluates in the compartment's global scope, which is what a sandboxed eval can offer.
        // (Strict code cannot declare its own `eval`, so this name is always the global one.)
        if (node.callee.type === "Identifier" && node.callee.name === "eval") {
          node.callee = {
            type: "SequenceExpression",
            expressions: [{ type: "Literal", value: 0, raw: "0" }, node.callee],
          };
        } else node.callee = visit(node.callee);
        node.arguments = node.arguments.map((a: AnyNode) => visit(a));
        return node;
      case "VariableDeclarator":
        visitPattern(node.id);
        node.init = visit(node.init);
        return node;
      case "FunctionDeclaration":
      case "FunctionExpression":
      case "ArrowFunctionExpression":
        for (const p of node.params) visitPattern(p);
        node.body = visit(node.body);
        return node;
      case "ClassDeclaration":
      case "ClassExpression":
        node.superClass = visit(node.superClass);
        node.body = visit(node.body);
        return node;
      case "CatchClause":
        if (node.param) visitPattern(node.param);
        node.body = visit(node.body);
        return node;
      case "ForInStatement":
      case "ForOfStatement":
        if (node.left.type === "VariableDeclaration") visit(node.left);
        else if (node.left.type === "MemberExpression") node.left = visit(node.left);
        else visitPattern(node.left);
        node.right = visit(node.right);
        node.body = visit(node.body);
        return node;
      case "LabeledStatement":
        node.body = visit(node.body);
        return node;
      case "BreakStatement":
      case "ContinueStatement":
      case "MetaProperty":
      case "Literal":
      case "TemplateElement":
      case "Super":
      case "ThisExpression":
        return node;
    }
    for (const key of Object.keys(node)) {
      if (key === "loc") continue;
      const v = node[key];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++)
          if (v[i] && typeof v[i].type === "string") v[i] = visit(v[i]);
      } else if (v && typeof v === "object" && typeof v.type === "string") node[key] = visit(v);
    }
    return node;
  };
  // Patterns bind or assign names; only their default values and computed keys are expressions.
  const visitPattern = (p: AnyNode): void => {
    if (!p) return;
    switch (p.type) {
      case "ObjectPattern":
        for (const prop of p.properties) {
          if (prop.type === "RestElement") visitPattern(prop.argument);
          else {
            if (prop.computed) prop.key = visit(prop.key);
            visitPattern(prop.value);
          }
        }
        return;
      case "ArrayPattern":
        for (const el of p.elements) visitPattern(el);
        return;
      case "RestElement":
        visitPattern(p.argument);
        return;
      case "AssignmentPattern":
        visitPattern(p.left);
        p.right = visit(p.right);
        return;
      case "MemberExpression":
        p.object = visit(p.object);
        if (p.computed) p.property = visit(p.property);
        return;
    }
  };
  for (let i = 0; i < body.length; i++) body[i] = visit(body[i]);
}
