import { z } from "zod";
import { action } from "../src/apps/qa/demo-trajectories.ts";
import { pageSearchTask } from "../src/apps/qa/team.ts";
import type { KnowledgeSource } from "../src/store/types.ts";
import { defineTool, type CodeTool } from "../src/tools/define-tool.ts";
import { createRetrievePassagesTool } from "../src/apps/qa/tools/retrieve-passages.ts";
import { createSearchWikipediaTool } from "../src/apps/qa/tools/search-wikipedia.ts";

/**
 * Ten-step trajectories of the three reference-app agents for the history benchmark, written the
 * way a small instruction model writes (short thoughts, one to three tool calls per action, two
 * failed actions it then fixes). Each agent runs with its real prompt folder; search_wikipedia and
 * retrieve_passages are the real tools over the demo corpus, so observation sizes are the app's.
 * Only the sub-agent tools (whose answers are single sentences) return recorded answers.
 */
export interface HistoryTrajectory {
  /** Agent (= prompt folder under prompts/). */
  agent: "manager" | "wikipedia_search" | "page_search";
  task: string;
  replies: string[];
  tools(source: KnowledgeSource): CodeTool<any>[];
}

/** A sub-agent tool answering from a table of recorded answers (first key found in the question). */
function recordedAgentTool(
  name: string,
  parameters: z.ZodObject<any>,
  answers: Record<string, string>,
): CodeTool<any> {
  return defineTool({
    name,
    description: "Asks a sub-agent; returns its short answer with the source page(s).",
    parameters,
    returns: "string",
    invoke: async (args) => {
      const asked = Object.values(args).join(" ").toLowerCase();
      const key = Object.keys(answers).find((k) => asked.includes(k));
      if (!key) throw new Error(`no recorded answer for ${JSON.stringify(args)}`);
      return answers[key];
    },
  });
}

const WIKI_ANSWERS = {
  "eiffel tower completed":
    "The Eiffel Tower was completed in March 1889 (construction 1887–1889), for the Exposition Universelle. Source: Eiffel Tower.",
  "tokyo tower completed":
    "Tokyo Tower was completed in 1958 and opened to the public on 23 December 1958. Source: Tokyo Tower.",
  "empire state building completed":
    "The Empire State Building was completed in 1931: construction began in March 1930 and it opened on 1 May 1931. Source: Empire State Building.",
  "tokyo tower height":
    "Tokyo Tower is 332.9 metres tall, taller than the Eiffel Tower. Source: Tokyo Tower.",
  "eiffel tower height":
    "The Eiffel Tower was 300 metres tall at completion (312 m with its flagpole); antennas later brought it to about 330 m. Source: Eiffel Tower.",
};

const manager: HistoryTrajectory = {
  agent: "manager",
  task: "Of the Eiffel Tower, Tokyo Tower and the Empire State Building, which was completed first, and how many years separate each completion from the next?",
  tools: () => [
    recordedAgentTool(
      "wikipedia_search_agent",
      z.object({ query: z.string().describe("a complete, self-contained question") }),
      WIKI_ANSWERS,
    ),
  ],
  replies: [
    action(
      "I need the completion year of each building. I ask the three questions at the same time.",
      `const [eiffel, tokyo, empire] = await Promise.all([
  wikipedia_search_agent("When was the Eiffel Tower completed?"),
  wikipedia_search_agent("When was Tokyo Tower completed?"),
  wikipedia_search_agent("When was the Empire State Building completed?"),
]);
console.log("Eiffel:", eiffel);
console.log("Tokyo:", tokyo);
console.log("Empire:", empire);`,
    ),
    action(
      "The years are 1889, 1958 and 1931. I sort them in code.",
      `const years = { "Eiffel Tower": 1889, "Tokyo Tower": 1958, "Empire State Building": 1931 };
const order = Object.entries(years).sort((a, b) => a[1] - b[1]);
console.log(order);`,
    ),
    action(
      "Now I compute the gap between consecutive completions.",
      `for name, year in order:
    print(name, year)`,
    ),
    action(
      "That was Python syntax. I write it in JavaScript.",
      `const gaps = [];
for (let i = 1; i < order.length; i++) gaps.push([order[i - 1][0], order[i][0], order[i][1] - order[i - 1][1]]);
console.log(gaps);`,
    ),
    action(
      "The Empire State Building answer mixes start and opening dates. I check its completion year once more.",
      `const check = await wikipedia_search_agent("In which year was the Empire State Building completed?");
console.log(check);`,
    ),
    action(
      "1931 is confirmed. I also check the Tokyo Tower year, because it opened in December.",
      `const tokyoCheck = await wikipedia_search_agent("In which year was Tokyo Tower completed?");
console.log(tokyoCheck);`,
    ),
    action(
      "Both are confirmed. I also want the heights, to add context to the answer.",
      `const heights = await wikipedia_search("Tokyo Tower height");
console.log(heights);`,
    ),
    action(
      "search_wikipedia is not one of my tools; I ask the wikipedia_search_agent instead.",
      `const [tokyoHeight, eiffelHeight] = await Promise.all([
  wikipedia_search_agent("What is Tokyo Tower height?"),
  wikipedia_search_agent("What is the Eiffel Tower height?"),
]);
console.log(tokyoHeight);
console.log(eiffelHeight);`,
    ),
    action(
      "I have everything. I build the answer text in code from the computed gaps.",
      `const text = order.map(([n, y]) => n + " (" + y + ")").join(", then ") + ". Gaps: " + gaps.map(([a, b, d]) => a + " to " + b + ": " + d + " years").join("; ") + ".";
console.log(text);`,
    ),
    action("The text is correct.", `final_answer(text);`),
  ],
};

