import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { resumeThread } from "../../src/apps/index.ts";
import { ask, verificationOf } from "../../src/apps/qa/app.ts";
import { action, DEMO_QUESTIONS, towersRules } from "../../src/apps/qa/demo-trajectories.ts";
import { researchResponder } from "../../src/apps/research/demo-trajectories.ts";
import {
  trajectoryResponder,
  type TrajectoryRule,
} from "../../src/testing/scripted-openai-server.ts";
import { MEMORY_DB_FILE, openSqliteMemoryStore } from "../../src/memory/sqlite-store.ts";
import { readThread, systemOf, useDemoWorld } from "../app/fixtures.ts";

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
const LESSON = "Answer only with what the pages you read say, and name them.";
/** How the verifier's model answers: the lexical judge, or replies that hold no verdict. */
let verifierReplies: "judge" | "chatter" = "judge";
const isVerifier = (req: Parameters<typeof systemOf>[0]) =>
  systemOf(req).startsWith("You check claims against the source passages");
const world = useDemoWorld("codehop-verify-answer-", {
  responder: () => (req, ctx) =>
    String(req.messages[0]?.content ?? "").startsWith("An agent attempted a task")
      ? `Lesson: ${LESSON}`
      : verifierReplies === "chatter" && isVerifier(req)
        ? "These claims look fine to me overall."
        : trajectoryResponder(rules, researchResponder())(req, ctx),
});

/**
 * What the run's agents were shown, as the call journal holds it: the passages of their
 * retrieve_passages calls and the search summaries of the pages the answer reports using.
 */
async function passagesRead(threadId: string, pages: string[]): Promise<string[]> {
  const entries = await readThread(world.home, threadId, (_s, p) => p.journal.entries(threadId));
  const texts: string[] = [];
  for (const e of entries) {
    if (!e.outcome.ok) continue;
    const shown = String(e.outcome.value);
    if (e.tool === "search_wikipedia") {
      for (const [, title, summary] of shown.matchAll(/^Page: (.+)\nSummary: (.*)$/gm))
        if (pages.includes(title) && !texts.includes(summary)) texts.push(summary);
    }
    if (e.tool !== "retrieve_passages") continue;
    for (const line of shown.split("\n")) {
      const m = /^Passage \d+: (?:\[[^\]]*\] )?(.*)$/.exec(line);
      if (m && !texts.includes(m[1])) texts.push(m[1]);
    }
  }
  return texts;
}

const flat = (text: string) => text.replace(/\s+/g, " ").trim();

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
    // The evidence is what the agents read: every passage their retrieve_passages calls showed,
    // in reading order, and nothing else.
    const read = await passagesRead(
      result.thread_id,
      result.sources.map((x) => x.title),
    );
    expect(read.length).toBeGreaterThan(0);
    expect(result.citations.map((c) => flat(c.text))).toEqual(read.slice(0, 12));
    expect(v.status).toBe("verified");
    // Recorded with the thread (what `codehop show` prints).
    const recorded = await verificationOf(result.thread_id, { config: world.config() });
    expect(recorded).toMatchObject({
      answer: result.answer,
      checkpoint_id: result.checkpoint_id,
      verification: { status: "verified", checked: 3, supported: 2 },
    });
    expect(recorded!.citations).toEqual(result.citations);
  });

  it("a verifier that fails keeps the answer and says why; resume --verify verifies a finished thread again without running its agents", async () => {
    rules = towersRules();
    const asked = await ask(DEMO_QUESTIONS.towers, { config: world.config(), threadId: "again" });
    expect(asked.answer).toBeTruthy();
    const before = world.server.requests.length;

    // A dead endpoint: the answer is kept, the verification failed, naming the problem.
    const dead = await resumeThread("again", {
      verify: true,
      config: world.config({ baseURL: "http://127.0.0.1:9/v1", maxRetries: 0 }),
    });
    expect(dead.answer).toBe(asked.answer);
    const failed = (dead as typeof dead & { verification: any }).verification;
    expect(failed).toMatchObject({ status: "failed", checked: 0, claims: [] });
    expect(failed.error).toMatch(/127\.0\.0\.1:9/);
    expect((await verificationOf("again", { config: world.config() }))?.verification).toEqual(
      failed,
    );
    expect(world.server.requests.length).toBe(before);

    // Replies that hold no verdict: failed too, saying so; only the verifier was asked.
    verifierReplies = "chatter";
    try {
      const chatter = await resumeThread("again", { verify: true, config: world.config() });
      expect(chatter.answer).toBe(asked.answer);
      expect((chatter as any).verification).toMatchObject({ status: "failed" });
      expect((chatter as any).verification.error).toContain("held no usable verdict");
    } finally {
      verifierReplies = "judge";
    }
    const asks = world.server.requests.slice(before);
    expect(asks.length).toBeGreaterThan(0);
    expect(asks.every((r) => isVerifier(r.request))).toBe(true);

    // A working verifier: verified, and the record replaced.
    const ok = await resumeThread("again", { verify: true, config: world.config() });
    expect((ok as any).verification).toMatchObject({ status: "verified", all_supported: true });
    expect(world.server.requests.slice(before).every((r) => isVerifier(r.request))).toBe(true);
    expect((await verificationOf("again", { config: world.config() }))?.verification.status).toBe(
      "verified",
    );
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

describe(
  "ask({ verify: true }) with reflection (CODEHOP_REFLECTION=1)",
  { timeout: 120_000 },
  () => {
    afterEach(() => vi.unstubAllEnvs());
    const lessons = async () => {
      const store = openSqliteMemoryStore(join(world.home, MEMORY_DB_FILE));
      try {
        return (await store.search(["local", "lessons", "qa"], { limit: 10 })).map((i) => i.value);
      } finally {
        await store.close();
      }
    };

    it("an answer the verifier scores low (few supported claims) leaves a lesson; a supported one does not", async () => {
      vi.stubEnv("CODEHOP_ENV_FILE", "none");
      vi.stubEnv("CODEHOP_USER", "");
      vi.stubEnv("CODEHOP_REFLECTION", "1");
      const before = (await lessons()).length;
      rules = towersAnswering(
        "The Eiffel Tower was completed in March 1889. The Eiffel Tower was painted gold in 1925. The Eiffel Tower was painted blue in 1926.",
      );
      const low = await ask(DEMO_QUESTIONS.towers, {
        verify: true,
        config: world.config(),
        threadId: "reflect-low",
      });
      expect(low.status).toBe("final_answer");
      expect(low.verification).toMatchObject({ status: "verified", checked: 3, supported: 1 });
      const after = await lessons();
      expect(after).toHaveLength(before + 1);
      expect(after.at(-1)).toMatchObject({ lesson: LESSON, thread_id: "reflect-low" });
      expect(String(after.at(-1)!.outcome)).toMatch(
        /got 0\.33 from the verifier \(share of supported claims\) \(below 0\.5\)/,
      );

      rules = towersAnswering(
        "The Eiffel Tower was completed in March 1889. Construction of the Empire State Building began in January 1930.",
      );
      const good = await ask(DEMO_QUESTIONS.towers, {
        verify: true,
        config: world.config(),
        threadId: "reflect-ok",
      });
      expect(good.verification).toMatchObject({ status: "verified", checked: 2, supported: 2 });
      expect(await lessons()).toHaveLength(before + 1);
    });
  },
);
