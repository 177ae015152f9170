import { LAST_ACTION_NOTE, PLAN_FOLLOW_UP } from "../../core/history.ts";
import {
  namedReply,
  type ChatRequest,
  type Responder,
  type ScriptedReply,
} from "../../testing/scripted-openai-server.ts";
import type { ArchivedSnapshot, SitePage } from "../../testing/web-test-server.ts";
import { detectDocumentKind } from "../../ingest/documents.ts";
import { makePdf, makeXlsx } from "./demo-files.ts";

/**
 * The assistant's scripted demo: a task over a local website (a city tourism office's pages, served
 * by src/testing/web-test-server.ts with a SearxNG-compatible search), a PDF and a spreadsheet made
 * at run time. The model is scripted; the rest is real — ChatOpenAI over HTTP, the sandbox, web
 * search through the provider port, the text browser's viewports and find, the document readers,
 * checkpoints. The replies check what the tools returned (a reply that depends on a fact only
 * gives it when the observation holds it), so a broken tool shows up as a wrong answer.
 */

/** The demo task. */
export const DEMO_TASK =
  "The City Museum's annual report (attached) gives its visitors in 2023, and the city tourism office's website gives its visitors in 2024. By how many visitors did attendance grow from 2023 to 2024, and which month of 2024 had the most visitors according to the attached spreadsheet?";

const MONTHS: Array<[string, number]> = [
  ["January", 12100],
  ["February", 13050],
  ["March", 16800],
  ["April", 18200],
  ["May", 19400],
  ["June", 22600],
  ["July", 29800],
  ["August", 31200],
  ["September", 17900],
  ["October", 12500],
  ["November", 10300],
  ["December", 10650],
];

/**
 * The spreadsheet's format: XLSX when codehop's reader registry reads XLSX, else CSV (the readers
 * gain spreadsheet formats separately; the demo uses the richest one they read).
 */
export function demoSpreadsheetName(): string {
  try {
    detectDocumentKind({ name: "visitors-2024.xlsx" }, makeXlsx([{ name: "s", rows: [["a"]] }]));
    return "visitors-2024.xlsx";
  } catch {
    return "visitors-2024.csv";
  }
}

/** The demo's files by name: the museum's annual report (PDF) and its monthly visitors. */
export function demoFiles(): Record<string, Uint8Array> {
  const sheet = demoSpreadsheetName();
  return {
    "annual-report-2023.pdf": makePdf("City Museum - Annual report 2023", [
      "The City Museum reopened its west wing in March 2023.",
      "In 2023 the museum welcomed 182,000 visitors, a record at the time.",
      "School visits made up a fifth of all visits.",
      "The museum shop sold 14,000 catalogues.",
    ]),
    [sheet]: sheet.endsWith(".xlsx")
      ? makeXlsx([
          { name: "Visitors 2024", rows: [["Month", "Visitors"], ...MONTHS] },
          { name: "Notes", rows: [["Source"], ["Ticket office counts, City Museum"]] },
        ])
      : new TextEncoder().encode(
          ["Month,Visitors", ...MONTHS.map(([m, v]) => `${m},${v}`)].join("\n") + "\n",
        ),
  };
}

/** The expected answer of the demo. */
export const DEMO_ANSWER =
  "32500 more visitors (182000 in 2023, 214500 in 2024); busiest month: August";

const filler = (topic: string, n: number) =>
  Array.from(
    { length: n },
    (_, i) =>
      `<p>${topic} note ${i + 1}: the tourism office publishes figures every spring, counted at the ticket offices of each venue and checked against the city's own survey of visitors.</p>`,
  ).join("\n");

