import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { CallJournal } from "../../../core/journal.ts";
import type { CodeSandbox } from "../../../sandbox/contract.ts";
import type { AssistantFilesDeps } from "../base/context.ts";

/** What the assistant's agents are built with (the team's dependencies). */
export interface AssistantAgentOptions extends AssistantFilesDeps {
  /** Chat model instance or name (default: resolved per run from the run context / environment). */
  model?: string | BaseChatModel;
  /** Sandbox for code actions (default: the run context's, else the process-wide sandbox). */
  sandbox?: CodeSandbox;
  /** Call journal for runs whose context brings none (graphs served by `langgraphjs dev`). */
  journal?: CallJournal;
}
