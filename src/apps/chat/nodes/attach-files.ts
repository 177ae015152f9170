import { type BaseMessage, HumanMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { readRunContext } from "../../../core/run-context.ts";
import type { UploadReader } from "../../../core/uploads.ts";
import type { CodeTool } from "../../../tools/define-tool.ts";
import { chatAccessOf } from "../conversation/access.ts";
import { attachAll, takeUploads, type AttachmentInput } from "../conversation/attachments.ts";
import { chatFilesOf, threadIdOf, type ChatFilesDeps } from "../conversation/context.ts";
import { openRoundMessage } from "../conversation/memory.ts";
import { chatSettingsOf } from "../conversation/settings.ts";
import type { ChatStateValue, ChatUpdate } from "../conversation/state.ts";

/** The server's store of the run's uploads (a plain object a client sent is no store). */
function uploadsOf(config: LangGraphRunnableConfig): UploadReader | undefined {
  const uploads = readRunContext(config).uploads;
  return typeof uploads?.get === "function" ? uploads : undefined;
}

/** Whether a tool of the round (the graph's or the run's `agentTools.chat`) may ask for approval. */
function mayAskApproval(
  tools: readonly CodeTool<any>[] | undefined,
  config: LangGraphRunnableConfig,
): boolean {
  const runTools = readRunContext(config).agentTools?.chat ?? [];
  return [...(tools ?? []), ...runTools].some(
    (t) => t.approval !== undefined && t.approval !== "never",
  );
}

/**
 * attach_files: the round's first step. Adds the files and links of the input's `attach` and the files a
 * chat UI uploaded inside the user's message (whose bytes it then replaces by a note, keeping the
 * checkpoints small) to the thread's knowledge base, and records one result per file in
 * `attachments` ([] on a round without any). A file that cannot be attached is a failed result
 * the agent tells the user about; the round goes on. Re-running it (a resumed round) is harmless:
 * a file attached again from the same place replaces itself. When a tool of the round may ask
 * for approval, it also opens the round's reply (an empty AI message the reply replaces), so that
 * a paused round's conversation ends with an AI message, under which chat UIs draw the approval.
 */
export function makeAttachFilesNode(deps: ChatFilesDeps & { tools?: readonly CodeTool<any>[] }) {
  return async function attach(
    state: ChatStateValue,
    config: LangGraphRunnableConfig,
  ): Promise<ChatUpdate> {
    const settings = chatSettingsOf(config);
    const files = chatFilesOf(config, deps);
    // Retention: indexes of conversations idle for too long go (at most once an hour).
    // The conversation being continued is not idle, however long ago its last round was.
    files.sweepIfDue(settings.filesRetentionDays, undefined, undefined, threadIdOf(config));
    const inputs: AttachmentInput[] = [...(state.attach ?? [])];
    const update: ChatUpdate = { attachments: [] };
    const last = state.messages[state.messages.length - 1];
    if (last?.getType() === "human") {
      const { uploads, content } = takeUploads(last.content);
      const messages: BaseMessage[] = [];
      if (uploads.length) {
        inputs.push(...uploads);
        messages.push(
          new HumanMessage({
            content: content as HumanMessage["content"],
            id: last.id,
            ...(last.name ? { name: last.name } : {}),
          }),
        );
      }
      if (mayAskApproval(deps.tools, config)) messages.push(openRoundMessage());
      if (messages.length) update.messages = messages;
    }
    if (!inputs.length) return update;
    update.attachments = await attachAll(files, threadIdOf(config), inputs, settings, {
      signal: config.signal,
      // Local paths and private addresses only when code granted them (the CLI, chat()).
      access: chatAccessOf(config, deps.access),
      uploads: uploadsOf(config),
    });
    return update;
  };
}
