/**
 * Phase 1b of the action transform (transform.ts), only with authorized libraries: the guest's
 * imports of a library become `require` calls of the sandbox's own (the libraries the host
 * checked and bundled, src/sandbox/libraries.ts); any other import is refused.
 */
import type { GuestError } from "./contract.ts";
import { id, str, walk, type AnyNode } from "./transform-ast.ts";

/** `require("name")` at `loc`. */
function requireCall(name: string, loc: AnyNode): AnyNode {
  return {
    type: "CallExpression",
    callee: id("require"),
    arguments: [str(name)],
    optional: false,
    loc,
  };
}

/**
 * Phase 1b (only with authorized libraries): top-level `import ... from "lib"` becomes
 * `const ... = require("lib")` (default and namespace imports: the library's exports; named
 * imports: its properties), and `import("lib")` becomes `Promise.resolve().then(() =>
 * require("lib"))`. Any other module, an import below the top level, and `export` are refused
 * with a message naming the libraries that exist.
 */
export function rewriteLibraryImports(
  program: AnyNode,
  libraries: readonly string[],
): { error: GuestError } | null {
  const known = new Set(libraries);
  const list = libraries.join(", ");
  let failure: GuestError | null = null;
  const fail = (n: AnyNode, message: string) => {
    failure = {
      name: "SyntaxError",
      message,
      line: n.loc.start.line,
      column: n.loc.start.column + 1,
    };
    return false;
  };
  const unknown = (spec: unknown) =>
    `module ${JSON.stringify(String(spec))} is not available in the sandbox: the libraries you can import are ${list}`;
  walk(program, (n, parent) => {
    if (failure) return false;
    if (
      n.type === "ExportNamedDeclaration" ||
      n.type === "ExportDefaultDeclaration" ||
      n.type === "ExportAllDeclaration"
    )
      return fail(
        n,
        "export statements are not available in the sandbox (an action is not a module)",
      );
    if (n.type === "ImportDeclaration") {
      const spec = n.source.value;
      if (!known.has(spec)) return fail(n, unknown(spec));
      if (parent !== program)
        return fail(n, "import declarations must be at the top level of the code");
      const declarators: AnyNode[] = [];
      const named: AnyNode[] = [];
      for (const s of n.specifiers) {
        if (s.type === "ImportSpecifier") {
          const key =
            s.imported.type === "Identifier" ? id(s.imported.name) : str(s.imported.value);
          named.push({
            type: "Property",
            key,
            value: id(s.local.name),
            kind: "init",
            computed: false,
            method: false,
            shorthand: false,
          });
        } else
          declarators.push({
            type: "VariableDeclarator",
            id: id(s.local.name),
            init: requireCall(spec, n.loc),
            loc: n.loc,
          });
      }
      if (named.length)
        declarators.push({
          type: "VariableDeclarator",
          id: { type: "ObjectPattern", properties: named },
          init: requireCall(spec, n.loc),
          loc: n.loc,
        });
      const loc = n.loc;
      for (const k of Object.keys(n)) delete n[k];
      if (declarators.length)
        Object.assign(n, {
          type: "VariableDeclaration",
          kind: "const",
          declarations: declarators,
          loc,
        });
      else
        Object.assign(n, { type: "ExpressionStatement", expression: requireCall(spec, loc), loc });
      return false;
    }
    if (n.type === "ImportExpression") {
      const src = n.source;
      if (src.type !== "Literal" || typeof src.value !== "string" || !known.has(src.value))
        return fail(
          n,
          src.type === "Literal"
            ? unknown(src.value)
            : `import() needs a library name as a string: the libraries you can import are ${list}`,
        );
      const loc = n.loc;
      const spec = src.value;
      for (const k of Object.keys(n)) delete n[k];
      const member = (object: AnyNode, name: string): AnyNode => ({
        type: "MemberExpression",
        object,
        property: id(name),
        computed: false,
        optional: false,
      });
      Object.assign(n, {
        type: "CallExpression",
        callee: member(
          {
            type: "CallExpression",
            callee: member(id("Promise"), "resolve"),
            arguments: [],
            optional: false,
          },
          "then",
        ),
        arguments: [
          {
            type: "ArrowFunctionExpression",
            id: null,
            params: [],
            body: requireCall(spec, loc),
            expression: true,
            async: false,
            generator: false,
          },
        ],
        optional: false,
        loc,
      });
      return false;
    }
    return undefined;
  });
  return failure ? { error: failure } : null;
}
