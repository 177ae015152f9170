import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "@langchain/langgraph";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  APPROVAL_INTERRUPT_TYPE,
  type ApprovalRequest,
  ApprovalRequestSchema,
  approvalResume,
  isApprovalRequest,
} from "../../src/core/approval.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { openPersistence, type SqlitePersistence } from "../../src/persistence/index.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { type ApprovalPolicy, defineTool } from "../../src/tools/define-tool.ts";

// Human approval inside code actions, with the real ChatOpenAI over HTTP against the scripted
// server, the real sandbox, SQLite checkpoints and the SQLite call journal: a sub-agent's call that
// needs approval pauses the whole run; the decision comes back with Command({ resume }); nothing
// that finished before the pause runs again (tool counters, model request counts).

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;

let server: ScriptedOpenAIServer;
let home: string;
let persistence: SqlitePersistence;
const sandbox = createSandbox();

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "codehop-approval-"));
  persistence = openPersistence(home);
  server = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([
      {
        name: "worker",
        task: "clean up notes a and b",
        steps: [
          action(
            [
              'const before = await read_note("a");',
              "let first;",
              'try { first = await delete_note("a"); } catch (e) { first = "refused: " + e.message; }',
              'const second = await delete_note("b");',
              'final_answer(before + " / " + first + " / " + second);',
            ].join("\n"),
          ),
        ],
      },
      {
        name: "manager",
        task: "Tidy the notes.",
        steps: [
          action(
            'const info = await lookup("notes");\nconst report = await worker_agent("clean up notes a and b");\nconsole.log(info, report);',
          ),
          action("final_answer(report);"),
        ],
      },
      {
        name: "twins",
        task: "Clean both shelves.",
        steps: [
          action(
            'const [l, r] = await Promise.all([shelf_agent("empty shelf left"), shelf_agent("empty shelf right")]);\nfinal_answer(l + " & " + r);',
          ),
        ],
      },
      ...["left", "right"].map((side) => ({
        name: `shelf-${side}`,
        task: `empty shelf ${side}`,
        steps: [
          action(
            `const text = await read_note("${side}");\nfinal_answer(await delete_note("${side}"));`,
          ),
        ],
      })),
      {
        name: "pair",
        task: "Delete both at once.",
        steps: [
          action(
            'const [x, y] = await Promise.all([delete_note("x"), delete_note("y")]);\nfinal_answer(x + "," + y);',
          ),
        ],
      },
      {
        name: "edit",
        task: "Delete with an edit.",
        steps: [
          action(
            'let out = [];\nfor (const id of ["p", "q"]) {\n  try { out.push(await delete_note(id)); } catch (e) { out.push(e.message); }\n}\nfinal_answer(out.join(" | "));',
          ),
        ],
      },
      {
        name: "guarded",
        task: "Delete only what is allowed.",
        steps: [
          action(
            'const a = await delete_note("scratch");\nconst b = await delete_note("important");\nfinal_answer(a + "," + b);',
          ),
        ],
      },
    ]),
  });
});
afterAll(async () => {
  await server?.close();
  await sandbox.close();
  await persistence?.close();
  rmSync(home, { recursive: true, force: true });
});

/** Tools whose calls are counted (what ran for real, in order). */
function noteTools(approval: ApprovalPolicy<{ id: string }> = "always", readers = 1) {
  const ran: string[] = [];
  // read_note returns once `readers` reads have started (concurrent agents meet there, so both
  // have finished their model calls before either asks for an approval).
  let arrived = 0;
  let allArrived!: () => void;
  const barrier = new Promise<void>((resolve) => (allArrived = resolve));
  const readNote = defineTool({
    name: "read_note",
    description: "Returns a note's text.",
    parameters: z.object({ id: z.string() }),
    returns: "string",
    invoke: async ({ id }) => {
      ran.push(`read ${id}`);
      if (++arrived >= readers) allArrived();
      await barrier;
      return `note ${id}`;
    },
  });
  const deleteNote = defineTool({
    name: "delete_note",
    description: "Deletes a note.",
    parameters: z.object({ id: z.string().describe("note id") }),
    returns: "string",
    approval,
    invoke: async ({ id }) => {
      ran.push(`delete ${id}`);
      return `deleted ${id}`;
    },
  });
  const lookup = defineTool({
    name: "lookup",
    description: "Looks something up.",
    parameters: z.object({ what: z.string() }),
    returns: "string",
    invoke: async ({ what }) => {
      ran.push(`lookup ${what}`);
      return `about ${what}`;
    },
  });
  return { ran, readNote, deleteNote, lookup };
}

