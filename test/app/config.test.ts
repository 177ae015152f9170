import { AGENT_NAMES } from "../../src/apps/qa/team.ts";
import { describe, expect, it } from "vitest";
import { assertModelConfigured, detectModel, loadAppConfig } from "../../src/runs/config.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { readEnv } from "../../src/config/env.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";

describe("app configuration contract", () => {
  it("reads endpoint, models, home and corpus from the environment; flags win", () => {
    const env = readEnv({
      OPENAI_BASE_URL: "http://localhost:8000/v1",
      OPENAI_API_KEY: "k",
      CODEHOP_MODEL: "qwen",
      CODEHOP_MODEL_PAGE_SEARCH: "small",
      CODEHOP_HOME: "/data/codehop",
      CODEHOP_CORPUS: "/data/corpus.db",
    });
    const c = loadAppConfig({ corpus: "/other.db" }, env);
    expect(c).toMatchObject({
      baseURL: "http://localhost:8000/v1",
      apiKey: "k",
      model: "qwen",
      models: { page_search: "small" },
      home: "/data/codehop",
      corpus: "/other.db",
    });
    expect(() => assertModelConfigured(c, AGENT_NAMES)).not.toThrow();
    expect(loadAppConfig({}, readEnv({})).home).toMatch(/\.codehop$/);
  });

  it("names exactly the variables to set when no model endpoint is configured", () => {
    const err = (() => {
      try {
        assertModelConfigured(loadAppConfig({}, readEnv({})), AGENT_NAMES);
      } catch (e) {
        return e as CodehopError;
      }
    })();
    expect(CodehopError.isInstance(err)).toBe(true);
    expect(err!.code).toBe(ErrorCodes.MODEL_NOT_CONFIGURED);
    for (const v of ["OPENAI_BASE_URL", "OPENAI_API_KEY", "CODEHOP_MODEL"])
      expect(err!.message).toContain(v);
    // An endpoint without a model is still incomplete, and says which agents lack one.
    expect(() =>
      assertModelConfigured(
        loadAppConfig({ models: { manager: "m" } }, readEnv({ OPENAI_BASE_URL: "http://x/v1" })),
        AGENT_NAMES,
      ),
    ).toThrow(/no model for wikipedia_search, page_search/);
  });
});

describe("model detection", () => {
  it("uses the first model the endpoint lists when CODEHOP_MODEL is unset", async () => {
    const server = await ScriptedOpenAIServer.start({ responder: () => "unused" });
    try {
      const config = loadAppConfig({}, readEnv({ OPENAI_BASE_URL: server.baseURL }));
      expect(await detectModel(config, AGENT_NAMES)).toBe("scripted");
      // A configured model wins: nothing is asked.
      expect(
        await detectModel(
          loadAppConfig({ model: "mine" }, readEnv({ OPENAI_BASE_URL: server.baseURL })),
          AGENT_NAMES,
        ),
      ).toBeUndefined();
    } finally {
      await server.close();
    }
  });

  it("says to set CODEHOP_MODEL when the endpoint cannot list its models", async () => {
    const config = loadAppConfig({}, readEnv({ OPENAI_BASE_URL: "http://127.0.0.1:9/v1" }));
    await expect(detectModel(config, AGENT_NAMES, 2_000)).rejects.toMatchObject({
      code: ErrorCodes.MODEL_NOT_CONFIGURED,
      message: expect.stringContaining(
        "CODEHOP_MODEL is not set and the endpoint's model list (http://127.0.0.1:9/v1/models)",
      ),
    });
  });
});
