import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { BaseMessage } from "@langchain/core/messages";
import { chat, chatApp, chatHistory } from "../../src/apps/chat/app.ts";
import { openPersistenceFor } from "../../src/persistence/index.ts";
import { loadAppConfig, persistenceLocation } from "../../src/runs/config.ts";
import { resumeThread } from "../../src/apps/index.ts";
import { chatResponder, type DemoRound } from "../../src/apps/chat/demo-trajectories.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { defineTool } from "../../src/tools/define-tool.ts";

// A tool call that needs human approval, made by the chat agent's code: the round pauses (LangGraph
// interrupt through the chat graph), the decision continues it, and nothing the paused action had
// finished runs again. Through the API with tools given to chat(), and through `codehop chat` with
// a real MCP server (@modelcontextprotocol/server-filesystem over stdio) from codehop.config.json.

const BIN = resolve(import.meta.dirname, "../../bin/codehop.mjs");

describe("approvals inside the chat agent's code (API)", () => {
  const calls = { lookup: 0, save: 0 };
  const saved: string[] = [];
  const lookup = defineTool({
    name: "lookup",
    description: "Looks a fact up.",
    parameters: z.object({ q: z.string() }),
    returns: "string",
    invoke: async () => {
      calls.lookup++;
      return "the main span is 503 m";
    },
  });
  const saveNote = defineTool({
    name: "save_note",
    description: "Saves a note.",
    parameters: z.object({ text: z.string() }),
    returns: "string",
    approval: "always",
    invoke: async ({ text }) => {
      calls.save++;
      saved.push(text);
      return "saved";
    },
  });
  const rounds: DemoRound[] = [
    {
      message: "Note down the main span.",
      steps: [
        action(
          "I look it up, then save it.",
          'const fact = await lookup("main span");\nconsole.log(await save_note(fact));',
        ),
        action("Saving was declined or done; I report.", 'final_answer("Done with the note.");'),
      ],
      expect: { reply: "", cites: [] },
    },
  ];
  let model: ScriptedOpenAIServer;
  let home: string;
  beforeAll(async () => {
    model = await ScriptedOpenAIServer.start({ responder: chatResponder(rounds) });
    home = mkdtempSync(join(tmpdir(), "codehop-chat-approval-"));
  });
  afterAll(async () => {
    await model?.close();
  });

  it("pauses the round, is rejected once and approved once; the finished lookup never re-runs", async () => {
    const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
    const tools = [lookup, saveNote];
    const first = await chat("ap", rounds[0].message, { config, tools });
    expect(first.status).toBe("awaiting_approval");
    expect(first.approval).toMatchObject({
      tool: "save_note",
      agent: "chat",
      args: { text: "the main span is 503 m" },
    });
    expect(first.interrupts).toHaveLength(1);
    expect(calls).toEqual({ lookup: 1, save: 0 });
    expect(model.requestsFor("chat:round1")).toHaveLength(1);

    const rejected = await chat("ap", "", {
      config,
      tools,
      approval: { decision: "reject", reason: "not today" },
    });
    expect(rejected.status).toBe("done");
    expect(rejected.reply).toBe("Done with the note.");
    expect(calls).toEqual({ lookup: 1, save: 0 });
    const observation = model
      .requestsFor("chat:round1")[1]
      .request.messages.map((m) => m.content)
      .join("\n");
    expect(observation).toContain("not today");

    const again = await chat("ap", rounds[0].message, { config, tools });
    expect(again.status).toBe("awaiting_approval");
    const approved = await chat("ap", "", { config, tools, approval: { decision: "approve" } });
    expect(approved.status).toBe("done");
    expect(calls).toEqual({ lookup: 2, save: 1 });
    expect(saved).toEqual(["the main span is 503 m"]);
    // Each round asked the model once per step: the resumes re-asked nothing.
    expect(model.requestsFor("chat:round1")).toHaveLength(4);
    expect(approved.round).toBe(2);
  }, 120_000);

  it("a paused round's conversation ends with the round's open reply (an AI message), which the reply replaces", async () => {
    // agent-chat-ui draws a pending approval only under a last AI or tool message: the round
    // opens its reply before its agent pauses. It has no text, so it is no part of the dialogue.
    const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
    const tools = [lookup, saveNote];
    const messagesOf = async (threadId: string) => {
      const persistence = await openPersistenceFor(persistenceLocation(loadAppConfig(config)));
      try {
        const snapshot = await chatApp
          .graph(persistence.checkpointer)
          .getState({ configurable: { thread_id: threadId } });
        return (snapshot.values as { messages: BaseMessage[] }).messages;
      } finally {
        await persistence.close();
      }
    };
    const paused = await chat("ap-open", rounds[0].message, { config, tools });
    expect(paused).toMatchObject({ status: "awaiting_approval", reply: "", round: 0 });
    const before = await messagesOf("ap-open");
    expect(before.map((m) => m.getType())).toEqual(["human", "ai"]);
    const open = before[1];
    expect(open.content).toBe("");
    expect(open.id).toMatch(/^codehop-round-/);
    expect(await chatHistory("ap-open", { config })).toEqual([{ user: rounds[0].message }]);

    const done = await chat("ap-open", "", { config, tools, approval: { decision: "approve" } });
    expect(done).toMatchObject({ status: "done", reply: "Done with the note.", round: 1 });
    const after = await messagesOf("ap-open");
    expect(after.map((m) => [m.getType(), m.content])).toEqual([
      ["human", rounds[0].message],
      ["ai", "Done with the note."],
    ]);
    expect(after[1].id).toBe(open.id);
    expect(await chatHistory("ap-open", { config })).toEqual([
      { user: rounds[0].message, reply: "Done with the note." },
    ]);
  }, 120_000);

  it("resumeThread (what `codehop resume <thread> --approve` runs) answers the one pending approval of a chat thread without its id", async () => {
    const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
    const tools = [lookup, saveNote];
    const before = { ...calls, saved: saved.length };
    const paused = await chat("ap-resume", rounds[0].message, { config, tools });
    expect(paused.status).toBe("awaiting_approval");
    const done = await resumeThread("ap-resume", {
      config,
      context: { agentTools: { chat: tools } },
      approval: { decision: "approve" },
    });
    expect(done).toMatchObject({ status: "done", approval: null });
    expect(done.answer).toBe("Done with the note.");
    // The approved call ran once; the lookup the paused action had finished did not run again.
    expect(calls).toEqual({ lookup: before.lookup + 1, save: before.save + 1 });
    expect(saved.slice(before.saved)).toEqual(["the main span is 503 m"]);
  }, 120_000);
});

