// A local model through Ollama's OpenAI-compatible API (small models such as Qwen2.5-7B work:
// prompts are short, parsing is tolerant, and replies are cut at stop sequences).
//   ollama pull qwen2.5:7b && node examples/ollama.mjs
// OLLAMA_HOST (Ollama's own variable) points it at another machine: OLLAMA_HOST=http://gpu-box:11434
// `npx codehop doctor` checks the same endpoint: OPENAI_BASE_URL=http://localhost:11434/v1 npx codehop doctor
import { createCodeAgent } from "codehop";

const host = process.env.OLLAMA_HOST ?? "http://localhost:11434";
const baseURL = `${/^https?:\/\//.test(host) ? host : `http://${host}`}/v1`;

const agent = createCodeAgent({ name: "local", description: "answers by computing in code" });
const state = await agent.invoke(
  { task: "How many seconds are there in a leap year? Compute it in code." },
  {
    // The run context names the model and its endpoint (instead of OPENAI_* / CODEHOP_MODEL).
    context: {
      model: "qwen2.5:7b",
      modelSettings: { baseURL, apiKey: "ollama", temperature: 0, maxTokens: 512 },
    },
  },
);
console.log(state.answer);
