import type { ScriptedReply, TrajectoryRule } from "../../testing/scripted-openai-server.ts";

/**
 * Recorded trajectories for the demo, the tests and the benchmarks: what a capable model would
 * write for three questions over the demo corpus (data/demo-corpus.jsonl), in the reference design's code-action (docs/code-agent.md)
 * format. Each rule answers one agent for one task: the agent is recognised by its system prompt
 * (every agent's prompts/<agent>/system.md starts with "You are the <agent> agent") and the task by
 * a substring of the first user message. Observations come from the real tools, so only the model
 * is scripted.
 */

/** The sentence that opens each agent's system prompt (see prompts/<agent>/system.md). */
export const AGENT_MARKERS = {
  manager: "You are the manager agent",
  wikipedia_search: "You are the wikipedia_search agent",
  page_search: "You are the page_search agent",
} as const;

/** The demo questions and the answers their trajectories end with. */
export const DEMO_QUESTIONS = {
  towers:
    "How many years after the Eiffel Tower was completed did construction of the Empire State Building begin?",
  plywood: "Does birch plywood float in ethanol?",
  ming: "Which Chinese dynasty ruled when Constantinople fell, and who was its emperor then?",
} as const;

/** Substrings that identify each sub-agent task (used by tests to count requests per call). */
export const DEMO_SUBTASKS = {
  eiffel: "When was the Eiffel Tower completed?",
  empire: "When did construction of the Empire State Building begin?",
  empirePage: "start of construction",
  plywood: "What is the density of birch plywood?",
  plywoodPage: "density of birch plywood",
  ethanol: "What is the density of ethanol?",
  constantinople: "When did Constantinople fall?",
  ming: "Who ruled China in 1453?",
  mingPage: "ruler of China in 1453",
} as const;

/** Expected final answers (what the scripted manager computes). */
export const DEMO_ANSWERS = {
  towers:
    "41 years: the Eiffel Tower was completed in 1889 and construction of the Empire State Building began in 1930.",
  plywood:
    "Yes. Birch plywood (about 680 kg/m³ = 0.68 g/cm³) is less dense than ethanol (0.789 g/cm³ at 20 °C), so it floats.",
  ming: "The Ming dynasty, under the Jingtai Emperor (Constantinople fell in 1453).",
} as const;

/** One code action in the reference design's format (docs/code-agent.md). */
export function action(thought: string, code: string): string {
  return `Thought: ${thought}\nCode:\n\`\`\`js\n${code.trim()}\n\`\`\`<end_action>`;
}

const manager = (name: string, question: string, steps: ScriptedReply[]): TrajectoryRule => ({
  name,
  system: AGENT_MARKERS.manager,
  task: question,
  steps,
});
const wiki = (name: string, task: string, steps: ScriptedReply[]): TrajectoryRule => ({
  name,
  system: AGENT_MARKERS.wikipedia_search,
  task,
  steps,
});
const page = (name: string, task: string, steps: ScriptedReply[]): TrajectoryRule => ({
  name,
  system: AGENT_MARKERS.page_search,
  task,
  steps,
});

/**
 * Eiffel Tower vs Empire State Building: the manager asks two questions one after the other in
 * ONE action (so a crash during the second call exercises the call journal), then computes
 * 1930 - 1889 in code. The Empire State question goes one level deeper (search_info → page agent).
 */
