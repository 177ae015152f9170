import { readFileSync, readdirSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import * as codehop from "../../src/index.ts";

// The code examples of README.md and docs/ are what a user copies into a project that installed
// codehop: every block must parse, import only from `codehop`'s package exports (its one entry,
// ".": a deep path such as codehop/src/... is ERR_PACKAGE_PATH_NOT_EXPORTED), Node's built-ins or
// packages codehop depends on, and every name it imports from `codehop` must be exported there.

const root = process.cwd();
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const indexSource = readFileSync(join(root, "src/index.ts"), "utf8");

/** README.md and every Markdown file under docs/. */
function markdownFiles(): string[] {
  const out = ["README.md"];
  const walk = (dir: string) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith(".md")) out.push(join(dir, e.name));
    }
  };
  walk("docs");
  return out;
}

interface Block {
  file: string;
  line: number;
  code: string;
}

/** The fenced JavaScript / TypeScript blocks of a Markdown file. */
function codeBlocks(file: string): Block[] {
  const blocks: Block[] = [];
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(ts|typescript|js|javascript|mjs|mts)\s*$/.exec(lines[i]);
    if (!open) continue;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]); j++) body.push(lines[j]);
    blocks.push({ file, line: i + 1, code: body.join("\n") });
    i = j;
  }
  return blocks;
}

/** Every module specifier a block imports, with the names it takes from it. */
function imports(code: string): Array<{ from: string; names: string[] }> {
  const source = ts.createSourceFile("block.ts", code, ts.ScriptTarget.Latest, true);
  const found: Array<{ from: string; names: string[] }> = [];
  const visit = (node: ts.Node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const names: string[] = [];
      const bindings = ts.isImportDeclaration(node)
        ? node.importClause?.namedBindings
        : node.exportClause;
      if (bindings && (ts.isNamedImports(bindings) || ts.isNamedExports(bindings)))
        for (const el of bindings.elements) names.push((el.propertyName ?? el.name).text);
      found.push({ from: node.moduleSpecifier.text, names });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      found.push({ from: node.arguments[0].text, names: [] });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The package a specifier names (`@scope/name/sub` -> `@scope/name`). */
function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

const dependencies = new Set([
  ...Object.keys(pkg.dependencies ?? {}),
  ...Object.keys(pkg.peerDependencies ?? {}),
]);
const blocks = markdownFiles().flatMap(codeBlocks);

/** Whether `name` is exported by codehop's entry: a value at run time, or a type in its source. */
function exported(name: string): boolean {
  return name in codehop || new RegExp(`\\b(?:type\\s+)?${name}\\b`).test(indexSource);
}

describe("code examples in README.md and docs/", () => {
  it("there are examples, and some of them use codehop", () => {
    expect(blocks.length).toBeGreaterThan(10);
    expect(blocks.filter((b) => imports(b.code).some((i) => i.from === "codehop")).length).toBe(
      blocks.filter((b) => /from "codehop"/.test(b.code)).length,
    );
  });

  it.each(blocks.map((b) => [`${b.file}:${b.line}`, b] as const))(
    "%s parses and imports only what a user of the package can import",
    (_where, block) => {
      // Syntax only: an example may use variables it does not declare (a file's bytes, a signal).
      const { diagnostics } = ts.transpileModule(block.code, {
        reportDiagnostics: true,
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      });
      expect(diagnostics?.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"))).toEqual(
        [],
      );
      for (const { from, names } of imports(block.code)) {
        if (from === "codehop") {
          expect(
            names.filter((n) => !exported(n)),
            `not exported by codehop`,
          ).toEqual([]);
          continue;
        }
        expect(from.startsWith("codehop/"), `${from}: not in codehop's package exports`).toBe(
          false,
        );
        expect(from.startsWith("."), `${from}: a path of the repository`).toBe(false);
        const builtin = from.startsWith("node:") || builtinModules.includes(from);
        expect(builtin || dependencies.has(packageOf(from)), `${from}: not a dependency`).toBe(
          true,
        );
      }
    },
  );
});

it("the package's one entry is the module the examples' names were checked on", () => {
  expect(Object.keys(pkg.exports)).toEqual(["."]);
  expect(pkg.exports["."].import).toBe("./dist/index.js");
});
