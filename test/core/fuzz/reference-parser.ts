/**
 * The action parser as it was written with regular expressions (src/core/parser.ts before it was
 * made linear), kept as the reference the fuzz tests compare the linear parser with on inputs
 * small enough for its quadratic cases (test/core/parser.fuzz.test.ts). Not used by codehop.
 */
import type { ParsedAction } from "../../../src/core/parser.ts";

/** Fence labels accepted as JavaScript. */
const JS_LANGS = new Set([
  "",
  "js",
  "javascript",
  "ts",
  "typescript",
  "jsx",
  "tsx",
  "mjs",
  "cjs",
  "node",
]);

/** The format reminder used in "no code" observations. */
const FORMAT_REMINDER =
  "Reply in this format:\nThought: <your reasoning>\nCode:\n```js\n<JavaScript>\n```<end_action>";

const END_MARKERS = /<end_action>|<end_code>|<\/code>/g;

/**
 * The reply without reasoning-model think blocks (QwQ, DeepSeek-R1): code drafted while thinking
 * must never run. Removes every `<think>...</think>`, a reply that starts inside an unopened block
 * (the chat template put `<think>` in the prompt, so the reply only has the closing tag), and an
 * unclosed block at the end (the model was cut off while thinking).
 */
function stripThinkBlocks(text: string): string {
  let out = text.replace(/<think>[\s\S]*?<\/think>/gi, "");
  const close = out.search(/<\/think>/i);
  if (close >= 0) out = out.slice(close + "</think>".length);
  const open = out.search(/<think>/i);
  if (open >= 0) out = out.slice(0, open);
  return out;
}

/** Parses a model reply into thought and code. Never throws. */
export function referenceParseAction(text: string): ParsedAction {
  const raw = stripThinkBlocks((text ?? "").replace(/\r\n/g, "\n"));
  const fence = /```([A-Za-z0-9_+-]*)[^\n]*\n([\s\S]*?)(?:```|$)/g;
  const blocks: { lang: string; body: string; start: number }[] = [];
  for (const m of raw.matchAll(fence)) {
    blocks.push({ lang: m[1].toLowerCase(), body: m[2], start: m.index ?? 0 });
    if (m[0].length === 0) break;
  }
  const jsBlocks = blocks.filter(
    (b) => JS_LANGS.has(b.lang) && b.body.replace(END_MARKERS, "").trim(),
  );
  let code: string | null = null;
  let thoughtEnd = raw.length;
  if (jsBlocks.length) {
    code = jsBlocks.map((b) => b.body.replace(END_MARKERS, "").trim()).join("\n\n");
    thoughtEnd = jsBlocks[0].start;
  } else if (/<code>[\s\S]*?(<\/code>|$)/.test(raw)) {
    // smolagents' newer format: <code>...</code>.
    const m = /<code>([\s\S]*?)(?:<\/code>|$)/.exec(raw)!;
    const body = m[1].replace(END_MARKERS, "").trim();
    if (body) {
      code = body;
      thoughtEnd = m.index;
    }
  } else {
    // No fence: accept the text after a "Code:" label (some models drop the fences).
    const label = /(^|\n)\s*Code:\s*\n?/i.exec(raw);
    if (label) {
      const body = raw
        .slice(label.index + label[0].length)
        .replace(END_MARKERS, "")
        .trim();
      if (body && !body.startsWith("```")) {
        code = body;
        thoughtEnd = label.index;
      }
    }
  }
  const thought = raw
    .slice(0, thoughtEnd)
    .replace(/(^|\n)\s*Code:\s*$/i, "")
    .replace(/^\s*Thought:\s*/i, "")
    .trim();
  if (code !== null) return { thought, code };

  const other = blocks.find((b) => !JS_LANGS.has(b.lang));
  const error = other
    ? `Your code block is marked as "${other.lang}", but only JavaScript runs here. Rewrite it in JavaScript.\n${FORMAT_REMINDER}`
    : raw.trim()
      ? `No code found in your reply. Every step must end with a JavaScript code block.\n${FORMAT_REMINDER}`
      : `Your reply was empty.\n${FORMAT_REMINDER}`;
  return { thought, code: null, error };
}

/**
 * Normal form of code for repeated-action detection: comments and whitespace differences don't
 * make two actions different.
 */
export function referenceNormalizeCode(code: string): string {
  return code
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/(^|[^:"'`\\])\/\/[^\n]*/g, "$1")
    .replace(/\s+/g, " ")
    .replace(/\s*([;,(){}[\]=+\-*/<>:])\s*/g, "$1")
    .replace(/;+$/g, "")
    .trim();
}
