import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { ROOT, startDevServer, type DevServer } from "./dev-server.ts";

// Approvals through the LangGraph API server (what Studio and the SDK talk to): a code agent served
// by `langgraphjs dev` (test/fixtures/studio) pauses at a tool that needs approval; the thread's
// state shows the request; a run with `command: { resume }` approves or rejects it. The tool runs
// in the server's process and logs each call to a file, so the test counts what ran.

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
let model: ScriptedOpenAIServer;
let api: DevServer | undefined;
let client: Client;
let home: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "codehop-studio-approval-"));
  model = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder(
      ["a", "b", "c", "d", "e"].map((id) => ({
        name: `delete:${id}`,
        task: `Delete note ${id}.`,
        steps: [
          action(
            `const words = await count_note("${id}");\nlet r;\ntry { r = await delete_note("${id}"); } catch (e) { r = "refused: " + e.message; }\nfinal_answer(r + " (" + words + " words)");`,
          ),
        ],
      })),
    ),
  });
  api = await startDevServer(join(ROOT, "test/fixtures/studio"), {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "scripted",
    CODEHOP_MODEL: "scripted",
    CODEHOP_HOME: home,
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  });
  client = new Client({ apiUrl: api.url });
}, 120_000);

afterAll(async () => {
  api?.stop();
  await model?.close();
});

const calls = () =>
  existsSync(join(home, "calls.log"))
    ? readFileSync(join(home, "calls.log"), "utf8").trim().split("\n")
    : [];

async function pending(threadId: string) {
  const state = await client.threads.getState(threadId);
  return state.tasks.flatMap((t: any) => (t.interrupts ?? []).map((i: any) => i.value));
}

describe("approvals through the LangGraph API server (Studio, SDK)", { timeout: 120_000 }, () => {
  it("pauses with the request in the thread's state; command.resume approves or rejects", async () => {
    for (const [id, resume, answer] of [
      ["a", { decision: "approve" }, "deleted a (3 words)"],
      [
        "b",
        { decision: "reject", reason: "keep b" },
        "refused: The user rejected this call to delete_note(): keep b (3 words)",
      ],
    ] as const) {
      const thread = await client.threads.create();
      const paused = (await client.runs.wait(thread.thread_id, "approval_agent", {
        input: { task: `Delete note ${id}.` },
      })) as Record<string, any>;
      const [request] = await pending(thread.thread_id);
      expect(request).toMatchObject({
        type: "codehop.approval",
        agent: "approval_agent",
        agentPath: ["approval_agent"],
        tool: "delete_note",
        args: { id },
        line: 3,
      });
      expect(paused.__interrupt__?.[0]?.value?.approvalId).toBe(request.approvalId);
      expect(calls()).toEqual(id === "a" ? ["count a"] : ["count a", "delete a", "count b"]);

      const done = (await client.runs.wait(thread.thread_id, "approval_agent", {
        command: { resume: { approvalId: request.approvalId, ...resume } },
      })) as Record<string, any>;
      expect(done.answer).toBe(answer);
      expect(await pending(thread.thread_id)).toEqual([]);
      // One model request per task: the resumed action was not planned again.
      expect(model.requestsFor(`delete:${id}`)).toHaveLength(1);
    }
    // The approved call ran once, the rejected one never; count_note, finished before each pause,
    // was served from the call journal on resume instead of running again.
    expect(calls()).toEqual(["count a", "delete a", "count b"]);
  });

  /** agent-chat-ui's check of an interrupt it can render as an approve / edit / reject form. */
  function isAgentInboxInterrupt(value: any): boolean {
    const requests = value?.action_requests;
    const configs = value?.review_configs;
    return (
      Array.isArray(requests) &&
      requests.length > 0 &&
      requests.every(
        (r: any) => typeof r?.name === "string" && r.args && typeof r.args === "object",
      ) &&
      Array.isArray(configs) &&
      configs.length > 0 &&
      configs.every(
        (c: any) => typeof c?.action_name === "string" && Array.isArray(c.allowed_decisions),
      )
    );
  }

  it("agent-chat-ui: the interrupt is its HITL request; its decisions approve, reject and edit", async () => {
    const cases = [
      ["c", { type: "approve" }, "deleted c (3 words)", ["count c", "delete c"]],
      [
        "d",
        { type: "reject", message: "keep d" },
        "refused: The user rejected this call to delete_note(): keep d (3 words)",
        ["count d"],
      ],
      [
        "e",
        { type: "edit", edited_action: { name: "delete_note", args: { id: "x" } } },
        "deleted x (3 words)",
        ["count e", "delete x"],
      ],
    ] as const;
    for (const [id, decision, answer, ran] of cases) {
      const before = calls().length;
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "approval_agent", {
        input: { task: `Delete note ${id}.` },
      });
      // What agent-chat-ui reads: the thread's interrupt value.
      const [request] = await pending(thread.thread_id);
      expect(isAgentInboxInterrupt(request)).toBe(true);
      expect(request.action_requests).toEqual([
        {
          name: "delete_note",
          args: { id },
          description: expect.stringMatching(
            /^approval_agent calls delete_note\(\) \(line 3: .*delete_note\("/,
          ),
        },
      ]);
      expect(request.review_configs).toEqual([
        {
          action_name: "delete_note",
          allowed_decisions: ["approve", "edit", "reject"],
          args_schema: expect.objectContaining({ type: "object" }),
        },
      ]);
      // What it sends: submit({}, { command: { resume: { decisions: [decision] } } }).
      const events: Array<{ event: string; data: any }> = [];
      for await (const e of client.runs.stream(thread.thread_id, "approval_agent", {
        input: {},
        command: { resume: { decisions: [decision] } },
        streamMode: ["values"],
      }))
        events.push(e as { event: string; data: any });
      expect(events.filter((e) => e.event === "error")).toEqual([]);
      expect(events.filter((e) => e.event === "values").at(-1)!.data.answer).toBe(answer);
      expect(await pending(thread.thread_id)).toEqual([]);
      // The call answered ran once (or never, rejected); count_note was served from the journal.
      expect(calls().slice(before)).toEqual(ran);
    }
  });
});
