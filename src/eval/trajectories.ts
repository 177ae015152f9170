import { appendFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import type { AgentTranscript, QuestionResult } from "./types.ts";

/** A question counts as correct for export when the judge says so, or (no judge) on EM = 1. */
export function isCorrect(r: Pick<QuestionResult, "error" | "judge" | "em">): boolean {
  if (r.error) return false;
  return r.judge ? r.judge.correct : r.em === 1;
}

/**
 * Writes `<dir>/<system>/<agent>.jsonl`: one chat transcript per agent invocation of every
 * correctly answered question, as `{"messages":[{role,content}...],"metadata":{...}}` — the shape
 * fine-tuning tools (OpenAI, TRL, Axolotl "chat_template") read. The folder is rewritten from the
 * stored results each time, so it always matches the report. Returns the files written.
 */
export function exportTrajectories(
  dir: string,
  results: Omit<QuestionResult, "transcripts">[],
  transcriptsOf: (r: Omit<QuestionResult, "transcripts">) => AgentTranscript[],
): string[] {
  rmSync(dir, { recursive: true, force: true });
  const files = new Set<string>();
  for (const r of results) {
    if (!isCorrect(r)) continue;
    // Written question by question, so a large run never holds every transcript in memory.
    const lines = new Map<string, string[]>();
    for (const t of transcriptsOf(r)) {
      if (t.messages.length === 0) continue;
      const file = join(dir, safeName(r.system), `${safeName(t.agent)}.jsonl`);
      const entry = {
        messages: t.messages,
        metadata: {
          system: r.system,
          agent: t.agent,
          question_id: r.questionId,
          thread_id: r.threadId,
          answer: r.prediction,
          gold: r.answers,
        },
      };
      (lines.get(file) ?? lines.set(file, []).get(file)!).push(JSON.stringify(entry));
    }
    for (const [file, ls] of lines) {
      if (!files.has(file)) mkdirSync(dirname(file), { recursive: true });
      files.add(file);
      appendFileSync(file, ls.join("\n") + "\n");
    }
  }
  return [...files].sort();
}

function safeName(s: string): string {
  return s.replace(/[^A-Za-z0-9_.-]+/g, "_") || "agent";
}
