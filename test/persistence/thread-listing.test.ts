import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { openPersistence } from "../../src/persistence/index.ts";
import { openThreadListing } from "../../src/persistence/thread-listing.ts";

/** A graph that writes a few root checkpoints per run. */
function counter(checkpointer: any) {
  const State = Annotation.Root({
    n: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  });
  return new StateGraph(State)
    .addNode("step", (s) => ({ n: s.n + 1 }))
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.n >= 3 ? END : "step"))
    .compile({ checkpointer });
}

it("lists the same threads as the full adapter (statuses, questions, checkpoint counts) without writing", async () => {
  const home = mkdtempSync(join(tmpdir(), "codehop-listing-"));
  const p = openPersistence(home);
  const graph = counter(p.checkpointer);
  for (const [id, outcome] of [
    ["a", "done"],
    ["b", "failed"],
    ["c", "running"],
  ] as const) {
    await p.threads.start(id, { question: `question ${id}?`, options: {} });
    await graph.invoke({}, { configurable: { thread_id: id } });
    if (outcome === "done") await p.threads.finish(id, `answer ${id}`, 10);
    if (outcome === "failed") await p.threads.fail(id, "model crashed");
  }
  // Checkpoints of a thread the registry does not know are not listed by either.
  await graph.invoke({}, { configurable: { thread_id: "unregistered" } });
  const full = await p.threads.list();
  const one = await p.threads.get("a");
  await p.close();

  const listing = await openThreadListing({ home }, { mustExist: true });
  try {
    expect(await listing.list()).toEqual(full);
    expect(await listing.get("a")).toEqual(one);
    expect(one?.checkpoints).toBeGreaterThan(0);
    expect(await listing.get("nope")).toBeUndefined();
    expect(listing.location).toBe(join(home, "checkpoints.db"));
  } finally {
    await listing.close();
    await listing.close(); // idempotent
  }
});

it("a data directory without a database is DB_INVALID with mustExist, and nothing is created", async () => {
  const home = mkdtempSync(join(tmpdir(), "codehop-listing-none-"));
  const err = await openThreadListing({ home }, { mustExist: true }).catch((e) => e);
  expect(CodehopError.isInstance(err)).toBe(true);
  expect((err as CodehopError).code).toBe(ErrorCodes.DB_INVALID);
  expect(existsSync(join(home, "checkpoints.db"))).toBe(false);
});
