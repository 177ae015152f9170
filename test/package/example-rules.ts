import { action } from "../../src/apps/qa/demo-trajectories.ts";
import type { TrajectoryRule } from "../../src/testing/scripted-openai-server.ts";

/** The tasks of examples/*.mjs, as the scripted model recognises them. */
export const EXAMPLE_TASKS = {
  hello: "What is 17 * 23?",
  tool: "Which is longer: the name of the capital of Japan or of Peru?",
  team: "How many years passed between the completion of the Eiffel Tower",
  eiffel: "When was the Eiffel Tower completed?",
  empire: "When did construction of the Empire State Building begin?",
  ollama: "How many seconds are there in a leap year?",
} as const;

/** What each example prints when the model acts as scripted here. */
export const EXAMPLE_ANSWERS = {
  hello: "391",
  tool: "Tokyo, the capital of Japan",
  team: "41",
  ollama: "31622400",
} as const;

/**
 * Scripted model replies for the examples: each one calls its tools the way a model following the
 * prompt would, so the tools, the nesting and the sandbox run for real.
 */
export function exampleRules(): TrajectoryRule[] {
  return [
    {
      name: "hello",
      task: EXAMPLE_TASKS.hello,
      steps: [action("I multiply in code.", "final_answer(17 * 23);")],
    },
    {
      name: "tool",
      task: EXAMPLE_TASKS.tool,
      steps: [
        action(
          "I look up both capitals at once.",
          'const [japan, peru] = await Promise.all([capital_of("Japan"), capital_of("Peru")]);\nconsole.log(japan, peru);',
        ),
        action(
          "Tokyo and Lima: I compare their lengths in code.",
          'final_answer("Tokyo".length > "Lima".length ? "Tokyo, the capital of Japan" : "Lima, the capital of Peru");',
        ),
      ],
    },
    {
      name: "team:writer",
      task: EXAMPLE_TASKS.team,
      steps: [
        action(
          "I ask the researcher both dates at once.",
          `const [a, b] = await Promise.all([\n  researcher_agent("${EXAMPLE_TASKS.eiffel}"),\n  researcher_agent("${EXAMPLE_TASKS.empire}"),\n]);\nconsole.log(a);\nconsole.log(b);`,
        ),
        action("1889 and 1930: the difference in code.", "final_answer(1930 - 1889);"),
      ],
    },
    {
      name: "team:eiffel",
      task: EXAMPLE_TASKS.eiffel,
      steps: [
        action("I look it up.", 'console.log(await look_up("Eiffel Tower"));'),
        action("The notes say 1889.", 'final_answer("The Eiffel Tower was completed in 1889.");'),
      ],
    },
    {
      name: "team:empire",
      task: EXAMPLE_TASKS.empire,
      steps: [
        action("I look it up.", 'console.log(await look_up("Empire State Building"));'),
        action("The notes say 1930.", 'final_answer("Construction began in 1930.");'),
      ],
    },
    {
      name: "ollama",
      task: EXAMPLE_TASKS.ollama,
      steps: [action("366 days of 86400 seconds.", "final_answer(366 * 24 * 60 * 60);")],
    },
  ];
}
