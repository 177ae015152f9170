import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { chat } from "../../src/apps/chat/app.ts";
import { ChatRunContextSchema } from "../../src/apps/chat/conversation/context.ts";
import { ClientSettingError, vetClientRun } from "../../src/core/client-settings.ts";
import { LAST_ACTION_NOTE } from "../../src/core/history.ts";
import { memoryContext } from "../../src/runs/memory.ts";
import { ask } from "../../src/apps/qa/app.ts";
import { ensureDemoCorpus } from "../../src/apps/qa/demo.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { MEMORY_DB_FILE, openSqliteMemoryStore } from "../../src/memory/sqlite-store.ts";
import {
  type ChatRequest,
  observationCount,
  type Responder,
  ScriptedOpenAIServer,
} from "../../src/testing/scripted-openai-server.ts";

const task = (req: ChatRequest) => req.messages.find((m) => m.role === "user")?.content ?? "";
const last = (req: ChatRequest) => req.messages.at(-1)?.content ?? "";
/** The observations the agent saw (user messages after the task, not the note recalling its code). */
const observations = (req: ChatRequest) =>
  req.messages
    .filter((m) => m.role === "user")
    .slice(1)
    .filter((m) => !LAST_ACTION_NOTE.test(m.content))
    .map((m) => m.content)
    .join("\n");

/**
 * The chat agent's model: says hello and remembers a fact; answers "what's my name" from what the
 * round shows it remembers; looks a fact up with recall; forgets one.
 */
const chatModel: Responder = (req) => {
  const t = task(req);
  const step = observationCount(req);
  if (t.includes("I'm Ada and I write compilers")) {
    return step === 0
      ? action(
          "Remember who the user is.",
          'remember("The user\'s name is Ada and she writes compilers.", "name")',
        )
      : action("Greet.", 'final_answer("Nice to meet you, Ada!")');
  }
  if (t.includes("What's my name?")) {
    const known = /remember about the user[\s\S]*name is (\w+)/.exec(t)?.[1];
    return action(
      "Answer from memory.",
      `final_answer(${JSON.stringify(known ? `Your name is ${known}.` : "I don't know your name.")})`,
    );
  }
  if (t.includes("What do I write?")) {
    if (step === 0)
      return action(
        "Look it up.",
        'const found = await recall("writes compilers"); print(JSON.stringify(found))',
      );
    const seen = observations(req);
    return action(
      "Answer.",
      `final_answer(${JSON.stringify(seen.includes("she writes compilers") ? "Compilers." : "No idea.")})`,
    );
  }
  if (t.includes("Forget my name")) {
    return step === 0
      ? action("Forget it.", 'print(JSON.stringify(await forget("name")))')
      : action(
          "Done.",
          `final_answer(${JSON.stringify(observations(req).includes('"forgotten":true') ? "Forgotten." : "Nothing to forget.")})`,
        );
  }
  return action("Fallback.", 'final_answer("?")');
};

let server: ScriptedOpenAIServer;
let home: string;
beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({ responder: (req, ctx) => responder(req, ctx) });
  home = mkdtempSync(join(tmpdir(), "codehop-memory-app-"));
});
afterAll(() => server.close());
afterEach(() => vi.unstubAllEnvs());
let responder: Responder = chatModel;

const config = () => ({
  home,
  baseURL: server.baseURL,
  apiKey: "k",
  model: "scripted",
  models: {},
});

describe(
  "chat remembers user facts across threads (CODEHOP_MEMORY=1)",
  { timeout: 120_000 },
  () => {
    it("a fact remembered in one conversation answers in another, for that user only", async () => {
      vi.stubEnv("CODEHOP_ENV_FILE", "none");
      vi.stubEnv("CODEHOP_MEMORY", "1");
      vi.stubEnv("CODEHOP_USER", "ada");
      responder = chatModel;
      const hello = await chat(undefined, "Hi, I'm Ada and I write compilers.", {
        config: config(),
      });
      expect(hello.reply).toBe("Nice to meet you, Ada!");
      // The fact is in the store under the user's namespace.
      const store = openSqliteMemoryStore(join(home, MEMORY_DB_FILE));
      try {
        const item = await store.get(["ada", "memories"], "name");
        expect(item?.value).toMatchObject({
          text: "The user's name is Ada and she writes compilers.",
          agent: "chat",
          thread_id: hello.thread_id,
        });
      } finally {
        await store.close();
      }
      // A new conversation: the round shows what is remembered about the user.
      const asked = await chat(undefined, "What's my name?", { config: config() });
      expect(asked.thread_id).not.toBe(hello.thread_id);
      expect(asked.reply).toBe("Your name is Ada.");
      // The recall tool finds it too.
      const wrote = await chat(undefined, "What do I write?", { config: config() });
      expect(wrote.reply).toBe("Compilers.");

      // Another user remembers nothing of Ada.
      vi.stubEnv("CODEHOP_USER", "bob");
      expect((await chat(undefined, "What's my name?", { config: config() })).reply).toBe(
        "I don't know your name.",
      );
      // Memory off: nothing is recalled, and the agent has no memory tools.
      vi.stubEnv("CODEHOP_USER", "ada");
      vi.stubEnv("CODEHOP_MEMORY", "0");
      const before = server.requests.length;
      expect((await chat(undefined, "What's my name?", { config: config() })).reply).toBe(
        "I don't know your name.",
      );
      const system = server.requests[before].request.messages[0].content;
      expect(system).not.toContain("remember(");
    });

    it("forget deletes a fact; a second forget finds nothing", async () => {
      vi.stubEnv("CODEHOP_ENV_FILE", "none");
      vi.stubEnv("CODEHOP_MEMORY", "1");
      vi.stubEnv("CODEHOP_USER", "ada");
      responder = chatModel;
      expect((await chat(undefined, "Forget my name, please.", { config: config() })).reply).toBe(
        "Forgotten.",
      );
      expect((await chat(undefined, "Forget my name, please.", { config: config() })).reply).toBe(
        "Nothing to forget.",
      );
      expect((await chat(undefined, "What's my name?", { config: config() })).reply).toBe(
        "I don't know your name.",
      );
    });
  },
);

