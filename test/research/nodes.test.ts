import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  splitSentences,
  withCitations,
  citationNumbers,
  renumberCitations,
} from "../../src/apps/common/claims.ts";
import { parseVerdicts, type VerificationReport } from "../../src/apps/common/verifier.ts";
import type { CitedPassage } from "../../src/apps/research/base/records.ts";
import type { ReportSection, ResearchStateValue } from "../../src/apps/research/base/state.ts";
import { condense, parseNotes } from "../../src/apps/research/nodes/condense.ts";
import { parseSection } from "../../src/apps/research/nodes/write.ts";
import { assembleReport } from "../../src/apps/research/report/markdown.ts";
import { FLAG_UNVERIFIED, verify } from "../../src/apps/research/nodes/verify.ts";
import {
  ScriptedOpenAIServer,
  type ChatRequest,
  type ScriptedReply,
} from "../../src/testing/scripted-openai-server.ts";

// The condensation and verifier nodes on their own, called with a run config whose model is a
// ChatOpenAI talking real HTTP to the scripted server; the test decides each reply.

let server: ScriptedOpenAIServer;
let reply: (req: ChatRequest) => ScriptedReply = () => "NONE";
beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({ responder: (req) => reply(req) });
});
afterAll(() => server.close());

const config = (research: Record<string, unknown> = {}) =>
  ({
    configurable: { thread_id: "nodes" },
    context: {
      model: "scripted",
      modelSettings: { baseURL: server.baseURL, apiKey: "test", maxRetries: 0 },
      research,
    },
  }) as any;

const passage = (id: string, section: string, text: string): CitedPassage => ({
  id,
  doc_id: "7",
  title: "Eiffel Tower",
  section,
  source: "corpus",
  text,
});
const READ = [
  passage("31", "Construction", "Work on the foundations began on 28 January 1887."),
  passage("32", "Height", "At completion the tower was 300 metres tall."),
  passage("33", "Legacy", "Dozens of towers copy its shape."),
];
const userOf = (req: ChatRequest) => req.messages.at(-1)!.content;

describe("condense node", () => {
  it("turns the passages read into notes tied to the passages they cite; notes citing nothing that was read are dropped", async () => {
    const first = server.requests.length;
    reply = () =>
      [
        "Notes:",
        "- Foundations were started on 28 January 1887 [1].",
        "- The tower was 300 metres tall [2][7].",
        "- A note with no source at all.",
        "- A note citing a passage that was not shown [9].",
      ].join("\n");
    const out = await condense(
      { task: "How was the tower built?", read: READ, failure: null, usage: {} } as any,
      config(),
    );
    const request = server.requests[first].request;
    expect(server.requests.length - first).toBe(1);
    // The prompt numbers the passages read, with their page and section.
    expect(userOf(request)).toContain("Question: How was the tower built?");
    expect(userOf(request)).toContain("[1] (Eiffel Tower — Construction) Work on the foundations");
    expect(userOf(request)).toContain("[3] (Eiffel Tower — Legacy)");
    const notes = (out.sources as any[]).filter((s) => s.kind === "research_note");
    expect(notes).toEqual([
      {
        kind: "research_note",
        question: "How was the tower built?",
        text: "Foundations were started on 28 January 1887.",
        passages: ["31"],
      },
      {
        kind: "research_note",
        question: "How was the tower built?",
        text: "The tower was 300 metres tall.",
        passages: ["32"],
      },
    ]);
    // Only the passages the notes came from go on; the sub-question's record says how it went.
    expect(
      (out.sources as any[]).filter((s) => s.kind === "research_passage").map((p) => p.id),
    ).toEqual(["31", "32"]);
    expect((out.sources as any[]).find((s) => s.kind === "research_question")).toMatchObject({
      status: "answered",
      notes: 2,
    });
    expect(out.answer).toBe(
      'Notes on "How was the tower built?" (from: Eiffel Tower):\n- Foundations were started on 28 January 1887.\n- The tower was 300 metres tall.',
    );
    expect(out.usage).toEqual({ condenser: expect.objectContaining({ calls: 1 }) });
    expect(out.nodeUsage).toEqual(out.usage);
  });

  it("records no evidence when the passages do not answer (NONE), and makes no model call without passages", async () => {
    reply = () => "NONE";
    const none = await condense(
      { task: "Q?", read: READ, failure: null, usage: {} } as any,
      config(),
    );
    expect((none.sources as any[])[0]).toMatchObject({
      kind: "research_question",
      status: "no_evidence",
      notes: 0,
    });
    expect(none.answer).toContain('Nothing found for "Q?"');
    const first = server.requests.length;
    const failed = await condense(
      { task: "Q?", read: [], failure: "the researcher failed: boom", usage: {} } as any,
      config(),
    );
    expect(server.requests.length).toBe(first);
    expect((failed.sources as any[])[0]).toMatchObject({
      status: "failed",
      reason: "the researcher failed: boom",
    });
  });

  it("keeps at most maxNotesPerQuestion notes", () => {
    const reply = Array.from({ length: 9 }, (_, i) => `- fact ${i} [1]`).join("\n");
    expect(parseNotes(reply, 1, 6).notes).toHaveLength(6);
    expect(
      parseNotes(
        "<think>[1] hmm</think>\n1. A fact [1]\n* Another [P2]\n- Third [Passage 1][2]",
        2,
        6,
      ).notes,
    ).toEqual([
      { text: "A fact", cites: [1] },
      { text: "Another", cites: [2] },
      { text: "Third", cites: [1, 2] },
    ]);
  });
});

