import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { readEnv } from "../../src/config/env.ts";
import {
  LangSmithRecorder,
  OtlpReceiver,
  type ReceivedSpan,
  type RecordedRun,
} from "../../src/testing/trace-receivers.ts";
import { runTracing } from "../../src/tracing/index.ts";
import { parseOtlpHeaders } from "../../src/tracing/otel.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";

const world = useDemoWorld("codehop-tracing-");
let langsmith: LangSmithRecorder;
let otlp: OtlpReceiver;
beforeAll(async () => {
  [langsmith, otlp] = await Promise.all([LangSmithRecorder.start(), OtlpReceiver.start()]);
});
afterAll(async () => {
  await Promise.all([langsmith?.close(), otlp?.close()]);
});

describe("tracing is off by default", () => {
  it("no variable: no handler, nothing loaded", async () => {
    const tracing = await runTracing(readEnv({}));
    expect(tracing.handlers).toEqual([]);
    const on = await runTracing(readEnv({ LANGSMITH_TRACING: "true", CODEHOP_OTEL: "1" }));
    expect(on.handlers.map((h) => h.name)).toEqual(["langchain_tracer", "codehop_otel"]);
  });

  it("parses OTLP headers as the spec writes them", () => {
    expect(parseOtlpHeaders("authorization=Bearer%20t0k,x-team = a ,bad")).toEqual({
      authorization: "Bearer t0k",
      "x-team": "a",
    });
  });
});

/** The chain of names from a run up to its trace's root. */
function ancestry<T>(item: T, parentOf: (x: T) => T | undefined, name: (x: T) => string) {
  const names: string[] = [];
  for (let x: T | undefined = item; x; x = parentOf(x)) names.push(name(x));
  return names;
}

/**
 * One `ask --json` with both tracers configured by their variables (LangSmith and OpenTelemetry),
 * run once for the file (by whichever test asks first): each tracer's test reads its own
 * receiver.
 */
let traced: ReturnType<typeof runCli> | undefined;
const tracedAsk = () =>
  (traced ??= runCli(
    ["ask", DEMO_QUESTIONS.plywood, "--json"],
    world.cliEnv({
      OPENAI_API_KEY: "k",
      CODEHOP_CORPUS: world.corpus,
      LANGSMITH_TRACING: "true",
      LANGSMITH_ENDPOINT: langsmith.url,
      LANGSMITH_API_KEY: "ls-key",
      LANGSMITH_PROJECT: "codehop-test",
      CODEHOP_OTEL: "1",
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20otel-token",
      OTEL_SERVICE_NAME: "codehop-test",
    }),
  ));

describe("LangSmith, by its environment variables", { timeout: 180_000 }, () => {
  it("one trace per run, nested agent > step > model call | tool > sub-agent; flushed before the CLI exits", async () => {
    const asked = await tracedAsk();
    expect(asked.code).toBe(0);
    const result = JSON.parse(asked.stdout);
    expect(result.answer).toBe(DEMO_ANSWERS.plywood);

    const runs = langsmith.list();
    const byId = new Map(runs.map((r) => [r.id, r]));
    const roots = runs.filter((r) => !r.parent_run_id);
    expect(roots.map((r) => r.name)).toEqual(["manager"]);
    const root = roots[0];
    expect(new Set(runs.map((r) => r.trace_id))).toEqual(new Set([root.id]));
    expect(root.session_name).toBe("codehop-test");
    expect(root.end_time).toBeTruthy();
    expect(langsmith.apiKeys.every((k) => k === "ls-key")).toBe(true);
    const parent = (r: RecordedRun) => (r.parent_run_id ? byId.get(r.parent_run_id) : undefined);
    const path = (r: RecordedRun) => ancestry(r, parent, (x) => x.name);

    // Every model call of the run is an llm run under a plan step of its agent.
    const llm = runs.filter((r) => r.run_type === "llm");
    expect(llm).toHaveLength(result.usage.total.calls);
    expect(new Set(llm.map((r) => path(r).slice(1, 3).join("<")))).toEqual(
      new Set(["plan<manager", "plan<wikipedia_search", "plan<page_search"]),
    );
    // Tool calls are tool runs under the act step; a sub-agent's graph nests under its tool call.
    const tools = runs.filter((r) => r.run_type === "tool");
    expect(new Set(tools.map((r) => r.name))).toEqual(
      new Set(["wikipedia_search_agent", "search_wikipedia", "search_info", "retrieve_passages"]),
    );
    const page = runs.find((r) => r.name === "page_search")!;
    expect(path(page)).toEqual([
      "page_search",
      "search_info",
      "act",
      "wikipedia_search",
      "wikipedia_search_agent",
      "act",
      "manager",
    ]);
    const wikiCall = tools.find((r) => r.name === "wikipedia_search_agent")!;
    expect(wikiCall.inputs).toBeTruthy();
    expect(JSON.stringify(wikiCall.outputs)).toContain("kg/m");
  });

  it("the variables work from a .env file too", async () => {
    const dotenv = join(world.home, "tracing.env");
    writeFileSync(
      dotenv,
      `LANGSMITH_TRACING=true\nLANGSMITH_ENDPOINT=${langsmith.url}\nLANGSMITH_API_KEY=from-file\nLANGSMITH_PROJECT=dotenv\n`,
    );
    const env = world.cliEnv({
      OPENAI_API_KEY: "k",
      CODEHOP_CORPUS: world.corpus,
      CODEHOP_ENV_FILE: dotenv,
    });
    const asked = await runCli(["ask", DEMO_QUESTIONS.towers, "--json"], env);
    expect(asked.code).toBe(0);
    const roots = langsmith.list().filter((r) => !r.parent_run_id && r.session_name === "dotenv");
    expect(roots).toHaveLength(1);
    expect(langsmith.apiKeys).toContain("from-file");
  });
});

