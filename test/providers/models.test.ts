import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readEnv } from "../../src/config/env.ts";
import { callModel, messageText, resolveModel } from "../../src/core/models.ts";
import { MODEL_PROVIDER_CONFIG } from "@langchain/classic/chat_models/universal";
import { parseModelName, PROVIDER_NAMES, ProviderChatModel } from "../../src/core/providers.ts";
import { usageFromMessage } from "../../src/core/usage.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { assertModelConfigured, loadAppConfig } from "../../src/runs/config.ts";
import type { ScriptedReply } from "../../src/testing/scripted-openai-server.ts";
import {
  type ProviderApi,
  ScriptedProviderServer,
} from "../../src/testing/scripted-provider-servers.ts";

const STOP = ["<end_action>", "Observation:"];

describe("parseModelName", () => {
  it("splits a LangChain provider prefix at the first colon and keeps other names whole", () => {
    expect(parseModelName("anthropic:claude-sonnet-4-5")).toEqual({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
    });
    expect(parseModelName("google-genai:gemini-2.5-flash")).toEqual({
      provider: "google-genai",
      model: "gemini-2.5-flash",
    });
    expect(parseModelName("openai:qwen2.5:7b")).toEqual({
      provider: "openai",
      model: "qwen2.5:7b",
    });
    // Ollama tags and repository names are the OpenAI-compatible endpoint's, never a provider guess.
    expect(parseModelName("qwen2.5:7b")).toEqual({ provider: "openai", model: "qwen2.5:7b" });
    expect(parseModelName("claude-3-haiku")).toEqual({
      provider: "openai",
      model: "claude-3-haiku",
    });
    expect(parseModelName("Qwen/Qwen2.5-7B-Instruct").provider).toBe("openai");
  });

  it("knows exactly the providers of LangChain's universal init (written out so a model name loads none of it)", () => {
    expect([...PROVIDER_NAMES].sort()).toEqual(Object.keys(MODEL_PROVIDER_CONFIG).sort());
    for (const provider of PROVIDER_NAMES)
      expect(parseModelName(`${provider}:m`)).toEqual({ provider, model: "m" });
  });

  it("refuses a provider without a model", () => {
    expect(() => parseModelName("anthropic:")).toThrow(/names the provider anthropic but no model/);
  });
});

/** Environment of a provider's scripted server. */
function providerEnv(api: ProviderApi, server: ScriptedProviderServer, extra = {}) {
  return readEnv(
    api === "anthropic"
      ? { ANTHROPIC_API_KEY: "ak-test", ANTHROPIC_BASE_URL: server.baseURL, ...extra }
      : { GOOGLE_API_KEY: "gk-test", GOOGLE_GEMINI_BASE_URL: server.baseURL, ...extra },
  );
}

const modelName = (api: ProviderApi) =>
  api === "anthropic" ? "anthropic:claude-scripted" : "google-genai:gemini-scripted";

