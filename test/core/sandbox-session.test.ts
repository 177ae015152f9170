/** Which actions may share a sandbox process: the session key of an agent run. */
import { describe, expect, it } from "vitest";
import { sandboxSession } from "../../src/core/run-code.ts";

describe("sandboxSession", () => {
  it("is one key for every step of one agent run, and different for other runs", () => {
    const step1 = sandboxSession("t1", "act:aaa", [0], "manager");
    const step2 = sandboxSession("t1", "act:bbb", [0], "manager");
    const finalAnswer = sandboxSession("t1", "final_answer:ccc", [0], "manager");
    expect(step2).toBe(step1);
    expect(finalAnswer).toBe(step1);
    expect(sandboxSession("t2", "act:aaa", [0], "manager")).not.toBe(step1); // another thread
    expect(sandboxSession("t1", "act:aaa", [1], "manager")).not.toBe(step1); // a new task
    // Two sub-agent calls of one action (LangGraph numbers the second |1): two runs.
    const sub1 = sandboxSession("t1", "act:aaa|act:x1", [0, 0], "page_search");
    const sub1Step2 = sandboxSession("t1", "act:aaa|act:x2", [0, 0], "page_search");
    const sub2 = sandboxSession("t1", "act:aaa|1|act:y1", [0, 0], "page_search");
    expect(sub1Step2).toBe(sub1);
    expect(sub2).not.toBe(sub1);
  });

  it("a top-level run without a thread cannot be told from another: no session (a process per action)", () => {
    expect(sandboxSession("", "act:aaa", [0], "manager")).toBeUndefined();
    // A nested run is told apart by its caller's task id, which is unique per run.
    expect(sandboxSession("", "act:aaa|act:x1", [0, 0], "leaf")).toBe(
      sandboxSession("", "act:aaa|act:x2", [0, 0], "leaf"),
    );
  });
});