/** What the verify node returns, as the tests read it. */
type VerifyOut = { verified: ReportSection[]; verification: VerificationReport; usage: unknown };
const runVerify = async (state: ResearchStateValue, cfg: unknown) =>
  (await verify(state, cfg as any)) as unknown as VerifyOut;

/** A draft state for the verify node: sections citing the numbered references. */
function draftState(sections: string[]): ResearchStateValue {
  return {
    draft: sections.map((text, i) => ({
      heading: i ? `S${i}` : "",
      question: i ? `Q${i}` : "",
      text,
    })),
    references: READ.map((p, i) => ({ n: i + 1, passage: p })),
    notes: [],
    maxQuestions: undefined,
  } as any;
}

describe("verify node", () => {
  it("checks every cited sentence against its cited passages in batches, and keeps, fixes, drops or flags it", async () => {
    const seen: string[] = [];
    reply = (req) => {
      const user = userOf(req);
      seen.push(user);
      const lines: string[] = [];
      for (const m of user.matchAll(/^(\d+)\. (.*) \(cites/gm)) {
        const k = m[1];
        if (m[2].includes("gold")) lines.push(`${k}: UNSUPPORTED`);
        else if (m[2].includes("310 metres"))
          lines.push(`${k}: FIX: At completion the tower was 300 metres tall.`);
        else if (m[2].includes("mumble")) lines.push(`${k}: maybe?`);
        else lines.push(`**Claim ${k}**: Supported [${k === "1" ? 1 : 2}]`);
      }
      return lines.join("\n");
    };
    const first = server.requests.length;
    const out = await runVerify(
      draftState([
        "Work began on 28 January 1887 [1]. It is a tower.",
        "The tower was 310 metres tall [2]. It was painted gold [1]. Its lift came from Otis [9]. Copies mumble [3].",
      ]),
      config({ verifyBatchSize: 2 }),
    );
    // Five sentences to judge (the [9] one resolves to nothing; the uncited one is checked
    // against its section's passages), two per call.
    expect(server.requests.length - first).toBe(3);
    // A call shows only the passages its claims cite.
    expect(seen[0]).toContain("[1] (Eiffel Tower — Construction)");
    expect(seen[0]).not.toContain("[2] (Eiffel Tower — Height)");
    expect(seen[1]).toContain("[1] (Eiffel Tower — Construction)");
    expect(seen[1]).toContain("[2] (Eiffel Tower — Height)");
    expect(seen[1]).not.toContain("[3] (Eiffel Tower — Legacy)");
    expect(out.verified.map((s) => s.text)).toEqual([
      "Work began on 28 January 1887 [1]. It is a tower [1].",
      `At completion the tower was 300 metres tall [2]. Copies mumble [3]. ${FLAG_UNVERIFIED}`,
    ]);
    expect(out.verification).toMatchObject({
      checked: 6,
      supported: 2,
      fixed: 1,
      dropped: 2,
      flagged: 1,
      uncited: 1,
    });
    const claims = out.verification.claims;
    expect(claims.find((c) => c.text.includes("gold"))).toMatchObject({
      verdict: "unsupported",
      action: "dropped",
      passage_ids: ["31"],
    });
    expect(claims.find((c) => c.text.includes("310"))).toMatchObject({
      action: "fixed",
      fixed_text: "At completion the tower was 300 metres tall.",
    });
    expect(claims.find((c) => c.text.includes("Otis"))).toMatchObject({
      action: "dropped",
      citations: [],
    });
    expect(claims.find((c) => c.text === "It is a tower.")).toMatchObject({
      action: "kept",
      citations: [1],
      reason: expect.stringContaining("without a citation"),
    });
    expect(out.usage).toEqual({ verifier: expect.objectContaining({ calls: 3 }) });
  });

  it("flags instead of dropping with onUnsupported: flag, and does nothing without a draft", async () => {
    reply = () => "1: UNSUPPORTED";
    const out = await runVerify(
      draftState(["It was painted gold [1]."]),
      config({ onUnsupported: "flag" }),
    );
    expect(out.verified![0].text).toBe(
      "It was painted gold [1]. *(not supported by the cited passages)*",
    );
    const first = server.requests.length;
    const empty = await runVerify({ draft: [], references: [] } as any, config());
    expect(server.requests.length).toBe(first);
    expect(empty.verification).toMatchObject({ checked: 0 });
  });
});

describe("write node's reply parsing", () => {
  it("reads a heading and a paragraph, tolerating Markdown headings, labels and labelled citations", () => {
    expect(
      parseSection(
        "## Building the tower\nParagraph: It began in 1887 [P1].\nIt ended in 1889 [Source 2].",
        "fallback",
      ),
    ).toEqual({
      heading: "Building the tower",
      text: "It began in 1887 [1]. It ended in 1889 [2].",
    });
    expect(parseSection("It began in 1887 [1].", "When was it built")).toEqual({
      heading: "When was it built",
      text: "It began in 1887 [1].",
    });
  });
});

describe("claims and verdicts", () => {
  it("splits sentences without breaking decimals, and keeps a citation written after the full stop with its sentence", () => {
    expect(splitSentences("Ethanol is 0.789 g/cm³ at 20 °C. [3] Birch is 0.68 g/cm³ [1].")).toEqual(
      ["Ethanol is 0.789 g/cm³ at 20 °C. [3]", "Birch is 0.68 g/cm³ [1]."],
    );
    expect(citationNumbers("A [1, 3] and [^2][3].")).toEqual([1, 3, 2]);
    expect(withCitations("It opened in 1889.", [2, 4])).toBe("It opened in 1889 [2][4].");
    expect(renumberCitations("A [3]. B [1][7].", (n) => ({ 3: 1, 1: 2 })[n])).toBe("A [1]. B [2].");
  });

  it("reads verdicts tolerantly", () => {
    const v = parseVerdicts(
      "<think>1: UNSUPPORTED</think>\n- Claim 1 - supported [2]\n2) **Not supported**\n3. FIX: Shorter.\n4: partly supported",
    );
    expect([...v.entries()]).toEqual([
      [1, { verdict: "supported", rest: "[2]" }],
      [2, { verdict: "unsupported", rest: "" }],
      [3, { verdict: "fix", rest: "Shorter." }],
      [4, { verdict: "fix", rest: "" }],
    ]);
  });
});

describe("report assembly", () => {
  const refs = READ.map((p, i) => ({ n: i + 1, passage: p }));
  const base = {
    title: "Towers",
    topic: "Towers",
    references: refs,
    verification: null,
    sourceName: "the corpus",
  };

  it("renumbers citations by first appearance, prints only numbers that resolve, and lists gaps", () => {
    const out = assembleReport({
      ...base,
      sections: [
        { heading: "", question: "", text: "Summary cites the height [2] and the legacy [3]." },
        { heading: "Height", question: "Q1", text: "It was 300 metres tall [2][7]." },
        { heading: "Emptied", question: "Q2", text: "" },
      ],
      questions: [
        { question: "Q1", status: "answered", notes: 1 },
        { question: "Q2", status: "answered", notes: 1 },
        { question: "Q3", status: "failed", notes: 0, reason: "the researcher failed: boom" },
      ],
    });
    expect(out.markdown).toContain("Summary cites the height [1] and the legacy [2].");
    expect(out.markdown).toContain("It was 300 metres tall [1].");
    expect(out.markdown).not.toContain("[7]");
    expect(out.markdown).not.toContain("## Emptied");
    expect(out.citations.map((c) => [c.n, c.passage_id])).toEqual([
      [1, "32"],
      [2, "33"],
    ]);
    expect(out.markdown).toContain('"Q2": its section was removed');
    expect(out.markdown).toContain('"Q3": research failed — the researcher failed: boom.');
    expect(out.markdown).toContain(
      '1. **Eiffel Tower**, section "Height" — passage 32, document 7 (corpus)',
    );
  });

  it("says nothing was found, or nothing was researched, instead of writing from memory", () => {
    const none = assembleReport({
      ...base,
      sections: [],
      questions: [{ question: "Q1", status: "no_evidence", notes: 0, reason: "NONE" }],
    });
    expect(none.empty).toBe(true);
    expect(none.markdown).toContain("No relevant information was found in the corpus");
    const nothing = assembleReport({ ...base, sections: [], questions: [] });
    expect(nothing.markdown).toContain("No sub-question was researched");
    expect(nothing.citations).toEqual([]);
  });
});
