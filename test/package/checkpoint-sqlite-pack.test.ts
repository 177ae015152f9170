import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { whyDistIsStale } from "../../bin/dist-current.mjs";
import { copySqliteAddon, lockEntries, offlineInstall, placeLockEntries } from "./scratch.ts";

// What `npm install @codehop/checkpoint-sqlite` gives a LangGraph.js user who has never heard of
// codehop: the tarball `npm pack` makes of the workspace package (its `prepack` builds dist/),
// installed into a new project beside plain @langchain/langgraph, better-sqlite3 and nothing of
// codehop, then used by a graph run with plain `node` in two processes (the second resumes from
// what the first stored). Offline as test/package/pack.test.ts is (see scratch.ts).
// The build: when the repository's build is current with its sources (vitest's global setup just
// made sure), packages/checkpoint-sqlite/dist is what `prepack` would build (`npm run build` of
// the workspaces runs the same script), so the copy takes it and packs with no scripts, as
// pack.test.ts does; otherwise the copy's own `prepack` builds it.

const run = promisify(execFile);
const repo = process.cwd();
const root = mkdtempSync(join(tmpdir(), "codehop-saver-pack-"));
const scratch = join(root, "scratch");
const NAME = "@codehop/checkpoint-sqlite";
let packed: string[];
let manifest: Record<string, any>;

beforeAll(async () => {
  // A copy of the package with the repository's node_modules (its build tools are hoisted there).
  const pkg = join(root, "checkpoint-sqlite");
  const built = whyDistIsStale(repo) === undefined;
  cpSync(join(repo, "packages/checkpoint-sqlite"), pkg, {
    recursive: true,
    filter: (src) => !(built ? /[\\/]node_modules$/ : /[\\/](dist|node_modules)$/).test(src),
  });
  symlinkSync(join(repo, "node_modules"), join(pkg, "node_modules"), "dir");
  const pack = [
    "pack",
    "--json",
    "--pack-destination",
    root,
    ...(built ? ["--ignore-scripts"] : []),
  ];
  const { stdout } = await run("npm", pack, {
    cwd: pkg,
    timeout: 240_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [info] = JSON.parse(stdout.slice(stdout.indexOf("[")));
  const tarball = join(root, info.filename);
  packed = info.files.map((f: { path: string }) => f.path);
  manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));

  // The scratch project: the tarball, LangGraph, LangChain core and better-sqlite3, at the
  // versions this repository locks (and what they need, nothing more).
  mkdirSync(scratch);
  const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8"));
  const spec = `file:${tarball}`;
  const others = ["@langchain/langgraph", "@langchain/core", "better-sqlite3"];
  const entries = lockEntries(lock, others);
  const dependencies: Record<string, string> = { [NAME]: spec };
  for (const name of others) dependencies[name] = entries[`node_modules/${name}`].version;
  writeFileSync(
    join(scratch, "package.json"),
    JSON.stringify({ name: "scratch", private: true, type: "module", dependencies }),
  );
  const packages: Record<string, unknown> = {
    "": { name: "scratch", dependencies },
    [`node_modules/${NAME}`]: {
      version: manifest.version,
      resolved: spec,
      integrity: `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`,
      license: manifest.license,
      peerDependencies: manifest.peerDependencies,
      engines: manifest.engines,
    },
    ...entries,
  };
  writeFileSync(
    join(scratch, "package-lock.json"),
    JSON.stringify({ name: "scratch", lockfileVersion: 3, requires: true, packages }),
  );
  placeLockEntries(repo, scratch, entries);
  await offlineInstall(scratch);
  copySqliteAddon(repo, scratch);
}, 480_000);

/** A graph script run with plain `node` in the scratch project; returns its stdout. */
async function nodeScript(code: string): Promise<string> {
  const file = join(scratch, `script-${createHash("md5").update(code).digest("hex")}.mjs`);
  writeFileSync(file, code);
  const { stdout } = await run(process.execPath, [file], {
    cwd: scratch,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    timeout: 90_000,
  });
  return stdout;
}

/** A LangGraph loop appending one record per step, checkpointed by the saver in `db`. */
const GRAPH = (db: string, body: string) => `
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { IncrementalSqliteSaver } from "${NAME}";
const State = Annotation.Root({
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  limit: Annotation({ reducer: (_a, b) => b, default: () => 0 }),
});
const checkpointer = IncrementalSqliteSaver.fromConnString(${JSON.stringify(db)});
const graph = new StateGraph(State)
  .addNode("step", (s) => ({ log: [\`record \${s.log.length}\`] }))
  .addEdge(START, "step")
  .addConditionalEdges("step", (s) => (s.log.length >= s.limit ? END : "step"))
  .compile({ checkpointer });
const config = { configurable: { thread_id: "t1" } };
${body}
checkpointer.db.close();
`;

describe("the @codehop/checkpoint-sqlite package", { timeout: 120_000 }, () => {
  it("packs its build, types, README and license; no sources or tests", () => {
    for (const file of ["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts"])
      expect(packed, file).toContain(file);
    expect(packed.filter((f) => /^(src|test)\//.test(f) || /(?<!\.d)\.ts$/.test(f))).toEqual([]);
    expect(manifest.exports["."]).toMatchObject({ import: "./dist/index.js" });
    // LangGraph's checkpoint package and the SQLite driver are the user's own (one copy each).
    expect(Object.keys(manifest.peerDependencies).sort()).toEqual([
      "@langchain/core",
      "@langchain/langgraph-checkpoint",
      "better-sqlite3",
    ]);
    expect(manifest.dependencies).toBeUndefined();
  });

  it("installs beside plain @langchain/langgraph, nothing of codehop", () => {
    const installed = JSON.parse(readFileSync(join(scratch, "package-lock.json"), "utf8"));
    const names = Object.keys(installed.packages).map((p) => p.replace(/^.*node_modules\//, ""));
    expect(names).toContain(NAME);
    expect(names).toContain("@langchain/langgraph");
    expect(
      names.filter((n) => n === "codehop" || (n.startsWith("@codehop/") && n !== NAME)),
    ).toEqual([]);
  });

  it("checkpoints a LangGraph run, and a second process resumes and forks from what it stored", async () => {
    const db = join(root, "checkpoints.db");
    const first = await nodeScript(
      GRAPH(
        db,
        `const out = await graph.invoke({ limit: 5 }, config); console.log(JSON.stringify(out.log));`,
      ),
    );
    expect(JSON.parse(first)).toEqual(["record 0", "record 1", "record 2", "record 3", "record 4"]);
    const second = await nodeScript(
      GRAPH(
        db,
        `const state = await graph.getState(config);
const history = [];
for await (const s of graph.getStateHistory(config)) history.push(s.values.log?.length ?? 0);
const more = await graph.invoke({ limit: 8 }, config);
const early = (await (async () => { for await (const s of graph.getStateHistory(config)) if (s.values.log?.length === 2) return s; })());
const fork = await graph.invoke(null, { configurable: { ...early.config.configurable } });
console.log(JSON.stringify({ before: state.values.log.length, history, after: more.log.length, fork: fork.log }));`,
      ),
    );
    const result = JSON.parse(second);
    expect(result.before).toBe(5);
    expect(result.history).toEqual([5, 4, 3, 2, 1, 0, 0]);
    expect(result.after).toBe(8);
    // Forked from the first run's checkpoint with two records: that run's limit (5) again.
    expect(result.fork).toEqual(["record 0", "record 1", "record 2", "record 3", "record 4"]);
  });
});
