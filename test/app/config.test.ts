import { describe, expect, it } from "vitest";
import { assertModelConfigured, loadAppConfig } from "../../src/app/config.ts";
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
    expect(() => assertModelConfigured(c)).not.toThrow();
    expect(loadAppConfig({}, readEnv({})).home).toMatch(/\.codehop$/);
  });

  it("names exactly the variables to set when no model endpoint is configured", () => {
    const err = (() => {
      try {
        assertModelConfigured(loadAppConfig({}, readEnv({})));
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
      ),
    ).toThrow(/no model for wikipedia_search, page_search/);
  });
});