const PAGE_ANSWERS = {
  "completion date":
    "From the History section: construction of Tokyo Tower was completed in 1958; it opened on 23 December 1958.",
  "height in metres":
    "From the Design section: Tokyo Tower is 332.9 metres (1,092 ft) tall, 13 metres taller than the Eiffel Tower.",
  "inspired by the eiffel tower":
    "From the Design section: its lattice design was inspired by the Eiffel Tower; it is painted white and international orange for air safety.",
  "construction started":
    "From the History section: construction began in June 1957 and took about a year and a half.",
};

const wikipediaSearch: HistoryTrajectory = {
  agent: "wikipedia_search",
  task: "When was Tokyo Tower completed, and how tall is it?",
  tools: (source) => [
    createSearchWikipediaTool(source),
    recordedAgentTool(
      "search_info",
      z.object({
        query: z.string().describe("what to look for in the page"),
        page: z.string().describe("exact title of the Wikipedia page"),
      }),
      PAGE_ANSWERS,
    ),
  ],
  replies: [
    action(
      "I search Wikipedia for Tokyo Tower.",
      `const results = await search_wikipedia("Tokyo Tower");
console.log(results);`,
    ),
    action(
      'The page is "Tokyo Tower". I ask for the completion date inside it.',
      `const done = await search_info("completion date", "Tokyo Tower");
console.log(done);`,
    ),
    action(
      "Now the height.",
      `const height = await search_info("height in metres");\nconsole.log(height);`,
    ),
    action(
      "search_info needs the page title too.",
      `const height = await search_info("height in metres", "Tokyo Tower");
console.log(height);`,
    ),
    action(
      "The answer compares it with the Eiffel Tower. I search for that comparison.",
      `const more = await search_wikipedia("Tokyo Tower Eiffel Tower comparison");
console.log(more);`,
    ),
    action(
      "I check what the Tokyo Tower page says about the Eiffel Tower.",
      `const inspired = await search_info("inspired by the Eiffel Tower", "Tokyo Tower");
console.log(inspired);`,
    ),
    action(
      "I look at Tokyo Skytree too, to be sure which tower the question means.",
      `const sky = search_wikipedia("Tokyo Skytree");
console.log(sky.split("\\n").slice(0, 3).join("\\n"));`,
    ),
    action(
      "I forgot await.",
      `const sky = await search_wikipedia("Tokyo Skytree");
console.log(sky.split("\\n").slice(0, 3).join("\\n"));`,
    ),
    action(
      "Skytree is a different tower. I check when construction of Tokyo Tower started.",
      `const started = await search_info("construction started", "Tokyo Tower");
console.log(started);`,
    ),
    action(
      "I have the completion year and the height.",
      `final_answer("Tokyo Tower was completed in 1958 (construction June 1957 – 1958; opened 23 December 1958) and is 332.9 m tall. Source: Tokyo Tower.");`,
    ),
  ],
};

const pageSearch: HistoryTrajectory = {
  agent: "page_search",
  task: pageSearchTask("completion date and height", "Eiffel Tower"),
  tools: (source) => [createRetrievePassagesTool(source, "Eiffel Tower")],
  replies: [
    action(
      "I retrieve the passages about the completion date.",
      `const p1 = await retrieve_passages("completion date 1889");
console.log(p1);`,
    ),
    action(
      "Now the height.",
      `const p2 = await retrieve_passages("height metres tall");
console.log(p2);`,
    ),
    action(
      "I keep only the passages that mention metres.",
      `const tall = p2.filter((p) => p.includes("metres"));
console.log(tall);`,
    ),
    action(
      "retrieve_passages returns one string, so I split it into lines.",
      `const lines = p2.split("\\n").filter((l) => /metres|m\\b/.test(l));
console.log(lines.join("\\n"));`,
    ),
    action(
      "I look for the antenna height today.",
      `const p3 = await retrieve_passages("antenna height today");
console.log(p3);`,
    ),
    action(
      "I check the construction period.",
      `const p4 = await retrieve_passages("construction began 1887 workers";
console.log(p4);`,
    ),
    action(
      "I missed a closing parenthesis.",
      `const p4 = await retrieve_passages("construction began 1887 workers");
console.log(p4);`,
    ),
    action(
      "I check whether it was the tallest structure.",
      `const p5 = await retrieve_passages("tallest man-made structure in the world");
console.log(p5);`,
    ),
    action(
      "I check the flagpole height once more.",
      `const p6 = await retrieve_passages("flagpole 312 m");
console.log(p6);`,
    ),
    action(
      "I have the date and the heights.",
      `final_answer("The Eiffel Tower was completed in March 1889 (construction 1887–1889). It was 300 m tall at completion (312 m with its flagpole); with antennas it is about 330 m today.");`,
    ),
  ],
};

/** The three trajectories, manager first. */
export const HISTORY_TRAJECTORIES: readonly HistoryTrajectory[] = [
  manager,
  wikipediaSearch,
  pageSearch,
];
