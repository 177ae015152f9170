import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";

// The real ChatOpenAI client over real HTTP against the scripted server: checks the fixture every
// other integration test relies on (stop sequences reach the server and are honoured, streaming
// works, usage and cached-prefix tokens are reported).
let server: ScriptedOpenAIServer;

beforeAll(async () => {
  server = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([
      {
        name: "greeter",
        task: "say hello",
        steps: [
          "Thought: greet\nCode:\n```js\nfinal_answer('hi')\n```<end_action>\nObservation: leaked",
          "second",
        ],
      },
    ]),
  });
});
afterAll(async () => server.close());

function model() {
  return new ChatOpenAI({
    model: "scripted-model",
    apiKey: "test",
    maxRetries: 0,
    configuration: { baseURL: server.baseURL },
  });
}

// NOTE: `streaming: true` + invoke() makes ChatOpenAI estimate tokens with tiktoken, which downloads
// its encoding from the internet and hangs offline. Streaming is done with .stream() instead, which
// reads usage from the server's final chunk (stream_options.include_usage).
async function call(streaming: boolean, messages: any[], options: any = {}) {
  const m = model();
  if (!streaming) return m.invoke(messages, options);
  let acc: any;
  for await (const chunk of await m.stream(messages, options))
    acc = acc ? acc.concat(chunk) : chunk;
  return acc;
}

describe.each([false, true])(
  "ChatOpenAI against the scripted server (streaming=%s)",
  (streaming) => {
    it("sends stop sequences and gets the reply cut before them", async () => {
      const before = server.requests.length;
      const res = await call(
        streaming,
        [new SystemMessage("You are a code agent."), new HumanMessage("Task: say hello")],
        { stop: ["<end_action>", "Observation:"] },
      );
      expect(res.content).toBe("Thought: greet\nCode:\n```js\nfinal_answer('hi')\n```");
      const logged = server.requests[before];
      expect(logged.request.stop).toEqual(["<end_action>", "Observation:"]);
      expect(logged.request.stream).toBe(streaming);
      expect(logged.rule).toBe("greeter");
      expect(res.usage_metadata?.input_tokens).toBeGreaterThan(0);
      expect(res.usage_metadata?.output_tokens).toBeGreaterThan(0);
    });
  },
);

it("picks the step from the number of observations and reports the shared prefix as cached", async () => {
  const res = await call(false, [
    new SystemMessage("You are a code agent."),
    new HumanMessage("Task: say hello"),
    new HumanMessage("Observation: something"),
  ]);
  expect(res.content).toBe("second");
  expect(res.usage_metadata?.input_token_details?.cache_read).toBeGreaterThan(0);
});

it("answers unknown tasks with HTTP 500 naming the task", async () => {
  await expect(call(false, [new HumanMessage("unscripted question")])).rejects.toThrow(
    /no scripted rule/,
  );
});
