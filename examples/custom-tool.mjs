// A custom tool: the zod schema validates the arguments and renders the tool into the prompt as a
// JavaScript signature, so the model calls `await capital_of("France")`.
// Model: OPENAI_BASE_URL, OPENAI_API_KEY and CODEHOP_MODEL (or .env). Run: node examples/custom-tool.mjs
import { createCodeAgent, defineTool } from "codehop";
import { z } from "zod";

const CAPITALS = { France: "Paris", Japan: "Tokyo", Kenya: "Nairobi", Peru: "Lima" };

const capitalOf = defineTool({
  name: "capital_of",
  description: "Returns the capital city of a country, or an error naming the countries it knows.",
  parameters: z.object({ country: z.string().describe("the country, e.g. France") }),
  returns: "string",
  invoke: async ({ country }) => {
    const capital = CAPITALS[country];
    // A thrown error becomes an observation the model can act on (another spelling, another tool).
    if (!capital)
      throw new Error(`unknown country ${country}; known: ${Object.keys(CAPITALS).join(", ")}`);
    return capital;
  },
});

const agent = createCodeAgent({
  name: "geographer",
  description: "answers geography questions with its tools",
  tools: [capitalOf],
  maxSteps: 4,
});
const state = await agent.invoke({
  task: "Which is longer: the name of the capital of Japan or of Peru?",
});
console.log(state.answer);
