import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { research, type ResearchResult } from "../../src/apps/research/app.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import {
  DEMO_RESEARCH,
  RESEARCH_MARKERS,
  demoResearchScript,
  researchResponder,
  type ResearchScript,
} from "../../src/apps/research/demo-trajectories.ts";
import { citationNumbers } from "../../src/apps/common/claims.ts";
import { CodehopError } from "../../src/errors.ts";
import { startMcpTestServer } from "../../src/testing/mcp-test-server.ts";
import { observationCount, type Responder } from "../../src/testing/scripted-openai-server.ts";
import { systemOf, taskOf, useDemoWorld } from "../app/fixtures.ts";

// Research runs over the demo corpus with the scripted model over real HTTP: the agents replay
// recorded actions, the condenser/writer are scripted by content (they cite what the prompt shows)
// and the verifier is a lexical judge (src/apps/research/demo-trajectories.ts). Retrieval, passage
// ids, numbering, verification and the report are the real code's.

/** The script each test's run uses (set before the run; the responder reads it per request). */
let script: ResearchScript = demoResearchScript();
const responder = (): Responder => (req, ctx) => researchResponder(script)(req, ctx);
const world = useDemoWorld("codehop-research-", { responder });

const [Q1, Q2, Q3] = DEMO_RESEARCH.questions;

/** Every citation of a result checked against the corpus itself: same passage, page, section and text. */
function expectCitationsResolve(result: ResearchResult, corpus: string) {
  const db = new Database(corpus, { readonly: true });
  try {
    const row = db.prepare(
      "SELECT p.id, p.section, p.text, d.id AS doc, d.title FROM passages p JOIN documents d ON d.id = p.doc_id WHERE p.id = ?",
    );
    for (const c of result.citations) {
      const p = row.get(Number(c.passage_id)) as any;
      expect(p, `passage ${c.passage_id}`).toBeTruthy();
      expect({ title: c.title, section: c.section, text: c.text, doc: c.doc_id }).toEqual({
        title: p.title,
        section: p.section,
        text: p.text,
        doc: String(p.doc),
      });
    }
  } finally {
    db.close();
  }
  // Every [n] printed anywhere in the report is one of the citations, numbered 1..k in order.
  const numbers = citationNumbers(result.report.split("## References")[0]);
  expect(numbers.length).toBeGreaterThan(0);
  expect(new Set(numbers)).toEqual(new Set(result.citations.map((c) => c.n)));
  expect(result.citations.map((c) => c.n)).toEqual(result.citations.map((_, i) => i + 1));
  for (const n of citationNumbers(result.report))
    expect(n).toBeLessThanOrEqual(result.citations.length);
}

const run = (topic: string, extra: Parameters<typeof research>[1] = {}) =>
  research(topic, { config: world.config(), ...extra });