describe("OpenTelemetry GenAI spans over OTLP/HTTP", { timeout: 180_000 }, () => {
  it("one trace, agent/step/chat/tool spans with gen_ai attributes and the run's usage", async () => {
    const asked = await tracedAsk();
    expect(asked.code).toBe(0);
    const result = JSON.parse(asked.stdout);
    const spans = otlp.spans;
    expect(otlp.headers[0].authorization).toBe("Bearer otel-token");
    const bySpan = new Map(spans.map((s) => [s.spanId, s]));
    const parent = (s: ReceivedSpan) => (s.parentSpanId ? bySpan.get(s.parentSpanId) : undefined);
    const roots = spans.filter((s) => !s.parentSpanId);
    expect(roots.map((s) => s.name)).toEqual(["invoke_agent manager"]);
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
    expect(roots[0].attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "manager",
      "gen_ai.conversation.id": result.thread_id,
    });
    expect(spans.every((s) => s.service === "codehop-test")).toBe(true);

    const chats = spans.filter((s) => s.attributes["gen_ai.operation.name"] === "chat");
    expect(chats).toHaveLength(result.usage.total.calls);
    for (const c of chats) {
      expect(c.name).toBe("chat scripted");
      expect(c.kind).toBe(3); // CLIENT
      expect(c.attributes).toMatchObject({
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "scripted",
        "gen_ai.request.temperature": 0,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.response.finish_reasons": ["stop"],
      });
      expect(c.attributes["gen_ai.request.stop_sequences"]).toEqual([
        "<end_action>",
        "Observation:",
      ]);
    }
    const sum = (k: string) => chats.reduce((n, c) => n + Number(c.attributes[k]), 0);
    expect(sum("gen_ai.usage.input_tokens")).toBe(result.usage.total.input_tokens);
    expect(sum("gen_ai.usage.output_tokens")).toBe(result.usage.total.output_tokens);

    const tool = spans.find((s) => s.name === "execute_tool search_info")!;
    expect(tool.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "search_info",
    });
    const page = spans.find((s) => s.name === "invoke_agent page_search")!;
    expect(ancestry(page, parent, (s) => s.name)).toEqual([
      "invoke_agent page_search",
      "execute_tool search_info",
      "act",
      "invoke_agent wikipedia_search",
      "execute_tool wikipedia_search_agent",
      "act",
      "invoke_agent manager",
    ]);
    // Every span ended inside its parent's time.
    for (const s of spans) {
      const p = parent(s);
      if (p) expect(BigInt(s.endTimeUnixNano) <= BigInt(p.endTimeUnixNano)).toBe(true);
    }
  });
});
