import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CodehopError, ErrorCodes } from "../errors.ts";

/** Root of the prompts/ folder shipped with the package. */
export const PROMPTS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../prompts");

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** Names of the `{{placeholders}}` in a template, in order of first appearance. */
export function placeholders(template: string): string[] {
  const seen = new Set<string>();
  for (const m of template.matchAll(PLACEHOLDER)) seen.add(m[1]);
  return [...seen];
}

/**
 * Strict template rendering: every `{{name}}` must have a value and every value must be used.
 * Both mistakes throw (CODEHOP_PROMPT_TEMPLATE) instead of silently sending a broken prompt —
 * the weak spot of `.replace`-based prompt filling.
 */
export function renderTemplate(
  template: string,
  vars: Record<string, string | number>,
  name = "<inline>",
): string {
  const used = placeholders(template);
  const missing = used.filter((p) => !(p in vars) || vars[p] === undefined || vars[p] === null);
  if (missing.length) {
    throw new CodehopError(
      ErrorCodes.PROMPT_TEMPLATE,
      `Prompt ${name}: no value for placeholder(s) ${missing.map((m) => `{{${m}}}`).join(", ")}`,
    );
  }
  const unknown = Object.keys(vars).filter((k) => !used.includes(k));
  if (unknown.length) {
    throw new CodehopError(
      ErrorCodes.PROMPT_TEMPLATE,
      `Prompt ${name}: value(s) given for unknown placeholder(s) ${unknown.join(", ")}`,
    );
  }
  return template.replace(PLACEHOLDER, (_m, key: string) => String(vars[key]));
}

/** Reads a prompt file (path relative to prompts/, e.g. "code_agent/system.md"). */
export function loadPrompt(path: string): string {
  return readFileSync(join(PROMPTS_DIR, path), "utf8");
}

/** Loads and strictly renders a prompt file. */
export function renderPrompt(path: string, vars: Record<string, string | number>): string {
  return renderTemplate(loadPrompt(path), vars, path);
}

/** Every prompt file under prompts/ (relative paths), for the render-all test. */
export function listPromptFiles(dir = PROMPTS_DIR): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d)) {
      const full = join(d, entry);
      if (statSync(full).isDirectory()) walk(full);
      else if (/\.(md|txt)$/.test(entry)) out.push(relative(dir, full));
    }
  };
  walk(dir);
  return out.sort();
}
