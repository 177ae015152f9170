/**
 * Tolerant parsing of a model's action. Small local models drift from the format, so the parser
 * accepts: `Thought: ... Code: ```js ... ```<end_action>` (the reference design's format, docs/code-agent.md), js / javascript / ts /
 * typescript / jsx / mjs / unlabeled fences, `<code>...</code>` tags, a missing `<end_action>` or closing fence (cut by a
 * stop sequence), a missing "Thought:", and several code blocks (run in order, as one action).
 * Anything it cannot use becomes `error`: an observation telling the model the expected format.
 */

/** Result of parsing one model reply. */
export interface ParsedAction {
  /** Reasoning before the code ("" when absent). */
  thought: string;
  /** JavaScript to run, or null when the reply contains no usable code. */
  code: string | null;
  /** Set when `code` is null: what was wrong, phrased for the model. */
  error?: string;
}

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
export const FORMAT_REMINDER =
  "Reply in this format:\nThought: <your reasoning>\nCode:\n```js\n<JavaScript>\n```<end_action>";

const END_MARKERS = /<end_action>|<end_code>|<\/code>/g;

// Every scan below is linear in the reply's length: a reply is model output, which may be huge and
// repetitive (thousands of blank lines, a run of backticks, an unclosed <think>), and the regular
// expressions this parser was first written with took seconds on 20 KB of such text (each start
// position rescanned the rest). test/core/parser.fuzz.test.ts compares it with that version.

/** JavaScript's `\s`. */
const SPACE = /\s/;
const isSpace = (ch: string | undefined): boolean => ch !== undefined && SPACE.test(ch);

/** Index of the next match of `re` (a global regex of a literal, no backtracking) at or after `from`. */
function indexOfRe(re: RegExp, text: string, from: number): number {
  re.lastIndex = from;
  const m = re.exec(text);
  return m ? m.index : -1;
}

/**
 * The reply without reasoning-model think blocks (QwQ, DeepSeek-R1): code drafted while thinking
 * must never run. Removes every `<think>...</think>`, a reply that starts inside an unopened block
 * (the chat template put `<think>` in the prompt, so the reply only has the closing tag), and an
 * unclosed block at the end (the model was cut off while thinking).
 */
export function stripThinkBlocks(text: string): string {
  const open = /<think>/gi;
  const close = /<\/think>/gi;
  let out = "";
  let pos = 0;
  for (;;) {
    const o = indexOfRe(open, text, pos);
    if (o < 0) break;
    const c = indexOfRe(close, text, o + "<think>".length);
    if (c < 0) break; // no later block closes either
    out += text.slice(pos, o);
    pos = c + "</think>".length;
  }
  out += text.slice(pos);
  const c = indexOfRe(close, out, 0);
  if (c >= 0) out = out.slice(c + "</think>".length);
  const o = indexOfRe(open, out, 0);
  if (o >= 0) out = out.slice(0, o);
  return out;
}

/** A fenced block: ``` + label + rest of the line, then the body up to the next ``` (or the end). */
interface Fence {
  lang: string;
  body: string;
  start: number;
}

function fencedBlocks(raw: string): Fence[] {
  const blocks: Fence[] = [];
  for (let pos = 0; ;) {
    const open = raw.indexOf("```", pos);
    if (open < 0) break;
    const nl = raw.indexOf("\n", open + 3);
    if (nl < 0) break; // (no later fence has a line after it either)
    const lang = /^[A-Za-z0-9_+-]*/.exec(raw.slice(open + 3, nl))![0].toLowerCase();
    const close = raw.indexOf("```", nl + 1);
    blocks.push({ lang, body: raw.slice(nl + 1, close < 0 ? raw.length : close), start: open });
    if (close < 0) break;
    pos = close + 3;
  }
  return blocks;
}

/**
 * A "Code:" label on a line of its own start (case-insensitive; blank lines may come before it):
 * where the label's line break (or the reply) starts, and where the code after it (and the
 * whitespace after the label) starts. The first such label, or null.
 */
function codeLabel(raw: string): { index: number; end: number } | null {
  const label = /code:/gi;
  for (let c = indexOfRe(label, raw, 0); c >= 0; c = indexOfRe(label, raw, c + 1)) {
    const index = lineStartBefore(raw, c);
    if (index < 0) continue;
    let end = c + "code:".length;
    while (isSpace(raw[end])) end++;
    return { index, end };
  }
  return null;
}

/**
 * Where a label at `at` begins counting its line: the reply's start when only whitespace precedes
 * it, else the first line break of the whitespace right before it; -1 when text precedes it on its line.
 */
function lineStartBefore(text: string, at: number): number {
  let w = at;
  while (w > 0 && isSpace(text[w - 1])) w--;
  if (w === 0) return 0;
  for (let i = w; i < at; i++) if (text[i] === "\n") return i;
  return -1;
}

/** `text` without a trailing "Code:" label line (the fence or code came after it). */
function withoutTrailingLabel(text: string): string {
  let end = text.length;
  while (isSpace(text[end - 1])) end--;
  const c = end - "code:".length;
  if (c < 0 || text.slice(c, end).toLowerCase() !== "code:") return text;
  const index = lineStartBefore(text, c);
  return index < 0 ? text : text.slice(0, index);
}

/** Parses a model reply into thought and code. Never throws; linear in the reply's length. */
export function parseAction(text: string): ParsedAction {
  const raw = stripThinkBlocks((text ?? "").replace(/\r\n/g, "\n"));
  const blocks = fencedBlocks(raw);
  const jsBlocks = blocks.filter(
    (b) => JS_LANGS.has(b.lang) && b.body.replace(END_MARKERS, "").trim(),
  );
  let code: string | null = null;
  let thoughtEnd = raw.length;
  const codeTag = raw.indexOf("<code>");
  if (jsBlocks.length) {
    code = jsBlocks.map((b) => b.body.replace(END_MARKERS, "").trim()).join("\n\n");
    thoughtEnd = jsBlocks[0].start;
  } else if (codeTag >= 0) {
    // smolagents' newer format: <code>...</code>.
    const from = codeTag + "<code>".length;
    const close = raw.indexOf("</code>", from);
    const body = raw
      .slice(from, close < 0 ? raw.length : close)
      .replace(END_MARKERS, "")
      .trim();
    if (body) {
      code = body;
      thoughtEnd = codeTag;
    }
  } else {
    // No fence: accept the text after a "Code:" label (some models drop the fences).
    const label = codeLabel(raw);
    if (label) {
      const body = raw.slice(label.end).replace(END_MARKERS, "").trim();
      if (body && !body.startsWith("```")) {
        code = body;
        thoughtEnd = label.index;
      }
    }
  }
  const thought = withoutTrailingLabel(raw.slice(0, thoughtEnd))
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
 * make two actions different. Linear too (a `/*` nothing closes ends the comments).
 */
export function normalizeCode(code: string): string {
  let out = code;
  let noComments = "";
  for (let pos = 0; ;) {
    const open = out.indexOf("/*", pos);
    const close = open < 0 ? -1 : out.indexOf("*/", open + 2);
    if (close < 0) {
      noComments += out.slice(pos);
      break;
    }
    noComments += out.slice(pos, open);
    pos = close + 2;
  }
  out = noComments
    .replace(/(^|[^:"'`\\])\/\/[^\n]*/g, "$1")
    .replace(/\s+/g, " ")
    .replace(/\s*([;,(){}[\]=+\-*/<>:])\s*/g, "$1");
  let end = out.length;
  while (end > 0 && out[end - 1] === ";") end--;
  return out.slice(0, end).trim();
}