/** The scripted task: a checksum the model first tries with a tool that does not exist. */
const FIRST = "Compute the checksum of the word codehop.";
const SECOND = "Compute the checksum of the word langgraph.";
const LESSON =
  "There is no checksum tool: compute it in code as the sum of the character codes modulo 256.";
const checksum = (w: string) => [...w].reduce((s, c) => s + c.charCodeAt(0), 0) % 256;

const reflectingModel: Responder = (req) => {
  const t = task(req);
  if (t.startsWith("An agent attempted a task and failed")) return `Lesson: ${LESSON}`;
  const word = /checksum of the word (\w+)/.exec(t)?.[1];
  if (!word) return action("?", 'final_answer("?")');
  if (t.includes("Lessons from your earlier attempts") && t.includes(LESSON))
    return action(
      "Follow the lesson.",
      `final_answer([..."${word}"].reduce((s, c) => s + c.charCodeAt(0), 0) % 256)`,
    );
  if (last(req).startsWith("You have no steps left")) return "I could not compute it.";
  // Without the lesson: a different missing tool every step, until the steps run out.
  return action("Use the checksum tool.", `print(checksum_v${observationCount(req)}("${word}"))`);
};

describe(
  "reflection: a lesson after a failed run helps a similar task (CODEHOP_REFLECTION=1)",
  { timeout: 180_000 },
  () => {
    it("fails, writes a lesson, then the similar task succeeds; without reflection it fails again", async () => {
      const corpus = await ensureDemoCorpus(home);
      vi.stubEnv("CODEHOP_ENV_FILE", "none");
      vi.stubEnv("CODEHOP_USER", "ada");
      responder = reflectingModel;
      const run = (question: string, thread: string) =>
        ask(question, { threadId: thread, config: { ...config(), corpus } });

      // Without reflection: both attempts fail.
      vi.stubEnv("CODEHOP_REFLECTION", "0");
      const off1 = await run(FIRST, "off-1");
      const off2 = await run(SECOND, "off-2");
      expect(off1.status).toBe("max_steps");
      expect(off2.status).toBe("max_steps");

      // With reflection: the failure leaves a lesson, the next similar task is shown it and succeeds.
      vi.stubEnv("CODEHOP_REFLECTION", "1");
      const warnings: string[] = [];
      const first = await run(FIRST, "on-1");
      expect(first.status).toBe("max_steps");
      const second = await ask(SECOND, {
        threadId: "on-2",
        config: { ...config(), corpus },
        onWarning: (w) => warnings.push(w),
      });
      expect(second.status).toBe("final_answer");
      expect(second.answer).toBe(String(checksum("langgraph")));
      const store = openSqliteMemoryStore(join(home, MEMORY_DB_FILE));
      try {
        const lessons = await store.search(["ada", "lessons", "qa"], { limit: 10 });
        expect(lessons.map((l) => l.value.lesson)).toEqual([LESSON]);
        expect(lessons[0].value).toMatchObject({ task: FIRST, thread_id: "on-1" });
      } finally {
        await store.close();
      }
      // Only the root agent sees lessons; the reflection prompt saw the failed trajectory.
      const reflection = server.requests.find((r) =>
        task(r.request).startsWith("An agent attempted"),
      );
      expect(task(reflection!.request)).toContain("checksum_v0");
      expect(task(reflection!.request)).toContain("step limit");
      expect(warnings).toEqual([]);
    });
  },
);

describe("memory settings in served runs (operator-only)", () => {
  it("a client that sends `memory` (another user's memories) is refused; a worker's own settings pass the guard", () => {
    for (const where of ["context", "configurable"] as const) {
      let status: number | undefined;
      try {
        vetClientRun(ChatRunContextSchema, {
          [where]: { memory: { user: "victim", tools: true } },
        });
      } catch (err) {
        status = (err as ClientSettingError).status;
      }
      expect(status).toBe(403);
    }
    expect(() => vetClientRun(ChatRunContextSchema, { context: { lessons: ["x"] } })).toThrow(
      ClientSettingError,
    );
    const worker = memoryContext({ tools: true, recall: true, user: "local" }, "chat", undefined);
    const vetted = vetClientRun(
      ChatRunContextSchema,
      { context: { ...worker } },
      { codeValues: true, serverKeys: true },
    );
    expect(vetted.context?.memory).toMatchObject({ tools: true, recall: true });
    expect((vetted.context?.agentTools as any).chat.map((t: any) => t.name)).toEqual([
      "remember",
      "recall",
      "forget",
    ]);
  });
});