export function towersRules(): TrajectoryRule[] {
  return [
    manager("manager:towers", DEMO_QUESTIONS.towers, [
      action(
        "I need two dates: when the Eiffel Tower was completed and when construction of the Empire State Building began. I will ask the wikipedia_search_agent for each.",
        `
const eiffel = await wikipedia_search_agent("${DEMO_SUBTASKS.eiffel}");
console.log("Eiffel Tower:", eiffel);
const empire = await wikipedia_search_agent("${DEMO_SUBTASKS.empire}");
console.log("Empire State Building:", empire);`,
      ),
      action(
        "The Eiffel Tower was completed in 1889 and construction of the Empire State Building began in 1930. I compute the difference in code.",
        `
const completed = 1889;
const started = 1930;
const years = started - completed;
final_answer(\`\${years} years: the Eiffel Tower was completed in \${completed} and construction of the Empire State Building began in \${started}.\`);`,
      ),
    ]),
    wiki("wiki:eiffel", DEMO_SUBTASKS.eiffel, [
      action(
        "I search Wikipedia for the Eiffel Tower.",
        `const results = await search_wikipedia("Eiffel Tower construction completed");\nconsole.log(results);`,
      ),
      action(
        "The Eiffel Tower page says construction was finished in March 1889.",
        `final_answer("The Eiffel Tower was completed in March 1889 (built 1887–1889). Source: Eiffel Tower.");`,
      ),
    ]),
    wiki("wiki:empire", DEMO_SUBTASKS.empire, [
      action(
        "I search Wikipedia for the Empire State Building.",
        `const results = await search_wikipedia("Empire State Building");\nconsole.log(results);`,
      ),
      action(
        "The summary may not give the start date; I ask the page agent to look inside the page.",
        `const info = await search_info("${DEMO_SUBTASKS.empirePage}", "Empire State Building");\nconsole.log(info);`,
      ),
      action(
        "The page says excavation began in January 1930 and steel construction on 17 March 1930.",
        `final_answer("Construction of the Empire State Building began in 1930 (excavation January 1930, steel work from 17 March 1930). Source: Empire State Building.");`,
      ),
    ]),
    page("page:empire", DEMO_SUBTASKS.empirePage, [
      action(
        "I retrieve the passages about construction.",
        `const passages = await retrieve_passages("construction began 1930 excavation");\nconsole.log(passages);`,
      ),
      action(
        "The Construction section answers the query.",
        `final_answer("From the Construction section: excavation began in January 1930 and steel construction started on 17 March 1930; the building opened on 1 May 1931.");`,
      ),
    ]),
  ];
}

/**
 * Birch plywood vs ethanol: two sub-agent calls in one Promise.all, then the manager converts
 * kg/m³ to g/cm³ in code and compares densities.
 */
export function plywoodRules(): TrajectoryRule[] {
  return [
    manager("manager:plywood", DEMO_QUESTIONS.plywood, [
      action(
        "Something floats in a liquid when it is less dense than the liquid. I look up both densities at the same time.",
        `
const [plywood, ethanol] = await Promise.all([
  wikipedia_search_agent("${DEMO_SUBTASKS.plywood}"),
  wikipedia_search_agent("${DEMO_SUBTASKS.ethanol}"),
]);
console.log("Birch plywood:", plywood);
console.log("Ethanol:", ethanol);`,
      ),
      action(
        "Birch plywood is about 680 kg/m³ and ethanol is 0.789 g/cm³. I convert to the same unit and compare.",
        `
const plywoodKgM3 = 680;
const plywoodGcm3 = plywoodKgM3 / 1000; // 1 g/cm³ = 1000 kg/m³
const ethanolGcm3 = 0.789;
const floats = plywoodGcm3 < ethanolGcm3;
final_answer(floats
  ? \`Yes. Birch plywood (about \${plywoodKgM3} kg/m³ = \${plywoodGcm3} g/cm³) is less dense than ethanol (\${ethanolGcm3} g/cm³ at 20 °C), so it floats.\`
  : \`No. Birch plywood (\${plywoodGcm3} g/cm³) is denser than ethanol (\${ethanolGcm3} g/cm³), so it sinks.\`);`,
      ),
    ]),
    wiki("wiki:plywood", DEMO_SUBTASKS.plywood, [
      action(
        "I search for birch plywood.",
        `const results = await search_wikipedia("birch plywood density");\nconsole.log(results);`,
      ),
      action(
        "I check the density inside the Birch plywood page.",
        `const info = await search_info("${DEMO_SUBTASKS.plywoodPage}", "Birch plywood");\nconsole.log(info);`,
      ),
      action(
        "The page gives about 680 kg/m³.",
        `final_answer("Birch plywood has a density of about 680 kg/m³ (0.68 g/cm³). Source: Birch plywood.");`,
      ),
    ]),
    page("page:plywood", DEMO_SUBTASKS.plywoodPage, [
      action(
        "I retrieve passages about density.",
        `const passages = await retrieve_passages("density kg/m3");\nconsole.log(passages);`,
      ),
      action(
        "The Properties section gives the density.",
        `final_answer("Properties section: birch plywood has a density of about 680 kg/m³ (0.68 g/cm³).");`,
      ),
    ]),
    wiki("wiki:ethanol", DEMO_SUBTASKS.ethanol, [
      action(
        "I search for ethanol's density.",
        `const results = await search_wikipedia("ethanol density");\nconsole.log(results);`,
      ),
      action(
        "The summary may not include the density; I look inside the Ethanol page.",
        `const info = await search_info("density of ethanol", "Ethanol");\nconsole.log(info);`,
      ),
      action(
        "Ethanol's density is 0.789 g/cm³ at 20 °C.",
        `final_answer("Ethanol has a density of 0.789 g/cm³ (789 kg/m³) at 20 °C. Source: Ethanol.");`,
      ),
    ]),
    page("page:ethanol", "density of ethanol", [
      action(
        "I retrieve passages about density.",
        `const passages = await retrieve_passages("density g/cm3");\nconsole.log(passages);`,
      ),
      action(
        "Physical properties gives the density.",
        `final_answer("Physical properties section: ethanol has a density of 0.789 g/cm³ (789 kg/m³) at 20 °C.");`,
      ),
    ]),
  ];
}