function runConfig(threadId: string, recursionLimit: number) {
  return {
    recursionLimit,
    configurable: { thread_id: threadId },
    context: {
      journal: persistence.journal,
      model: "scripted",
      modelSettings: { baseURL: server.baseURL, apiKey: "test", maxRetries: 0 },
    },
  };
}

/** The approval the thread waits for (from the state, where Studio and the SDK read it). */
async function pendingApproval(graph: any, config: object): Promise<ApprovalRequest | undefined> {
  const state = await graph.getState(config);
  const values = state.tasks.flatMap((t: any) => t.interrupts.map((i: any) => i.value));
  expect(values.length).toBeLessThanOrEqual(1);
  return values.find(isApprovalRequest);
}

const requestsOf = (rule: string) => server.requestsFor(rule).length;

/** A one-agent graph with `delete_note` (and its call log), on the shared checkpointer. */
function deleter(name: string, approval?: ApprovalPolicy<{ id: string }>) {
  const { ran, deleteNote } = noteTools(approval);
  const agent = createCodeAgent({
    name,
    description: "deletes",
    tools: [deleteNote],
    maxSteps: 2,
    sandbox,
  });
  const graph: any = agent.builder.compile({ checkpointer: persistence.checkpointer });
  return { ran, graph, config: runConfig(`${name}-approval`, agent.recursionLimit) };
}

/** Answers the pending approval with `decision` (and what it needs). */
const answer = (
  graph: any,
  config: object,
  request: ApprovalRequest | undefined,
  decision: object,
) =>
  graph.invoke(new Command({ resume: { approvalId: request!.approvalId, ...decision } }), config);

/** A manager whose worker sub-agent reads and deletes notes (delete_note needs approval). */
function nestedTeam(threadId: string) {
  const { ran, readNote, deleteNote, lookup } = noteTools();
  const worker = createCodeAgent({
    name: "worker",
    description: "cleans notes",
    tools: [readNote, deleteNote],
    maxSteps: 2,
    sandbox,
  });
  const manager = createCodeAgent({
    name: "manager",
    description: "tidies",
    maxSteps: 3,
    sandbox,
    tools: [
      lookup,
      worker.asTool({
        name: "worker_agent",
        description: "Cleans notes.",
        parameters: z.object({ task: z.string() }),
        toInput: ({ task }) => ({ task }),
      }),
    ],
  });
  const graph: any = manager.builder.compile({ checkpointer: persistence.checkpointer });
  return { ran, graph, config: runConfig(threadId, manager.recursionLimit) };
}

/** Two concurrent shelf sub-agents, each reading and deleting a note (approval needed). */
function twinTeam(threadId: string) {
  const { ran, readNote, deleteNote } = noteTools("always", 2);
  const shelf = createCodeAgent({
    name: "shelf",
    description: "empties a shelf",
    tools: [readNote, deleteNote],
    maxSteps: 2,
    sandbox,
  });
  const twins = createCodeAgent({
    name: "twins",
    description: "cleans",
    maxSteps: 2,
    sandbox,
    tools: [
      shelf.asTool({
        name: "shelf_agent",
        description: "Empties a shelf.",
        parameters: z.object({ task: z.string() }),
        toInput: ({ task }) => ({ task }),
      }),
    ],
  });
  const graph: any = twins.builder.compile({ checkpointer: persistence.checkpointer });
  return { ran, graph, config: runConfig(threadId, twins.recursionLimit) };
}

