import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";

// The layering of docs/architecture.md, checked on the real import graph of src/: every static and
// literal dynamic import (type-only ones too: they couple the code as much as any other).

const root = process.cwd();

/** Layer of a module path (relative to the repo), by the longest matching prefix. Lower imports nothing higher. */
const LAYERS: Array<[prefix: string, layer: number]> = [
  ["src/errors.ts", 0],
  ["src/config/", 0],
  ["src/prompts/", 0],
  ["src/util/", 0],
  ["src/sandbox/", 1],
  ["src/store/", 1],
  ["src/ingest/", 1],
  ["src/tracing/", 1],
  ["src/web/", 1],
  ["src/tools/", 2],
  ["src/core/", 3],
  ["src/nodes/", 4],
  ["src/framework/", 5],
  ["src/persistence/", 6],
  ["src/memory/", 6],
  ["src/testing/", 6],
  ["src/runs/", 7],
  ["src/apps/", 8],
  ["src/graphs/", 9],
  ["src/eval/", 9],
  ["src/server/", 9],
  ["src/cli/", 10],
  ["src/index.ts", 11],
];

/** The framework: never imports an application or anything built on it. */
const FRAMEWORK = ["src/tools/", "src/core/", "src/nodes/", "src/framework/"];

function layerOf(path: string): number | undefined {
  let best: [string, number] | undefined;
  for (const entry of LAYERS)
    if (path.startsWith(entry[0]) && (!best || entry[0].length > best[0].length)) best = entry;
  return best?.[1];
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (/\.(ts|mts|mjs|js)$/.test(name)) out.push(relative(root, full));
  }
  return out;
}