describe("research over the demo corpus", { timeout: 120_000 }, () => {
  it("writes a report whose every citation resolves to a real passage of the corpus, and verifies it", async () => {
    script = demoResearchScript();
    const before = world.server.requests.length;
    const result = await run(DEMO_RESEARCH.topic, { threadId: "research-full" });
    expect(result.status).toBe("final_answer");
    expect(result.title).toBe(DEMO_RESEARCH.title);
    expect(result.answer).toBe(result.report);
    expect(result.report.startsWith(`# ${DEMO_RESEARCH.title}\n`)).toBe(true);
    // One section per sub-question, a summary, references and the verification figures.
    for (const heading of [
      "## Construction, 1887 to 1889",
      "## Height and record",
      "## Overtaken by the Chrysler Building",
      "## References",
    ])
      expect(result.report).toContain(heading);
    expect(result.report).toContain("Work on the foundations began on 28 January 1887 [1].");
    expect(result.questions.map((q) => [q.question, q.status])).toEqual([
      [Q1, "answered"],
      [Q2, "answered"],
      [Q3, "answered"],
    ]);
    expectCitationsResolve(result, world.corpus);
    expect(result.citations.map((c) => `${c.title} / ${c.section}`)).toEqual([
      "Eiffel Tower / Construction",
      "Eiffel Tower / Height",
      "Chrysler Building / Record",
      "Chrysler Building / Construction",
    ]);
    expect(result.sources.map((s) => s.title)).toEqual(["Eiffel Tower", "Chrysler Building"]);
    expect(result.verification).toMatchObject({
      checked: 12,
      supported: 12,
      fixed: 0,
      dropped: 0,
      flagged: 0,
      uncited: 0,
    });
    // Every step that called a model is accounted for; the verifier is one of them.
    expect(Object.keys(result.usage.by_agent).sort()).toEqual(
      ["condenser", "page_reader", "planner", "researcher", "verifier", "writer"].sort(),
    );
    expect(result.usage.total.calls).toBe(world.server.requests.length - before);
    expect(result.usage.by_agent.verifier.calls).toBe(result.verification!.usage.calls);
    // 12 cited sentences in batches of 5 (at most 8 passages each).
    expect(result.verification!.usage.calls).toBe(3);
    // The HTML page is self-contained: no script, nothing fetched, each [n] links to its reference.
    expect(result.html).toContain("<!doctype html>");
    expect(result.html).not.toMatch(/<script|<link|src=/i);
    for (const c of result.citations) {
      expect(result.html).toContain(`id="ref-${c.n}"`);
      expect(result.html).toContain(`href="#ref-${c.n}"`);
    }
  });

  it("catches a planted unsupported claim in the writer's reply and removes it; a citation that does not resolve is never printed", async () => {
    script = demoResearchScript();
    script.sections[Q1].sentences.splice(1, 0, {
      text: "The tower was first painted gold and cost 12 million francs.",
      from: ["28 January 1887"],
    });
    // The writer also cites a number no passage has: it must not reach the report.
    const writer = researchResponder(script);
    const planted: Responder = async (req, ctx) => {
      const reply: any = await writer(req, ctx);
      if (reply?.content?.startsWith("Heading: Height and record"))
        return { ...reply, content: `${reply.content} Its lift was built by Otis [9].` };
      return reply;
    };
    const previous = world.server.responder;
    world.server.responder = planted;
    try {
      const first = world.server.requests.length;
      const result = await run(DEMO_RESEARCH.topic, { threadId: "research-planted" });
      const v = result.verification!;
      expect(v).toMatchObject({ checked: 14, supported: 12, dropped: 2, fixed: 0, flagged: 0 });
      const gold = v.claims.find((c) => c.text.includes("painted gold"))!;
      expect(gold).toMatchObject({ verdict: "unsupported", action: "dropped" });
      expect(gold.passage_ids).toEqual([result.citations[0].passage_id]);
      const otis = v.claims.find((c) => c.text.includes("Otis"))!;
      expect(otis).toMatchObject({ action: "dropped", citations: [] });
      expect(otis.reason).toContain("[9]");
      expect(result.report).not.toContain("painted gold");
      expect(result.report).not.toContain("Otis");
      expect(result.report).not.toContain("[9]");
      expect(result.report).toContain("2 removed as unsupported");
      expectCitationsResolve(result, world.corpus);
      // The verifier saw the planted claim with the passage it cites, and judged it unsupported;
      // the claim citing [9] cost no model call.
      const judged = world.server.requests
        .slice(first)
        .filter(
          (r) =>
            r.rule === "verifier" && r.request.messages.at(-1)!.content.includes("painted gold"),
        );
      expect(judged).toHaveLength(1);
      expect(judged[0].request.messages.at(-1)!.content).toContain(
        "Work on the foundations began on 28 January 1887",
      );
      expect(judged[0].content).toMatch(/UNSUPPORTED/);
      expect(
        world.server.requests
          .slice(first)
          .some(
            (r) => r.rule === "verifier" && r.request.messages.at(-1)!.content.includes("Otis"),
          ),
      ).toBe(false);
    } finally {
      world.server.responder = previous;
    }
  });

  it("checks a sentence written without a citation against its section's passages: cited when supported, removed when not", async () => {
    script = demoResearchScript();
    const writer = researchResponder(script);
    const uncited: Responder = async (req, ctx) => {
      const reply: any = await writer(req, ctx);
      if (reply?.content?.startsWith("Heading: Height and record"))
        return {
          ...reply,
          content: `${reply.content} Antennas brought its height to about 330 m. It is repainted every 7 years.`,
        };
      return reply;
    };
    const previous = world.server.responder;
    world.server.responder = uncited;
    try {
      const result = await run(DEMO_RESEARCH.topic, { threadId: "research-uncited" });
      const v = result.verification!;
      expect(v.uncited).toBe(2);
      expect(v.claims.find((c) => c.text.startsWith("Antennas brought"))).toMatchObject({
        verdict: "supported",
        action: "kept",
        citations: [2],
      });
      expect(v.claims.find((c) => c.text.startsWith("It is repainted"))).toMatchObject({
        verdict: "unsupported",
        action: "dropped",
      });
      expect(result.report).toContain("Antennas brought its height to about 330 m [2].");
      expect(result.report).not.toContain("repainted");
      expectCitationsResolve(result, world.corpus);
    } finally {
      world.server.responder = previous;
    }
  });

  it("keeps an unsupported claim, flagged, when asked to flag instead of drop", async () => {
    script = demoResearchScript();
    script.sections[Q2].sentences.push({ text: "It was painted red in 1968.", from: ["312 m"] });
    const result = await run(DEMO_RESEARCH.topic, {
      threadId: "research-flag",
      settings: { onUnsupported: "flag" },
    });
    expect(result.verification).toMatchObject({ dropped: 0, flagged: 1 });
    expect(result.report).toMatch(
      /It was painted red in 1968 \[2\]\. \*\(not supported by the cited passages\)\*/,
    );
  });

  it("says so when the corpus has nothing relevant, and writes nothing from memory", async () => {
    const topic = "The airspeed velocity of an unladen swallow";
    const question = "What is the airspeed velocity of an unladen swallow?";
    script = demoResearchScript();
    script.rules = [
      {
        name: "planner:swallow",
        system: "You are the planner agent",
        task: topic,
        steps: [
          "Thought: one question.\nCode:\n```js\nconsole.log(await research(" +
            JSON.stringify(question) +
            "));\n```<end_action>",
          'Thought: done.\nCode:\n```js\nfinal_answer("Swallows");\n```<end_action>',
        ],
      },
      {
        name: "researcher:swallow",
        system: "You are the researcher agent",
        task: question,
        steps: [
          'Thought: search.\nCode:\n```js\nconsole.log(await search_wikipedia("swallow airspeed"));\n```<end_action>',
          'Thought: read the best hit.\nCode:\n```js\nconsole.log(await search_info("airspeed of a swallow", "Birch"));\n```<end_action>',
          'Thought: nothing.\nCode:\n```js\nfinal_answer("The pages do not say. Sources: Birch.");\n```<end_action>',
        ],
      },
      {
        name: "page_reader:swallow",
        system: "You are the page_reader agent",
        task: "airspeed of a swallow",
        steps: [
          'Thought: look.\nCode:\n```js\nconsole.log(await retrieve_passages("swallow airspeed"));\n```<end_action>',
          'Thought: not here.\nCode:\n```js\nfinal_answer("The page says nothing about swallows.");\n```<end_action>',
        ],
      },
    ];
    const first = world.server.requests.length;
    const result = await run(topic, { threadId: "research-nothing" });
    expect(result.status).toBe("no_evidence");
    expect(result.citations).toEqual([]);
    expect(result.report).toContain(
      "No relevant information was found in the corpus for this topic",
    );
    expect(result.report).toContain(`"${question}": no relevant source found`);
    expect(result.report).not.toMatch(/\[\d+\]/);
    expect(result.questions).toEqual([
      expect.objectContaining({ question, status: "no_evidence", notes: 0 }),
    ]);
    // The condenser saw the passages and found nothing; no writer or verifier call was made.
    const rules = world.server.requests.slice(first).map((r) => r.rule);
    expect(rules).toContain("condenser");
    expect(rules).not.toContain("writer");
    expect(rules).not.toContain("verifier");
  });

  it("notes the gap when a researcher fails, and reports the rest", async () => {
    script = demoResearchScript();
    // The third researcher's code fails at every step, and it ends without reading anything.
    script.rules = script.rules.map((r) =>
      r.name === "researcher:q3"
        ? {
            ...r,
            steps: [
              'Thought: try.\nCode:\n```js\nthrow new Error("search backend exploded");\n```<end_action>',
              "I could not find anything.",
            ],
          }
        : r,
    );
    const result = await run(DEMO_RESEARCH.topic, { threadId: "research-gap" });
    expect(result.status).toBe("final_answer");
    expect(result.questions.map((q) => q.status)).toEqual(["answered", "answered", "no_evidence"]);
    expect(result.questions[2].reason).toMatch(/read no passage/);
    expect(result.report).toContain("## Gaps");
    expect(result.report).toContain(
      `"${Q3}": no relevant source found — the researcher read no passage`,
    );
    expect(result.report).not.toContain("## Overtaken by the Chrysler Building");
    expect(result.report).toContain("## Height and record");
    expectCitationsResolve(result, world.corpus);
  });

  it("a sub-question whose model request the endpoint refuses is a gap: the others go on and the report is written", async () => {
    script = demoResearchScript();
    // The third researcher's second request is too long for the model: the endpoint answers 400,
    // which sending the same request again cannot change.
    const refusal = JSON.stringify({
      error: {
        message:
          "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens.",
        type: "invalid_request_error",
      },
    });
    script.rules = script.rules.map((r) =>
      r.name === "researcher:q3"
        ? { ...r, steps: [r.steps[0], { status: 400, body: refusal }] }
        : r,
    );
    const first = world.server.requests.length;
    const result = await run(DEMO_RESEARCH.topic, { threadId: "research-refused" });
    expect(result.status).toBe("final_answer");
    expect(result.questions.map((q) => [q.question, q.status])).toEqual([
      [Q1, "answered"],
      [Q2, "answered"],
      [Q3, "failed"],
    ]);
    expect(result.questions[2].reason).toMatch(/HTTP 400: This model's maximum context length/);
    expect(result.report).toContain("## Gaps");
    expect(result.report).toMatch(
      new RegExp(`"${Q3.replace(/[?()]/g, "\\$&")}": research failed — .*maximum context length`),
    );
    expect(result.report).toContain("## Construction, 1887 to 1889");
    expect(result.report).toContain("## Height and record");
    expect(result.report).not.toContain("## Overtaken by the Chrysler Building");
    expectCitationsResolve(result, world.corpus);
    // The refused request was made once (a 400 is not retried); the other pipelines ran to the end.
    const requests = world.server.requests.slice(first);
    expect(requests.filter((r) => r.rule === "researcher:q3")).toHaveLength(2);
    expect(requests.filter((r) => r.rule === "writer").length).toBeGreaterThan(0);
  });

  it("a sub-question stopped by an endpoint that is down stops the run (resumable), it is not a gap", async () => {
    script = demoResearchScript();
    script.rules = script.rules.map((r) =>
      r.name === "researcher:q3" ? { ...r, steps: [r.steps[0], { status: 503 }] } : r,
    );
    const err = await run(DEMO_RESEARCH.topic, {
      threadId: "research-down",
      config: world.config({ maxRetries: 0 }),
    }).catch((e) => e);
    expect(CodehopError.isInstance(err), String(err)).toBe(true);
    expect(err.code).toBe("CODEHOP_MODEL_ENDPOINT_FAILED");
    expect(err.message).toContain("HTTP 503");
    expect(err.message).toContain("codehop resume research-down");
  });

  it("researches at most --max-questions sub-questions: the planner's extra calls are refused", async () => {
    script = demoResearchScript();
    const first = world.server.requests.length;
    const result = await run(DEMO_RESEARCH.topic, { threadId: "research-limit", maxQuestions: 2 });
    expect(result.questions.map((q) => q.question)).toEqual([Q1, Q2]);
    const rules = world.server.requests.slice(first).map((r) => r.rule);
    expect(rules).not.toContain("researcher:q3");
    const planner = world.server.requests.slice(first).filter((r) => r.rule === "planner");
    expect(planner[0].request.messages[1].content).toContain("Research at most 2 sub-questions.");
    expect(planner[1].request.messages.map((m) => m.content).join("\n")).toContain(
      `Not researched: "${Q3}". The limit of 2 sub-questions`,
    );
  });

  it("counts research() calls themselves: another tool's call and a research() call refused for its arguments use no sub-question", async () => {
    const topic = "The Eiffel Tower's building, height, record and visitors";
    const Q4 = "How many people visit the Eiffel Tower each year?";
    const questions = [Q1, Q2, Q3, Q4];
    script = demoResearchScript();
    script.rules = [
      {
        name: "planner:counted",
        system: RESEARCH_MARKERS.planner,
        task: topic,
        steps: [
          action(
            "I look a word up, make one call with a bad argument, then research four sub-questions.",
            [
              'console.log(await lookup_word("tower"));',
              'try { await research("x"); } catch (e) { console.log("refused: " + e.message); }',
              `const notes = await Promise.all(${JSON.stringify(questions)}.map((q) => research(q)));`,
              "notes.forEach((n) => console.log(n));",
            ].join("\n"),
          ),
          action("Done.", 'final_answer("The Eiffel Tower");'),
        ],
      },
      {
        name: "researcher:q4",
        system: RESEARCH_MARKERS.researcher,
        task: Q4,
        steps: [
          action("I search.", 'console.log(await search_wikipedia("Eiffel Tower visitors"));'),
          action("Nothing on visitors.", 'final_answer("The pages do not say.");'),
        ],
      },
      ...script.rules,
    ];
    const mcp = await startMcpTestServer();
    try {
      const first = world.server.requests.length;
      const result = await run(topic, {
        threadId: "research-counted",
        maxQuestions: 4,
        mcpServers: { dictionary: { url: mcp.url, tools: ["lookup_word"] } },
      });
      // All four were researched; the other calls took no slot.
      expect(result.questions.map((q) => q.question)).toEqual(questions);
      expect(result.questions.map((q) => q.status)).toEqual([
        "answered",
        "answered",
        "answered",
        "no_evidence",
      ]);
      const planner = world.server.requests
        .slice(first)
        .filter((r) => r.rule === "planner:counted");
      const observation = planner[1].request.messages.map((m) => m.content).join("\n");
      expect(observation).toContain("tower: a word");
      expect(observation).toMatch(/refused: .*question/);
      expect(observation).not.toContain("Not researched");
      expect(world.server.requestsFor("researcher:q4").length).toBeGreaterThan(0);
    } finally {
      await mcp.close();
    }
  });

  it("never runs more than `concurrency` sub-questions at once (in-flight pipelines measured at the model server)", async () => {
    const topic = "Five questions about towers, two at a time";
    const questions = [1, 2, 3, 4, 5].map(
      (i) => `Which tower is number ${i} on the list of towers?`,
    );
    script = demoResearchScript();
    script.rules = [
      {
        name: "planner:five",
        system: RESEARCH_MARKERS.planner,
        task: topic,
        steps: [
          action(
            "Five sub-questions at once.",
            `const notes = await Promise.all(${JSON.stringify(questions)}.map((q) => research(q)));\nnotes.forEach((n) => console.log(n));`,
          ),
          action("Done.", 'final_answer("Towers");'),
        ],
      },
      ...questions.map((q, i) => ({
        name: `researcher:five-${i + 1}`,
        system: RESEARCH_MARKERS.researcher,
        task: q,
        steps: [
          action("I search.", `console.log(await search_wikipedia("tower ${i + 1}"));`),
          action("Not in the pages.", 'final_answer("The pages do not say.");'),
        ],
      })),
      ...script.rules,
    ];
    // A sub-question's pipeline is live from its researcher's first request until its last reply
    // (two requests: search, then final answer; nothing read, so no condenser call). Every reply
    // takes 120 ms, so pipelines that may run together do overlap.
    const live = new Set<string>();
    let most = 0;
    const inner = researchResponder(script);
    const measured: Responder = async (req, ctx) => {
      const question = questions.find((q) => taskOf(req).includes(q));
      if (question && systemOf(req).includes(RESEARCH_MARKERS.researcher)) {
        if (observationCount(req) === 0) {
          live.add(question);
          most = Math.max(most, live.size);
        }
        await new Promise((r) => setTimeout(r, 120));
        const reply = await inner(req, ctx);
        if (observationCount(req) >= 1) live.delete(question);
        return reply;
      }
      return inner(req, ctx);
    };
    const previous = world.server.responder;
    world.server.responder = measured;
    try {
      const result = await run(topic, {
        threadId: "research-bounded",
        maxQuestions: 5,
        settings: { concurrency: 2 },
      });
      expect(result.questions.map((q) => q.question)).toEqual(questions);
      // Two at a time: never three, and the two did run together.
      expect(most).toBe(2);
      expect(live.size).toBe(0);
    } finally {
      world.server.responder = previous;
    }
  });

  it("rejects an empty or huge topic and bad limits before anything runs", async () => {
    const first = world.server.requests.length;
    for (const [topic, options, code, message] of [
      ["   ", {}, "CODEHOP_INPUT_INVALID", /topic is empty/],
      ["x".repeat(1001), {}, "CODEHOP_INPUT_INVALID", /1001 characters long; the limit is 1000/],
      ["Towers", { maxQuestions: 0 }, "CODEHOP_CONFIG_INVALID", /maxQuestions/],
      ["Towers", { settings: { concurrency: 99 } }, "CODEHOP_CONFIG_INVALID", /concurrency/],
    ] as const) {
      const err = await run(topic, options as any).catch((e) => e);
      expect(CodehopError.isInstance(err), String(err)).toBe(true);
      expect(err.code).toBe(code);
      expect(err.message).toMatch(message);
    }
    expect(world.server.requests.length).toBe(first);
  });
});
