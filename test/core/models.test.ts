import { HumanMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";
import { readEnv } from "../../src/config/env.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import {
  callModel,
  isRequestRefused,
  modelFailedAttemptHandler,
  resolveModel,
} from "../../src/core/models.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";

const env = (vars: Record<string, string>) => readEnv(vars);
const nameOf = (m: unknown) => (m as ChatOpenAI).model;

describe("resolveModel", () => {
  it("uses a chat model instance given to the agent over any configuration", async () => {
    const instance = new ScriptedChatModel(["hi"]);
    const m = await resolveModel(
      "manager",
      { configurable: { model: "other" } },
      { model: instance, env: env({ CODEHOP_MODEL: "x" }) },
    );
    expect(m).toBe(instance);
  });

  it("resolves names by precedence: configurable.models[agent] > configurable.model > option > CODEHOP_MODEL_<AGENT> > CODEHOP_MODEL", async () => {
    const e = env({
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      CODEHOP_MODEL: "default-m",
      CODEHOP_MODEL_PAGE_SEARCH: "page-m",
    });
    expect(nameOf(await resolveModel("manager", {}, { env: e }))).toBe("default-m");
    expect(nameOf(await resolveModel("page_search", {}, { env: e }))).toBe("page-m");
    expect(nameOf(await resolveModel("page_search", {}, { env: e, model: "opt-m" }))).toBe("opt-m");
    expect(
      nameOf(
        await resolveModel(
          "page_search",
          { configurable: { model: "run-m" } },
          { env: e, model: "opt-m" },
        ),
      ),
    ).toBe("run-m");
    expect(
      nameOf(
        await resolveModel(
          "page_search",
          { configurable: { model: "run-m", models: { page_search: "agent-m" } } },
          { env: e },
        ),
      ),
    ).toBe("agent-m");
  });

  it("accepts model instances in configurable (per agent or for every agent)", async () => {
    const perAgent = new ScriptedChatModel(["a"]);
    const shared = new ScriptedChatModel(["b"]);
    const e = env({});
    const config = { configurable: { model: shared, models: { page_search: perAgent } } };
    expect(await resolveModel("page_search", config, { env: e })).toBe(perAgent);
    expect(await resolveModel("manager", config, { env: e })).toBe(shared);
  });

  it("passes endpoint, temperature, max tokens, retries and timeout to ChatOpenAI", async () => {
    const e = env({
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      CODEHOP_MODEL: "m",
      CODEHOP_TEMPERATURE: "0.3",
      CODEHOP_MAX_TOKENS: "256",
      CODEHOP_MAX_RETRIES: "5",
      CODEHOP_MODEL_TIMEOUT_MS: "1234",
    });
    const m = (await resolveModel("a", {}, { env: e })) as ChatOpenAI;
    expect(m.temperature).toBe(0.3);
    expect(m.maxTokens).toBe(256);
    expect(m.timeout).toBe(1234);
    expect((m as any).caller.maxRetries).toBe(5);
    expect((m as any).clientConfig.baseURL).toBe("http://127.0.0.1:9/v1");
    expect((m as any).streaming).toBe(false);
    const overridden = (await resolveModel(
      "a",
      { configurable: { modelSettings: { temperature: 0.9 } } },
      { env: e },
    )) as ChatOpenAI;
    expect(overridden.temperature).toBe(0.9);
  });

  it("says exactly which variables to set when no model is configured", async () => {
    try {
      await resolveModel("page_search", {}, { env: env({}) });
      expect.unreachable();
    } catch (err) {
      expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_NOT_CONFIGURED);
      expect((err as Error).message).toMatch(
        /CODEHOP_MODEL\b.*CODEHOP_MODEL_PAGE_SEARCH.*OPENAI_BASE_URL/,
      );
    }
  });

  it("does not take CODEHOP_MODEL_TIMEOUT_MS for the model of an agent named timeout_ms", async () => {
    const e = env({
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      CODEHOP_MODEL: "default-m",
      CODEHOP_MODEL_TIMEOUT_MS: "5000",
      CODEHOP_MODEL_MANAGER: "manager-m",
    });
    expect(e.agentModels).toEqual({ manager: "manager-m" });
    expect(e.modelTimeoutMs).toBe(5000);
    expect(nameOf(await resolveModel("timeout_ms", {}, { env: e }))).toBe("default-m");
  });

  it("asks for an endpoint when a model name has no base URL or key", async () => {
    await expect(resolveModel("a", {}, { env: env({ CODEHOP_MODEL: "m" }) })).rejects.toThrow(
      /set OPENAI_BASE_URL/,
    );
  });
});

