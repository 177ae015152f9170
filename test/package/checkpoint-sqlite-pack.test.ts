import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copySqliteAddon, expectResumeAndFork, installPackedWorkspace } from "./scratch.ts";

// What `npm install @codehop/checkpoint-sqlite` gives a LangGraph.js user who has never heard of
// codehop: the tarball `npm pack` makes of the workspace package (its `prepack` builds dist/),
// installed into a new project beside plain @langchain/langgraph, better-sqlite3 and nothing of
// codehop, then used by a graph run with plain `node` in two processes (the second resumes from
// what the first stored). Offline as test/package/pack.test.ts is (see scratch.ts).

const run = promisify(execFile);
const repo = process.cwd();
const root = mkdtempSync(join(tmpdir(), "codehop-saver-pack-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const NAME = "@codehop/checkpoint-sqlite";
let packed: string[];
let manifest: Record<string, any>;
let scratch: string;

beforeAll(async () => {
  ({ packed, manifest, scratch } = await installPackedWorkspace(repo, root, "checkpoint-sqlite", [
    "@langchain/langgraph",
    "@langchain/core",
    "better-sqlite3",
  ]));
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
    await expectResumeAndFork((body) => nodeScript(GRAPH(db, body)));
  });
});
