import { describe, expect, it } from "vitest";
import { ask } from "../../src/apps/qa/app.ts";
import {
  action,
  AGENT_MARKERS,
  DEMO_QUESTIONS,
  towersRules,
} from "../../src/apps/qa/demo-trajectories.ts";
import { NO_SUPPORT_ANSWER } from "../../src/apps/qa/verify.ts";
import { research } from "../../src/apps/research/app.ts";
import {
  demoResearchScript,
  RESEARCH_MARKERS,
  researchResponder,
} from "../../src/apps/research/demo-trajectories.ts";
import type { TrajectoryRule } from "../../src/testing/scripted-openai-server.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";

// No-evidence honesty: what a model says without a supporting passage is never printed as a
// finding — not in a research report (its sub-question list says only that nothing was found),
// not as the answer of `ask --verify` (withheld, kept only as `unsupported_answer` in the JSON).

const TOPIC = "Charlemagne's coronation";
const QUESTION = "Who crowned Charlemagne emperor, and when?";
/** What the researcher "knows" without reading anything. */
const MEMORY = "Charlemagne was crowned emperor in 800 by Pope Leo III. Sources: memory";
const ASK = "Who crowned Charlemagne emperor?";

/** Research rules: one sub-question, whose researcher answers from memory without reading. */
function fromMemoryRules(): TrajectoryRule[] {
  return [
    {
      name: "planner:memory",
      system: RESEARCH_MARKERS.planner,
      task: TOPIC,
      steps: [
        action("One question.", `console.log(await research(${JSON.stringify(QUESTION)}));`),
        action("Done.", 'final_answer("Charlemagne was crowned by Pope Leo III.");'),
      ],
    },
    {
      name: "researcher:memory",
      system: RESEARCH_MARKERS.researcher,
      task: QUESTION,
      steps: [action("I know this.", `final_answer(${JSON.stringify(MEMORY)});`)],
    },
  ];
}

/** QA rules: the manager answers `answer` to ASK without asking anyone (nothing is read). */
const managerAlone = (answer: string): TrajectoryRule => ({
  name: "manager:memory",
  system: AGENT_MARKERS.manager,
  task: ASK,
  steps: [action("I answer from memory.", `final_answer(${JSON.stringify(answer)});`)],
});

const script = demoResearchScript();
script.rules = [...fromMemoryRules(), managerAlone(MEMORY), ...towersRules()];
// Built per request, so a test can change `script.rules`.
const world = useDemoWorld("codehop-no-evidence-", {
  responder: () => (req, ctx) => researchResponder(script)(req, ctx),
});

describe("no-evidence honesty", { timeout: 180_000 }, () => {
  it("a research report with nothing read prints none of the researcher's own answer", async () => {
    const result = await research(TOPIC, { config: world.config(), threadId: "memory-api" });
    expect(result.status).toBe("no_evidence");
    expect(result.report).toContain("nothing was written from memory");
    expect(result.report).toContain(
      `- "${QUESTION}": no relevant source found — the researcher read no passage.`,
    );
    expect(result.questions).toEqual([
      expect.objectContaining({
        question: QUESTION,
        status: "no_evidence",
        reason: "the researcher read no passage",
      }),
    ]);
    // Nowhere in the result: not the report, the sub-questions, the answer or the sources.
    const { html, ...rest } = result;
    expect(JSON.stringify(rest)).not.toMatch(/Leo III|Sources: memory/);
    expect(html).not.toMatch(/Leo III/);
  });

  it("`codehop research` prints only that nothing was found (the report, and the run's summary)", async () => {
    // -q: without the live trace of each agent's steps (which shows what each one said, as a trace).
    const r = await runCli(
      ["research", TOPIC, "--corpus", world.corpus, "--thread", "memory-cli", "-q"],
      world.cliEnv(),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("No relevant information was found in the corpus");
    expect(r.stdout).toContain("no relevant source found — the researcher read no passage");
    expect(r.stdout + r.stderr).not.toMatch(/Leo III|Sources: memory/);
  });

  it("`ask --verify` with nothing read withholds the model's answer: no claim printed as a finding", async () => {
    const text = await runCli(
      ["ask", ASK, "--corpus", world.corpus, "--verify", "--thread", "ask-memory"],
      world.cliEnv(),
    );
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`Answer: ${NO_SUPPORT_ANSWER}`);
    expect(text.stdout).toContain("none of the answer's 1 claim(s) is supported");
    expect(text.stdout).not.toMatch(/Leo III/);

    const json = await runCli(
      ["ask", ASK, "--corpus", world.corpus, "--verify", "--json", "--thread", "ask-memory-json"],
      world.cliEnv(),
    );
    const result = JSON.parse(json.stdout);
    expect(result.answer).toBe(NO_SUPPORT_ANSWER);
    expect(result.unsupported_answer).toBe(MEMORY);
    expect(result.verification).toMatchObject({ status: "verified", all_supported: false });
    // `codehop show` prints the recorded verification the same way (under the run's trace,
    // which shows what each agent did, the manager's reply included).
    const show = await runCli(["show", "ask-memory"], world.cliEnv());
    const verified = show.stdout.slice(show.stdout.indexOf("Verified "));
    expect(verified).toContain("none of the answer's 1 claim(s) is supported");
    expect(verified).not.toMatch(/Leo III/);
  });

  it("ask({ verify }) withholds an answer whose every claim the passages read contradict, and keeps one with support", async () => {
    const wrong = "The Eiffel Tower was painted gold in 1925. It was built by Pope Leo III.";
    script.rules = [
      ...fromMemoryRules(),
      managerAlone(MEMORY),
      ...towersRules().map((r) =>
        r.name === "manager:towers"
          ? {
              ...r,
              steps: [r.steps[0], action("I answer.", `final_answer(${JSON.stringify(wrong)});`)],
            }
          : r,
      ),
    ];
    const result = await ask(DEMO_QUESTIONS.towers, { verify: true, config: world.config() });
    expect(result.citations.length).toBeGreaterThan(0);
    expect(result.verification.claims.every((c) => !c.supported)).toBe(true);
    expect(result.answer).toBe(NO_SUPPORT_ANSWER);
    expect(result.unsupported_answer).toBe(wrong);

    script.rules = [...fromMemoryRules(), managerAlone(MEMORY), ...towersRules()];
    const good = await ask(DEMO_QUESTIONS.towers, { verify: true, config: world.config() });
    expect(good.verification.supported).toBeGreaterThan(0);
    expect(good.answer).not.toBe(NO_SUPPORT_ANSWER);
    expect(good.unsupported_answer).toBeUndefined();
  });
});
