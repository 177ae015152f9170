import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { AIMessage, type BaseMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { chat } from "../src/apps/chat/app.ts";
import { CHAT_DEMO_DIR } from "../src/apps/chat/demo.ts";
import {
  CHAT_AGENT_MARKER,
  DEMO_FILES,
  SUMMARIZER_MARKER,
  newMessageOf,
  scriptedSummary,
} from "../src/apps/chat/demo-trajectories.ts";
import { action } from "../src/apps/qa/demo-trajectories.ts";
import {
  type ChatRequest,
  type LoggedRequest,
  ScriptedOpenAIServer,
} from "../src/testing/scripted-openai-server.ts";
import { type BenchSection, fmt } from "./lib.ts";
import { qwenTokens, renderQwenChat } from "./qwen-tokens.ts";

/**
 * Chat memory (issue 15): prompt tokens per round over a 30-round scripted conversation about the
 * demo files, with the whole history verbatim vs round-based retention (the last N rounds
 * verbatim, older ones folded into a summary by one model call per round that leaves the window).
 * The real chat app runs (lifecycle, attach, search_files over the real index, checkpoints); the
 * model is scripted: each round one search and a ~60-word cited reply; the summarizer keeps the
 * previous summary plus one line per exchange within its word budget (scriptedSummary). Tokens
 * are exact Qwen2.5 tokens of the chat-template rendering of each request.
 */

const ROUNDS = 30;
const TOPICS = [
  ["main span length", "the main span", "503 metres long", `${DEMO_FILES.report}, p. 1`],
  [
    "maintenance cost 2019",
    "the 2019 repainting",
    "12.4 million dollars",
    `${DEMO_FILES.report}, p. 2`,
  ],
  [
    "vehicles per day traffic",
    "daily traffic",
    "160,000 vehicles per day",
    `${DEMO_FILES.report}, p. 3`,
  ],
  [
    "maintenance budget 2025",
    "the 2025 budget",
    "14.5 million dollars",
    `${DEMO_FILES.budget} § Budget`,
  ],
  ["engineers staff", "the staff", "17 engineers and 6 painters", `${DEMO_FILES.budget} § Staff`],
  [
    "north arch repainting schedule",
    "the repainting schedule",
    "May 2025, for 30 weeks",
    `${DEMO_FILES.budget} § Schedule`,
  ],
] as const;

/** The user's message of round `n` (1-based): a question about one topic, worded per round. */
function message(n: number): string {
  const [, what] = TOPICS[(n - 1) % TOPICS.length];
  return `Question ${n}: looking at the documents again, what exactly do they say about ${what}, and how does that compare with what we discussed before?`;
}

function reply(n: number): string {
  const [, what, fact, cite] = TOPICS[(n - 1) % TOPICS.length];
  return (
    `About ${what}: the documents say ${fact} [${cite}]. ` +
    `This matches what we discussed earlier in the conversation; nothing in the other file contradicts it, ` +
    `and the figure is stated once, without revisions or footnotes, so I would quote it as it stands (round ${n}).`
  );
}

function responder(req: ChatRequest) {
  const system = req.messages.find((m) => m.role === "system")?.content ?? "";
  if (system.includes(SUMMARIZER_MARKER)) return { content: scriptedSummary(req) };
  if (!system.includes(CHAT_AGENT_MARKER)) return { status: 500 };
  const n = Number(/^Question (\d+):/.exec(newMessageOf(req))?.[1]);
  const [query] = TOPICS[(n - 1) % TOPICS.length];
  const step = req.messages.filter((m) => m.role === "user").length - 1;
  return {
    content:
      step === 0
        ? action(
            "I search the files.",
            `console.log(await search_files(${JSON.stringify(query)}));`,
          )
        : action("I answer with the citation.", `final_answer(${JSON.stringify(reply(n))});`),
  };
}

const asMessages = (r: LoggedRequest): BaseMessage[] =>
  r.request.messages.map((m) =>
    m.role === "system"
      ? new SystemMessage(m.content)
      : m.role === "assistant"
        ? new AIMessage(m.content)
        : new HumanMessage(m.content),
  );
const tokens = (r: LoggedRequest) => qwenTokens(renderQwenChat(asMessages(r))).length;

interface RoundCost {
  /** Prompt tokens of the round's chat-agent calls (each carries the round's history view). */
  agent: number;
  /** Prompt + completion tokens of the summary call made this round (0 if none). */
  summary: number;
}

/** Runs the conversation with `keepRounds`; returns each round's costs. */
async function converse(keepRounds: number, summaryBatch: number): Promise<RoundCost[]> {
  const model = await ScriptedOpenAIServer.start({ responder });
  const home = mkdtempSync(join(tmpdir(), "codehop-bench-chat-"));
  const costs: RoundCost[] = [];
  try {
    const config = { home, baseURL: model.baseURL, apiKey: "x", model: "scripted", models: {} };
    for (let n = 1; n <= ROUNDS; n++) {
      const before = model.requests.length;
      await chat("bench", message(n), {
        config,
        settings: { keepRounds, summaryBatch },
        files:
          n === 1
            ? [resolve(CHAT_DEMO_DIR, DEMO_FILES.report), resolve(CHAT_DEMO_DIR, DEMO_FILES.budget)]
            : [],
      });
      const made = model.requests.slice(before);
      const isSummary = (r: LoggedRequest) =>
        r.request.messages[0].content.includes(SUMMARIZER_MARKER);
      const summary = made.filter(isSummary);
      costs.push({
        agent: made.filter((r) => !isSummary(r)).reduce((t, r) => t + tokens(r), 0),
        summary: summary.reduce((t, r) => t + tokens(r) + qwenTokens(r.content ?? "").length, 0),
      });
    }
  } finally {
    await model.close();
    rmSync(home, { recursive: true, force: true });
  }
  return costs;
}

export default async function chatBench(): Promise<BenchSection[]> {
  const configs = [
    { name: "full", keep: 1_000, batch: 1 },
    { name: "keep 4 / batch 1", keep: 4, batch: 1 },
    { name: "keep 4 / batch 4 (default)", keep: 4, batch: 4 },
    { name: "keep 2 / batch 2", keep: 2, batch: 2 },
  ];
  const runs: RoundCost[][] = [];
  for (const c of configs) runs.push(await converse(c.keep, c.batch));
  const shown = [1, 2, 5, 8, 9, 10, 15, 20, 25, 30];
  const rows: (string | number)[][] = shown.map((n) => [
    n,
    ...runs.flatMap((costs, i) =>
      i === 0 ? [costs[n - 1].agent] : [costs[n - 1].agent, costs[n - 1].summary || "—"],
    ),
  ]);
  const sum = (costs: RoundCost[], key: keyof RoundCost) => costs.reduce((t, c) => t + c[key], 0);
  rows.push([
    "all 30 (sum)",
    ...runs.flatMap((costs, i) =>
      i === 0 ? [sum(costs, "agent")] : [sum(costs, "agent"), sum(costs, "summary")],
    ),
  ]);
  const total = (costs: RoundCost[]) => sum(costs, "agent") + sum(costs, "summary");
  const calls = (costs: RoundCost[]) => costs.filter((c) => c.summary > 0).length;
  const mean = (costs: RoundCost[]) => sum(costs.slice(10), "agent") / (ROUNDS - 10);
  const full = runs[0];
  return [
    {
      title: "Chat: prompt tokens per round over a 30-round conversation",
      description:
        "Prompt tokens (exact Qwen2.5 tokens, chat template) of the chat agent's model calls in each round (two: a search, then the reply) of a " +
        "30-round scripted conversation about the two demo files (each round: one search_files call, a ~60-word cited " +
        "reply), with the whole history verbatim vs round-based retention: the last `keepRounds` rounds verbatim, older " +
        "ones folded into a rolling summary (at most 200 words) by one model call per `summaryBatch` rounds. `summary` is " +
        "the prompt + completion tokens of the summary call a round made. The last row sums the whole conversation.",
      columns: [
        "round",
        "full: agent",
        "keep 4/batch 1: agent",
        "summary",
        "keep 4/batch 4: agent",
        "summary",
        "keep 2/batch 2: agent",
        "summary",
      ],
      rows,
      verdicts: [
        ...configs
          .slice(1)
          .map(
            (c, i) =>
              `${c.name}: mean agent prompt tokens per round over rounds 11-30 = ${fmt(mean(runs[i + 1]) / mean(full))}x full ` +
              `(${Math.round(mean(runs[i + 1]))} vs ${Math.round(mean(full))} tokens), round 30 = ${runs[i + 1][ROUNDS - 1].agent} vs ${full[ROUNDS - 1].agent}; ` +
              `${calls(runs[i + 1])} summary calls; all tokens of the 30 rounds = ${fmt(total(runs[i + 1]) / total(full))}x full`,
          ),
        `full history grows ${Math.round((full[ROUNDS - 1].agent - full[9].agent) / 20)} tokens per round (rounds 10→30); with retention the view is bounded by the window and the summary's word budget`,
      ],
    },
  ];
}