describe("approval inside a nested sub-agent's code", () => {
  it("pauses, is rejected once and approved once; nothing finished runs again", async () => {
    const { ran, graph, config } = nestedTeam("nested-approval");

    const first = await graph.invoke({ task: "Tidy the notes." }, config);
    expect(first.__interrupt__).toHaveLength(1);
    const asked = await pendingApproval(graph, config);
    expect(ApprovalRequestSchema.parse(asked)).toMatchObject({
      type: "codehop.approval",
      agent: "worker",
      agentPath: ["manager", "worker"],
      tool: "delete_note",
      args: { id: "a" },
      step: 1,
      callIndex: 1,
      line: 3,
      lineText:
        'try { first = await delete_note("a"); } catch (e) { first = "refused: " + e.message; }',
      parameters: { type: "object", properties: { id: { type: "string" } } },
    });
    expect(first.__interrupt__[0].value).toEqual(asked);
    expect(ran).toEqual(["lookup notes", "read a"]);
    expect([requestsOf("manager"), requestsOf("worker")]).toEqual([1, 1]);

    // Rejected: the reason is the call's error in the worker's code; its next call asks.
    const second = await graph.invoke(
      new Command({
        resume: { approvalId: asked!.approvalId, decision: "reject", reason: "keep a" },
      }),
      config,
    );
    expect(second.__interrupt__).toHaveLength(1);
    const next = await pendingApproval(graph, config);
    expect(next).toMatchObject({ agent: "worker", tool: "delete_note", args: { id: "b" } });
    expect(next!.line).toBe(4);
    expect(next!.approvalId).not.toBe(asked!.approvalId);
    // Nothing ran again: lookup and read_note were served from the journal, no model was asked.
    expect(ran).toEqual(["lookup notes", "read a"]);
    expect([requestsOf("manager"), requestsOf("worker")]).toEqual([1, 1]);

    const done = await graph.invoke(
      new Command({ resume: { approvalId: next!.approvalId, decision: "approve" } }),
      config,
    );
    expect(done.__interrupt__).toBeUndefined();
    expect(done.status).toBe("final_answer");
    expect(done.answer).toBe(
      "note a / refused: The user rejected this call to delete_note(): keep a / deleted b",
    );
    // The approved call ran exactly once; the rejected one never.
    expect(ran).toEqual(["lookup notes", "read a", "delete b"]);
    expect([requestsOf("manager"), requestsOf("worker")]).toEqual([2, 1]);
    // The manager's record shows its calls once, the sub-agent's with the decisions.
    expect(done.steps[0].toolCalls.map((c: any) => [c.tool, c.fromJournal])).toEqual([
      ["lookup", true],
      ["worker_agent", false],
    ]);
    const journaled = (await persistence.journal.entries("nested-approval"))
      .filter((e) => e.tool === "delete_note")
      .map((e) => [e.argsJson, e.outcome.approval]);
    expect(journaled).toEqual([
      ['{"id":"a"}', { decision: "reject", reason: "keep a" }],
      ['{"id":"b"}', { decision: "approve" }],
    ]);
  });
});

