import { describe, expect, it } from "vitest";
import { routeAfterObserve, routeStart } from "../../src/core/routing.ts";

const base = { status: "running" as const, stepCount: 1, replan: false };

describe("routeStart", () => {
  it("starts with planning only when a planning interval is set", () => {
    expect(routeStart({ stepCount: 0 }, { planningInterval: 2 })).toBe("planning");
    expect(routeStart({ stepCount: 0 }, {})).toBe("plan");
  });
});

describe("routeAfterObserve", () => {
  const s = { maxStepsPolicy: "last_observation" as const, planningInterval: undefined };
  it("ends on a final answer", () => {
    expect(routeAfterObserve({ ...base, status: "final_answer" }, s)).toBe("end");
  });
  it("loops to plan while running", () => {
    expect(routeAfterObserve(base, s)).toBe("plan");
  });
  it("at max steps ends (last_observation) or asks for a final answer (final_answer_prompt)", () => {
    expect(routeAfterObserve({ ...base, status: "max_steps" }, s)).toBe("end");
    expect(
      routeAfterObserve(
        { ...base, status: "max_steps" },
        { ...s, maxStepsPolicy: "final_answer_prompt" },
      ),
    ).toBe("final_answer");
    expect(
      routeAfterObserve(
        { ...base, status: "repeated_action" },
        { ...s, maxStepsPolicy: "final_answer_prompt" },
      ),
    ).toBe("final_answer");
  });
  it("replans every planningInterval actions", () => {
    const p = { ...s, planningInterval: 3 };
    expect(
      [1, 2, 3, 4, 5, 6].map((stepCount) => routeAfterObserve({ ...base, stepCount }, p)),
    ).toEqual(["plan", "plan", "planning", "plan", "plan", "planning"]);
  });
  it("replans when forced (repeated action)", () => {
    expect(routeAfterObserve({ ...base, replan: true }, s)).toBe("planning");
  });
});
