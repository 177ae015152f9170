import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemorySaver } from "@langchain/langgraph";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { AssistantRunContextSchema } from "../../src/apps/assistant/base/context.ts";
import { ChatRunContextSchema } from "../../src/apps/chat/conversation/context.ts";
import { KnowledgeRunContextSchema } from "../../src/apps/common/knowledge-source.ts";
import { ResearchRunContextSchema } from "../../src/apps/research/base/settings.ts";
import {
  ClientSettingError,
  clientSchemaOf,
  clientSettable,
  describeClientAccess,
  guardClientRuns,
  isGuarded,
  oneOf,
  upTo,
  vetClientRun,
} from "../../src/core/client-settings.ts";
import { RunContextSchema } from "../../src/core/run-context.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

// What a client of a served graph may set in its run's context and configurable: keys only the
// operator may set are refused by name (never silently dropped, never used), unknown keys too,
// limits are lowered to the operator's, names must be on the operator's allow-lists.

const refusal = (fn: () => unknown): ClientSettingError => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ClientSettingError) return err;
    throw err;
  }
  throw new Error("not refused");
};

const saved = { ...process.env };
afterEach(() => {
  for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
  Object.assign(process.env, saved);
});

describe("vetClientRun", () => {
  const schema = KnowledgeRunContextSchema;

  it.each([
    [
      "context",
      { modelSettings: { baseURL: "http://evil.example/v1" } },
      "context.modelSettings.baseURL",
    ],
    ["context", { modelSettings: { apiKey: "sk-mine" } }, "context.modelSettings.apiKey"],
    ["context", { corpus: "/home/codehop/chat-files/victim.db" }, "context.corpus"],
    ["context", { sandbox: {} }, "context.sandbox"],
    ["context", { journal: { get: 1 } }, "context.journal"],
    ["context", { knowledgeSource: { kind: "corpus" } }, "context.knowledgeSource"],
    ["context", { agentTools: { "*": [] } }, "context.agentTools"],
    ["context", { taskEpochs: [7] }, "context.taskEpochs"],
    ["context", { uploads: {} }, "context.uploads"],
    [
      "configurable",
      { modelSettings: { baseURL: "http://evil.example/v1" } },
      "config.configurable.modelSettings.baseURL",
    ],
    ["configurable", { corpus: "/etc/passwd" }, "config.configurable.corpus"],
    [
      "configurable",
      { langgraph_auth_user: { identity: "admin" } },
      "config.configurable.langgraph_auth_user",
    ],
    ["configurable", { __pregel_checkpointer: {} }, "config.configurable.__pregel_checkpointer"],
  ] as const)("refuses %s %j (403, naming %s)", (where, values, key) => {
    const err = refusal(() =>
      vetClientRun(schema, where === "context" ? { context: values } : { configurable: values }),
    );
    expect(err.path).toBe(key);
    expect(err.status).toBe(403);
    expect(err.code).toBe("CODEHOP_CLIENT_SETTING_REFUSED");
    expect(err.message).toContain(`\`${key}\``);
  });

  it("refuses a key the graph's run context does not know (422), listing what a client may set", () => {
    const err = refusal(() => vetClientRun(schema, { context: { modelz: "x" } }));
    expect(err.status).toBe(422);
    expect(err.path).toBe("context.modelz");
    expect(err.message).toContain(
      "model, models, modelSettings (temperature, maxTokens, maxRetries, timeoutMs), source",
    );
    expect(refusal(() => vetClientRun(schema, { configurable: { user_id: "bob" } })).status).toBe(
      403,
    );
    expect(refusal(() => vetClientRun(schema, { context: [] })).status).toBe(422);
  });

  it("refuses an invalid value of a settable key (422), naming it", () => {
    const err = refusal(() =>
      vetClientRun(schema, { context: { modelSettings: { temperature: "hot" } } }),
    );
    expect(err.status).toBe(422);
    expect(err.path).toBe("context.modelSettings.temperature");
  });

  it("lowers limits to the operator's (environment, else the defaults), keeps lower ones", () => {
    process.env.CODEHOP_MAX_TOKENS = "256";
    delete process.env.CODEHOP_MAX_RETRIES;
    delete process.env.CODEHOP_MODEL_TIMEOUT_MS;
    const asked = { maxTokens: 1e9, maxRetries: 1e6, timeoutMs: 1e12, temperature: 0.7 };
    expect(vetClientRun(schema, { context: { modelSettings: asked } }).context).toEqual({
      modelSettings: { maxTokens: 256, maxRetries: 3, timeoutMs: 120_000, temperature: 0.7 },
    });
    expect(
      vetClientRun(schema, { configurable: { modelSettings: { maxTokens: 10 } } }).configurable,
    ).toEqual({ modelSettings: { maxTokens: 10 } });
  });

  it("takes a model name only from the operator's allow-list (CODEHOP_CLIENT_MODELS)", () => {
    delete process.env.CODEHOP_CLIENT_MODELS;
    const none = refusal(() => vetClientRun(schema, { context: { model: "gpt-4o" } }));
    expect(none.status).toBe(403);
    expect(none.message).toContain("(none configured)");
    process.env.CODEHOP_CLIENT_MODELS = "qwen2.5:7b, llama3.1:8b";
    expect(vetClientRun(schema, { context: { model: "llama3.1:8b" } }).context).toEqual({
      model: "llama3.1:8b",
    });
    const other = refusal(() =>
      vetClientRun(schema, { context: { models: { manager: "qwen2.5:7b", page_search: "o1" } } }),
    );
    expect(other.path).toBe("context.models.page_search");
    expect(other.message).toContain('"qwen2.5:7b", "llama3.1:8b"');
  });

  it("takes a knowledge source by the name the operator gives it, never a path", () => {
    const dir = mkdtempSync(join(tmpdir(), "codehop-sources-"));
    const config = join(dir, "codehop.config.json");
    writeFileSync(config, JSON.stringify({ knowledgeSources: { wiki: { corpus: "wiki.db" } } }));
    process.env.CODEHOP_CONFIG = config;
    expect(vetClientRun(schema, { context: { source: "wiki" } }).context).toEqual({
      source: "wiki",
    });
    const err = refusal(() => vetClientRun(schema, { context: { source: "../victim" } }));
    expect(err.status).toBe(403);
    expect(err.message).toContain('"wiki"');
  });

  it("lets the LangGraph keys of a run through, and the server's own only inside a served graph", () => {
    const configurable = { thread_id: "t", checkpoint_id: "c", checkpoint_ns: "" };
    expect(vetClientRun(schema, { configurable }).configurable).toEqual(configurable);
    const server = { langgraph_auth_user: { identity: "ada" }, "x-request-id": "r" };
    expect(
      vetClientRun(schema, { configurable: server }, { serverKeys: true }).configurable,
    ).toEqual(server);
  });

  it("lets code-made values through only when asked (a worker's journal, never a request body)", () => {
    const journal = { get: async () => undefined, put: async () => {} };
    expect(vetClientRun(schema, { context: { journal } }, { codeValues: true }).context).toEqual({
      journal,
    });
    expect(refusal(() => vetClientRun(schema, { context: { journal } })).path).toBe(
      "context.journal",
    );
  });

  it("classifies every key of every app's run context (unmarked keys are the operator's)", () => {
    const access = describeClientAccess(ResearchRunContextSchema);
    for (const key of [
      "modelSettings.baseURL",
      "modelSettings.apiKey",
      "corpus",
      "sandbox",
      "journal",
    ])
      expect(access[key]).toBe("operator");
    expect(access["modelSettings.maxTokens"]).toBe("upTo");
    expect(access.source).toBe("oneOf");
    expect(access["research.maxQuestions"]).toBe("any");
    const chat = describeClientAccess(ChatRunContextSchema);
    expect(chat["chat.filesRetentionDays"]).toBe("operator");
    expect(chat["chat.maxFileBytes"]).toBe("upTo");
    expect(chat["chat.keepRounds"]).toBe("any");
    expect(chat.chatAccess).toBe("operator");
    expect(chat.chatFiles).toBe("operator");
    expect(describeClientAccess(RunContextSchema).models).toBe("oneOf");
    const assistant = describeClientAccess(AssistantRunContextSchema);
    expect(assistant["web.viewportChars"]).toBe("any");
    expect(assistant["web.maxPageBytes"]).toBe("upTo");
    expect(assistant["web.browser"]).toBe("oneOf");
    expect(assistant.assistantAccess).toBe("operator");
    expect(assistant.assistantFiles).toBe("operator");
  });

  it("a schema of a graph of one's own: marked keys are the client's, the rest the operator's", () => {
    const own = z.looseObject({
      tone: clientSettable(z.enum(["short", "long"]).optional()),
      budget: clientSettable(
        z.number().optional(),
        upTo(() => 5, "the operator's budget"),
      ),
      region: clientSettable(
        z.string().optional(),
        oneOf(() => ["eu"], "regions"),
      ),
      secret: z.string().optional(),
    });
    expect(vetClientRun(own, { context: { tone: "short", budget: 50, region: "eu" } })).toEqual({
      context: { tone: "short", budget: 5, region: "eu" },
    });
    expect(refusal(() => vetClientRun(own, { context: { secret: "x" } })).path).toBe(
      "context.secret",
    );
    // A graph without a context schema: a client sets nothing.
    expect(refusal(() => vetClientRun(undefined, { context: { tone: "short" } })).status).toBe(422);
  });
});

