import { spawnSync } from "node:child_process";
import {
  cpSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, normalize, relative } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { whyDistIsStale } from "../../bin/dist-current.mjs";

// How the CLI starts (issue 24): a command module loads its work only when it runs, `--version`
// loads no command, and a clone runs dist/ while it is current with src/, the sources otherwise.
// The start times themselves are measured in bench/cli-start.bench.ts, not asserted here.

const root = process.cwd();
const COMMANDS = join(root, "src/cli/commands");

/** Packages a command module may load before its action runs (commander and small helpers). */
const LIGHT_PACKAGES = new Set(["commander", "shell-quote", "picocolors", "dotenv"]);

/** The value imports of a TypeScript file (type-only imports and `await import()` left out). */
function staticImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest);
  const out: string[] = [];
  for (const node of source.statements) {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      if (ts.isImportDeclaration(node)) {
        const clause = node.importClause;
        if (clause?.isTypeOnly) continue;
        const named = clause?.namedBindings;
        const onlyTypes =
          clause &&
          !clause.name &&
          named &&
          ts.isNamedImports(named) &&
          named.elements.length > 0 &&
          named.elements.every((e) => e.isTypeOnly);
        if (onlyTypes) continue;
      } else if (node.isTypeOnly) continue;
      out.push(node.moduleSpecifier.text);
    }
  }
  return out;
}

/** Every package and repository file a module loads before any of its code runs. */
function loadedBeforeRunning(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    for (const spec of staticImports(join(root, file))) {
      if (spec.startsWith(".")) visit(normalize(join(dirname(file), spec)));
      else if (!spec.startsWith("node:") && !builtinModules.includes(spec))
        packages.add(
          spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0],
        );
    }
  };
  visit(entry);
  return { files, packages };
}

const commandFiles = readdirSync(COMMANDS).filter((f) => /^[a-z][a-z0-9-]*\.ts$/.test(f));

describe("a command module loads its work only when it runs", () => {
  it.each(commandFiles)("src/cli/commands/%s", (file) => {
    const { packages } = loadedBeforeRunning(relative(root, join(COMMANDS, file)));
    // `<command> --help` and the command list load only these: agents, models, stores and
    // databases are imported inside the action (`await import(...)`), see docs/architecture.md.
    expect([...packages].filter((p) => !LIGHT_PACKAGES.has(p))).toEqual([]);
  });

  it("so does the entry, src/cli/main.ts", () => {
    const { packages } = loadedBeforeRunning("src/cli/main.ts");
    expect([...packages]).toEqual(["commander"]);
  });
});

describe("a clone runs the build while it is current with the sources", () => {
  let clone: string;
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [join(clone, "bin/codehop.mjs"), ...args], {
      cwd: clone,
      encoding: "utf8",
      env: { PATH: process.env.PATH, HOME: process.env.HOME, CODEHOP_ENV_FILE: "none" },
    });

  beforeAll(() => {
    // The suite's global setup built dist/ (test/vitest/global-setup.ts).
    expect(whyDistIsStale()).toBeUndefined();
    clone = mkdtempSync(join(tmpdir(), "codehop-clone-"));
    // Times preserved: the copy's build is as current with its sources as this one's.
    for (const part of [
      "bin",
      "packages",
      "src",
      "dist",
      "prompts",
      "package.json",
      "tsconfig.json",
      "tsconfig.build.json",
    ])
      cpSync(join(root, part), join(clone, part), { recursive: true, preserveTimestamps: true });
    // Folders too (their times change when files are added to them, as when copying).
    const folderTimes = (dir: string) => {
      for (const e of readdirSync(join(root, dir), { withFileTypes: true }))
        if (e.isDirectory()) folderTimes(join(dir, e.name));
      const st = statSync(join(root, dir));
      utimesSync(join(clone, dir), st.atime, st.mtime);
    };
    for (const dir of ["src", "dist", "packages"]) folderTimes(dir);
    symlinkSync(join(root, "node_modules"), join(clone, "node_modules"));
  });
  afterAll(() => rmSync(clone, { recursive: true, force: true }));

  it("`prepare` (npm install, and npx's install of the clone) keeps a current build as it is", () => {
    // npm 11's `npx codehop` in a clone links the clone into the npx cache and runs its "prepare":
    // a full rebuild there took a minute and deleted dist/ under running commands.
    const prepare = JSON.parse(readFileSync(join(clone, "package.json"), "utf8")).scripts.prepare;
    expect(prepare).toBe("node bin/build.mjs --if-stale");
    const stamp = readFileSync(join(clone, "dist/.build.json"), "utf8");
    const r = spawnSync(process.execPath, ["bin/build.mjs", "--if-stale"], {
      cwd: clone,
      encoding: "utf8",
    });
    expect(r.stderr).toContain("dist/ is current with the sources; nothing to build");
    expect(r.status).toBe(0);
    expect(readFileSync(join(clone, "dist/.build.json"), "utf8")).toBe(stamp);
    expect(readdirSync(join(clone, "dist/cli")).length).toBeGreaterThan(0);
  });

  it("runs dist/ when current, the edited source after an edit; --version loads no command", () => {
    const mark = (file: string, text: string) =>
      writeFileSync(file, readFileSync(file, "utf8").replace("list threads (", `${text} (`));
    // The build is what runs: a mark put in dist/ only is printed. `threads` runs from the bundled
    // CLI (bin/bundle.mjs): the mark goes into the bundle's file that holds the command's module.
    const bundled: Record<string, string[]> = JSON.parse(
      readFileSync(join(clone, "dist/bundle/modules.json"), "utf8"),
    );
    const [threadsFile] = Object.entries(bundled).find(([, inputs]) =>
      inputs.includes("dist/cli/commands/threads.js"),
    )!;
    mark(join(clone, "dist/bundle", threadsFile), "BUILT list threads");
    // A command whose module throws when loaded: only running it (or listing every command) loads it.
    writeFileSync(
      join(clone, "dist/cli/commands/zz-broken.js"),
      'throw new Error("loaded zz-broken");\n',
    );
    let r = run("threads", "--help");
    expect(r.stdout).toContain("BUILT list threads");
    expect(r.status).toBe(0);
    r = run("--version");
    expect(r.stdout.trim()).toBe(
      JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version,
    );
    expect(r.status).toBe(0);
    r = run("ask", "--help");
    expect(r.stdout).toContain("Usage: codehop ask");
    expect(r.status).toBe(0);
    r = run("zz-broken", "--help");
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("loaded zz-broken");

    // An edit to a source file: the CLI runs the sources (through tsx) and shows the edit.
    mark(join(clone, "src/cli/commands/threads.ts"), "EDITED list threads");
    r = run("threads", "--help");
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("EDITED list threads");
    expect(r.status).toBe(0);
  });
});
