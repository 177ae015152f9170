import { randomUUID } from "node:crypto";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { AppGraph, RunApp } from "../../runs/app.ts";
import { loadAppConfig, type AppConfig } from "../../runs/config.ts";
import { startRun, type StartOptions } from "../../runs/lifecycle.ts";
import type { AskResult } from "../../runs/result.ts";
import type { WebSettings } from "../../web/settings.ts";
import { LOCAL_ASSISTANT_ACCESS } from "./base/context.ts";
import { AssistantFiles } from "./base/files.ts";
import { INSPECTOR, VISUALIZER } from "./base/media.ts";
import { assistantRecording } from "./recording.ts";
import { ASSISTANT_RECURSION_LIMIT, assistantTeam, createAssistantGraph } from "./team.ts";

/**
 * The general assistant for the run lifecycle: a task (and its files) in, the assistant → web_search
 * team, the answer out. Its threads resume and replay like any other (`codehop resume`, `replay`);
 * a thread's files live in `<home>/assistant-files/<thread>/` and are deleted with the thread.
 */
export const assistantApp: RunApp = {
  ...assistantRecording,
  team: assistantTeam,
  graph: (checkpointer: BaseCheckpointSaver) => createAssistantGraph({ checkpointer }) as AppGraph,
  recursionLimit: ASSISTANT_RECURSION_LIMIT,
  input: (question) => ({ question }),
  inputText: (input) => String(input.question ?? ""),
  modelUsers: [INSPECTOR, VISUALIZER],
  async openServices(config: AppConfig) {
    return {
      // The CLI, assist() and eval run on the user's own machine: every web setting is theirs.
      context: {
        assistantFiles: new AssistantFiles(config.home),
        assistantAccess: LOCAL_ASSISTANT_ACCESS,
      },
      close: async () => {},
    };
  },
  async deleteThread(config, threadId) {
    return new AssistantFiles(config.home).deleteThread(threadId);
  },
};

/** Options of {@link assist}. */
export interface AssistOptions extends StartOptions {
  /** Local files the task comes with: copied into the thread's folder, read with inspect_file. */
  files?: readonly string[];
  /** Web settings for this run over the environment's (search provider, browser, limits ...). */
  web?: Partial<WebSettings>;
}

/**
 * Solves a task with the general assistant (assistant → web_search: web search and browsing, file
 * inspection, images, audio, code), checkpointing every step. `files` are copied into the thread's
 * folder first (so a resume reads the same bytes); the thread is recorded before anything slow
 * happens, so a run killed at any point continues with `resumeThread`.
 */
export async function assist(task: string, options: AssistOptions = {}): Promise<AskResult> {
  const { files = [], web, ...start } = options;
  const threadId = start.threadId ?? randomUUID();
  const store = new AssistantFiles(loadAppConfig(start.config).home);
  const names: string[] = [];
  for (const file of files) names.push(await store.attach(threadId, file));
  return startRun(assistantApp, task, {
    ...start,
    threadId,
    context: { ...start.context, ...(web ? { web } : {}) },
    input: { ...start.input, ...(names.length ? { files: names } : {}) },
  });
}