/** The city tourism office's site (the search server indexes its HTML pages). */
export function demoSite(): { pages: Record<string, SitePage>; snapshots: ArchivedSnapshot[] } {
  return {
    pages: {
      "/tourism": {
        body: `<!doctype html><html><head><title>City Tourism Office</title></head><body><h1>City Tourism Office</h1><p>Figures on <a href="/tourism/museums-2024">museum visitors in 2024</a> and <a href="/tourism/hotels">hotel stays</a>.</p></body></html>`,
      },
      "/tourism/museums-2024": {
        body: `<!doctype html><html><head><title>Museum visitors 2024 - City Tourism Office</title></head><body><nav><a href="/tourism">Tourism Office</a></nav><main><h1>Museum visitors in 2024</h1>${filler("Method", 30)}<h2>Results by venue</h2><table><tr><th>Venue</th><th>Visitors 2024</th></tr><tr><td>Botanical Garden</td><td>301,000</td></tr><tr><td>City Museum</td><td>214,500</td></tr><tr><td>Science Hall</td><td>98,700</td></tr></table><p>The City Museum's figure includes the summer exhibition.</p></main></body></html>`,
      },
      "/tourism/hotels": {
        body: `<!doctype html><html><head><title>Hotel stays - City Tourism Office</title></head><body><h1>Hotel stays</h1><p>Hotels counted 1.2 million nights in 2024.</p></body></html>`,
      },
    },
    snapshots: [],
  };
}

/** The messages of a request after the task, without plan follow-ups and last-action notes. */
function observations(req: ChatRequest): string[] {
  const first = req.messages.findIndex((m) => m.role === "user");
  return req.messages
    .slice(first + 1)
    .filter(
      (m) => m.role === "user" && m.content !== PLAN_FOLLOW_UP && !LAST_ACTION_NOTE.test(m.content),
    )
    .map((m) => m.content);
}

/** A scripted action reply: a thought and a JavaScript block. */
export const code = (thought: string, js: string): string =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${js}\n\`\`\`<end_action>`;

const PLAN = (steps: string[]) =>
  `## Facts survey\n### 1. Facts given in the task\nThe task and its files.\n### 2. Facts to look up\nWhat the task asks.\n### 3. Facts to derive\nThe answer.\n\n## Plan\n${steps.map((s, i) => `${i + 1}. ${s}`).join("\n")}\n<end_plan>`;

/** What the assistant's script sees of a request. */
export interface AssistantTurn {
  /** The assistant's task (its first user message). */
  task: string;
  /** The observations so far. */
  seen: string[];
  /** The last observation ("" before the first). */
  last: string;
  /** The demo spreadsheet's file name. */
  sheet: string;
}

/** The first user message of a request (an agent's task). */
function taskOf(req: ChatRequest): string {
  return req.messages.find((m) => m.role === "user")?.content ?? "";
}

/** The demo task's assistant: reads both files and asks the web agent at once, then computes. */
export function demoAssistantScript({ seen, last, sheet }: AssistantTurn): string {
  if (seen.length === 0)
    return code(
      "I read both files and ask the web agent for the 2024 figure, all at once.",
      [
        "const [report, months, web] = await Promise.all([",
        '  inspect_file("annual-report-2023.pdf", "How many visitors did the City Museum have in 2023?"),',
        `  inspect_file(${JSON.stringify(sheet)}, "Which month of 2024 had the most visitors?"),`,
        '  web_search_agent("How many visitors did the City Museum have in 2024, according to the city tourism office\'s website? Give the exact number and the page address."),',
        "]);",
        'console.log("Report:", report);',
        'console.log("Spreadsheet:", months);',
        'console.log("Web:", web);',
      ].join("\n"),
    );
  const has2023 = /Report: 1\. Short answer: 182000/.test(last);
  const has2024 = /214,500/.test(last);
  const month = /Spreadsheet: 1\. Short answer: August/.test(last);
  return has2023 && has2024 && month
    ? code(
        "2023: 182000 (report), 2024: 214500 (tourism office), busiest month August. I compute the growth in code.",
        "const growth = 214500 - 182000;\nfinal_answer(`${growth} more visitors (182000 in 2023, 214500 in 2024); busiest month: August`);",
      )
    : code(
        "Something is missing from the observations.",
        `final_answer(${JSON.stringify(`incomplete: 2023 ${has2023 ? "found" : "missing"}, 2024 ${has2024 ? "found" : "missing"}, month ${month ? "found" : "missing"}`)});`,
      );
}

