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
 *
 * This file runs the phases in order (buildActionUnguarded) and holds parse, scan, restore plan,
 * wrapper and generation; phase 1b (library imports) is transform-imports.ts, phase 4 (top-level
 * rewrite) transform-top-level.ts, phase 5 (free-name guard) transform-free-names.ts, phase 6 (SES
 * escaping) ses-escape.ts; what they share is transform-ast.ts.
 */
import * as acorn from "acorn";
import { generate } from "astring";
import { isBindableName, type GuestError, type VariablesSnapshot } from "./contract.ts";
import { GUEST_ECMA_VERSION } from "./ecma-version.ts";
import { planDeclarations, type PlannedDeclaration } from "./restore.ts";
import { escapeForSes, SES_SAFE_GENERATOR } from "./ses-escape.ts";
import {
  assign,
  Bindings,
  collectIdentifiers,
  exprStmt,
  id,
  prop,
  str,
  walk,
  type AnyNode,
  type WrapperNames,
} from "./transform-ast.ts";
import { guardFreeReferences } from "./transform-free-names.ts";
import { rewriteLibraryImports } from "./transform-imports.ts";
import { declStatement, rewriteTopLevel } from "./transform-top-level.ts";

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
 * @param libraries the authorized libraries' package names: `import ... from` them and `import()`
 *   of them become `require` calls (the child's `require` of the loaded libraries)
 */
export function buildAction(
  code: string,
  previous: VariablesSnapshot | undefined,
  shadowable: ReadonlySet<string> = new Set(),
  available: ReadonlySet<string> = shadowable,
  libraries: readonly string[] = [],
): BuiltAction | BuildFailure {
  let built: BuiltAction | BuildFailure;
  try {
    built = buildActionUnguarded(code, previous, shadowable, available, libraries);
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

/** Phase 1: the guest's code parsed as strict script code (a `#!` line kept as a comment). */
function parseGuestCode(
  code: string,
  libraries: readonly string[],
): { program: AnyNode; source: string } | BuildFailure {
  // Guest code runs as strict code (SES). Parse it that way, so strict-only errors (`with`, octal
  // literals, `let eval`, ...) are reported here with a position instead of failing later without
  // one. The directive goes on line 1 without a newline: line numbers stay the guest's own.
  const source = STRICT_PREFIX + stripHashbang(code);
  let program: AnyNode;
  try {
    // With libraries, import declarations parse (anywhere: phase 1b says which are allowed).
    program = acorn.parse(
      source,
      libraries.length ? { ...PARSE_OPTIONS, allowImportExportEverywhere: true } : PARSE_OPTIONS,
    );
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
  const restoredValues = new Set(Object.keys(plan.values));
  for (const [name, note] of Object.entries(previous.unserializable ?? {})) {
    // An undefined value is carried over as undefined. A value that could not be carried over is
    // left unbound: using it raises "m is not defined (its value could not be carried over: ...)"
    // instead of a puzzling error about undefined; declaring it again works as usual.
    if (note === UNDEFINED_NOTE && isBindableName(name) && !shadowable.has(name)) {
      bindings.add(name);
      restoredValues.add(name);
    }
  }
  const { order, problems } = planDeclarations(
    previous.declarations ?? {},
    shadowable,
    restoredValues,
  );
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
  // A standard constructor a class extends, or `Symbol` in a `[Symbol.iterator]` member name, is
  // read from the guest's globals: this action may declare a binding of that name, which would
  // otherwise be read (undefined) instead.
  const globalRead = (name: string): AnyNode => ({
    type: "CallExpression",
    callee: id(names.ref),
    arguments: [str(name)],
    optional: false,
  });
  for (const d of plan.declarations) {
    if (d.node.type === "Identifier") {
      // Another name for a function or class restored before it: the same object again.
      out.push(exprStmt(assign(id(d.name), id(d.node.name))));
      continue;
    }
    if (d.extendsGlobal) d.node.superClass = globalRead(d.extendsGlobal);
    for (const symbol of d.symbols) {
      delete symbol.name; // the `Symbol` identifier node becomes the call, in place
      Object.assign(symbol, globalRead("Symbol"));
    }
    out.push(declStatement(d.name, d.node, names.decl));
  }
  return out;
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
  libraries: readonly string[],
): BuiltAction | BuildFailure {
  const parsed = parseGuestCode(code, libraries);
  if ("error" in parsed) return parsed;
  if (libraries.length) {
    const failure = rewriteLibraryImports(parsed.program, libraries);
    if (failure) return failure;
  }
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
