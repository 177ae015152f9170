import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assist } from "../../src/apps/assistant/app.ts";
import {
  DEMO_ANSWER,
  DEMO_TASK,
  assistantDemoResponder,
} from "../../src/apps/assistant/demo-trajectories.ts";
import { historyOfThread, replayThread, resumeThread } from "../../src/apps/index.ts";
import { startAssistantWorld, type AssistantWorld } from "./world.ts";

// A run whose model endpoint fails at the assistant's second action stops resumable; resuming it
// finishes without running the web agent again (its call is served from the call journal); a
// replay from a checkpoint re-runs from there.

let world: AssistantWorld;
let failing = true;
beforeAll(async () => {
  world = await startAssistantWorld((origin) => {
    const replay = assistantDemoResponder(origin);
    return async (req, ctx) => {
      const system = req.messages[0]?.content ?? "";
      const observed = req.messages
        .filter((m) => m.role === "user")
        .some((m) => m.content.startsWith("Observation:"));
      if (failing && system.startsWith("You are the general assistant") && observed)
        return { status: 500, body: '{"error":{"message":"overloaded"}}' };
      return replay(req, ctx);
    };
  });
}, 60_000);
afterAll(() => world?.close());

describe("an assistant thread", () => {
  it("stops resumable when the endpoint fails, and resumes without repeating the web agent", async () => {
    const config = { ...world.config(), maxRetries: 0 };
    const failed = await assist(DEMO_TASK, {
      config,
      files: Object.values(world.files),
      web: world.webSettings(),
      threadId: "flaky",
    }).catch((e) => e);
    expect(failed.code).toBe("CODEHOP_MODEL_ENDPOINT_FAILED");
    const webCalls = world.model.requests.filter((r) => r.rule === "web_search").length;
    const pageHits = world.web.hits("/tourism/museums-2024");
    expect(webCalls).toBe(3);
    failing = false;
    const resumed = await resumeThread("flaky", { config, context: { web: world.webSettings() } });
    expect(resumed.answer).toBe(DEMO_ANSWER);
    expect(world.model.requests.filter((r) => r.rule === "web_search").length).toBe(webCalls);
    expect(world.web.hits("/tourism/museums-2024")).toBe(pageHits);
  }, 240_000);

  it("replays from a checkpoint and answers again", async () => {
    const config = world.config();
    const history = await historyOfThread("flaky", { config });
    // The checkpoint after the assistant's first action (its observation is in the state).
    const target = history.find((c) => c.actions === 1 && c.next.includes("plan"));
    expect(target).toBeDefined();
    const replayed = await replayThread("flaky", target!.checkpoint_id, {
      config,
      context: { web: world.webSettings() },
    });
    expect(replayed.answer).toBe(DEMO_ANSWER);
  }, 240_000);
});