describe("a guarded (served) graph", () => {
  it("every graph of codehop's langgraph.json is guarded (a client's run context is vetted)", async () => {
    const spec = JSON.parse(
      readFileSync(join(import.meta.dirname, "../../langgraph.json"), "utf8"),
    );
    const entries = (await import("../../src/graphs/entries.ts")) as Record<string, unknown>;
    for (const [name, target] of Object.entries(spec.graphs as Record<string, string>)) {
      const exported = entries[target.split(":")[1]];
      expect(isGuarded(exported), name).toBe(true);
      expect(clientSchemaOf(exported), name).toBeDefined();
    }
  });

  let operator: ScriptedOpenAIServer;
  let attacker: ScriptedOpenAIServer;
  const answer = "Thought: done\nCode:\n```js\nfinal_answer(42)\n```<end_action>";

  beforeAll(async () => {
    operator = await ScriptedOpenAIServer.start({ responder: () => answer });
    attacker = await ScriptedOpenAIServer.start({
      responder: () => "Thought: mine\nCode:\n```js\nfinal_answer('stolen')\n```<end_action>",
    });
  });
  afterAll(async () => {
    await operator?.close();
    await attacker?.close();
  });

  const served = () => {
    process.env.OPENAI_BASE_URL = operator.baseURL;
    process.env.OPENAI_API_KEY = "operator-secret-key";
    process.env.CODEHOP_MODEL = "scripted";
    const graph = guardClientRuns(
      createCodeAgent({ name: "solo", description: "computes", maxSteps: 2 }).graph,
    );
    (graph as { checkpointer?: unknown }).checkpointer = new MemorySaver();
    return graph;
  };
  const config = (extra: Record<string, unknown>) =>
    ({ configurable: { thread_id: `t-${Math.random()}` }, ...extra }) as any;

  it("refuses a client's endpoint in context or configurable before any request leaves", async () => {
    const graph = served();
    const before = operator.requests.length;
    for (const extra of [
      { context: { modelSettings: { baseURL: attacker.baseURL } } },
      {
        configurable: {
          thread_id: `t-${Math.random()}`,
          modelSettings: { baseURL: attacker.baseURL, apiKey: "x" },
        },
      },
    ]) {
      await expect(graph.invoke({ task: "What is 6*7?" }, config(extra))).rejects.toThrow(
        /modelSettings\.baseURL` is an operator setting/,
      );
    }
    expect(attacker.requests).toHaveLength(0);
    expect(operator.requests.length).toBe(before);
    expect(clientSchemaOf(graph)).toBe(RunContextSchema);
  });

  it("runs with a client's settable keys, its token limit lowered to the operator's", async () => {
    const graph = served();
    process.env.CODEHOP_MAX_TOKENS = "300";
    const state = await graph.invoke(
      { task: "What is 6*7?" },
      config({ context: { modelSettings: { maxTokens: 1e9, temperature: 0.5 } } }),
    );
    expect(state.answer).toBe(42);
    const sent = operator.requests.at(-1)!.request;
    expect(sent.maxTokens).toBe(300);
    expect(sent.temperature).toBe(0.5);
    expect(attacker.requests).toHaveLength(0);
  });
});
