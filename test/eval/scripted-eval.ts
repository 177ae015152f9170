import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readEnv, type CodehopEnv } from "../../src/config/env.ts";
import { runEval, type RunEvalOptions } from "../../src/eval/runner.ts";
import type { QuestionResult } from "../../src/eval/types.ts";
import {
  ScriptedOpenAIServer,
  type Responder,
  type ScriptedReply,
  type TrajectoryRule,
} from "../../src/testing/scripted-openai-server.ts";

/** The eval dataset fixtures (the same three questions in every format). */
export const EVAL_FIXTURES = join(import.meta.dirname, "../fixtures/eval");
/** The fixture questions as plain JSONL, ids p1, p2, p3. */
export const PLAIN_DATASET = join(EVAL_FIXTURES, "plain.jsonl");

/** A new temporary directory for a test file's output directories. */
export const evalTmpDir = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));

/**
 * Runs an evaluation into `out` with `env`, silently: by default the direct system on the plain
 * fixture; `options` override any of that (dataset, systems, log ...).
 */
export function runScripted(out: string, env: CodehopEnv, options: Partial<RunEvalOptions> = {}) {
  return runEval({
    dataset: PLAIN_DATASET,
    systems: ["direct"],
    out,
    env,
    log: () => undefined,
    ...options,
  });
}

/**
 * A stored result: question `q${i}` answered correctly by direct (thread `run:direct:q${i}`),
 * without transcripts; `extra` overrides any field.
 */
export function syntheticResult(
  i: number,
  extra: Partial<QuestionResult> = {},
): Omit<QuestionResult, "transcripts"> {
  return {
    system: "direct",
    questionId: `q${i}`,
    index: i,
    question: `Question ${i}?`,
    answers: ["a"],
    prediction: "a",
    em: 1,
    f1: 1,
    coverEm: 1,
    modelCalls: 1,
    inputTokens: 1,
    outputTokens: 1,
    cachedTokens: 0,
    usage: {},
    steps: 1,
    wallMs: 1,
    threadId: `run:direct:q${i}`,
    sources: [],
    finishedAt: "",
    ...extra,
  };
}

/**
 * A finished report of `n` {@link syntheticResult}s (question `question(i)`, thread
 * `${runId}:direct:q${i}` unless `threadId` says otherwise), for report rendering tests.
 */
export function syntheticReport(
  n: number,
  options: {
    runId: string;
    question: (i: number) => string;
    threadId?: (i: number) => string;
  },
): any {
  const results = Array.from({ length: n }, (_, i) =>
    syntheticResult(i, {
      question: options.question(i),
      threadId: options.threadId?.(i) ?? `${options.runId}:direct:q${i}`,
    }),
  );
  return {
    runId: options.runId,
    generatedAt: "",
    partial: false,
    progress: { expected: n, done: n },
    dataset: { path: "d", format: "jsonl", questions: n, bad: [] },
    config: {},
    systems: [],
    results,
  };
}

/** Runs `body` with a scripted server answering with `responder`, closed afterwards. */
export async function withScriptedServer<T>(
  responder: Responder,
  body: (server: ScriptedOpenAIServer) => Promise<T>,
): Promise<T> {
  const server = await ScriptedOpenAIServer.start({ responder });
  try {
    return await body(server);
  } finally {
    await server.close();
  }
}

/**
 * Scripted replies shared by the eval tests. Each question of the fixtures (same three questions
 * in every format) gets a fixed answer per system, with fixed usage, so the expected report
 * figures can be computed by hand.
 */
export const Q1 = "Which country was the architect of the Blue Pavilion born in?";
export const Q2 = "How tall is the tower in the city where Marek Zelny was born?";
export const Q3 = "Are the Blue Pavilion and the Red Tower in the same city?";

const reply = (content: string, prompt = 100, completion = 5, delayMs?: number): ScriptedReply => ({
  content,
  delayMs,
  usage: { prompt_tokens: prompt, completion_tokens: completion },
});

/**
 * direct: Q1 right ("Norway"), Q2 verbose ("The tower is 40 metres tall." → EM 0, F1 4/7, cover 1),
 * Q3 wrong ("Yes" vs "no" → all 0). 100 input + 5 output tokens per call.
 */
export function directRules(delayMs?: number): TrajectoryRule[] {
  const sys = "without looking anything up";
  return [
    { name: "direct:q1", system: sys, task: Q1, steps: [reply("Norway", 100, 5, delayMs)] },
    {
      name: "direct:q2",
      system: sys,
      task: Q2,
      steps: [reply("The tower is 40 metres tall.", 100, 5, delayMs)],
    },
    { name: "direct:q3", system: sys, task: Q3, steps: [reply("Yes", 100, 5, delayMs)] },
  ];
}

/** Environment pointing at the scripted server. */
export function scriptedEnv(baseURL: string, extra: Record<string, string> = {}): CodehopEnv {
  return readEnv({
    OPENAI_BASE_URL: baseURL,
    OPENAI_API_KEY: "test",
    CODEHOP_MODEL: "scripted-model",
    CODEHOP_MAX_RETRIES: "0",
    ...extra,
  });
}

/** {@link scriptedEnv} with the LLM judge "judge-model" served at `judgeURL`. */
export function judgedEnv(baseURL: string, judgeURL: string): CodehopEnv {
  return scriptedEnv(baseURL, {
    CODEHOP_JUDGE_MODEL: "judge-model",
    CODEHOP_JUDGE_BASE_URL: judgeURL,
  });
}