/**
 * The demo's scripted model, for a site at `origin`: the web agent, the plans, the inspector's
 * answers about the demo files, and the assistant (`assistant`: the demo task's script by default;
 * the GAIA mini set brings its own). `other` answers any other request (e.g. the eval's direct
 * baseline), undefined for none.
 */
export function assistantDemoResponder(
  origin: string,
  assistant: (turn: AssistantTurn) => string = demoAssistantScript,
  other?: (req: ChatRequest) => ScriptedReply | undefined,
): Responder {
  const page = `${origin}/tourism/museums-2024`;
  const sheet = demoSpreadsheetName();
  return async (req) => {
    const system = req.messages.find((m) => m.role === "system")?.content ?? "";
    const user = req.messages
      .filter((m) => m.role === "user")
      .map((m) => m.content)
      .join("\n");
    const seen = observations(req);
    const last = seen.at(-1) ?? "";
    const reply = (rule: string, r: ScriptedReply) => namedReply(r, rule, seen.length);
    if (system.includes("Facts survey"))
      return reply(
        system.startsWith("You are web_search") ? "plan:web_search" : "plan:assistant",
        PLAN(["Read the files.", "Find the 2024 figure on the web.", "Compute the difference."]),
      );
    if (system.startsWith("You read a file for another agent")) {
      if (user.includes("annual-report-2023.pdf") && user.includes("182,000 visitors"))
        return reply(
          "inspector:pdf",
          '1. Short answer: 182000\n2. Evidence: "In 2023 the museum welcomed 182,000 visitors."',
        );
      if (user.includes(sheet) && /August\D+31200/.test(user))
        return reply(
          "inspector:xlsx",
          "1. Short answer: August (31200 visitors)\n2. Evidence: the row August | 31200 is the largest.",
        );
      return reply("inspector:unread", "1. Short answer: not in the file\n2. Evidence: none.");
    }
    if (system.startsWith("You are the web search agent")) {
      if (/no steps left/.test(user)) return reply("web_search:final", "I could not find it.");
      switch (seen.length) {
        case 0:
          return reply(
            "web_search",
            code(
              "I search the web for the figure.",
              `console.log(await web_search("City Museum visitors 2024 tourism office"));`,
            ),
          );
        case 1:
          return reply(
            "web_search",
            last.includes(page)
              ? code(
                  "The tourism office's page on museum visitors should have it; I look for the museum on it.",
                  `await visit_page(${JSON.stringify(page)});\nconsole.log(await find_in_page("City Museum"));`,
                )
              : code(
                  "The search found nothing useful.",
                  `final_answer("No page with the figure was found.");`,
                ),
          );
        default:
          return reply(
            "web_search",
            /City Museum \| 214,500/.test(last)
              ? code(
                  "The table gives 214,500 visitors for the City Museum in 2024.",
                  `final_answer(${JSON.stringify(`The City Museum had 214,500 visitors in 2024. Source: ${page}`)});`,
                )
              : code(
                  "The page does not show the figure.",
                  `final_answer("The page did not show the figure.");`,
                ),
          );
      }
    }
    if (system.startsWith("You are the general assistant")) {
      if (/no steps left/.test(user)) return reply("assistant:final", "unknown");
      return reply("assistant", assistant({ task: taskOf(req), seen, last, sheet }));
    }
    if (other) {
      const answer = other(req);
      if (answer !== undefined) return reply("other", answer);
    }
    return {
      status: 500,
      body: JSON.stringify({ error: { message: `no scripted reply for: ${system.slice(0, 80)}` } }),
    };
  };
}
