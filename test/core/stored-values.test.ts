import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { openSqlitePersistence } from "../../src/persistence/sqlite.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { foldVariables } from "../../src/core/variables.ts";

// Guest values are data through a whole run, a checkpoint and a resume on a fresh process (fresh
// saver, fresh sandbox): names and keys that mean something to JavaScript objects (`__proto__`) or
// to LangGraph's checkpoint serializer (`lc`, `type`, `id`: its own records) come back as written.
const sandboxes = [createSandbox(), createSandbox()];
const home = mkdtempSync(join(tmpdir(), "codehop-stored-values-"));
afterAll(async () => {
  await Promise.all(sandboxes.map((s) => s.close()));
  rmSync(home, { recursive: true, force: true });
});

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

const SET = [
  "const __proto__ = 5;",
  `const rec = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}');`,
  'const asMap = { lc: 2, type: "constructor", id: ["Map"], args: [[[1, 2]]] };',
  'const gone = { lc: 2, type: "undefined" };',
  'const loads = { lc: 1, type: "constructor", id: ["nowhere", "Nothing"], kwargs: {} };',
  // Top-level names that make the values map itself look like a LangChain record.
  'const lc = 1;\nconst type = "constructor";\nconst id = ["nowhere"];',
  'console.log("set");',
].join("\n");
const READ =
  "console.log(JSON.stringify({ keys: Object.keys(rec), proto: Object.getPrototypeOf(rec) === Object.prototype, polluted: rec.polluted ?? null, asMap, gone, loads, lc, type, id }));";
const EXPECTED = {
  keys: ["__proto__", "ok"],
  proto: true,
  polluted: null,
  asMap: { lc: 2, type: "constructor", id: ["Map"], args: [[[1, 2]]] },
  gone: { lc: 2, type: "undefined" },
  loads: { lc: 1, type: "constructor", id: ["nowhere", "Nothing"], kwargs: {} },
  lc: 1,
  type: "constructor",
  id: ["nowhere"],
};

it("keeps values named or keyed __proto__, lc, type, id as written through a run, a checkpoint and a resume", async () => {
  let endpointDown = true;
  let replied = 0;
  const replies = [
    () => action(SET),
    () => action(READ),
    () => action("console.log(__proto__);"),
    () => action("final_answer(rec.ok)"),
  ];
  const make = (sandbox: (typeof sandboxes)[number]) =>
    createCodeAgent({
      name: "keeper",
      description: "d",
      sandbox,
      model: new ScriptedChatModel([
        async () => {
          // The endpoint goes down after the first action; the replies go on where they stopped.
          if (endpointDown && replied > 0) throw new Error("connect ECONNREFUSED");
          return replies[Math.min(replied++, replies.length - 1)]();
        },
      ]),
    });
  const config = { recursionLimit: 50, configurable: { thread_id: "values-1" } };

  const first = openSqlitePersistence(home);
  const err = await make(sandboxes[0])
    .builder.compile({ checkpointer: first.checkpointer })
    .invoke({ task: "keep" }, config)
    .catch((e: unknown) => e);
  expect(String(err)).toContain("ECONNREFUSED");
  first.close();

  // Another process: a fresh saver reads the thread, a fresh sandbox runs the rest.
  const second = openSqlitePersistence(home);
  try {
    const graph = make(sandboxes[1]).builder.compile({ checkpointer: second.checkpointer });
    const paused = await graph.getState(config);
    const stored = foldVariables(paused.values.variables)!;
    const rec = stored.values.rec as Record<string, unknown>;
    expect(Object.keys(rec)).toEqual(["__proto__", "ok"]);
    expect(Object.getPrototypeOf(rec)).toBe(Object.prototype);
    expect(JSON.stringify(rec)).toBe('{"__proto__":{"polluted":true},"ok":1}');
    const { asMap, gone, loads, lc, type, id } = EXPECTED;
    expect(stored.values).toMatchObject({ asMap, gone, loads, lc, type, id });
    expect(stored.values.asMap).not.toBeInstanceOf(Map);
    endpointDown = false;
    const out = await graph.invoke(null, config);
    expect(out).toMatchObject({ status: "final_answer", answer: 1 });
    const read = out.steps[1].observation;
    expect(JSON.parse(read.split("\n")[1])).toEqual(EXPECTED);
    // The name `__proto__` itself is not carried over, and says why when used.
    expect(out.steps[2].observation).toContain(
      "ReferenceError: __proto__ is not defined (its value could not be carried over: __proto__ cannot be carried over",
    );
  } finally {
    second.close();
  }
});
