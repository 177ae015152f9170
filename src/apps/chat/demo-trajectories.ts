import {
  trajectoryResponder,
  type ChatRequest,
  type Responder,
  type ScriptedReply,
  type TrajectoryRule,
} from "../../testing/scripted-openai-server.ts";
import { action } from "../qa/demo-trajectories.ts";

/**
 * The scripted file dialogue of `codehop demo --question chat`, its tests and the chat benchmark:
 * the documents (a PDF report, a DOCX budget, a web page), the user's messages, and what a capable
 * model would write each round in the code-action format. Observations come from the real tools
 * (search_files over the real per-thread index), so only the model is scripted.
 */

/** The report, one string per PDF page. */
export const DEMO_REPORT_PAGES: readonly string[] = [
  [
    "Harbor Bridge Inspection Report 2024",
    "The Harbor Bridge opened to traffic on 19 March 1932.",
    "Its main span is 503 metres long and the arch rises 134 metres above the water.",
  ].join("\n"),
  [
    "Maintenance",
    "The 2019 repainting of the south arch cost 12.4 million dollars.",
    "Bearing replacements in 2023 cost 9.8 million dollars.",
  ].join("\n"),
  [
    "Traffic",
    "In 2022 the bridge carried an average of 160,000 vehicles per day.",
    "Cyclists crossed 4,100 times per day on the western path.",
  ].join("\n"),
];

/** The budget document: a heading and its paragraphs per section. */
export const DEMO_BUDGET_SECTIONS: ReadonlyArray<{ heading: string; paragraphs: string[] }> = [
  {
    heading: "Budget",
    paragraphs: ["The maintenance budget for 2025 is 14.5 million dollars."],
  },
  {
    heading: "Staff",
    paragraphs: ["The bridge team has 17 engineers and 6 painters."],
  },
  {
    heading: "Schedule",
    paragraphs: ["Repainting of the north arch starts in May 2025 and lasts 30 weeks."],
  },
];

/** The visitor page (HTML) the link dialogue attaches. */
export const DEMO_VISITOR_PAGE = `<!doctype html>
<html><head><title>Harbor Bridge visitor information</title></head>
<body><nav>Home | Visit | Contact</nav>
<h1>Harbor Bridge visitor information</h1>
<h2>Bridge climb</h2><p>A guided bridge climb takes 3 hours and costs 45 dollars per adult.</p>
<h2>Opening hours</h2><p>The pedestrian path is open from 6:00 to 22:00 every day.</p>
</body></html>`;

/** File names of the demo documents (what answers cite). */
export const DEMO_FILES = {
  report: "harbor-bridge-report.pdf",
  budget: "budget-2025.docx",
  visitor: "Harbor Bridge visitor information",
} as const;

/** One round of the scripted dialogue. */
export interface DemoRound {
  /** The user's message. */
  message: string;
  /** Which demo documents are attached with it. */
  attach?: Array<"report" | "budget" | "visitor">;
  /** The chat agent's replies by step (each after the previous step's observation). */
  steps: ScriptedReply[];
  /** What the reply says (tests check it), and the citation labels it carries. */
  expect: { reply: string; cites: string[] };
}

const REPORT = DEMO_FILES.report;
const BUDGET = DEMO_FILES.budget;

/** The dialogue: attach two files, ask about each, combine them, ask about the conversation itself. */
export const DEMO_ROUNDS: readonly DemoRound[] = [
  {
    message:
      "Hi! I attached our bridge inspection report and the 2025 budget. What are they about?",
    attach: ["report", "budget"],
    steps: [
      action(
        "The files are listed in my task; I search each for an overview before describing them.",
        `const [report, budget] = await Promise.all([search_files("Harbor Bridge report opened"), search_files("maintenance budget 2025")]);
console.log(report);
console.log(budget);`,
      ),
      action(
        "I can describe both files with citations.",
        `final_answer("${REPORT} is the 2024 inspection report of the Harbor Bridge, which opened in 1932 [${REPORT}, p. 1]. ${BUDGET} is the 2025 maintenance budget: 14.5 million dollars [${BUDGET} § Budget].");`,
      ),
    ],
    expect: {
      reply: "2024 inspection report",
      cites: [`${REPORT}, p. 1`, `${BUDGET} § Budget`],
    },
  },
  {
    message: "How long is the main span, in feet?",
    steps: [
      action(
        "I search the report for the main span.",
        `console.log(await search_files("main span length"));`,
      ),
      action(
        "The span is 503 m; I convert it to feet in code.",
        `final_answer(\`The main span is 503 metres, about \${Math.round(503 * 3.28084)} feet [${REPORT}, p. 1].\`);`,
      ),
    ],
    expect: { reply: "about 1650 feet", cites: [`${REPORT}, p. 1`] },
  },
  {
    message: "What did maintenance cost in 2019 and 2023 together, and is the 2025 budget bigger?",
    steps: [
      action(
        "I need both maintenance costs from the report and the 2025 budget; I search both files at once.",
        `const [costs, budget] = await Promise.all([search_files("maintenance cost 2019 2023"), search_files("maintenance budget 2025")]);
console.log(costs);
console.log(budget);`,
      ),
      action(
        "2019: 12.4 million, 2023: 9.8 million, budget 2025: 14.5 million dollars. I add and compare in code.",
        `const spent = 12.4 + 9.8;
final_answer(\`Maintenance cost \${spent.toFixed(1)} million dollars in 2019 and 2023 together [${REPORT}, p. 2]; the 2025 budget of 14.5 million dollars [${BUDGET} § Budget] is \${(spent - 14.5).toFixed(1)} million smaller than that sum, but bigger than either year.\`);`,
      ),
    ],
    expect: {
      reply: "22.2 million dollars",
      cites: [`${REPORT}, p. 2`, `${BUDGET} § Budget`],
    },
  },
  {
    message: "How many engineers work on the bridge?",
    steps: [
      action(
        "I search the budget's staff section.",
        `console.log(await search_files("engineers staff team"));`,
      ),
      action(
        "The budget says 17 engineers.",
        `final_answer("17 engineers (and 6 painters) [${BUDGET} § Staff].");`,
      ),
    ],
    expect: { reply: "17 engineers", cites: [`${BUDGET} § Staff`] },
  },
  {
    message: "Thanks. What was the first thing I asked you today?",
    steps: [
      action(
        "The conversation so far is in my task: the first message asked what the two attached files are about. No tool is needed.",
        `final_answer("You first asked what the two files you attached (the inspection report and the 2025 budget) are about.");`,
      ),
    ],
    expect: { reply: "You first asked what the two files", cites: [] },
  },
  {
    message: "I also added the visitor page. How much is the bridge climb for two adults?",
    attach: ["visitor"],
    steps: [
      action(
        "I search the visitor page for the climb price.",
        `console.log(await search_files("bridge climb price adult"));`,
      ),
      action(
        "45 dollars per adult; two adults cost twice that.",
        `final_answer(\`\${2 * 45} dollars for two adults (45 dollars each) [${DEMO_FILES.visitor} § Bridge climb].\`);`,
      ),
    ],
    expect: { reply: "90 dollars", cites: [`${DEMO_FILES.visitor} § Bridge climb`] },
  },
];

