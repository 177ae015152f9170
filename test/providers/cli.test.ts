import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDemoCorpus } from "../../src/apps/qa/demo.ts";
import { DEMO_ANSWERS, DEMO_QUESTIONS, demoRules } from "../../src/apps/qa/demo-trajectories.ts";
import { type Responder, trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import {
  type ProviderApi,
  ScriptedProviderServer,
} from "../../src/testing/scripted-provider-servers.ts";
import { cliEnv, runCli } from "../app/cli-helpers.ts";

/** Answers the doctor's prompts ("ready", the probe line repeated) and the demo's agents. */
const demoAndDoctor = (): Responder => {
  const demo = trajectoryResponder(demoRules());
  return (req, ctx) => {
    const prompt = req.messages.at(-1)?.content ?? "";
    const line = /write nothing else:\n(.+)/.exec(prompt)?.[1];
    if (line) return line;
    if (/ready/i.test(prompt) && req.messages.length === 1) return "ready";
    return demo(req, ctx);
  };
};

const servers = {} as Record<ProviderApi, ScriptedProviderServer>;
let corpus: string;
beforeAll(async () => {
  corpus = await ensureDemoCorpus(mkdtempSync(join(tmpdir(), "codehop-providers-corpus-")));
  servers.anthropic = await ScriptedProviderServer.start({
    api: "anthropic",
    apiKey: "ak",
    responder: demoAndDoctor(),
  });
  servers.gemini = await ScriptedProviderServer.start({
    api: "gemini",
    apiKey: "gk",
    responder: demoAndDoctor(),
  });
});
afterAll(async () => {
  await Promise.all(Object.values(servers).map((s) => s.close()));
});

/** A CLI environment with only the provider's variables (no OpenAI endpoint at all). */
const envFor = (api: ProviderApi, home: string) =>
  cliEnv({
    CODEHOP_HOME: home,
    CODEHOP_CORPUS: corpus,
    ...(api === "anthropic"
      ? {
          CODEHOP_MODEL: "anthropic:claude-scripted",
          ANTHROPIC_API_KEY: "ak",
          ANTHROPIC_BASE_URL: servers.anthropic.baseURL,
        }
      : {
          CODEHOP_MODEL: "google-genai:gemini-scripted",
          GOOGLE_API_KEY: "gk",
          GOOGLE_GEMINI_BASE_URL: servers.gemini.baseURL,
        }),
  });

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe.each(["anthropic", "gemini"] as const)(
  "codehop with %s models",
  { timeout: 180_000 },
  (api) => {
    it("ask runs the three-agent demo question over the provider's API, with usage per agent", async () => {
      const home = mkdtempSync(join(tmpdir(), `codehop-${api}-`));
      const server = servers[api];
      const before = server.requests.length;
      const asked = await runCli(["ask", DEMO_QUESTIONS.plywood, "--json"], envFor(api, home));
      expect(asked.stderr).not.toMatch(/CODEHOP_[A-Z_]+\]/);
      expect(asked.code).toBe(0);
      const result = JSON.parse(asked.stdout);
      expect(result.answer).toBe(DEMO_ANSWERS.plywood);
      // Every model call of the run went to the provider, each with codehop's stop sequences.
      const calls = server.requests.slice(before);
      expect(result.usage.total.calls).toBe(calls.length);
      expect(calls.every((c) => c.request.stop.includes("<end_action>"))).toBe(true);
      expect(result.usage.by_agent.manager.input_tokens).toBeGreaterThan(0);
      expect(result.usage.by_agent.page_search.output_tokens).toBeGreaterThan(0);
    });

    it("doctor checks the provider's key, a completion and the stop sequences", async () => {
      const home = mkdtempSync(join(tmpdir(), `codehop-${api}-doctor-`));
      const ok = await runCli(["doctor", "--json"], envFor(api, home));
      expect(ok.code).toBe(0);
      const report = JSON.parse(ok.stdout);
      const checks = Object.fromEntries(report.checks.map((c: any) => [c.name, c]));
      expect(report.model).toBe(
        api === "anthropic" ? "anthropic:claude-scripted" : "google-genai:gemini-scripted",
      );
      expect(report.base_url).toBe(servers[api].baseURL);
      expect(checks.endpoint.status).toBe("ok");
      expect(checks.completion).toMatchObject({ status: "ok" });
      expect(checks.stop_sequences).toMatchObject({ status: "ok" });

      const keyVar = api === "anthropic" ? "ANTHROPIC_API_KEY" : "GOOGLE_API_KEY";
      const noKey = await runCli(["doctor", "--json"], { ...envFor(api, home), [keyVar]: "" });
      expect(noKey.code).toBe(2);
      const failed = JSON.parse(noKey.stdout).checks.find((c: any) => c.name === "endpoint");
      expect(failed).toMatchObject({ status: "fail" });
      expect(failed.detail).toContain(`${keyVar} is not set`);
    });
  },
);

describe("a provider model without its key", { timeout: 120_000 }, () => {
  it("ask stops before running, naming the variable to set", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-nokey-"));
    const asked = await runCli(
      ["ask", DEMO_QUESTIONS.plywood],
      cliEnv({ CODEHOP_HOME: home, CODEHOP_MODEL: "anthropic:claude-x" }),
    );
    expect(asked.code).toBe(2);
    expect(asked.stderr).toContain("ANTHROPIC_API_KEY is not set");
    expect(asked.stderr).toContain("CODEHOP_MODEL_NOT_CONFIGURED");
  });
});
