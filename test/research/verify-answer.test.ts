import { describe, expect, it } from "vitest";
import { ask } from "../../src/apps/qa/app.ts";
import { action, DEMO_QUESTIONS, towersRules } from "../../src/apps/qa/demo-trajectories.ts";
import { researchResponder } from "../../src/apps/research/demo-trajectories.ts";
import {
  trajectoryResponder,
  type TrajectoryRule,
} from "../../src/testing/scripted-openai-server.ts";
import { useDemoWorld } from "../app/fixtures.ts";

// ask({ verify: true }) in process: the answer's claims checked against passages of the pages the
// agents used, by the same verifier as research reports (the lexical judge stands in for its model).

/** The towers trajectory, with the manager's final answer replaced by `answer`. */
function towersAnswering(answer: string): TrajectoryRule[] {
  return towersRules().map((r) =>
    r.name === "manager:towers"
      ? {
          ...r,
          steps: [r.steps[0], action("I answer.", `final_answer(${JSON.stringify(answer)});`)],
        }
      : r,
  );
}

let rules: TrajectoryRule[] = towersRules();
const world = useDemoWorld("codehop-verify-answer-", {
  responder: () => (req, ctx) => trajectoryResponder(rules, researchResponder())(req, ctx),
});

describe("ask({ verify: true })", { timeout: 120_000 }, () => {
  it("says which claims of the answer its sources support, and with which passages", async () => {
    rules = towersAnswering(
      "The Eiffel Tower was completed in March 1889. Construction of the Empire State Building began in January 1930. The Eiffel Tower was painted gold in 1925. Sources: Eiffel Tower, Empire State Building.",
    );
    const result = await ask(DEMO_QUESTIONS.towers, { verify: true, config: world.config() });
    const v = result.verification;
    expect(v.claims.map((c) => [c.text, c.supported])).toEqual([
      ["The Eiffel Tower was completed in March 1889.", true],
      ["Construction of the Empire State Building began in January 1930.", true],
      ["The Eiffel Tower was painted gold in 1925.", false],
    ]);
    expect(v).toMatchObject({ checked: 3, supported: 2, all_supported: false });
    expect(v.claims[2]).toMatchObject({ verdict: "unsupported", citations: [] });
    // Each supported claim cites passages of the answer's own source pages, numbered in `citations`.
    const byN = new Map(result.citations.map((c) => [c.n, c]));
    for (const claim of v.claims.filter((c) => c.supported)) {
      expect(claim.citations.length).toBeGreaterThan(0);
      for (const n of claim.citations) expect(byN.has(n)).toBe(true);
    }
    expect(new Set(result.citations.map((c) => c.title))).toEqual(
      new Set(["Eiffel Tower", "Empire State Building"]),
    );
    // The answer itself is not changed.
    expect(result.answer).toContain("painted gold in 1925");
  });

  it("marks every claim unverified, without a verifier call, when the run used no page", async () => {
    rules = [
      {
        name: "manager:alone",
        system: "You are the manager agent",
        task: DEMO_QUESTIONS.towers,
        steps: [action("I answer from memory.", 'final_answer("It took 41 years.");')],
      },
    ];
    const first = world.server.requests.length;
    const result = await ask(DEMO_QUESTIONS.towers, {
      verify: true,
      config: world.config(),
      threadId: "alone",
    });
    expect(world.server.requests.length - first).toBe(1);
    expect(result.citations).toEqual([]);
    expect(result.verification.claims).toEqual([
      expect.objectContaining({
        verdict: "unverified",
        supported: false,
        reason: expect.stringContaining("no source page"),
      }),
    ]);
    expect(result.verification.all_supported).toBe(false);
  });
});
