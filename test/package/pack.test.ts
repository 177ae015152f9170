import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDemoModelServer } from "../../src/apps/qa/demo.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { whyDistIsStale } from "../../bin/dist-current.mjs";
import { EXAMPLE_ANSWERS, exampleRules } from "./example-rules.ts";
import {
  copySqliteAddon,
  linkNodeModules,
  lockEntries,
  npmPack,
  offlineInstall,
  placeLockEntries,
} from "./scratch.ts";

// What `npm install codehop` gives a user: the tarball `npm pack` makes of dist/ (the build
// `prepare` makes), installed into a new project, imported by name with plain Node and run as a CLI.
//
// The install is offline and takes seconds: the scratch project gets a lock file made of this
// repository's runtime entries, so npm resolves nothing, and those dependencies laid out as that
// lock installs them (from the repository's node_modules, scratch.ts placeLockEntries), so npm
// unpacks only the codehop tarball (from its cache). Install scripts are skipped and better-sqlite3's
// compiled addon is copied from the repository's build (same version, by the lock): compiling it
// takes minutes offline and is better-sqlite3's business, not the package's. `legacy-peer-deps`
// is what this repository's .npmrc sets (see README, "Install the package").

const run = promisify(execFile);
/** The workspace packages the codehop tarball bundles (the checkpointers), by folder. */
const BUNDLED: Record<string, string> = {
  "@codehop/checkpoint-sqlite": "checkpoint-sqlite",
  "@codehop/checkpoint-postgres": "checkpoint-postgres",
};
const repo = process.cwd();
const root = mkdtempSync(join(tmpdir(), "codehop-pack-"));
const scratch = join(root, "scratch");
let tarball: string;
let packed: string[];
let demo: ScriptedOpenAIServer;
let examples: ScriptedOpenAIServer;

beforeAll(async () => {
  // A copy of the package (a build in the working tree could race another test's reads of dist/).
  const pkg = join(root, "codehop");
  mkdirSync(pkg);
  for (const file of [
    "package.json",
    "tsconfig.json",
    "tsconfig.build.json",
    "README.md",
    "LICENSE",
    ".env.example",
    ".npmrc",
  ])
    cpSync(join(repo, file), join(pkg, file));
  for (const dir of ["src", "bin", "prompts", "data", "examples", "test", "bench", "docs"])
    cpSync(join(repo, dir), join(pkg, dir), { recursive: true });
  // The build: when the repository's dist/ is current with its sources (vitest's global setup
  // just made sure), it is what `prepare` would build here (bin/build.mjs empties dist/ first), so
  // the copy takes it and packs with no scripts: a second build of the same sources costs the
  // suite half a minute of CPU and asserts nothing more (`npm install` ran `prepare` already).
  // Otherwise the copy's own `prepare` builds it, as on a publisher's machine.
  const built = whyDistIsStale(repo) === undefined;
  if (built) cpSync(join(repo, "dist"), join(pkg, "dist"), { recursive: true });
  // The workspace packages with their builds, or without them for the copy's `prepare` to make.
  cpSync(join(repo, "packages"), join(pkg, "packages"), {
    recursive: true,
    filter: (src) => !(built ? /[\\/]node_modules$/ : /[\\/](dist|node_modules)$/).test(src),
  });
  linkNodeModules(repo, pkg, Object.keys(BUNDLED));
  const info = await npmPack(pkg, root, built);
  tarball = join(root, info.filename);
  packed = info.files.map((f: { path: string }) => f.path);

  // The scratch project and its lock: the package itself (with the saver it bundles) plus the
  // repository's runtime entries.
  mkdirSync(scratch);
  const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8"));
  const manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
  const spec = `file:${tarball}`;
  const dependencies = lockEntries(lock);
  const packages: Record<string, unknown> = {
    "": { name: "scratch", dependencies: { codehop: spec } },
    "node_modules/codehop": {
      version: manifest.version,
      resolved: spec,
      integrity: `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`,
      license: manifest.license,
      dependencies: manifest.dependencies,
      bin: manifest.bin,
      engines: manifest.engines,
      bundleDependencies: manifest.bundleDependencies,
    },
    ...Object.fromEntries(
      Object.entries(BUNDLED).map(([name, folder]) => {
        const saver = JSON.parse(
          readFileSync(join(pkg, "packages", folder, "package.json"), "utf8"),
        );
        return [
          `node_modules/codehop/node_modules/${name}`,
          {
            version: saver.version,
            inBundle: true,
            license: saver.license,
            dependencies: saver.dependencies,
            peerDependencies: saver.peerDependencies,
            peerDependenciesMeta: saver.peerDependenciesMeta,
            engines: saver.engines,
          },
        ];
      }),
    ),
    ...dependencies,
  };
  writeFileSync(
    join(scratch, "package.json"),
    JSON.stringify({
      name: "scratch",
      private: true,
      type: "module",
      dependencies: { codehop: spec },
    }),
  );
  writeFileSync(
    join(scratch, "package-lock.json"),
    JSON.stringify({ name: "scratch", lockfileVersion: 3, requires: true, packages }),
  );
  placeLockEntries(repo, scratch, dependencies);
  await offlineInstall(scratch);
  copySqliteAddon(repo, scratch);

  demo = await startDemoModelServer();
  examples = await ScriptedOpenAIServer.start({ responder: trajectoryResponder(exampleRules()) });
}, 480_000);