describe("approvals in codehop chat, with an MCP server's tool", () => {
  let model: ScriptedOpenAIServer;
  let home: string;
  let notes: string;
  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "codehop-chat-mcp-"));
    notes = join(home, "notes");
    mkdirSync(notes);
    writeFileSync(
      join(home, "codehop.config.json"),
      JSON.stringify({
        mcpServers: {
          files: {
            command: process.execPath,
            args: [
              join(
                process.cwd(),
                "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
              ),
              notes,
            ],
            tools: ["write_file"],
            approval: { write_file: "always" },
            agents: ["chat"],
          },
        },
      }),
    );
    const write = (file: string) =>
      action(
        "I write the note.",
        `console.log(await write_file(${JSON.stringify(join(notes, file))}, "span: 503 m"));`,
      );
    const rounds: DemoRound[] = [
      {
        message: "Write the span to a.txt.",
        steps: [write("a.txt"), action("Report.", 'final_answer("Handled a.txt.");')],
        expect: { reply: "", cites: [] },
      },
      {
        message: "Write the span to b.txt.",
        steps: [write("b.txt"), action("Report.", 'final_answer("Handled b.txt.");')],
        expect: { reply: "", cites: [] },
      },
    ];
    model = await ScriptedOpenAIServer.start({ responder: chatResponder(rounds) });
  });
  afterAll(async () => {
    await model?.close();
  });

  it("asks approve / reject in the session and goes on with the answer", async () => {
    const proc = spawn(process.execPath, [BIN, "chat", "--thread", "mcp", "--home", home, "-q"], {
      env: {
        ...process.env,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: "x",
        CODEHOP_MODEL: "scripted",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    proc.stdout!.on("data", (d) => (out += d));
    proc.stderr!.on("data", (d) => (err += d));
    const waitFor = async (pattern: RegExp, count = 1) => {
      const deadline = Date.now() + 60_000;
      const g = new RegExp(pattern.source, "gm");
      while ((out.match(g)?.length ?? 0) < count) {
        if (proc.exitCode !== null || Date.now() > deadline)
          throw new Error(`waiting for ${pattern}:\n${out}\n${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    proc.stdin!.write("Write the span to a.txt.\n");
    await waitFor(/^Approval needed: write_file\(\) called by agent chat, step 1$/);
    expect(out).toContain(
      `arguments: {"path":${JSON.stringify(join(notes, "a.txt"))},"content":"span: 503 m"}`,
    );
    proc.stdin!.write("r\nnot in that folder\n");
    await waitFor(/^assistant> Handled a\.txt\.$/);
    expect(existsSync(join(notes, "a.txt"))).toBe(false);
    proc.stdin!.write("Write the span to b.txt.\n");
    await waitFor(/^Approval needed: write_file\(\)/, 2);
    proc.stdin!.write("a\n");
    await waitFor(/^assistant> Handled b\.txt\.$/);
    expect(readFileSync(join(notes, "b.txt"), "utf8")).toBe("span: 503 m");
    proc.stdin!.write("/exit\n");
    expect(await new Promise((ok) => proc.on("exit", ok))).toBe(0);
    // The rejection's reason reached the agent as the call's error.
    const afterReject = model
      .requestsFor("chat:round1")[1]
      .request.messages.map((m) => m.content)
      .join("\n");
    expect(afterReject).toContain("not in that folder");
    expect(model.requestsFor("chat:round1")).toHaveLength(2);
    expect(model.requestsFor("chat:round2")).toHaveLength(2);
  }, 180_000);
});

describe("an MCP server whose tool names clash with the chat agent's own", () => {
  it("codehop chat stops with exit 2 naming both tools and the prefix setting, before any model call", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-chat-clash-"));
    writeFileSync(
      join(home, "codehop.config.json"),
      JSON.stringify({
        mcpServers: {
          fs: {
            command: process.execPath,
            args: [
              join(
                process.cwd(),
                "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
              ),
              home,
            ],
            // server-filesystem's search_files meets the chat agent's own search_files.
            tools: ["search_files"],
            agents: ["chat"],
          },
        },
      }),
    );
    const model = await ScriptedOpenAIServer.start({ responder: chatResponder([]) });
    try {
      const proc = spawn(process.execPath, [BIN, "chat", "--home", home, "-q"], {
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          OPENAI_BASE_URL: model.baseURL,
          OPENAI_API_KEY: "x",
          CODEHOP_MODEL: "scripted",
        },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      proc.stdout!.on("data", (d) => (out += d));
      proc.stderr!.on("data", (d) => (err += d));
      proc.stdin!.end("Which files are there?\nAnd now?\n");
      expect(await new Promise((ok) => proc.on("exit", ok))).toBe(2);
      expect(err).toContain(
        `two tools are named "search_files": codehop's own "search_files" and tool "search_files" of MCP server "fs".`,
      );
      expect(err).toContain(`Give the MCP server "fs" a "prefix" in codehop.config.json`);
      expect(err).toContain(
        "once the configuration is fixed, continue it with `npx codehop chat --thread",
      );
      // `resume` cannot help a conversation whose configuration is wrong.
      expect(err).not.toContain("resume");
      expect(err).toMatch(/\[CODEHOP_CONFIG_INVALID\]\n$/);
      expect(out).not.toContain("(the reply failed");
      expect(model.requests).toHaveLength(0);
    } finally {
      await model.close();
    }
  }, 120_000);
});
