import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ChatRequest, Responder } from "../../testing/scripted-openai-server.ts";
import {
  assistantDemoResponder,
  code,
  demoFiles,
  demoSpreadsheetName,
  type AssistantTurn,
} from "./demo-trajectories.ts";

/**
 * A GAIA-format mini set over the demo's world (the city tourism site, the museum's report and
 * spreadsheet), for tests and the eval benchmark: `metadata.jsonl` (task_id, Question, Level,
 * Final answer, file_name) with the attachments beside it, and the scripted model that plays the
 * assistant (and answers the direct baseline) on it. One task is answered wrong on purpose, so
 * accuracy is not trivially 100%.
 */

/** The mini set's tasks: id, question, level, gold answer, attachment. */
export const GAIA_MINI_TASKS = [
  {
    id: "mini-1",
    question:
      "According to the attached annual report, how many visitors did the City Museum have in 2023? Give the number only.",
    level: 1,
    answer: "182000",
    file: "annual-report-2023.pdf",
  },
  {
    id: "mini-2",
    question:
      "According to the city tourism office's website, how many visitors did the City Museum have in 2024? Give the number only.",
    level: 2,
    answer: "214500",
    file: "",
  },
  {
    id: "mini-3",
    question:
      "Which month of 2024 had the most visitors at the City Museum, according to the attached spreadsheet?",
    level: 1,
    answer: "August",
    file: "sheet",
  },
  {
    id: "mini-4",
    question:
      "Which two venues of the tourism office's 2024 table had more visitors than the Science Hall? Answer as a comma-separated list, largest first.",
    level: 3,
    answer: "Botanical Garden, City Museum",
    file: "",
  },
] as const;

/** Writes the mini set into `dir` (created); returns `dir`. */
export function writeGaiaMiniSet(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const files = demoFiles();
  const sheet = demoSpreadsheetName();
  for (const [name, bytes] of Object.entries(files)) writeFileSync(join(dir, name), bytes);
  const lines = GAIA_MINI_TASKS.map((t) =>
    JSON.stringify({
      task_id: t.id,
      Question: t.question,
      Level: t.level,
      "Final answer": t.answer,
      file_name: t.file === "sheet" ? sheet : t.file,
      "Annotator Metadata": { Steps: "scripted" },
    }),
  );
  writeFileSync(join(dir, "metadata.jsonl"), `${lines.join("\n")}\n`);
  return dir;
}

/** The assistant's script for the mini set's tasks. */
function miniAssistant({ task, seen, last, sheet }: AssistantTurn): string {
  if (task.includes("attached annual report")) {
    if (!seen.length)
      return code(
        "I read the report.",
        'console.log(await inspect_file("annual-report-2023.pdf", "How many visitors did the City Museum have in 2023?"));',
      );
    return /Short answer: 182000/.test(last)
      ? code("The report says 182000.", 'final_answer("182000");')
      : code("The report did not say.", 'final_answer("unknown");');
  }
  if (task.includes("Which month of 2024")) {
    if (!seen.length)
      return code(
        "I read the spreadsheet.",
        `console.log(await inspect_file(${JSON.stringify(sheet)}, "Which month of 2024 had the most visitors?"));`,
      );
    return /Short answer: August/.test(last)
      ? code("August had the most.", 'final_answer("August");')
      : code("The spreadsheet did not say.", 'final_answer("unknown");');
  }
  if (task.includes("how many visitors did the City Museum have in 2024")) {
    if (!seen.length)
      return code(
        "I ask the web agent.",
        'console.log(await web_search_agent("How many visitors did the City Museum have in 2024, according to the city tourism office\'s website? Give the exact number and the page address."));',
      );
    return /214,500/.test(last)
      ? code("The tourism office says 214,500.", 'final_answer("214500");')
      : code("Not found.", 'final_answer("unknown");');
  }
  // The list task: answered from memory, wrongly (one venue missing), without looking it up.
  return code("I think it is only the Botanical Garden.", 'final_answer("Botanical Garden");');
}

/** The direct baseline's replies: it knows only the list task's answer. */
function miniDirect(req: ChatRequest): string | undefined {
  const system = req.messages.find((m) => m.role === "system")?.content ?? "";
  if (!system.startsWith("You answer trivia")) return undefined;
  const question = req.messages.find((m) => m.role === "user")?.content ?? "";
  return question.includes("Which two venues") ? "Botanical Garden, City Museum" : "I don't know";
}

/** The scripted model of the mini set, for the demo site at `origin`. */
export function gaiaMiniResponder(origin: string): Responder {
  return assistantDemoResponder(origin, miniAssistant, miniDirect);
}
