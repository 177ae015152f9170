import {
  namedReply,
  trajectoryResponder,
  type ChatRequest,
  type Responder,
  type ScriptedReply,
  type TrajectoryRule,
} from "../../testing/scripted-openai-server.ts";
import { action, demoRules } from "../qa/demo-trajectories.ts";

/**
 * The scripted research run over the demo corpus (data/demo-corpus.jsonl), for `codehop demo
 * --question research`, the tests and the benchmarks. The agents (planner, researchers, page
 * readers) replay recorded code actions, recognised by their system prompt and task. The pipeline's
 * model steps are scripted by content instead, because what they must cite depends on what was
 * read: the condenser writes each scripted note citing the passage (by its number in the prompt)
 * that contains the note's key phrase; the writer writes each scripted sentence citing the notes
 * it comes from; the verifier is a lexical judge — a claim is supported when every number and
 * capitalised word in it occurs in the passages it cites. Only the model is scripted: retrieval,
 * numbering, verification and the report are the real code's.
 */

/** The sentence that opens each research agent's system prompt (prompts/<agent>/system.md). */
export const RESEARCH_MARKERS = {
  planner: "You are the planner agent",
  researcher: "You are the researcher agent",
  page_reader: "You are the page_reader agent",
  condenser: "You turn source passages into short research notes",
  writer: "You write sections of a research report",
  verifier: "You check claims against the source passages",
} as const;

/** The demo topic, its sub-questions and the title the planner gives the report. */
export const DEMO_RESEARCH = {
  topic:
    "The Eiffel Tower: how it was built and how long it was the tallest structure in the world",
  questions: [
    "When and how was the Eiffel Tower built?",
    "How tall was the Eiffel Tower when it was completed, and how long was it the tallest structure in the world?",
    "Which building first overtook the Eiffel Tower as the tallest structure, and when?",
  ],
  title: "The Eiffel Tower: construction and height record",
} as const;

/** A note the condenser writes when a passage it is shown contains `find`. */
export interface NoteScript {
  find: string;
  text: string;
}

/** A sentence the writer writes, citing the notes (or, in the summary, the sentences) containing `from`. */
export interface SentenceScript {
  text: string;
  from: string[];
}

/** Everything the scripted model of a research run says. */
export interface ResearchScript {
  /** Agent trajectories (planner, researchers, page readers). */
  rules: TrajectoryRule[];
  /** Notes per sub-question. */
  notes: Record<string, NoteScript[]>;
  /** Sections per sub-question. */
  sections: Record<string, { heading: string; sentences: SentenceScript[] }>;
  /** Sentences of the summary, each citing the section sentences containing its `from` phrases. */
  summary: SentenceScript[];
}

const [Q1, Q2, Q3] = DEMO_RESEARCH.questions;

const planner = (steps: ScriptedReply[]): TrajectoryRule => ({
  name: "planner",
  system: RESEARCH_MARKERS.planner,
  task: DEMO_RESEARCH.topic,
  steps,
});
const researcher = (name: string, question: string, steps: ScriptedReply[]): TrajectoryRule => ({
  name,
  system: RESEARCH_MARKERS.researcher,
  task: question,
  steps,
});
const reader = (name: string, query: string, steps: ScriptedReply[]): TrajectoryRule => ({
  name,
  system: RESEARCH_MARKERS.page_reader,
  task: query,
  steps,
});

