// A code agent in ten lines: the model answers by writing JavaScript, which runs in the sandbox.
// Model: OPENAI_BASE_URL, OPENAI_API_KEY and CODEHOP_MODEL (or a .env file, see .env.example).
// Run: node examples/hello-agent.mjs
import { createCodeAgent } from "codehop";

const agent = createCodeAgent({ name: "hello", description: "answers by computing in code" });
const state = await agent.invoke({ task: "What is 17 * 23? Compute it in code." });
console.log(state.answer);