describe.each(["anthropic", "gemini"] as const)("%s over its own HTTP API", (api) => {
  let server: ScriptedProviderServer;
  let replies: ScriptedReply[] = [];
  beforeAll(async () => {
    server = await ScriptedProviderServer.start({
      api,
      apiKey: api === "anthropic" ? "ak-test" : "gk-test",
      responder: () => replies.shift() ?? "(no reply scripted)",
    });
  });
  afterAll(() => server.close());

  const model = (extra: Record<string, string> = {}) =>
    resolveModel("manager", { context: { model: modelName(api) } } as never, {
      env: providerEnv(api, server, { CODEHOP_MAX_RETRIES: "1", ...extra }),
    });

  it.each([false, true])(
    "sends the stop sequences, gets the reply cut there and usage as the OpenAI path reports it (stream %s)",
    async (stream) => {
      replies = [
        {
          content:
            "Thought: add\nCode:\n```js\nfinal_answer(1 + 1)\n```<end_action>\nObservation: made up",
          usage: { prompt_tokens: 120, completion_tokens: 17, cached_tokens: 100 },
        },
      ];
      const before = server.requests.length;
      const m = await model();
      expect(m).toBeInstanceOf(ProviderChatModel);
      const reply = await callModel(
        m,
        [new SystemMessage("You write code."), new HumanMessage("What is 1 + 1?")],
        { agentName: "manager", stop: STOP, stream },
      );
      expect(messageText(reply)).toBe("Thought: add\nCode:\n```js\nfinal_answer(1 + 1)\n```");
      const usage = usageFromMessage(reply);
      expect(usage.calls).toBe(1);
      // Anthropic's stream counts output tokens in message_start (1) and again, in total, in
      // message_delta; @langchain/anthropic adds both up (one token too many per streamed call).
      expect(usage.outputTokens).toBe(api === "anthropic" && stream ? 18 : 17);
      expect(usage.cachedInputTokens).toBe(100);
      // Anthropic counts cache reads beside input_tokens; LangChain adds them up as OpenAI does.
      expect(usage.inputTokens).toBe(api === "anthropic" ? 220 : 120);
      const logged = server.requests[before];
      expect(logged.request.stop).toEqual(STOP);
      expect(logged.request.stream).toBe(stream);
      expect(logged.request.model).toBe(
        api === "anthropic" ? "claude-scripted" : "gemini-scripted",
      );
      expect(logged.request.messages).toEqual([
        { role: "system", content: "You write code." },
        { role: "user", content: "What is 1 + 1?" },
      ]);
      expect(logged.request.maxTokens).toBe(1024);
      expect(logged.request.temperature).toBe(0);
    },
  );

  it("a call without stop sequences sends none (one provider model serves both)", async () => {
    replies = ["plain reply"];
    const before = server.requests.length;
    const reply = await callModel(await model(), [new HumanMessage("hi")], {
      agentName: "manager",
    });
    expect(messageText(reply)).toBe("plain reply");
    expect(server.requests[before].request.stop).toEqual([]);
  });

  it("retries a server error, then fails with MODEL_ENDPOINT_FAILED naming provider, model and endpoint", async () => {
    replies = [{ status: 500 }, { status: 500 }];
    const before = server.requests.length;
    const err = await callModel(await model(), [new HumanMessage("hi")], {
      agentName: "manager",
    }).catch((e) => e);
    expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toContain(`${modelName(api)} at ${server.baseURL}`);
    expect(err.message).toContain("HTTP 500");
    expect(server.requests.length - before).toBe(2);
  });

  it("does not retry a request the provider refuses (HTTP 400)", async () => {
    replies = [{ status: 400 }, "never sent"];
    const before = server.requests.length;
    const err = await callModel(await model(), [new HumanMessage("hi")], {
      agentName: "manager",
    }).catch((e) => e);
    expect(err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toContain("HTTP 400");
    expect(server.requests.length - before).toBe(1);
    replies = [];
  });

  it("a wrong key is refused by the server and reported, not retried", async () => {
    const before = server.requests.length;
    const key: Record<string, string> =
      api === "anthropic" ? { ANTHROPIC_API_KEY: "wrong" } : { GOOGLE_API_KEY: "wrong" };
    const err = await callModel(await model(key), [new HumanMessage("hi")], {
      agentName: "manager",
    }).catch((e) => e);
    expect(err.code).toBe(ErrorCodes.MODEL_ENDPOINT_FAILED);
    expect(err.message).toMatch(api === "anthropic" ? /HTTP 401/ : /HTTP 400/);
    expect(server.requests.length - before).toBe(0);
  });

  it("a model whose key variable is unset fails before any call, naming the variable", async () => {
    const env = readEnv(api === "anthropic" ? {} : { GEMINI_API_KEY: "" });
    const err = await resolveModel("manager", { context: { model: modelName(api) } } as never, {
      env,
    }).then(
      () => undefined,
      (e) => e as CodehopError,
    );
    expect(err?.code).toBe(ErrorCodes.MODEL_NOT_CONFIGURED);
    expect(err?.message).toContain(api === "anthropic" ? "ANTHROPIC_API_KEY" : "GOOGLE_API_KEY");
    const config = loadAppConfig({ model: modelName(api) }, env);
    expect(() => assertModelConfigured(config, ["manager"], env)).toThrow(
      api === "anthropic" ? /ANTHROPIC_API_KEY is not set/ : /GOOGLE_API_KEY is not set/,
    );
    // With the key, no OpenAI variable is needed.
    expect(() =>
      assertModelConfigured(config, ["manager"], providerEnv(api, server)),
    ).not.toThrow();
  });
});

describe("a provider whose package is not installed", () => {
  it("fails the first call with MODEL_NOT_CONFIGURED naming the package to install", async () => {
    const m = await resolveModel(
      "manager",
      { context: { model: "mistralai:mistral-small" } } as never,
      {
        env: readEnv({}),
      },
    );
    const err = await callModel(m, [new HumanMessage("hi")], { agentName: "manager" }).catch(
      (e) => e,
    );
    expect(err.code).toBe(ErrorCodes.MODEL_NOT_CONFIGURED);
    expect(err.message).toContain("@langchain/mistralai");
  });
});