describe("callModel against a failing endpoint", () => {
  let server: ScriptedOpenAIServer;
  let failures = 0;
  let emptyReplies = 0;
  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start({
      responder: (req) => {
        const task = req.messages.at(-1)?.content ?? "";
        if (task === "always 500") return { status: 500 };
        if (task === "garbage") return { garbage: "<html>not json" };
        if (task === "no choices")
          return { garbage: '{"id":"x","object":"chat.completion","choices":[]}' };
        if (task === "no choices once" && emptyReplies++ < 1)
          return { garbage: '{"id":"x","object":"chat.completion","choices":[]}' };
        if (task === "flaky" && failures++ < 1) return { status: 503 };
        if (task === "too long")
          return {
            status: 400,
            body: JSON.stringify({
              error: {
                message:
                  "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens.",
              },
            }),
          };
        return "ok";
      },
    });
  });
  afterAll(() => server.close());

  const model = (maxRetries: number) =>
    resolveModel("manager", {
      configurable: {
        model: "m",
        modelSettings: { baseURL: server.baseURL, apiKey: "k", maxRetries },
      },
    });

  it("fails with MODEL_ENDPOINT_FAILED naming the agent and endpoint after the retries", async () => {
    const before = server.requests.length;
    const err = await callModel(await model(1), [new HumanMessage("always 500")], {
      agentName: "manager",
    }).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toContain('agent "manager"');
    expect(err.message).toContain(server.baseURL);
    expect(server.requests.length - before).toBe(2); // first try + one retry
  });

  it("retries a transient failure and succeeds", async () => {
    const reply = await callModel(await model(2), [new HumanMessage("flaky")], {
      agentName: "manager",
    });
    expect(reply.content).toBe("ok");
  });

  it("turns a non-JSON body into MODEL_ENDPOINT_FAILED", async () => {
    const err = await callModel(await model(0), [new HumanMessage("garbage")], {
      agentName: "manager",
    }).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
  });

  it("reports a reply with empty choices as such, after retrying it like a garbage body", async () => {
    const before = server.requests.length;
    const err = await callModel(await model(1), [new HumanMessage("no choices")], {
      agentName: "manager",
    }).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toContain("the endpoint returned no choices (empty response)");
    expect(err.message).toContain('agent "manager"');
    expect(server.requests.length - before).toBe(2); // first try + one retry
  });

  it("a request refused as too long: said with its HTTP status, not retried, and told apart from an endpoint that is down", async () => {
    // LangChain wraps this 400 in a ContextOverflowError: the status is on its cause.
    const before = server.requests.length;
    const err = await callModel(await model(3), [new HumanMessage("too long")], {
      agentName: "researcher",
    }).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toContain("HTTP 400: This model's maximum context length is 8192 tokens");
    expect(server.requests.length - before).toBe(1);
    expect(isRequestRefused(err)).toBe(true);
    const down = await callModel(await model(0), [new HumanMessage("always 500")], {
      agentName: "researcher",
    }).catch((e) => e);
    expect(isRequestRefused(down)).toBe(false);
    expect(isRequestRefused(new Error("HTTP 400"))).toBe(false);
  });

  it("recovers when an empty-choices reply is followed by a real one", async () => {
    const reply = await callModel(await model(2), [new HumanMessage("no choices once")], {
      agentName: "manager",
    });
    expect(reply.content).toBe("ok");
  });
});

describe("modelFailedAttemptHandler (retry policy of model calls)", () => {
  const httpError = (status: number, message = "x") =>
    Object.assign(new Error(message), { status });

  it("retries rate limits without a hint, server errors and network failures", () => {
    expect(() => modelFailedAttemptHandler(httpError(429, "server busy"))).not.toThrow();
    expect(() => modelFailedAttemptHandler(httpError(500))).not.toThrow();
    expect(() => modelFailedAttemptHandler(httpError(503))).not.toThrow();
    expect(() => modelFailedAttemptHandler(new Error("socket hang up"))).not.toThrow();
  });

  it("gives up at once on client errors, exhausted quota and aborts", () => {
    expect(() => modelFailedAttemptHandler(httpError(401))).toThrow();
    expect(() => modelFailedAttemptHandler(httpError(404))).toThrow();
    expect(() =>
      modelFailedAttemptHandler(httpError(429, "You exceeded your current quota, check billing")),
    ).toThrow();
    expect(() =>
      modelFailedAttemptHandler(Object.assign(new Error("aborted"), { name: "AbortError" })),
    ).toThrow();
  });
});
