// A nested team: the researcher agent is a tool of the writer agent, called from the writer's code
// (`await researcher_agent("...")`, several at once with Promise.all). Each agent keeps its own
// steps; usage rolls up to the top. With a checkpointer, every step of both is checkpointed.
// Model: OPENAI_BASE_URL, OPENAI_API_KEY and CODEHOP_MODEL (or .env). Run: node examples/nested-team.mjs
import { MemorySaver } from "@langchain/langgraph";
import { createCodeAgent, defineTool } from "codehop";
import { z } from "zod";

const FACTS = {
  "Eiffel Tower": "The Eiffel Tower was completed in 1889.",
  "Empire State Building": "Construction of the Empire State Building began in 1930.",
};

const lookUp = defineTool({
  name: "look_up",
  description: "Returns what the notes say about a landmark.",
  parameters: z.object({ landmark: z.string().describe("e.g. Eiffel Tower") }),
  returns: "string",
  invoke: async ({ landmark }) => FACTS[landmark] ?? `No notes on ${landmark}.`,
});

const researcher = createCodeAgent({
  name: "researcher",
  description: "looks facts up in the notes",
  tools: [lookUp],
  maxSteps: 3,
});

const writer = createCodeAgent({
  name: "writer",
  description: "answers questions, asking the researcher for facts",
  tools: [
    researcher.asTool({
      name: "researcher_agent",
      description: "Asks the researcher a question; returns its answer with the facts it found.",
      parameters: z.object({ question: z.string().describe("one factual question") }),
      toInput: ({ question }) => ({ task: question }),
    }),
  ],
  maxSteps: 4,
});

// The same graph with a checkpointer: the run can be resumed or replayed by thread id.
const graph = writer.builder.compile({ checkpointer: new MemorySaver() });
const state = await graph.invoke(
  {
    task: "How many years passed between the completion of the Eiffel Tower and the start of the Empire State Building?",
  },
  { configurable: { thread_id: "example" }, recursionLimit: writer.recursionLimit },
);
console.log(state.answer);
console.log(
  "model calls:",
  Object.fromEntries(Object.entries(state.usage).map(([agent, u]) => [agent, u.calls])),
);
