/**
 * Real model replies to mutate in the fuzz tests: every scripted reply of the demo trajectories
 * (the qa, chat and research apps: what a capable model writes in codehop's format), plus the
 * format drifts small local models produce (think blocks, <code> tags, missing fences or labels,
 * other languages, CRLF, cut-off replies).
 */
import { chatRules } from "../../../src/apps/chat/demo-trajectories.ts";
import { demoRules } from "../../../src/apps/qa/demo-trajectories.ts";
import { researchRules } from "../../../src/apps/research/demo-trajectories.ts";
import type { ScriptedReply, TrajectoryRule } from "../../../src/testing/scripted-openai-server.ts";

function texts(rules: TrajectoryRule[]): string[] {
  const out: string[] = [];
  for (const rule of rules)
    for (const step of rule.steps as ScriptedReply[]) {
      if (typeof step === "string") out.push(step);
      else if ("content" in step) out.push(step.content);
    }
  return out;
}

const DRIFTS = [
  "<think>The user wants a number.\n```js\nbad()\n```\n</think>\nThought: print it\nCode:\n```js\nconsole.log(7)\n```<end_action>",
  "let me think\n```js\nbad()\n```\nok</think>\nThought: go\n```javascript\nfinal_answer(1)\n```",
  "Thought: tags\n<code>\nconst r = await search('x');\nprint(r)\n</code>",
  "Thought: no fence\nCode:\nfinal_answer(42)<end_action>",
  "I will compute it.\n```\nconst x = 2 ** 10;\nfinal_answer(x)\n```",
  "Thought: python habit\nCode:\n```python\nprint(1)\n```<end_action>",
  "Thought: two blocks\n```js\nconst a = 1;\n```\nthen\n```ts\nconsole.log(a as number);\n```",
  "Thought: cut off by the stop sequence\r\nCode:\r\n```js\r\nconst pages = await Promise.all([a(), b()]);\r\n",
  "```js\n```\n```js\nconsole.log(2)\n```",
  "Thought: I think the answer is Paris.",
  "",
];

/** The corpus: demo replies first, then the drifts. */
export const MODEL_REPLIES: readonly string[] = [
  ...texts(demoRules()),
  ...texts(chatRules()),
  ...texts(researchRules()),
  ...DRIFTS,
];