/**
 * rag: Q1 "Norway" and Q2 "40 metres" right, Q3 "Yes" wrong → EM = F1 = cover-EM = 2/3.
 * 300 input + 4 output tokens per call.
 */
export function ragRules(): TrajectoryRule[] {
  const sys = "using the passages you are given";
  return [
    { name: "rag:q1", system: sys, task: Q1, steps: [reply("Answer: Norway", 300, 4)] },
    { name: "rag:q2", system: sys, task: Q2, steps: [reply("40 metres", 300, 4)] },
    { name: "rag:q3", system: sys, task: Q3, steps: [reply("Yes", 300, 4)] },
  ];
}

/** The fixtures' paragraphs as corpus documents (for the configured-corpus case). */
export const FIXTURE_PAGES = [
  {
    title: "Blue Pavilion",
    text: "The Blue Pavilion is an exhibition hall in Lisbon. It was designed by the architect Ingrid Halvorsen and opened in 1998.",
  },
  {
    title: "Ingrid Halvorsen",
    text: "Ingrid Halvorsen (born 1961 in Bergen, Norway) is an architect. She is known for timber buildings.",
  },
  {
    title: "Red Tower",
    text: "The Red Tower is a 40-metre observation tower in Porto. It was completed in 1988.",
  },
  {
    title: "Marek Zelny",
    text: "Marek Zelny (born 1950 in Porto) is a painter. He moved to Prague in 1975.",
  },
];

const act = (thought: string, code: string) =>
  `Thought: ${thought}\nCode:\n\`\`\`js\n${code.trim()}\n\`\`\`<end_action>`;
const MANAGER = "You are the manager agent";
const WIKI = "You are the wikipedia_search agent";
const PAGE = "You are the page_search agent";

/** Sub-agent tasks of the agentic trajectories. */
export const SUBTASKS = {
  architect: "Who designed the Blue Pavilion, and where was that architect born?",
  zelny: "Where was Marek Zelny born?",
  tower: "How tall is the tower in Porto?",
  towerPage: "height of the Red Tower",
};

/**
 * agentic (manager → wikipedia_search → page_search over the fixtures' corpus):
 * Q1 "Norway" (EM 1), Q2 "40 metres" (EM 1, three levels deep), Q3 "No, they are in different
 * cities." (EM 0, F1 0 by the yes/no rule, cover-EM 1) → EM = F1 = 2/3, cover-EM = 1.
 * Calls per question: Q1 manager 2 + wiki 2; Q2 manager 3 + wiki 2 + wiki 3 + page 2; Q3 manager 1.
 */
export function agenticRules(): TrajectoryRule[] {
  return [
    {
      name: "manager:q1",
      system: MANAGER,
      task: Q1,
      steps: [
        act(
          "I ask who the architect is and where they were born.",
          `const a = await wikipedia_search_agent(${JSON.stringify(SUBTASKS.architect)});\nconsole.log(a);`,
        ),
        act("Ingrid Halvorsen was born in Bergen, Norway.", `final_answer("Norway");`),
      ],
    },
    {
      name: "wiki:architect",
      system: WIKI,
      task: SUBTASKS.architect,
      steps: [
        act(
          "I search for the pavilion.",
          `console.log(await search_wikipedia("Blue Pavilion architect"));`,
        ),
        act(
          "The architect is Ingrid Halvorsen, born in Bergen, Norway.",
          `final_answer("Ingrid Halvorsen designed it; she was born in Bergen, Norway.");`,
        ),
      ],
    },
    {
      name: "manager:q2",
      system: MANAGER,
      task: Q2,
      steps: [
        act(
          "First the city.",
          `console.log(await wikipedia_search_agent(${JSON.stringify(SUBTASKS.zelny)}));`,
        ),
        act(
          "He was born in Porto; now the tower there.",
          `console.log(await wikipedia_search_agent(${JSON.stringify(SUBTASKS.tower)}));`,
        ),
        act("The Red Tower is 40 metres tall.", `final_answer("40 metres");`),
      ],
    },
    {
      name: "wiki:zelny",
      system: WIKI,
      task: SUBTASKS.zelny,
      steps: [
        act("I search for him.", `console.log(await search_wikipedia("Marek Zelny"));`),
        act("Born in Porto.", `final_answer("Porto");`),
      ],
    },
    {
      name: "wiki:tower",
      system: WIKI,
      task: SUBTASKS.tower,
      steps: [
        act("I search for towers in Porto.", `console.log(await search_wikipedia("tower Porto"));`),
        act(
          "I look inside the Red Tower page.",
          `console.log(await search_info(${JSON.stringify(SUBTASKS.towerPage)}, "Red Tower"));`,
        ),
        act("It is 40 metres.", `final_answer("The Red Tower in Porto is 40 metres tall.");`),
      ],
    },
    {
      name: "page:tower",
      system: PAGE,
      task: SUBTASKS.towerPage,
      steps: [
        act(
          "I retrieve passages about its height.",
          `console.log(await retrieve_passages("metre tower height"));`,
        ),
        act(
          "A 40-metre observation tower.",
          `final_answer("40 metres (a 40-metre observation tower).");`,
        ),
      ],
    },
    {
      name: "manager:q3",
      system: MANAGER,
      task: Q3,
      steps: [
        act(
          "Lisbon vs Porto, known from the question context.",
          `final_answer("No, they are in different cities.");`,
        ),
      ],
    },
  ];
}