/** The sentence that opens the chat agent's system prompt (prompts/chat/system.md). */
export const CHAT_AGENT_MARKER = "You are the chat agent";
/** The sentence that opens the summarizer's system prompt (prompts/chat_memory/summarize.md). */
export const SUMMARIZER_MARKER = "You keep a short summary of a conversation";
/** What precedes the user's message in the chat agent's task (prompts/chat/round.md). */
const NEW_MESSAGE = "The user's new message:\n";

/** The user's message of a chat agent request (the end of its task). */
export function newMessageOf(req: ChatRequest): string {
  const task = req.messages.find((m) => m.role === "user")?.content ?? "";
  const at = task.lastIndexOf(NEW_MESSAGE);
  return at === -1 ? "" : task.slice(at + NEW_MESSAGE.length).trim();
}

/**
 * A summarizer that follows its instructions the simple way: the previous summary plus one line
 * per new exchange (each message's first sentence), within the word budget it is given.
 */
export function scriptedSummary(req: ChatRequest): string {
  const system = req.messages.find((m) => m.role === "system")?.content ?? "";
  const words = Number(/at most (\d+) words/.exec(system)?.[1] ?? 200);
  const request = req.messages.find((m) => m.role === "user")?.content ?? "";
  const previous = /Summary so far:\n([\s\S]*?)\n\nExchanges to add/.exec(request)?.[1] ?? "";
  const exchanges =
    /Exchanges to add to it:\n([\s\S]*?)\n\nWrite the updated summary/.exec(request)?.[1] ?? "";
  const first = (t: string) =>
    /^(.{0,160}?[.!?])(\s|$)/.exec(t.trim())?.[1] ?? t.trim().slice(0, 160);
  const lines = exchanges
    .split("\n")
    .filter((l) => /^(User|Assistant): /.test(l))
    .map((l) =>
      l.startsWith("User: ")
        ? `The user asked: ${first(l.slice(6))}`
        : `Answer: ${first(l.slice(11))}`,
    );
  const all = [previous === "(none yet)" ? "" : previous, ...lines]
    .filter(Boolean)
    .join(" ")
    .split(/\s+/);
  // Keep the newest part when over budget, as a model compressing its summary would.
  return all.slice(Math.max(0, all.length - words)).join(" ");
}

/** Trajectory rules for `rounds`: one per round, recognised by its message (the first line: notes of uploaded files may follow). */
export function chatRules(rounds: readonly DemoRound[] = DEMO_ROUNDS): TrajectoryRule[] {
  return rounds.map((round, i) => ({
    name: `chat:round${i + 1}`,
    system: CHAT_AGENT_MARKER,
    task: (req: ChatRequest) => newMessageOf(req).split("\n")[0] === round.message,
    steps: round.steps,
  }));
}

/**
 * The scripted model of a dialogue: the rounds' trajectories for the chat agent, and
 * {@link scriptedSummary} for the summarizer (an unknown request gets an HTTP 500 naming it).
 */
export function chatResponder(rounds: readonly DemoRound[] = DEMO_ROUNDS): Responder {
  return trajectoryResponder(chatRules(rounds), (req) => {
    const system = req.messages.find((m) => m.role === "system")?.content ?? "";
    if (system.includes(SUMMARIZER_MARKER)) return { content: scriptedSummary(req) };
    return {
      status: 500,
      body: JSON.stringify({
        error: { message: `no scripted reply for: ${newMessageOf(req).slice(0, 200)}` },
      }),
    };
  });
}
