import { beforeAll, describe, expect, it } from "vitest";
import type { AppConfigOverrides } from "../../src/runs/config.ts";
import {
  AGENT_MARKERS,
  DEMO_ANSWERS,
  DEMO_QUESTIONS,
  DEMO_SUBTASKS,
  towersRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { ask, resume } from "../../src/apps/qa/app.ts";
import { CodehopError } from "../../src/errors.ts";
import type { Persistence } from "../../src/persistence/index.ts";
import {
  trajectoryResponder,
  type ScriptedOpenAIServer,
  type ScriptedReply,
} from "../../src/testing/scripted-openai-server.ts";
import { systemOf, taskOf, useDemoWorld } from "./fixtures.ts";

// Faults injected by the scripted server: the real ChatOpenAI client meets real HTTP errors,
// slow replies and garbage bodies, with codehop's retry / timeout settings.
/** Decides a fault for a request (undefined = answer normally). */
let fault: (task: string, system: string) => ScriptedReply | undefined = () => undefined;

const world = useDemoWorld("codehop-faults-", {
  persistence: true,
  responder: () => {
    const normal = trajectoryResponder(towersRules());
    return async (req, ctx) => fault(taskOf(req), systemOf(req)) ?? normal(req, ctx);
  },
});
let server: ScriptedOpenAIServer;
let persistence: Persistence;
beforeAll(() => {
  ({ server, persistence } = world);
});

const config = (extra: AppConfigOverrides = {}) =>
  world.config({ maxRetries: 2, timeoutMs: 5_000, ...extra });
const outcomes = (from: number) => server.requests.slice(from).map((r) => r.outcome);

describe("model endpoint faults", () => {
  // 429s are retried with backoff, with or without a retry hint (LangChain's default gives up at
  // once on a bare 429; local servers send exactly that when their queue is full).
  it("retries a 429 with a retry hint and a garbage body, then succeeds", async () => {
    const start = server.requests.length;
    let n = 0;
    fault = (_task, system) => {
      if (!system.includes(AGENT_MARKERS.manager)) return undefined;
      n++;
      if (n === 1)
        return {
          status: 429,
          body: '{"error":{"message":"Rate limit reached. Please try again in 200ms."}}',
        };
      if (n === 2) return { garbage: "<html>502 Bad Gateway</html>" };
      return undefined;
    };
    const result = await ask(DEMO_QUESTIONS.towers, {
      threadId: "retry",
      config: config(),
      persistence,
    });
    expect(result.answer).toBe(DEMO_ANSWERS.towers);
    expect(outcomes(start).slice(0, 3)).toEqual(["error", "garbage", "reply"]);
  });

  it("retries a bare 429 (no retry hint), then succeeds", async () => {
    const start = server.requests.length;
    let n = 0;
    fault = (_task, system) => {
      if (!system.includes(AGENT_MARKERS.manager)) return undefined;
      n++;
      return n === 1 ? { status: 429, body: '{"error":{"message":"server busy"}}' } : undefined;
    };
    const result = await ask(DEMO_QUESTIONS.towers, {
      threadId: "bare-429",
      config: config(),
      persistence,
    });
    expect(result.answer).toBe(DEMO_ANSWERS.towers);
    expect(outcomes(start).slice(0, 2)).toEqual(["error", "reply"]);
  });

  it("fails with a clear error after retries on a permanent 500; the thread stays resumable", async () => {
    fault = (task) =>
      task.includes(DEMO_SUBTASKS.empire)
        ? { status: 500, body: '{"error":{"message":"model crashed"}}' }
        : undefined;
    const err = await ask(DEMO_QUESTIONS.towers, {
      threadId: "down",
      config: config({ maxRetries: 1 }),
      persistence,
    }).catch((e) => e);
    expect(CodehopError.isInstance(err)).toBe(true);
    expect(err.code).toBe("CODEHOP_MODEL_ENDPOINT_FAILED");
    expect(err.message).toContain('agent "wikipedia_search"');
    expect(err.message).toContain("codehop resume down");
    expect(await persistence.threads.get("down")).toMatchObject({ status: "failed" });
    const empireAttempts = server.requests.filter(
      (r) =>
        r.request.messages.some((m) => m.content.includes(DEMO_SUBTASKS.empire)) &&
        r.outcome === "error",
    );
    expect(empireAttempts.length).toBe(2); // first try + 1 retry

    // The endpoint recovers: resume finishes, and the finished Eiffel call is not repeated.
    fault = () => undefined;
    const eiffelBefore = server.requestsFor("wiki:eiffel").length;
    let started: { threadId: string; state?: Record<string, unknown> } | undefined;
    const result = await resume("down", {
      config: config(),
      persistence,
      onStart: (info) => (started = info),
    });
    expect(result.answer).toBe(DEMO_ANSWERS.towers);
    // The live tree is seeded with the state the run continued from.
    expect(started?.threadId).toBe("down");
    expect(started?.state).toMatchObject({ question: DEMO_QUESTIONS.towers, stepCount: 0 });
    expect(server.requestsFor("wiki:eiffel").length).toBe(eiffelBefore);
    expect(await persistence.threads.get("down")).toMatchObject({ status: "done" });
  });

  it("times out a reply slower than the configured timeout", async () => {
    // The reply would take a minute: failing well before it (500 ms timeout, no retry) is the
    // timeout at work, with room for what a loaded machine adds to the run around the call.
    const REPLY_MS = 60_000;
    fault = (_task, system) =>
      system.includes(AGENT_MARKERS.manager)
        ? { content: "Thought: too late", delayMs: REPLY_MS }
        : undefined;
    const started = Date.now();
    const err = await ask(DEMO_QUESTIONS.towers, {
      threadId: "slow",
      config: config({ maxRetries: 0, timeoutMs: 500 }),
      persistence,
    }).catch((e) => e);
    expect(err.code).toBe("CODEHOP_MODEL_ENDPOINT_FAILED");
    expect(err.message).toMatch(/time(d)? ?out/i);
    expect(Date.now() - started).toBeLessThan(REPLY_MS / 4);
    fault = () => undefined;
  });
});