/** Every relative import of every source file: [importer, imported] (repo-relative paths). */
function importEdges(): Array<[string, string]> {
  const edges: Array<[string, string]> = [];
  const spec = /(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g;
  for (const file of sourceFiles(join(root, "src"))) {
    const text = readFileSync(join(root, file), "utf8");
    for (const m of text.matchAll(spec)) edges.push([file, normalize(join(dirname(file), m[1]))]);
  }
  return edges;
}

/** The node of a module in the folder graph: its folder, or the file itself for files directly in src/. */
const nodeOf = (path: string) => (dirname(path) === "src" ? path : dirname(path));

describe("architecture (docs/architecture.md)", () => {
  const edges = importEdges();

  it("gives every source folder a layer", () => {
    const missing = [...new Set(edges.flat().filter((p) => layerOf(p) === undefined))];
    expect(missing).toEqual([]);
  });

  it("never imports a higher layer (the framework never imports an app)", () => {
    const upward = edges
      .filter(([from, to]) => layerOf(to)! > layerOf(from)!)
      .map(([from, to]) => `${from} -> ${to}`);
    expect(upward).toEqual([]);
    const frameworkToApps = edges
      .filter(([from]) => FRAMEWORK.some((f) => from.startsWith(f)))
      .filter(([, to]) => !FRAMEWORK.some((f) => to.startsWith(f)) && layerOf(to)! > 2)
      .map(([from, to]) => `${from} -> ${to}`);
    expect(frameworkToApps).toEqual([]);
  });

  it("lets the core see only the sandbox contract (and the default backend, loaded lazily in one module)", () => {
    const reaching = edges
      .filter(([from, to]) => from.startsWith("src/core/") && to.startsWith("src/sandbox/"))
      .filter(
        ([from, to]) =>
          to !== "src/sandbox/contract.ts" &&
          !(from === "src/core/default-sandbox.ts" && to === "src/sandbox/index.ts"),
      )
      .map(([from, to]) => `${from} -> ${to}`);
    expect(reaching).toEqual([]);
  });

  it("has no cycle between folders", () => {
    expect(cyclesOf(edges.map(([from, to]) => [nodeOf(from), nodeOf(to)]))).toEqual([]);
  });

  it("names every file of a nodes/ folder as the node it holds (node id, kebab-case)", () => {
    const ids = new Set<string>();
    for (const file of sourceFiles(join(root, "src")))
      for (const m of readFileSync(join(root, file), "utf8").matchAll(
        /\.addNode\(\s*["']([^"']+)["']/g,
      ))
        ids.add(m[1].replaceAll("_", "-"));
    const misnamed = sourceFiles(join(root, "src"))
      .filter((file) => basename(dirname(file)) === "nodes")
      .filter((file) => !ids.has(basename(file).replace(/\.ts$/, "")));
    expect(misnamed).toEqual([]);
  });

  it("has no cycle between files (type-only imports count too)", () => {
    expect(cyclesOf(edges)).toEqual([]);
  });
});

/** The cycles of a graph given by its edges: its strongly connected components of two or more nodes (Tarjan). */
function cyclesOf(graphEdges: Array<[string, string]>): string[][] {
  const graph = new Map<string, Set<string>>();
  for (const [a, b] of graphEdges) {
    if (a === b) continue;
    if (!graph.has(a)) graph.set(a, new Set());
    graph.get(a)!.add(b);
  }
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return cycles;
}

// ---------------------------------------------------------------------------------------------
// File length (issue 25): a source file over MAX_FILE_LINES lines says why at its top.

/** Lines a source file may have without a reason written at its top. */
const MAX_FILE_LINES = 600;
/** What starts the line of a long file's header comment that gives the reason. */
const LONG_FILE_MARKER = "Why this file is long:";

/** What may precede a file's header comment: blank lines, `#!`, `//` lines, imports, re-exports. */
const BEFORE_HEADER =
  /^(?:\s+|#![^\n]*|\/\/[^\n]*|(?:import|export)\b[^;]*?\bfrom\s*["'][^"']*["'];?|import\s*["'][^"']*["'];?)*/;

/** A file's header comment: its first block comment, with nothing but {@link BEFORE_HEADER} before it. */
function headerComment(text: string): string | undefined {
  const rest = text.slice(BEFORE_HEADER.exec(text)![0].length);
  return /^\/\*[\s\S]*?\*\//.exec(rest)?.[0];
}

/** Lines of a file as `wc -l` counts them. */
const lineCount = (text: string) => text.split("\n").length - (text.endsWith("\n") ? 1 : 0);

/**
 * Why a file breaks the length rule (undefined when it does not): over `limit` lines and no line
 * of its header comment starting with {@link LONG_FILE_MARKER} followed by a reason.
 */
function longFileProblem(path: string, text: string, limit = MAX_FILE_LINES): string | undefined {
  const lines = lineCount(text);
  if (lines <= limit) return undefined;
  const reasoned = (headerComment(text) ?? "")
    .split("\n")
    .map((line) => line.replace(/^\s*(?:\/\*+|\*+)?\s*/, ""))
    .some((line) => line.startsWith(LONG_FILE_MARKER) && line.length > LONG_FILE_MARKER.length + 3);
  return reasoned
    ? undefined
    : `${path}: ${lines} lines (over ${limit}) and no "${LONG_FILE_MARKER} ..." in its header comment`;
}

describe("file length (a file over 600 lines says why at its top)", () => {
  const long = (n: number) =>
    Array.from({ length: n }, (_, i) => `const x${i} = ${i};`).join("\n") + "\n";
  const header = (...lines: string[]) =>
    ["/**", ...lines.map((l) => ` * ${l}`), " */"].join("\n") + "\n";

  it("refuses a long file without the reason, and counts lines as wc -l does", () => {
    expect(longFileProblem("a.ts", long(601))).toMatch(/^a\.ts: 601 lines \(over 600\)/);
    expect(longFileProblem("a.ts", header("What it does.") + long(598))).toMatch(/601 lines/);
    expect(longFileProblem("a.ts", long(600))).toBeUndefined();
    expect(lineCount(long(600).trimEnd())).toBe(600);
  });

  it("accepts the reason only as a line of the header comment, with a reason after the marker", () => {
    const reason = header("What it does.", "", "Why this file is long: one state machine.");
    expect(longFileProblem("a.ts", reason + long(700))).toBeUndefined();
    // After imports and a `// @ts-check` line, on the comment's first line: still the header.
    const imports = 'import { a } from "./a.ts";\nimport {\n  b,\n  c,\n} from "./b.ts";\n\n';
    expect(longFileProblem("a.ts", imports + reason + long(700))).toBeUndefined();
    expect(
      longFileProblem(
        "a.mjs",
        "// @ts-check\n/** Why this file is long: one loop. */\n" + long(700),
      ),
    ).toBeUndefined();
    // A marker with no reason, in a later comment, or mid-line does not count.
    expect(longFileProblem("a.ts", header("Why this file is long:") + long(700))).toBeDefined();
    expect(
      longFileProblem("a.ts", header("What it does.") + long(10) + reason + long(700)),
    ).toBeDefined();
    expect(
      longFileProblem("a.ts", header("See why this file is long: no.") + long(700)),
    ).toBeDefined();
    expect(longFileProblem("a.ts", long(10) + reason + long(700))).toBeDefined();
  });

  it("holds for every source file of src/ and packages/*/src", () => {
    const roots = [
      "src",
      ...readdirSync(join(root, "packages")).map((p) => join("packages", p, "src")),
    ].filter((dir) => existsSync(join(root, dir)));
    const problems = roots
      .flatMap((dir) => sourceFiles(join(root, dir)))
      .map((file) => longFileProblem(file, readFileSync(join(root, file), "utf8")))
      .filter((problem) => problem !== undefined);
    expect(problems).toEqual([]);
  });
});

describe("docs/architecture.md is true of the tree", () => {
  const doc = readFileSync(join(root, "docs/architecture.md"), "utf8");

  it("every file or folder it names exists (templates like src/apps/<app>/ aside)", () => {
    const named = new Set(
      [
        ...doc.matchAll(/\b((?:src|test|prompts|bench|docs)\/[A-Za-z0-9_./<>*-]*[A-Za-z0-9_/])/g),
      ].map((m) => m[1]),
    );
    const missing = [...named].filter((p) => !/[<*]/.test(p) && !existsSync(join(root, p)));
    expect(missing).toEqual([]);
  });

  it("its layer table gives every folder the layer the import check uses", () => {
    const table = doc.split("\n").filter((line) => /^\| \d/.test(line));
    const documented = new Map<string, number>();
    for (const row of table) {
      const [, layers, folders] = row.split("|");
      const [low, high = low] = layers.trim().split(" ")[0].split("–").map(Number);
      for (const m of folders.matchAll(/`(src\/[^`]+)`(?: \((\d+)\))?/g)) {
        documented.set(m[1], m[2] ? Number(m[2]) : low === high ? low : NaN);
      }
    }
    const expected = new Map(LAYERS.map(([prefix, layer]) => [prefix.replace(/\/$/, ""), layer]));
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(expected));
  });
});