afterAll(async () => {
  await Promise.all([demo?.close(), examples?.close()]);
  // The packed install and its scratch project: ~430 MB a run.
  rmSync(root, { recursive: true, force: true });
});

/** Plain `node` in the scratch project (no tsx), with only the environment given. */
async function node(args: string[], env: Record<string, string> = {}, cwd = scratch) {
  return run(process.execPath, args, {
    cwd,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NO_COLOR: "1",
      CODEHOP_ENV_FILE: "none",
      ...env,
    },
    timeout: 90_000,
  });
}

/** Runs an ES module snippet with plain `node` in the scratch project; returns its stdout. */
async function nodeEval(code: string): Promise<string> {
  return (await node(["--input-type=module", "-e", code])).stdout;
}

describe("the npm package", { timeout: 120_000 }, () => {
  it("packs dist/, the CLI, prompts, the demo corpus, examples and the license; no sources, tests or benchmarks", () => {
    for (const file of [
      "package.json",
      "README.md",
      "LICENSE",
      ".env.example",
      "bin/codehop.mjs",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/cli/main.js",
      "dist/cli/commands/ask.js",
      "dist/bundle/cli.js", // the bundled CLI most commands start from (bin/bundle.mjs)
      "dist/sandbox/child/child.mjs", // the sandbox child: a folder of plain-ESM modules
      "dist/sandbox/child/child.cjs", // ... and them bundled, what children run (bin/bundle.mjs)
      "dist/sandbox/child/protocol.mjs",
      "prompts/manager/system.md",
      "data/demo-corpus.jsonl",
      "data/chat-demo/harbor-bridge-report.pdf",
      "data/chat-demo/budget-2025.docx",
      "examples/hello-agent.mjs",
      "examples/custom-tool.mjs",
      "examples/nested-team.mjs",
      "examples/ollama.mjs",
    ])
      expect(packed, file).toContain(file);
    for (const dir of ["src/", "test/", "bench/", "docs/", "packages/"])
      expect(
        packed.filter((f) => f.startsWith(dir)),
        dir,
      ).toEqual([]);
    // The bundled dependencies, the checkpointers' workspace packages: their builds, no sources.
    const bundled = Object.keys(BUNDLED).map((name) => `node_modules/${name}/`);
    for (const dir of bundled) {
      expect(packed).toContain(`${dir}dist/index.js`);
      expect(packed).toContain(`${dir}dist/index.d.ts`);
      expect(packed).toContain(`${dir}package.json`);
    }
    expect(
      packed.filter((f) => f.startsWith("node_modules/") && !bundled.some((d) => f.startsWith(d))),
    ).toEqual([]);
    expect(
      packed.filter((f) => f.startsWith("node_modules/") && /\.ts$/.test(f) && !/\.d\.ts$/.test(f)),
    ).toEqual([]);
  });

  it("declares what a registry page and npm need: files, repository, keywords, license, engines", async () => {
    const manifest = JSON.parse(
      (await run("tar", ["-xzOf", tarball, "package/package.json"])).stdout,
    );
    expect(manifest.files).toEqual(expect.arrayContaining(["dist", "bin/codehop.mjs", "prompts"]));
    expect(manifest.repository).toMatchObject({ type: "git" });
    expect(manifest.keywords).toEqual(expect.arrayContaining(["langgraph", "agents"]));
    expect(manifest.license).toBe("MIT");
    expect(readFileSync(join(repo, "LICENSE"), "utf8")).toContain("MIT License");
    expect(manifest.engines.node).toBe("^20.19.0 || >=22.13.0");
  });

  it("exports createManagerGraph, ask and the rest of the API as functions under plain Node", async () => {
    const out = await nodeEval(`
      const m = await import("codehop");
      const names = ["createManagerGraph", "ask", "resume", "replay", "history", "createCodeAgent", "openKnowledgeSource", "openPersistence"];
      console.log(JSON.stringify(Object.fromEntries(names.map((n) => [n, typeof m[n]]))));`);
    expect(JSON.parse(out)).toEqual({
      createManagerGraph: "function",
      ask: "function",
      resume: "function",
      replay: "function",
      history: "function",
      createCodeAgent: "function",
      openKnowledgeSource: "function",
      openPersistence: "function",
    });
  });

  it("answers a question from dist/ (prompts, demo data and the sandbox child found from there)", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-pkg-home-"));
    const out = await nodeEval(`
      const { ask, ensureDemoCorpus } = await import("codehop");
      const corpus = await ensureDemoCorpus(${JSON.stringify(home)});
      const result = await ask(${JSON.stringify(DEMO_QUESTIONS.towers)}, {
        config: { baseURL: ${JSON.stringify(demo.baseURL)}, apiKey: "k", model: "scripted", home: ${JSON.stringify(home)}, corpus },
      });
      console.log(JSON.stringify(result));
      process.exit(0);`);
    expect(JSON.parse(out)).toMatchObject({ answer: DEMO_ANSWERS.towers, status: "final_answer" });
  });

  it("runs the codehop CLI from the install (dist/, no tsx)", async () => {
    const bin = join(scratch, "node_modules/.bin/codehop");
    const home = join(root, "cli-home");
    const version = await node([bin, "--version"]);
    expect(version.stdout.trim()).toBe("0.1.0");
    const threads = await node([bin, "threads", "--json", "--home", home]);
    expect(JSON.parse(threads.stdout)).toEqual([]);
    const demoRun = await node([
      bin,
      "demo",
      "--question",
      "towers",
      "--delay",
      "0",
      "--home",
      home,
    ]);
    expect(demoRun.stdout).toContain(`Answer: ${DEMO_ANSWERS.towers}`);
    expect(demoRun.stderr).toContain("npx codehop history <thread> --home");
    const listed = await node([bin, "threads", "--json", "--home", home]);
    expect(JSON.parse(listed.stdout)[0]).toMatchObject({ status: "done" });
  });

  it("plays the chat demo from the install: PDF, DOCX and a web page read with unpdf, mammoth, turndown; its next steps say `codehop` and run as printed", async () => {
    const bin = join(scratch, "node_modules/.bin/codehop");
    const home = join(root, "chat-home");
    // The project's bin on PATH, as `npm install -g` or an activated project gives it.
    const PATH = `${join(scratch, "node_modules/.bin")}:${process.env.PATH}`;
    const chatRun = await node(
      [bin, "demo", "--question", "chat", "--delay", "0", "-q", "--home", home],
      { PATH },
    );
    expect(chatRun.stdout).toContain("(attached harbor-bridge-report.pdf)");
    expect(chatRun.stdout).toContain("(attached budget-2025.docx)");
    expect(chatRun.stdout).toContain("[harbor-bridge-report.pdf, p. 2]");
    expect(chatRun.stdout).toContain("[budget-2025.docx § Staff]");
    expect(chatRun.stdout).toContain("[Harbor Bridge visitor information § Bridge climb]");
    // Printed next steps: the bare `codehop`, the demo's documents by their path in the install
    // (from the project's directory); a printed line pasted into a shell runs.
    const docs = "node_modules/codehop/data/chat-demo";
    expect(chatRun.stderr).toContain(
      `\n  codehop chat --file ${docs}/harbor-bridge-report.pdf --file ${docs}/budget-2025.docx --home ${home}\n`,
    );
    expect(existsSync(join(scratch, docs, "budget-2025.docx"))).toBe(true);
    const history = /^ {2}(codehop history \S+ --home \S+)/m.exec(chatRun.stderr)?.[1];
    expect(history, chatRun.stderr).toBeDefined();
    const pasted = await run("/bin/sh", ["-c", history!], {
      cwd: scratch,
      env: { PATH, HOME: process.env.HOME, NO_COLOR: "1", CODEHOP_ENV_FILE: "none" },
    });
    expect(pasted.stdout).toContain("Show one: codehop history ");
  });

  it("runs every example it ships against an OpenAI-compatible endpoint", async () => {
    const env = {
      OPENAI_BASE_URL: examples.baseURL,
      OPENAI_API_KEY: "k",
      CODEHOP_MODEL: "scripted",
    };
    const dir = join(scratch, "node_modules/codehop/examples");
    const [hello, tool, team, ollama] = await Promise.all([
      node([join(dir, "hello-agent.mjs")], env),
      node([join(dir, "custom-tool.mjs")], env),
      node([join(dir, "nested-team.mjs")], env),
      // Ollama's own variable, pointed at the scripted server (its API is under /v1 there too).
      node([join(dir, "ollama.mjs")], { OLLAMA_HOST: examples.baseURL.replace(/\/v1$/, "") }),
    ]);
    expect(hello.stdout.trim()).toBe(EXAMPLE_ANSWERS.hello);
    expect(tool.stdout.trim()).toBe(EXAMPLE_ANSWERS.tool);
    expect(team.stdout).toContain(EXAMPLE_ANSWERS.team);
    expect(team.stdout).toContain("model calls: { writer: 2, researcher: 4 }");
    expect(ollama.stdout.trim()).toBe(EXAMPLE_ANSWERS.ollama);
    // The tools ran for real: their results reached the model as observations.
    const prompts = examples.requests.map((r) =>
      r.request.messages.map((m) => m.content).join("\n"),
    );
    expect(prompts.some((p) => p.includes("Tokyo Lima"))).toBe(true);
    expect(prompts.some((p) => p.includes("The Eiffel Tower was completed in 1889."))).toBe(true);
    // The Ollama example asked for its own model.
    expect(examples.requests.some((r) => r.request.model === "qwen2.5:7b")).toBe(true);
  });
});