describe("approval in LangChain's human-in-the-loop format (agent-chat-ui)", () => {
  it("a nested sub-agent's call: { decisions } rejects once and approves once, each the call asked", async () => {
    const { ran, graph, config } = nestedTeam("nested-approval-hitl");
    const models = () => [requestsOf("manager"), requestsOf("worker")];
    const before = models();

    await graph.invoke({ task: "Tidy the notes." }, config);
    const asked = await pendingApproval(graph, config);
    expect(asked).toMatchObject({
      action_requests: [{ name: "delete_note", args: { id: "a" } }],
      review_configs: [
        { action_name: "delete_note", allowed_decisions: ["approve", "edit", "reject"] },
      ],
    });
    expect(asked!.action_requests![0].description).toMatch(
      /^worker calls delete_note\(\) \(line 3: /,
    );

    // The reject answers the call that asked (a), not the worker's next call (b), which asks.
    await graph.invoke(
      new Command({ resume: { decisions: [{ type: "reject", message: "keep a" }] } }),
      config,
    );
    const next = await pendingApproval(graph, config);
    expect(next).toMatchObject({ tool: "delete_note", args: { id: "b" } });
    expect(ran).toEqual(["lookup notes", "read a"]);

    // The approve answers b; the earlier reject, still among the task's resume values, does not.
    const done = await graph.invoke(
      new Command({ resume: { decisions: [{ type: "approve" }] } }),
      config,
    );
    expect(done.__interrupt__).toBeUndefined();
    expect(done.answer).toBe(
      "note a / refused: The user rejected this call to delete_note(): keep a / deleted b",
    );
    expect(ran).toEqual(["lookup notes", "read a", "delete b"]);
    expect(models().map((n, i) => n - before[i])).toEqual([2, 1]);
  });
});

describe("approvals in one action", () => {
  it("Promise.all of two calls that need approval: the second asks once the first is answered", async () => {
    const { ran, graph, config } = deleter("pair");
    await graph.invoke({ task: "Delete both at once." }, config);
    const x = await pendingApproval(graph, config);
    expect(x).toMatchObject({ tool: "delete_note", args: { id: "x" }, callIndex: 0, line: 1 });
    expect(ran).toEqual([]);

    await answer(graph, config, x, { decision: "approve" });
    const y = await pendingApproval(graph, config);
    expect(y).toMatchObject({ tool: "delete_note", args: { id: "y" }, callIndex: 1, line: 1 });
    expect(ran).toEqual(["delete x"]);

    const done = await answer(graph, config, y, { decision: "approve" });
    expect(done.answer).toBe("deleted x,deleted y");
    expect(ran).toEqual(["delete x", "delete y"]);
    expect(requestsOf("pair")).toBe(1);
  });

  it("edits arguments; edited arguments that don't validate reject the call; a value naming no approval asks again", async () => {
    const { ran, graph, config } = deleter("edit");
    await graph.invoke({ task: "Delete with an edit." }, config);
    const p = await pendingApproval(graph, config);
    expect(p).toMatchObject({ args: { id: "p" }, line: 3 });

    // Not a targeted decision: skipped, and the same call asks again.
    const again = await graph.invoke(new Command({ resume: { decision: "approve" } }), config);
    expect(again.__interrupt__[0].value.approvalId).toBe(p!.approvalId);
    expect(ran).toEqual([]);

    await graph.invoke(
      new Command({
        resume: { approvalId: p!.approvalId, decision: "edit", args: { id: "p-copy" } },
      }),
      config,
    );
    const q = await pendingApproval(graph, config);
    expect(q).toMatchObject({ args: { id: "q" } });
    expect(ran).toEqual(["delete p-copy"]);

    const done = await graph.invoke(
      new Command({ resume: { approvalId: q!.approvalId, decision: "edit", args: { id: 7 } } }),
      config,
    );
    expect(done.answer).toMatch(
      /^deleted p-copy \| The user edited the arguments of this call to delete_note\(\), but they are invalid: Invalid arguments for delete_note\(\): id: /,
    );
    expect(ran).toEqual(["delete p-copy"]);
    expect(done.steps[0].toolCalls.map((c: any) => c.approval)).toEqual([
      { decision: "edit", args: { id: "p-copy" } },
      { decision: "edit", args: { id: 7 } },
    ]);
  });

  it("a predicate on the arguments decides which calls ask", async () => {
    const { ran, graph, config } = deleter("guarded", ({ id }: { id: string }) => id !== "scratch");
    await graph.invoke({ task: "Delete only what is allowed." }, config);
    const asked = await pendingApproval(graph, config);
    expect(asked).toMatchObject({ args: { id: "important" }, line: 2 });
    expect(ran).toEqual(["delete scratch"]);
    const done = await graph.invoke(
      new Command({ resume: { approvalId: asked!.approvalId, decision: "approve" } }),
      config,
    );
    expect(done.answer).toBe("deleted scratch,deleted important");
    expect(ran).toEqual(["delete scratch", "delete important"]);
  });
});

describe("approvals in two concurrent sub-agents", () => {
  it("one asks at a time; each call runs once; no model call is repeated", async () => {
    const { ran, graph, config } = twinTeam("twin-approval");
    await graph.invoke({ task: "Clean both shelves." }, config);
    const asked: string[] = [];
    for (let round = 0; round < 4; round++) {
      const pending = await pendingApproval(graph, config);
      if (!pending) break;
      expect(pending).toMatchObject({ agent: "shelf", agentPath: ["twins", "shelf"] });
      asked.push(pending.args.id as string);
      // A plain value given to the resumed node reaches both sub-agents: only the named call takes it.
      await graph.invoke(
        new Command({ resume: { approvalId: pending.approvalId, decision: "approve" } }),
        config,
      );
    }
    expect(asked.sort()).toEqual(["left", "right"]);
    const state = await graph.getState(config);
    expect(state.values.answer).toBe("deleted left & deleted right");
    expect(ran.filter((r) => r.startsWith("delete")).sort()).toEqual([
      "delete left",
      "delete right",
    ]);
    expect(ran.filter((r) => r.startsWith("read")).sort()).toEqual(["read left", "read right"]);
    expect([requestsOf("twins"), requestsOf("shelf-left"), requestsOf("shelf-right")]).toEqual([
      1, 1, 1,
    ]);
  });
});

describe("human-in-the-loop decisions in two concurrent sub-agents", () => {
  it("{ decisions } answers only a call the run showed; each call is shown before it runs, once", async () => {
    const { ran, graph, config } = twinTeam("twin-approval-hitl");
    await graph.invoke({ task: "Clean both shelves." }, config);
    const shown: string[] = [];
    for (let round = 0; round < 4; round++) {
      const pending = await pendingApproval(graph, config);
      if (!pending) break;
      shown.push(pending.args.id as string);
      expect(ran.filter((r) => r === `delete ${pending.args.id}`)).toEqual([]);
      await graph.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    }
    // A copy of the plain value reaches the other sub-agent too: it answers only a call the run
    // showed, never one it did not (a call may be shown again when the sub-agents race: each
    // call ran only after it was shown, checked above).
    expect([...new Set(shown)].sort()).toEqual(["left", "right"]);
    const state = await graph.getState(config);
    expect(state.values.answer).toBe("deleted left & deleted right");
    expect(ran.filter((r) => r.startsWith("delete")).sort()).toEqual([
      "delete left",
      "delete right",
    ]);
  });
});

describe("a decision without an approval id", () => {
  const request = (id: string, note: string) =>
    ApprovalRequestSchema.parse({
      type: APPROVAL_INTERRUPT_TYPE,
      approvalId: id,
      agent: "shelf",
      agentPath: ["twins", "shelf"],
      tool: "delete_note",
      args: { id: note },
      step: 1,
      callIndex: 0,
      line: 1,
      lineText: `await delete_note("${note}")`,
      code: `await delete_note("${note}")`,
      parameters: {},
    });
  const left = request("ap_left", "left");
  const right = request("ap_right", "right");

  it("answers the one pending approval", () => {
    expect(approvalResume({ decision: "approve" }, [left], "t")).toEqual({
      approvalId: "ap_left",
      decision: "approve",
    });
  });

  it("is refused while several are pending, listing them; naming one answers it", () => {
    let err: unknown;
    try {
      approvalResume({ decision: "reject", reason: "no" }, [left, right], "t");
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "CODEHOP_CONFIG_INVALID" });
    expect((err as Error).message).toBe(
      'Thread "t" waits for 2 approvals: ap_left (shelf: delete_note({"id":"left"})), ap_right (shelf: delete_note({"id":"right"})). ' +
        "Name the one you answer: --approval-id <id> (API: the decision's approvalId).",
    );
    expect(
      approvalResume({ approvalId: "ap_right", decision: "approve" }, [left, right], "t"),
    ).toEqual({ approvalId: "ap_right", decision: "approve" });
  });
});
