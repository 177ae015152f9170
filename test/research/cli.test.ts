import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS } from "../../src/apps/qa/demo-trajectories.ts";
import { allDemosResponder, DEMO_RESEARCH } from "../../src/apps/research/demo-trajectories.ts";
import { runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";

// `codehop research` and `codehop ask --verify` end to end: the real CLI process against the
// scripted model over HTTP and the demo corpus.

const world = useDemoWorld("codehop-research-cli-", { responder: allDemosResponder });

/**
 * `research --out <file> --json`, run once for the file (by whichever test asks first): its
 * output is checked by one test, and its thread is the research thread another one needs.
 */
let reportRun: Promise<{ out: string; r: Awaited<ReturnType<typeof runCli>> }> | undefined;
function researchWithOut() {
  reportRun ??= (async () => {
    const out = join(mkdtempSync(join(tmpdir(), "codehop-report-")), "eiffel", "report.md");
    const r = await runCli(
      [
        "research",
        DEMO_RESEARCH.topic,
        "--corpus",
        world.corpus,
        "--out",
        out,
        "--json",
        "--max-questions",
        "3",
      ],
      world.cliEnv(),
    );
    return { out, r };
  })();
  return reportRun;
}

describe("codehop research", { timeout: 180_000 }, () => {
  it("--out writes the report as Markdown and self-contained HTML; --json prints the result", async () => {
    const { out, r } = await researchWithOut();
    expect(r.stderr).not.toContain("Error:");
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({
      status: "final_answer",
      topic: DEMO_RESEARCH.topic,
      title: DEMO_RESEARCH.title,
    });
    // The fields every run prints, then the report's own (no HTML in the JSON).
    for (const key of [
      "answer",
      "thread_id",
      "sources",
      "usage",
      "steps",
      "checkpoint_id",
      "checkpoint_db",
      "duration_ms",
      "report",
      "citations",
      "verification",
      "questions",
    ])
      expect(result).toHaveProperty(key);
    expect(result).not.toHaveProperty("html");
    expect(result.citations).toHaveLength(4);
    expect(result.verification).toMatchObject({ checked: 12, supported: 12, dropped: 0 });
    expect(readFileSync(out, "utf8")).toBe(result.report);
    const html = readFileSync(join(out, "..", "report.html"), "utf8");
    expect(html).toContain(`<title>${DEMO_RESEARCH.title}</title>`);
    expect(html).toContain('<a class="cite" href="#ref-1">');
    expect(html).toContain('<li id="ref-4">');
    expect(html).not.toMatch(/<script|https?:\/\/(?!.*wikipedia)/i);
    // The thread id went to stderr at once, with the live tree kept out of --json's stdout.
    expect(r.stderr).toContain(`codehop research — thread ${result.thread_id}`);
  });

  /**
   * `research` piped, without -q or --json, run once for the file (by whichever test asks first):
   * its stderr is checked for the live tree by one test, its stdout for the report by another.
   */
  let pipedRun: ReturnType<typeof runCli> | undefined;
  const researchPiped = () =>
    (pipedRun ??= runCli(
      ["research", DEMO_RESEARCH.topic, "--corpus", world.corpus, "--thread", "piped-tree"],
      world.cliEnv(),
    ));

  it("piped, the live tree's lines name the research pipeline at the root and the planner below it, never [agent]", async () => {
    const r = await researchPiped();
    expect(r.code).toBe(0);
    const lines = r.stderr.split("\n");
    // The root is the research pipeline (the name its checkpoints carry); the planner agent runs
    // in its research node, one level down.
    expect(lines.some((l) => l.startsWith("[research] started:"))).toBe(true);
    expect(lines).toContain("[research] start: up to 4 sub-question(s), 3 at once");
    expect(lines.some((l) => l.startsWith("  [planner] started: Research topic:"))).toBe(true);
    expect(lines.some((l) => /^ {2}\[planner\] step 1\b/.test(l))).toBe(true);
    expect(r.stderr).not.toContain("[agent]");
  });

  it("prints the report on stdout and how the run went on stderr", async () => {
    // The live tree, and the blank line after it, go to stderr: stdout is the report alone (the
    // demo's -q run below checks the same without the tree).
    const r = await researchPiped();
    expect(r.code).toBe(0);
    expect(r.stdout.startsWith(`# ${DEMO_RESEARCH.title}\n`)).toBe(true);
    expect(r.stdout).toContain("## References");
    expect(r.stdout).not.toContain("[research]");
    expect(r.stderr).toContain(
      "Verification: 12 sentence(s) checked against the passages they cite",
    );
    expect(r.stderr).toContain("Sub-questions: 3 researched, 3 answered; 4 reference(s).");
  });

  it("rejects an empty topic, a huge one and a bad --max-questions with a clear error (exit 2)", async () => {
    const env = world.cliEnv();
    const empty = await runCli(["research", "  "], env);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/topic is empty.*\[CODEHOP_INPUT_INVALID\]/s);
    const huge = await runCli(["research", "word ".repeat(400)], env);
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain("the limit is 1000");
    const bad = await runCli(["research", "Towers", "--max-questions", "0"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--max-questions must be a whole number from 1 to 12");
  });

  it("with --json, a bad topic or --max-questions still prints { error, thread_id } on stdout, as ask does", async () => {
    const env = world.cliEnv();
    const ask = await runCli(["ask", "", "--json"], env);
    const askOut = JSON.parse(ask.stdout);
    expect(Object.keys(askOut)).toEqual(["error", "thread_id"]);
    for (const [args, code, message] of [
      [["research", "", "--json"], "CODEHOP_INPUT_INVALID", /topic is empty/],
      [
        ["research", "Towers", "--max-questions", "abc", "--json"],
        "CODEHOP_CONFIG_INVALID",
        /--max-questions must be a whole number from 1 to 12, got "abc"/,
      ],
      [
        ["research", "word ".repeat(400), "--json", "--thread", "t-huge"],
        "CODEHOP_INPUT_INVALID",
        /the limit is 1000/,
      ],
    ] as const) {
      const r = await runCli([...args], env);
      expect(r.code, r.stderr).toBe(2);
      const out = JSON.parse(r.stdout);
      expect(Object.keys(out)).toEqual(Object.keys(askOut));
      expect(out.error.code).toBe(code);
      expect(out.error.message).toMatch(message);
      expect(typeof out.thread_id).toBe("string");
      if ((args as readonly string[]).includes("t-huge")) expect(out.thread_id).toBe("t-huge");
    }
  });

  /** `codehop demo --question research` in a fresh data directory, with one output flag. */
  const runResearchDemo = (flag: "--json" | "-q") =>
    runCli(
      [
        "demo",
        "--question",
        "research",
        "--delay",
        "0",
        "--home",
        mkdtempSync(join(tmpdir(), "codehop-demo-")),
        flag,
      ],
      world.cliEnv(),
    );

  it("demo --question research runs the scripted research over the demo corpus", async () => {
    const r = await runResearchDemo("--json");
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.title).toBe(DEMO_RESEARCH.title);
    expect(result.verification.checked).toBe(12);
  });

  it("demo --question research prints the report alone on stdout, from its first line", async () => {
    const r = await runResearchDemo("-q");
    expect(r.code).toBe(0);
    // `> report.md` must give the Markdown as is: no blank line before the title.
    expect(r.stdout.startsWith(`# ${DEMO_RESEARCH.title}\n`)).toBe(true);
    expect(r.stdout).toContain("## References");
    expect(r.stderr).toContain("Sub-questions: 3 researched, 3 answered");
    expect(r.stderr).toContain(
      "Verification: 12 sentence(s) checked against the passages they cite",
    );
    // -q: no live tree.
    expect(r.stderr).not.toMatch(/^\[research\] /m);
  });
});

describe("codehop ask --verify", { timeout: 180_000 }, () => {
  it("ask --help names the verifier's model variable", async () => {
    const r = await runCli(["ask", "--help"], world.cliEnv());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("--verify");
    expect(r.stdout).toContain("CODEHOP_MODEL_VERIFIER");
  });

  it("adds citations and a verification of each claim, and keeps every field of ask's JSON", async () => {
    const plain = JSON.parse(
      (
        await runCli(
          ["ask", DEMO_QUESTIONS.plywood, "--corpus", world.corpus, "--json"],
          world.cliEnv(),
        )
      ).stdout,
    );
    const r = await runCli(
      ["ask", DEMO_QUESTIONS.plywood, "--corpus", world.corpus, "--json", "--verify"],
      world.cliEnv(),
    );
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(Object.keys(result)).toEqual([...Object.keys(plain), "citations", "verification"]);
    expect(result.answer).toBe(DEMO_ANSWERS.plywood);
    expect(result.citations.map((c: any) => c.title)).toEqual(
      expect.arrayContaining(["Birch plywood", "Ethanol"]),
    );
    for (const c of result.citations)
      expect(c).toMatchObject({
        passage_id: expect.any(String),
        source: "corpus",
        text: expect.any(String),
      });
    expect(result.verification).toMatchObject({ checked: 1, supported: 1, all_supported: true });
    expect(result.verification.claims[0]).toMatchObject({ supported: true, verdict: "supported" });
    expect(result.verification.claims[0].text).toContain("0.789 g/cm³");
    expect(result.verification.usage.calls).toBe(1);
    // The agents' usage is the same as without verification: the verifier's is apart.
    expect(result.usage.total.calls).toBe(plain.usage.total.calls);
    expect(existsSync(result.checkpoint_db)).toBe(true);
    expect(result.verification.status).toBe("verified");

    // The verdict is recorded with the thread: `codehop show` prints it.
    const shown = await runCli(["show", result.thread_id], world.cliEnv());
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^Verified \d{4}-\d\d-\d\d \d\d:\d\d UTC:$/m);
    expect(shown.stdout).toContain(
      "Verification: 1 of 1 claim(s) supported by the source passages",
    );
    const cites = result.verification.claims[0].citations.map((n: number) => `[${n}]`).join("");
    expect(shown.stdout).toContain(`  - supported ${cites}: ${result.verification.claims[0].text}`);
    // show --json: the tree, with the recorded verification on its root.
    const shownJson = JSON.parse(
      (await runCli(["show", result.thread_id, "--json"], world.cliEnv())).stdout,
    );
    expect(shownJson.steps.at(-1).is_final).toBe(true);
    expect(shownJson.verification).toMatchObject({
      status: "verified",
      checked: 1,
      supported: 1,
      verified_at: expect.any(String),
    });
    expect(shownJson.verification.claims[0].text).toBe(result.verification.claims[0].text);
    expect(shownJson.citations).toEqual(result.citations);

    // resume --verify checks the finished thread again: the verifier's call only, no agent's.
    const before = world.server.requests.length;
    const again = await runCli(["resume", result.thread_id, "--verify", "--json"], world.cliEnv());
    expect(again.code).toBe(0);
    const reverified = JSON.parse(again.stdout);
    expect(reverified.answer).toBe(result.answer);
    expect(reverified.verification).toMatchObject({ status: "verified", checked: 1, supported: 1 });
    expect(world.server.requests.length - before).toBe(1);

    // A dead verifier endpoint: the answer is printed, the verification says it failed.
    const dead = await runCli(
      ["resume", result.thread_id, "--verify"],
      world.cliEnv({ OPENAI_BASE_URL: "http://127.0.0.1:9/v1", CODEHOP_MAX_RETRIES: "0" }),
    );
    expect(dead.code).toBe(0);
    expect(dead.stdout).toContain(`Answer: ${result.answer}`);
    expect(dead.stdout).toMatch(
      /Verification FAILED \(the answer is kept, unchecked\): .*127\.0\.0\.1:9/,
    );
    const shownAfter = await runCli(["show", result.thread_id], world.cliEnv());
    expect(shownAfter.stdout).toContain("Verification FAILED");
  });

  it("resume --verify on a research thread says why not, before running anything", async () => {
    // A finished research thread: the one `research --out --json` made.
    const { r } = await researchWithOut();
    expect(r.code).toBe(0);
    const thread = JSON.parse(r.stdout).thread_id;
    const before = world.server.requests.length;
    const refused = await runCli(["resume", thread, "--verify"], world.cliEnv());
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `--verify checks a QA answer; thread "${thread}" is a research thread (its report was verified as it was written).`,
    );
    expect(world.server.requests.length).toBe(before);
  });
});
