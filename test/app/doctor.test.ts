import { createServer, type Server } from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureDemoCorpus } from "../../src/apps/qa/demo.ts";
import { DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { ScriptedOpenAIServer, type Responder } from "../../src/testing/scripted-openai-server.ts";
import { cliEnv, runCli } from "./cli-helpers.ts";

/** A model that does what the doctor asks: "ready", and the probe line repeated. */
const obliging: Responder = (req) => {
  const prompt = req.messages.at(-1)?.content ?? "";
  const line = /write nothing else:\n(.+)/.exec(prompt)?.[1];
  return line ?? "ready";
};

let good: ScriptedOpenAIServer;
let noStop: ScriptedOpenAIServer;
let html: Server;
let htmlURL: string;
let corpus: string;

beforeAll(async () => {
  good = await ScriptedOpenAIServer.start({ responder: obliging });
  noStop = await ScriptedOpenAIServer.start({ responder: obliging, honourStop: false });
  // A web UI where the API was expected: every path answers an HTML page with 200.
  html = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><html><body><h1>Chat UI</h1></body></html>");
  });
  await new Promise<void>((ok) => html.listen(0, "127.0.0.1", ok));
  htmlURL = `http://127.0.0.1:${(html.address() as { port: number }).port}`;
  corpus = await ensureDemoCorpus(mkdtempSync(join(tmpdir(), "codehop-doctor-corpus-")));
});
afterAll(async () => {
  await Promise.all([good?.close(), noStop?.close()]);
  await new Promise((ok) => html?.close(ok));
});

const home = () => mkdtempSync(join(tmpdir(), "codehop-doctor-"));
const byName = (report: any) =>
  Object.fromEntries(report.checks.map((c: any) => [c.name, c])) as Record<string, any>;

// CLI processes start slowly on a loaded 2-core machine: generous per-test timeout.
describe("codehop doctor", { timeout: 120_000 }, () => {
  it("passes against a working OpenAI-compatible endpoint and says what it found", async () => {
    const dir = home();
    const env = cliEnv({ OPENAI_BASE_URL: good.baseURL, CODEHOP_HOME: dir });
    const [json, text] = await Promise.all([
      runCli(["doctor", "--json", "--corpus", corpus], env),
      runCli(["doctor"], env),
    ]);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout);
    expect(report).toMatchObject({
      ok: true,
      base_url: good.baseURL,
      model: "scripted",
      home: dir,
    });
    const checks = byName(report);
    expect(Object.keys(checks)).toEqual([
      "endpoint",
      "models",
      "completion",
      "stop_sequences",
      "latency",
      "data_dir",
      "corpus",
    ]);
    for (const c of report.checks) expect(c.status, `${c.name}: ${c.detail}`).toBe("ok");
    expect(checks.models.detail).toContain("codehop uses scripted");
    expect(checks.completion.detail).toContain('"ready"');
    expect(checks.stop_sequences.detail).toContain('"alpha beta"');
    expect(checks.latency.duration_ms).toBeGreaterThanOrEqual(0);
    expect(checks.corpus.detail).toContain("63 documents");
    // The stop probe was sent with codehop's stop sequences.
    expect(good.requests.some((r) => r.request.stop.includes("<end_action>"))).toBe(true);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("All checks passed");
  });

  it("fails the stop check when the endpoint ignores stop sequences", async () => {
    const r = await runCli(
      ["doctor", "--json"],
      cliEnv({ OPENAI_BASE_URL: noStop.baseURL, CODEHOP_HOME: home() }),
    );
    expect(r.code).toBe(2);
    const checks = byName(JSON.parse(r.stdout));
    expect(checks.stop_sequences.status).toBe("fail");
    expect(checks.stop_sequences.detail).toContain("ignores");
    expect(checks.completion.status).toBe("ok");
  });

  it("an endpoint answering HTML with 200: doctor, ask and the live tree say so, with the /v1 hint", async () => {
    const env = cliEnv({
      OPENAI_BASE_URL: htmlURL,
      CODEHOP_MODEL: "qwen",
      CODEHOP_MAX_RETRIES: "0",
      CODEHOP_HOME: home(),
    });
    const [doctor, asked] = await Promise.all([
      runCli(["doctor", "--json"], env),
      runCli(["ask", DEMO_QUESTIONS.towers, "--corpus", corpus], env),
    ]);
    expect(doctor.code).toBe(2);
    const checks = byName(JSON.parse(doctor.stdout));
    for (const name of ["models", "completion"]) {
      expect(checks[name].status).toBe("fail");
      expect(checks[name].detail).toContain("answered an HTML page");
      expect(checks[name].detail).toContain(`try ${htmlURL}/v1`);
    }
    expect(asked.code).toBe(2);
    expect(asked.stderr).toContain("answered an HTML page");
    expect(asked.stderr).toContain(`try ${htmlURL}/v1`);
    expect(asked.stderr).toContain("[CODEHOP_MODEL_ENDPOINT_FAILED]");
    expect(asked.stderr).not.toContain("no choices");
    // The live tree (one line per event off a terminal) shows the message, not serialized JSON.
    const failedLine = asked.stderr.split("\n").find((l) => l.includes("failed in"));
    expect(failedLine).toContain("answered an HTML page");
    expect(failedLine).not.toContain("{");
  });

  it("a base URL missing /v1 on a real API server gets the hint", async () => {
    const root = good.baseURL.replace(/\/v1$/, "");
    const r = await runCli(
      ["doctor", "--json"],
      cliEnv({ OPENAI_BASE_URL: root, CODEHOP_MODEL: "scripted", CODEHOP_HOME: home() }),
    );
    expect(r.code).toBe(2);
    const checks = byName(JSON.parse(r.stdout));
    expect(checks.models.detail).toContain("HTTP 404");
    expect(checks.models.detail).toContain(`try ${root}/v1`);
    expect(checks.completion.detail).toContain("HTTP 404");
    expect(checks.completion.detail).toContain(`try ${root}/v1`);
    expect(checks.completion.detail).not.toMatch(/\{"/);
  });

  it("no endpoint at all: the endpoint check fails and says what to set; the data directory is still checked", async () => {
    const r = await runCli(["doctor", "--json"], cliEnv({ CODEHOP_HOME: home() }));
    expect(r.code).toBe(2);
    const checks = byName(JSON.parse(r.stdout));
    expect(checks.endpoint.status).toBe("fail");
    expect(checks.endpoint.detail).toContain("OPENAI_BASE_URL");
    expect(checks.models.status).toBe("skip");
    expect(checks.data_dir.status).toBe("ok");
  });
});
