import { AIMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { CodeAgent } from "../../../framework/code-agent.ts";
import { NOSTREAM_TAG, withoutParentStream } from "../../../core/pregel-internals.ts";
import { readRunContext, withRunContext } from "../../../core/run-context.ts";
import { memoryUserOf, recallMemories } from "../../../core/memory.ts";
import { CodehopError, ErrorCodes } from "../../../errors.ts";
import { DOCUMENT_KIND_LABELS } from "../../../ingest/documents.ts";
import { renderPrompt } from "../../../prompts/render.ts";
import { answerText } from "../../../runs/result.ts";
import type { AttachmentResult } from "../conversation/attachments.ts";
import { withCitations } from "../conversation/citations.ts";
import { chatFilesOf, threadIdOf, type ChatFilesDeps } from "../conversation/context.ts";
import type { ThreadFile } from "../conversation/knowledge-base.ts";
import { currentTurn, isOpenRoundMessage, renderConversation } from "../conversation/memory.ts";
import type { ChatStateValue, ChatUpdate } from "../conversation/state.ts";

const KIND_LABEL: Readonly<Record<ThreadFile["kind"], string>> = DOCUMENT_KIND_LABELS;

/** The files block of the round's task: what is attached, and what failed to attach this round. */
export function renderFiles(
  files: readonly ThreadFile[],
  attachments: readonly AttachmentResult[],
): string {
  const parts: string[] = [];
  if (files.length) {
    const lines = files.map((f) => {
      const what = [
        KIND_LABEL[f.kind] ?? f.kind,
        f.pages ? `${f.pages} page${f.pages === 1 ? "" : "s"}` : "",
      ]
        .filter(Boolean)
        .join(", ");
      return `- ${f.name} (${what}${f.truncated ? ", only its beginning was indexed" : ""})`;
    });
    parts.push(
      `Files attached to this conversation (search them with search_files):\n${lines.join("\n")}`,
    );
  }
  const failed = attachments.filter((a) => !a.ok);
  if (failed.length) {
    parts.push(
      `Could not be attached this round (tell the user why):\n${failed.map((a) => `- ${a.name}: ${a.error}`).join("\n")}`,
    );
  }
  return parts.length ? `${parts.join("\n\n")}\n\n` : "";
}

/** Facts about the user shown with each round at most. */
const RECALLED = 5;

/**
 * What the chat remembers about the run's user that relates to the message (long-term memory,
 * CODEHOP_MEMORY=1): a block of the round's task, or "" when nothing is remembered. Its facts
 * come from earlier conversations (other threads) through the run's store.
 */
export async function recalledBlock(
  config: LangGraphRunnableConfig,
  message: string,
): Promise<string> {
  if (!config.store) return "";
  const facts = await recallMemories(config.store, memoryUserOf(config), message, RECALLED);
  if (!facts.length) return "";
  return `What you remember about the user from earlier conversations (use recall for more):\n${facts
    .map((f) => `- ${f.text}`)
    .join("\n")}\n\n`;
}

/**
 * respond: the chat agent answers the user's latest message. Its task is the round's view
 * (prompts/chat/round.md): the summary of older rounds, the recent rounds verbatim, the attached
 * files and the message. It runs as a subgraph of this node (its steps checkpointed under the
 * node's namespace, so an interrupted round resumes inside the action it stopped in, and an
 * approval it raises pauses the whole conversation), under the round's number as its journal
 * epoch; its reply, with citations, becomes the round's AIMessage (replacing the round's open reply).
 */
export function makeRespondNode(agent: CodeAgent, deps: ChatFilesDeps) {
  return async function respond(
    state: ChatStateValue,
    config: LangGraphRunnableConfig,
  ): Promise<ChatUpdate> {
    const threadId = threadIdOf(config);
    const { earlier, message } = currentTurn(state.messages);
    if (!message) {
      throw new CodehopError(
        ErrorCodes.INPUT_INVALID,
        // The code in the message too: the LangGraph API (Studio, `codehop serve`) sends no code.
        `The conversation's last message is not a user message with text: there is nothing to answer (send { messages: [{ role: "user", content: "..." }] }). [${ErrorCodes.INPUT_INVALID}]`,
      );
    }
    const files = chatFilesOf(config, deps).list(threadId);
    const context = readRunContext(config);
    const task = renderPrompt("chat/round.md", {
      conversation: renderConversation(earlier, state.summary),
      memories: context.memory?.recall ? await recalledBlock(config, message) : "",
      files: renderFiles(files, state.attachments ?? []),
      message,
    });
    let child: LangGraphRunnableConfig = withRunContext(
      {
        ...config,
        // The agent's own model calls are its work, not the reply: chat UIs must not stream them.
        tags: [...(config.tags ?? []), NOSTREAM_TAG],
        recursionLimit: agent.recursionLimit,
      },
      // Each round's calls get their own journal keys, also in a replay (where task ids change).
      { taskEpochs: [...(context.taskEpochs ?? []), earlier.length] },
    );
    if (!context.streamAgentSteps) child = withoutParentStream(child);
    const out = await agent.graph.invoke({ task, context: {}, agent: agent.name }, child);
    const { content, citations } = withCitations(answerText(out.answer), out.sources);
    // The reply takes the place of the round's open reply (attach_files), if it has one.
    const open = state.messages[state.messages.length - 1];
    const id = isOpenRoundMessage(open) ? open.id : undefined;
    return {
      messages: [
        new AIMessage({ content, additional_kwargs: { citations }, ...(id ? { id } : {}) }),
      ],
      usage: out.usage ?? {},
    };
  };
}