/** The agents' trajectories of the demo research run. */
export function researchRules(): TrajectoryRule[] {
  return [
    planner([
      action(
        "I split the topic into three sub-questions — construction, height record, and what overtook it — and research them together.",
        `
const questions = [
  ${JSON.stringify(Q1)},
  ${JSON.stringify(Q2)},
  ${JSON.stringify(Q3)},
];
const notes = await Promise.all(questions.map((q) => research(q)));
notes.forEach((n) => console.log(n));`,
      ),
      action(
        "The notes cover construction, the height record and the building that overtook it. I finish with a title.",
        `final_answer(${JSON.stringify(DEMO_RESEARCH.title)});`,
      ),
    ]),
    researcher("researcher:q1", Q1, [
      action(
        "I search for the Eiffel Tower's construction.",
        `console.log(await search_wikipedia("Eiffel Tower construction"));`,
      ),
      action(
        "I read the Eiffel Tower page about its construction.",
        `console.log(await search_info("construction began finished 1887 1889", "Eiffel Tower"));`,
      ),
      action(
        "The page gives the construction dates.",
        `final_answer("The Eiffel Tower was built from January 1887 to March 1889 and opened on 15 May 1889. Sources: Eiffel Tower.");`,
      ),
    ]),
    researcher("researcher:q2", Q2, [
      action(
        "I search for the Eiffel Tower's height.",
        `console.log(await search_wikipedia("Eiffel Tower height tallest structure"));`,
      ),
      action(
        "I read the Eiffel Tower page about its height.",
        `console.log(await search_info("height metres tallest man-made structure years", "Eiffel Tower"));`,
      ),
      action(
        "The page gives the height and how long it was the tallest.",
        `final_answer("The Eiffel Tower was 300 m tall (312 m with its flagpole) and remained the tallest man-made structure for 41 years, until 1930. Sources: Eiffel Tower.");`,
      ),
    ]),
    researcher("researcher:q3", Q3, [
      action(
        "I search for the building that overtook the Eiffel Tower.",
        `console.log(await search_wikipedia("Chrysler Building taller than the Eiffel Tower"));`,
      ),
      action(
        "I read the Chrysler Building page.",
        `console.log(await search_info("first structure taller than the Eiffel Tower record", "Chrysler Building"));`,
      ),
      action(
        "The page answers the question.",
        `final_answer("The Chrysler Building, completed in 1930, was the first man-made structure taller than the Eiffel Tower. Sources: Chrysler Building.");`,
      ),
    ]),
    reader("page_reader:q1", "construction began finished 1887 1889", [
      action(
        "I retrieve the passages about the construction.",
        `console.log(await retrieve_passages("construction foundations began finished 1887 1889"));`,
      ),
      action(
        "The Construction section answers the query.",
        `final_answer("Construction section: work on the foundations began on 28 January 1887; construction was finished in March 1889 and the tower opened on 15 May 1889.");`,
      ),
    ]),
    reader("page_reader:q2", "height metres tallest man-made structure years", [
      action(
        "I retrieve the passages about the height.",
        `console.log(await retrieve_passages("height metres tallest man-made structure"));`,
      ),
      action(
        "The Height section answers the query.",
        `final_answer("Height section: 300 metres at completion (312 m with its flagpole); the tallest man-made structure for 41 years, until 1930.");`,
      ),
    ]),
    reader("page_reader:q3", "first structure taller than the Eiffel Tower record", [
      action(
        "I retrieve the passages about the record.",
        `console.log(await retrieve_passages("record tallest taller than the Eiffel Tower"));`,
      ),
      action(
        "The Record section answers the query.",
        `final_answer("Record section: the first man-made structure taller than the Eiffel Tower; overtaken by the Empire State Building in 1931.");`,
      ),
    ]),
  ];
}

