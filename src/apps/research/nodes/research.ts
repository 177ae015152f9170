import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { withoutInheritedAbortSignals } from "../../../core/pregel-internals.ts";
import type { CodeAgent } from "../../../framework/code-agent.ts";
import { answerText } from "../../../runs/result.ts";
import { notesIn, passagesIn, questionsIn } from "../base/records.ts";
import { researchSettingsOf } from "../base/settings.ts";
import type { ResearchStateValue, ResearchUpdate } from "../base/state.ts";

/** The planner's task for a topic (what its first user message says). */
export function plannerTask(topic: string, maxQuestions: number): string {
  return `Research topic: ${topic}\nResearch at most ${maxQuestions} sub-questions.`;
}

/** Longest planner answer taken as the report's title. */
const MAX_TITLE_CHARS = 120;

/**
 * research: runs the planner agent on the topic. The planner fans its sub-questions out to the
 * researcher pipelines (its `research` tool); what they found comes back as records in its
 * sources: each sub-question's outcome, the notes, and the passages the notes came from. The
 * planner's final answer is the report's title when it is one short line.
 */
export function makeResearchNode(planner: CodeAgent) {
  return async function research(
    state: ResearchStateValue,
    config: LangGraphRunnableConfig,
  ): Promise<ResearchUpdate> {
    const settings = researchSettingsOf(config, state.maxQuestions);
    const topic = state.task || state.topic;
    const out = await planner.graph.invoke(
      {
        task: plannerTask(topic, settings.maxQuestions),
        context: { maxQuestions: settings.maxQuestions, concurrency: settings.concurrency },
        agent: planner.name,
      },
      { ...withoutInheritedAbortSignals(config), recursionLimit: planner.recursionLimit },
    );
    const notes = notesIn(out.sources);
    const cited = new Set(notes.flatMap((n) => n.passages));
    // `final_answer("Title")`, or an object with a title (small models like to return one).
    const given = out.answer as unknown;
    const raw =
      given && typeof given === "object" && typeof (given as { title?: unknown }).title === "string"
        ? (given as { title: string }).title
        : answerText(given);
    const answer = raw.trim().replace(/^["'“]|["'”]$/g, "");
    const title =
      answer && !answer.includes("\n") && answer.length <= MAX_TITLE_CHARS ? answer : topic;
    const questions = questionsIn(out.sources);
    const passages = passagesIn(out.sources).filter((p) => cited.has(p.id));
    const answered = questions.filter((q) => q.status === "answered").length;
    return {
      title,
      stepCount: typeof out.stepCount === "number" ? out.stepCount : 0,
      questions,
      notes,
      passages,
      usage: out.usage ?? {},
      stage: `${questions.length} sub-question(s) researched, ${answered} answered: ${notes.length} note(s) from ${passages.length} passage(s)`,
    };
  };
}
