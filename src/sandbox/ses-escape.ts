/**
 * SES refuses to evaluate source text that merely *contains* `<!--`, `-->`, `import(` (also
 * `import/*`, `import//`) or `eval(` — a regular-expression check, not a parse
 * (ses/src/transforms.js). The wrapper is generated from an AST, so those sequences can only come
 * from text the guest wrote: string, template and regex literals, and names (`obj.import(x)`,
 * `$eval(1)`, `{ import() {} }`). This module writes such text differently with the same meaning —
 * a unicode escape in a string or name, a regex built from a string, a tagged template's strings
 * passed as the same arrays — so a valid action (and a helper restored from an earlier step) is
 * never rejected. Template raw text (`String.raw`) is never changed.
 */
import { GENERATOR, type Generator } from "astring";

type AnyNode = any;

/** What SES's three source checks look for, as one test (slightly broader: safe). */
const SES_REJECTS = /<!--|-->|\bimport\s*(?:\(|\/[/*])|\beval\s*\(/;

/** True if SES would reject source text containing `text`. */
export function rejectedBySes(text: string): boolean {
  return SES_REJECTS.test(text);
}

/**
 * Escapes the rejected sequences inside literal text whose backslashes all start escapes (JSON
 * string text, template raw text built by {@link templateRawFromCooked}): one character of each
 * becomes a unicode escape of itself.
 */
function escapeLiteralText(text: string): string {
  let out = text;
  // Replacing one sequence cannot create another; the loop only guards overlapping ones (`<!-->`).
  for (let i = 0; i < 4 && rejectedBySes(out); i++) {
    out = out
      .replace(/<(?=!--)/g, "\\u003c")
      .replace(/-(?=->)/g, "\\u002d")
      .replace(/\bi(?=mport\s*(?:\(|\/[/*]))/g, "\\u0069")
      .replace(/\be(?=val\s*\()/g, "\\u0065");
  }
  return out;
}

/** Source text of a string literal with `value`, safe for SES. */
export function stringLiteralRaw(value: string): string {
  return escapeLiteralText(JSON.stringify(value));
}

/** Raw text for an untagged template element whose cooked value is `cooked`, safe for SES. */
function templateRawFromCooked(cooked: string): string {
  return escapeLiteralText(
    cooked
      .replace(/\\/g, "\\\\")
      .replace(/`/g, "\\`")
      .replace(/\$\{/g, "\\${")
      .replace(/\r/g, "\\r"),
  );
}

/**
 * A name as written in the wrapper: one ending in `import` or `eval` where SES's check would see
 * a word of its own (`import`, `$eval`, `#import`) gets a unicode escape — the same name to JS.
 */
function escapeName(name: string): string {
  return name.replace(
    /(^|[^A-Za-z0-9_])(import|eval)$/,
    (_m, before: string, word: string) =>
      `${before}${word === "import" ? "\\u0069mport" : "\\u0065val"}`,
  );
}

/** astring's generator, writing every name through {@link escapeName}. */
export const SES_SAFE_GENERATOR: Generator = {
  ...GENERATOR,
  Identifier(node: AnyNode, state: { write(text: string, node?: AnyNode): void }) {
    state.write(escapeName(node.name), node);
  },
  PrivateIdentifier(node: AnyNode, state: { write(text: string, node?: AnyNode): void }) {
    state.write(`#${escapeName(node.name)}`, node);
  },
};

/** Names of the wrapper's helpers the rewritten literals call. */
export interface EscapeHelpers {
  /** `(pattern, flags) => new RegExp(pattern, flags)` */
  regexp: string;
  /** `(site, cooked, raw) => the frozen template strings array of that call site` */
  template: string;
}

const literal = (value: string): AnyNode => ({
  type: "Literal",
  value,
  raw: stringLiteralRaw(value),
});
const call = (callee: AnyNode, args: AnyNode[], loc?: AnyNode): AnyNode => ({
  type: "CallExpression",
  callee,
  arguments: args,
  optional: false,
  loc,
});
const name = (n: string): AnyNode => ({ type: "Identifier", name: n });

/**
 * Rewrites the literals of `body` (in place) so the generated text passes SES's source checks:
 * every string literal is re-rendered from its value (guest text is never pasted), a regex whose
 * text SES would reject becomes a call building the same RegExp, an untagged template's rejected
 * text is re-rendered from its cooked value, and a tagged template whose strings SES would reject
 * becomes a call of its tag with the same strings array (same cooked and raw strings, frozen,
 * one per call site as JS caches them).
 */
export function escapeForSes(body: AnyNode[], helpers: EscapeHelpers): void {
  let nextSite = 0;
  const voidZero = (): AnyNode => ({
    type: "UnaryExpression",
    operator: "void",
    prefix: true,
    argument: { type: "Literal", value: 0, raw: "0" },
  });
  /** The node itself, or what replaces it. */
  const replacement = (node: AnyNode): AnyNode => {
    if (node.type === "Literal" && node.regex && rejectedBySes(node.raw ?? "")) {
      const { pattern, flags } = node.regex;
      return call(name(helpers.regexp), [literal(pattern), literal(flags)], node.loc);
    }
    if (
      node.type === "TaggedTemplateExpression" &&
      node.quasi.quasis.some((q: AnyNode) => rejectedBySes(q.value.raw))
    ) {
      const quasis: AnyNode[] = node.quasi.quasis;
      const site = nextSite++;
      const strings = call(name(helpers.template), [
        { type: "Literal", value: site, raw: String(site) },
        {
          type: "ArrayExpression",
          elements: quasis.map((q) =>
            typeof q.value.cooked === "string" ? literal(q.value.cooked) : voidZero(),
          ),
        },
        { type: "ArrayExpression", elements: quasis.map((q) => literal(q.value.raw)) },
      ]);
      return call(node.tag, [strings, ...node.quasi.expressions], node.loc);
    }
    return node;
  };
  // Iterative: hostile nesting must not overflow the host's stack. `directive`: the literal is a
  // directive prologue's; `tagged`: the template is a tag's (its raw text is observable).
  const stack: { node: AnyNode; directive: boolean; tagged: boolean }[] = [];
  for (let i = body.length - 1; i >= 0; i--) {
    body[i] = replacement(body[i]);
    stack.push({ node: body[i], directive: false, tagged: false });
  }
  while (stack.length > 0) {
    const { node, directive, tagged } = stack.pop()!;
    if (node.type === "Literal" && typeof node.value === "string") {
      // A directive keeps its own text unless SES would reject it: re-rendered, `"use\x20strict"`
      // would become a real "use strict" (an error in a function with default parameters).
      if (!directive || rejectedBySes(node.raw ?? "")) node.raw = stringLiteralRaw(node.value);
    } else if (node.type === "TemplateLiteral" && !tagged) {
      for (const q of node.quasis) {
        if (rejectedBySes(q.value.raw))
          q.value = { ...q.value, raw: templateRawFromCooked(q.value.cooked) };
      }
    }
    for (const key of Object.keys(node)) {
      if (key === "loc") continue;
      const v = node[key];
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) {
          if (!v[i] || typeof v[i].type !== "string") continue;
          v[i] = replacement(v[i]);
          stack.push({ node: v[i], directive: false, tagged: false });
        }
      } else if (v && typeof v === "object" && typeof v.type === "string") {
        node[key] = replacement(v);
        stack.push({
          node: node[key],
          directive: node.type === "ExpressionStatement" && typeof node.directive === "string",
          tagged: node.type === "TaggedTemplateExpression" && key === "quasi",
        });
      }
    }
  }
}