/**
 * The fall of Constantinople and the Ming dynasty: the page agent never calls final_answer and
 * runs out of its 3 steps, so its last observation (retrieved passages) is returned to the
 * wikipedia_search agent, which answers from it.
 */
export function mingRules(): TrajectoryRule[] {
  return [
    manager("manager:ming", DEMO_QUESTIONS.ming, [
      action(
        "I need the year Constantinople fell and who ruled China then. I ask both at once.",
        `
const [fall, china] = await Promise.all([
  wikipedia_search_agent("${DEMO_SUBTASKS.constantinople}"),
  wikipedia_search_agent("${DEMO_SUBTASKS.ming}"),
]);
console.log(fall);
console.log(china);`,
      ),
      action(
        "Constantinople fell in 1453; China was then ruled by the Ming dynasty under the Jingtai Emperor.",
        `final_answer("The Ming dynasty, under the Jingtai Emperor (Constantinople fell in 1453).");`,
      ),
    ]),
    wiki("wiki:constantinople", DEMO_SUBTASKS.constantinople, [
      action(
        "I search for the fall of Constantinople.",
        `const results = await search_wikipedia("fall of Constantinople");\nconsole.log(results);`,
      ),
      action(
        "The summary gives the date.",
        `final_answer("Constantinople fell to the Ottoman Empire on 29 May 1453. Source: Fall of Constantinople.");`,
      ),
    ]),
    wiki("wiki:ming", DEMO_SUBTASKS.ming, [
      action(
        "China in 1453 was under the Ming dynasty (1368–1644); I look for the emperor in that page.",
        `const info = await search_info("${DEMO_SUBTASKS.mingPage}", "Ming dynasty");\nconsole.log(info);`,
      ),
      action(
        "The passages say that in 1453 China was ruled by the Ming dynasty under the Jingtai Emperor.",
        `final_answer("In 1453 China was ruled by the Ming dynasty under the Jingtai Emperor (reigned 1449–1457). Source: Ming dynasty.");`,
      ),
    ]),
    // Never calls final_answer: the agent stops after maxSteps = 3 with its last observation.
    page("page:ming", DEMO_SUBTASKS.mingPage, [
      action(
        "I retrieve passages about the emperors.",
        `console.log(await retrieve_passages("emperor"));`,
      ),
      action(
        "I look for 1453 specifically.",
        `console.log(await retrieve_passages("1453 Jingtai Emperor"));`,
      ),
      action(
        "I look at the fifteenth century section once more.",
        `console.log(await retrieve_passages("fifteenth century Constantinople fell"));`,
      ),
    ]),
  ];
}

/** Every demo trajectory. */
export function demoRules(): TrajectoryRule[] {
  return [...towersRules(), ...plywoodRules(), ...mingRules()];
}
