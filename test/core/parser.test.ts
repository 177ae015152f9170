import { describe, expect, it } from "vitest";
import { FORMAT_REMINDER, normalizeCode, parseAction } from "../../src/core/parser.ts";

describe("parseAction", () => {
  it("reads the reference design's format: Thought, Code, js fence, <end_action>", () => {
    const p = parseAction(
      "Thought: add them\nCode:\n```js\nconst x = 1 + 2;\nconsole.log(x);\n```<end_action>",
    );
    expect(p).toEqual({ thought: "add them", code: "const x = 1 + 2;\nconsole.log(x);" });
  });

  it.each(["javascript", "ts", "typescript", "jsx", "mjs", ""])("accepts a ```%s fence", (lang) => {
    expect(parseAction(`Thought: t\nCode:\n\`\`\`${lang}\nfinal_answer(1)\n\`\`\``).code).toBe(
      "final_answer(1)",
    );
  });

  it("accepts a missing <end_action> and a closing fence cut off by a stop sequence", () => {
    expect(parseAction("Thought: go\nCode:\n```js\nconsole.log(1)\n").code).toBe("console.log(1)");
  });

  it("accepts a missing Thought: label and keeps the free text as the thought", () => {
    const p = parseAction("I should print it.\n```js\nconsole.log('a')\n```");
    expect(p.thought).toBe("I should print it.");
    expect(p.code).toBe("console.log('a')");
  });

  it("joins several code blocks in order into one action", () => {
    const p = parseAction(
      "Thought: two parts\n```js\nconst a = 1;\n```\nthen\n```javascript\nconsole.log(a);\n```<end_action>",
    );
    expect(p.code).toBe("const a = 1;\n\nconsole.log(a);");
  });

  it("takes unfenced code after a Code: label", () => {
    const p = parseAction("Thought: easy\nCode:\nfinal_answer(42)<end_action>");
    expect(p).toEqual({ thought: "easy", code: "final_answer(42)" });
  });

  it("accepts <code>...</code> tags", () => {
    expect(parseAction("Thought: tags\n<code>\nfinal_answer(3)\n</code>")).toEqual({
      thought: "tags",
      code: "final_answer(3)",
    });
  });

  it("strips a stray <end_code> inside the block", () => {
    expect(parseAction("```js\nfinal_answer(1)<end_code>\n```").code).toBe("final_answer(1)");
  });

  it("turns a reply without code into a format error, never a throw", () => {
    const p = parseAction("Thought: I think the answer is Paris.");
    expect(p.code).toBeNull();
    expect(p.thought).toBe("I think the answer is Paris.");
    expect(p.error).toContain("No code found");
    expect(p.error).toContain(FORMAT_REMINDER);
  });

  it("tells the model to use JavaScript when it writes Python", () => {
    const p = parseAction("Thought: t\nCode:\n```python\nprint(1)\n```");
    expect(p.code).toBeNull();
    expect(p.error).toMatch(/"python".*JavaScript/);
  });

  it("reports an empty reply", () => {
    expect(parseAction("").error).toMatch(/empty/);
  });

  it("never runs code drafted inside <think> blocks of reasoning models", () => {
    const real = "Thought: print it\nCode:\n```js\nconsole.log(7)\n```<end_action>";
    const p = parseAction("<think>maybe\n```js\nbad()\n```\nno.</think>\n" + real);
    expect(p).toEqual({ thought: "print it", code: "console.log(7)" });
    // The template opened the block in the prompt: the reply only closes it.
    const q = parseAction("let me try\n```js\nbad()\n```\nhmm</think>\n" + real);
    expect(q).toEqual({ thought: "print it", code: "console.log(7)" });
    // Cut off while thinking: nothing to run, the model gets the format reminder.
    const r = parseAction("<think>first\n```js\nbad()\n```");
    expect(r.code).toBeNull();
    expect(r.error).toContain(FORMAT_REMINDER);
  });

  it("ignores empty fences and uses the next block", () => {
    expect(parseAction("```js\n```\n```js\nconsole.log(2)\n```").code).toBe("console.log(2)");
  });
});

describe("normalizeCode", () => {
  it("ignores comments, whitespace and trailing semicolons", () => {
    expect(normalizeCode("const x = f( 1 );  // try\n/* again */\nconsole.log(x);")).toBe(
      normalizeCode("const x=f(1);\nconsole.log(x)"),
    );
  });
  it("keeps different code different", () => {
    expect(normalizeCode("f(1)")).not.toBe(normalizeCode("f(2)"));
  });
  it("does not treat // inside a URL string as a comment", () => {
    expect(normalizeCode('fetchPage("https://a.org/x")')).toContain("https://a.org/x");
  });
});