/** The demo research run's scripted model: agents, notes, sections and summary. */
export function demoResearchScript(): ResearchScript {
  return {
    rules: researchRules(),
    notes: {
      [Q1]: [
        { find: "28 January 1887", text: "Work on the foundations began on 28 January 1887." },
        {
          find: "masonry piers",
          text: "The four legs were assembled on masonry piers and met at the first platform in 1888.",
        },
        {
          find: "31 March 1889",
          text: "Construction was finished in March 1889; Eiffel raised the French flag at the summit on 31 March 1889.",
        },
        { find: "15 May 1889", text: "The tower opened to the public on 15 May 1889." },
      ],
      [Q2]: [
        {
          find: "312 m",
          text: "At completion the tower was 300 metres tall, 312 m including its flagpole.",
        },
        {
          find: "41 years",
          text: "It remained the tallest man-made structure in the world for 41 years, until the Chrysler Building was finished in 1930.",
        },
        { find: "330 m", text: "Antennas added later bring its height to about 330 m." },
      ],
      [Q3]: [
        {
          find: "first man-made structure taller",
          text: "The Chrysler Building was the first man-made structure taller than the Eiffel Tower.",
        },
        { find: "27 May 1930", text: "The Chrysler Building opened on 27 May 1930." },
        {
          find: "overtaken by the Empire State Building",
          text: "The Chrysler Building was overtaken by the Empire State Building in 1931.",
        },
      ],
    },
    sections: {
      [Q1]: {
        heading: "Construction, 1887 to 1889",
        sentences: [
          { text: "Work on the foundations began on 28 January 1887.", from: ["28 January 1887"] },
          {
            text: "The four legs met at the first platform in 1888.",
            from: ["masonry piers"],
          },
          {
            text: "Construction was finished in March 1889, when Eiffel raised the French flag at the summit on 31 March 1889.",
            from: ["31 March 1889"],
          },
          { text: "The tower opened to the public on 15 May 1889.", from: ["15 May 1889"] },
        ],
      },
      [Q2]: {
        heading: "Height and record",
        sentences: [
          {
            text: "At completion the tower was 300 metres tall, or 312 m with its flagpole.",
            from: ["312 m"],
          },
          {
            text: "It remained the tallest man-made structure in the world for 41 years, until the Chrysler Building was finished in 1930.",
            from: ["41 years"],
          },
          { text: "Antennas later brought its height to about 330 m.", from: ["330 m"] },
        ],
      },
      [Q3]: {
        heading: "Overtaken by the Chrysler Building",
        sentences: [
          {
            text: "The Chrysler Building was the first man-made structure taller than the Eiffel Tower.",
            from: ["first man-made structure taller"],
          },
          { text: "It opened on 27 May 1930.", from: ["27 May 1930"] },
          {
            text: "The Empire State Building overtook it in 1931.",
            from: ["overtaken by the Empire State Building"],
          },
        ],
      },
    },
    summary: [
      {
        text: "Work on the Eiffel Tower began on 28 January 1887 and was finished in March 1889.",
        from: ["28 January 1887", "31 March 1889"],
      },
      {
        text: "At 300 metres it remained the tallest man-made structure in the world for 41 years, until the Chrysler Building was finished in 1930.",
        from: ["312 m", "41 years"],
      },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// The content-scripted model steps.

const lastUser = (req: ChatRequest) =>
  [...req.messages].reverse().find((m) => m.role === "user")?.content ?? "";
const systemOf = (req: ChatRequest) => req.messages.find((m) => m.role === "system")?.content ?? "";

/** Lines of a prompt block: what follows `start` up to the next blank line. */
function block(text: string, start: string): string[] {
  const at = text.indexOf(start);
  if (at === -1) return [];
  const rest = text.slice(at + start.length).replace(/^\s*\n/, "");
  const end = rest.search(/\n\s*\n/);
  return (end === -1 ? rest : rest.slice(0, end)).split("\n").filter((l) => l.trim());
}

/** `[n] ...` lines → text by number. */
function numbered(lines: string[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const line of lines) {
    const m = /^\[(\d+)\]\s*(.*)$/.exec(line.trim());
    if (m) out.set(Number(m[1]), m[2]);
  }
  return out;
}

const marks = (numbers: Iterable<number>) => [...numbers].map((n) => `[${n}]`).join("");
const numbersIn = (text: string) => [...text.matchAll(/\[(\d+)\]/g)].map((m) => Number(m[1]));

/** Before the final full stop: "text [1]." */
function cite(text: string, numbers: number[]): string {
  const body = text.replace(/[.]\s*$/, "");
  return `${body} ${marks(new Set(numbers))}.`;
}

/** The condenser: each scripted note whose phrase is in a passage it was shown, citing that passage. */
function condenseReply(script: ResearchScript, user: string): string {
  const question = /Question:\s*(.+)/.exec(user)?.[1]?.trim() ?? "";
  const passages = numbered(block(user, "Passages:"));
  const notes: string[] = [];
  for (const note of script.notes[question] ?? []) {
    const n = [...passages.entries()].find(([, text]) => text.includes(note.find))?.[0];
    if (n !== undefined) notes.push(`- ${cite(note.text, [n])}`);
  }
  return notes.length ? notes.join("\n") : "NONE";
}

/** The writer's section: the scripted sentences whose notes it was given, citing those notes' numbers. */
function sectionReply(script: ResearchScript, user: string): string {
  const question = /This section answers:\s*(.+)/.exec(user)?.[1]?.trim() ?? "";
  const notes = block(user, "Notes (each ends with its source numbers):");
  const section = script.sections[question];
  if (!section) return "Heading: Findings\nNothing to add.";
  const sentences: string[] = [];
  for (const s of section.sentences) {
    const cited = s.from.flatMap((phrase) =>
      numbersIn(notes.find((l) => l.includes(phrase)) ?? ""),
    );
    if (cited.length) sentences.push(cite(s.text, cited));
  }
  return `Heading: ${section.heading}\n${sentences.join(" ")}`;
}

/** The writer's summary: the scripted sentences, citing the section sentences they draw on. */
function summaryReply(script: ResearchScript, user: string): string {
  const sentences = user.split(/(?<=[.!?])\s+/);
  const out: string[] = [];
  for (const s of script.summary) {
    const cited = s.from.flatMap((phrase) =>
      numbersIn(sentences.find((x) => x.includes(phrase)) ?? ""),
    );
    if (cited.length) out.push(cite(s.text, cited));
  }
  return out.join(" ");
}

/** Numbers and capitalised words (except the sentence's first word) of a claim: what must be in its passages. */
export function keyTerms(claim: string): string[] {
  const words = claim
    .replace(/[^\p{L}\p{N}.,\s-]/gu, " ")
    .split(/\s+/)
    .filter(Boolean);
  const out: string[] = [];
  words.forEach((w, i) => {
    const word = w.replace(/[.,]+$/, "");
    if (/^\d+(?:[.,]\d+)*$/.test(word)) out.push(word);
    else if (i > 0 && /^\p{Lu}\p{Ll}+/u.test(word)) out.push(word);
  });
  return out;
}

/**
 * The lexical judge standing in for the verifier's model: a claim is SUPPORTED when every key
 * term of it occurs in the passages it cites (case-insensitive), else UNSUPPORTED.
 */
export function lexicalJudgeReply(user: string): string {
  const passages = numbered(block(user, "Passages:"));
  const lines: string[] = [];
  for (const line of block(user, "Claims:")) {
    const m = /^(\d+)\.\s+(.*)\s+\(cites ((?:\[\d+\])+)\)\s*$/.exec(line.trim());
    if (!m) continue;
    const evidence = numbersIn(m[3])
      .map((n) => passages.get(n) ?? "")
      .join(" ")
      .toLowerCase();
    const missing = keyTerms(m[2]).filter((t) => !evidence.includes(t.toLowerCase()));
    lines.push(`${m[1]}: ${missing.length ? "UNSUPPORTED" : "SUPPORTED"}`);
  }
  return lines.join("\n");
}

/**
 * The scripted model of a research run: agent trajectories first, then the pipeline's steps by
 * their system prompt; anything else gets an HTTP 500 naming the request (a test fails loudly).
 * Replies are tagged "condenser", "writer", "writer:summary" and "verifier" in the request log.
 */
export function researchResponder(script: ResearchScript = demoResearchScript()): Responder {
  return trajectoryResponder(script.rules, (req) => {
    const system = systemOf(req);
    const user = lastUser(req);
    if (system.startsWith(RESEARCH_MARKERS.condenser))
      return namedReply(condenseReply(script, user), "condenser");
    if (system.startsWith(RESEARCH_MARKERS.writer)) {
      return user.includes("This section answers:")
        ? namedReply(sectionReply(script, user), "writer")
        : namedReply(summaryReply(script, user), "writer:summary");
    }
    if (system.startsWith(RESEARCH_MARKERS.verifier))
      return namedReply(lexicalJudgeReply(user), "verifier");
    return {
      status: 500,
      body: JSON.stringify({
        error: { message: `no scripted research reply for: ${user.slice(0, 200)}` },
      }),
    };
  });
}

/** Every demo's scripted model: the QA questions' trajectories, then the research run's. */
export function allDemosResponder(): Responder {
  return trajectoryResponder(demoRules(), researchResponder());
}
