/**
 * The graphs `langgraph.json` serves (Studio, `npm run studio`, `langgraphjs dev`), in this one
 * module, which owns the environment fallback: a run that brings no knowledge source searches the
 * one the environment names (CODEHOP_CORPUS, else online Wikipedia, cached under CODEHOP_HOME),
 * opened on first use, and the call journal of the environment's persistence; a conversation
 * keeps its files under CODEHOP_HOME. The model comes from the run context, else the environment
 * (src/core/models.ts).
 * No graph here carries a checkpointer: the LangGraph server attaches its own.
 *
 * Every graph here is served: any client of the server writes its run's context and
 * configurable. Each is guarded (`guardClientRuns`, src/core/client-settings.ts): a run that sets
 * a key only the operator may set (the model endpoint, a corpus path ...) fails before it starts,
 * naming the key, and limits a client may set are held to the operator's.
 *
 * Importing the framework (src/core) builds nothing; importing this module builds these graphs.
 */
import { AssistantFiles } from "../apps/assistant/base/files.ts";
import {
  assistantTeam,
  createAssistantGraph,
  createWebSearchAgent,
} from "../apps/assistant/team.ts";
import { ChatFiles } from "../apps/chat/conversation/knowledge-base.ts";
import { chatTeam, createChatGraph } from "../apps/chat/team.ts";
import { lazySource, openSourceFor } from "../apps/common/knowledge-source.ts";
import {
  createManagerGraph,
  createPageSearchAgent,
  createWikipediaSearchAgent,
  qaTeam,
  type ReferenceAgentOptions,
} from "../apps/qa/team.ts";
import {
  createResearcherGraph,
  researchTeam,
  type ResearchAgentOptions,
} from "../apps/research/team.ts";
import type { ApprovalJournal } from "../core/approval.ts";
import { guardClientRuns } from "../core/client-settings.ts";
import type { CallJournal, ReplayableJournal } from "../core/journal.ts";
import { createCodeAgent } from "../framework/code-agent.ts";
import { openPersistenceFor, type Persistence } from "../persistence/open.ts";
import type { Team } from "../framework/team.ts";
import { loadAppConfig, persistenceLocation } from "../runs/config.ts";
import type { KnowledgeSource } from "../store/types.ts";

let environmentSource: KnowledgeSource | undefined;

/** The environment's knowledge source, for runs that name none (opened lazily, once per process). */
function fromEnvironment(): KnowledgeSource {
  if (!environmentSource) {
    const config = loadAppConfig();
    const kinds = config.sources ?? [config.corpus ? "corpus" : "wikipedia"];
    environmentSource = lazySource(
      () => openSourceFor(config),
      kinds.length === 1 ? kinds[0] : "mixed",
    );
  }
  return environmentSource;
}

let environmentPersistence: Promise<Persistence> | undefined;

/**
 * The call journal of runs that bring none (the LangGraph server gives a run only its own
 * checkpointer): the one of the environment's persistence — Postgres when CODEHOP_DATABASE_URL is
 * set, else CODEHOP_HOME/checkpoints.db — opened on first use. With it, a run the server resumes
 * (after an approval, a crash) is served the calls its action had finished instead of making them
 * again.
 */
export const environmentJournal: CallJournal & ApprovalJournal = {
  get: async (key) => (await journalOfEnvironment()).get(key),
  put: async (key, outcome) => (await journalOfEnvironment()).put(key, outcome),
  getDecision: async (threadId, approvalId) =>
    (await journalOfEnvironment()).getDecision(threadId, approvalId),
  putDecision: async (threadId, decision) =>
    (await journalOfEnvironment()).putDecision(threadId, decision),
  markAsked: async (threadId, approvalId) =>
    (await journalOfEnvironment()).markAsked!(threadId, approvalId),
  wasAsked: async (threadId, approvalId) =>
    (await journalOfEnvironment()).wasAsked!(threadId, approvalId),
};

async function journalOfEnvironment(): Promise<ReplayableJournal & ApprovalJournal> {
  environmentPersistence ??= openPersistenceFor(persistenceLocation(loadAppConfig())).catch(
    (err: unknown) => {
      environmentPersistence = undefined; // the next call tries again (e.g. the database is back)
      throw err;
    },
  );
  return (await environmentPersistence).journal as ReplayableJournal & ApprovalJournal;
}

const qaDeps: ReferenceAgentOptions = {
  fallbackSource: fromEnvironment,
  journal: environmentJournal,
};

/** The QA app: `{ question }` in, the manager → wikipedia_search → page_search team. */
export const manager = guardClientRuns(createManagerGraph(qaDeps));
/** The wikipedia_search agent on its own (input `{ task }`). */
export const wikipedia_search = guardClientRuns(createWikipediaSearchAgent(qaDeps).graph);
/** The page_search agent on its own (input `{ task, context: { page } }`). */
export const page_search = guardClientRuns(createPageSearchAgent(qaDeps).graph);
const researchDeps: ResearchAgentOptions = {
  fallbackSource: fromEnvironment,
  journal: environmentJournal,
};

/**
 * The research app: `{ topic, maxQuestions? }` in; planner → researcher pipelines → writer →
 * verifier → report; the cited, verified report in `answer`, with `citations` and `verification`.
 */
export const researcher = guardClientRuns(createResearcherGraph(researchDeps));
/** A generic code agent with no tools (plain JavaScript only). */
export const code_agent = guardClientRuns(
  createCodeAgent({
    name: "code_agent",
    description: "a general assistant that answers by computing in JavaScript",
    maxSteps: 6,
    journal: environmentJournal,
  }).graph,
);

let environmentFiles: ChatFiles | undefined;

/** Where conversations keep their files when a run names no store: under CODEHOP_HOME. */
function chatFilesFromEnvironment(): ChatFiles {
  if (!environmentFiles) {
    const config = loadAppConfig();
    environmentFiles = new ChatFiles(config.home, { embeddings: config.embeddings });
  }
  return environmentFiles;
}

/**
 * The chat app: `{ messages }` in (the LangGraph SDK's streaming hooks, agent-chat-ui), the chat
 * agent answers the last user message with the thread's attached files (files uploaded as
 * content blocks, or `attach: [{ url }]` in the input).
 */
export const chat = guardClientRuns(
  createChatGraph({
    fallbackFiles: chatFilesFromEnvironment,
    journal: environmentJournal,
  }),
);

let environmentAssistantFiles: AssistantFiles | undefined;

/** Where assistant tasks keep their files when a run names no store: under CODEHOP_HOME. */
function assistantFilesFromEnvironment(): AssistantFiles {
  environmentAssistantFiles ??= new AssistantFiles(loadAppConfig().home);
  return environmentAssistantFiles;
}

const assistantDeps = {
  fallbackFiles: assistantFilesFromEnvironment,
  journal: environmentJournal,
};

/**
 * The general assistant: `{ question, files? }` in (file names of the thread's folder), the
 * assistant → web_search team with the operator's web settings (docs/assistant.md).
 */
export const assistant = guardClientRuns(createAssistantGraph(assistantDeps));
/** The web agent on its own (input `{ task }`). */
export const web_search = guardClientRuns(createWebSearchAgent(assistantDeps).graph);

/** One graph of langgraph.json: the compiled graph, and the team and agent it is, if any. */
export interface GraphEntry {
  graph: { getGraphAsync(o: { xray: boolean }): Promise<{ drawMermaid(): string }> };
  team?: Team;
  agent?: string;
}

/** Every graph above by its langgraph.json name (what `codehop graph` draws). */
export const GRAPH_ENTRIES: Readonly<Record<string, GraphEntry>> = {
  manager: { graph: manager, team: qaTeam, agent: "manager" },
  wikipedia_search: { graph: wikipedia_search, team: qaTeam, agent: "wikipedia_search" },
  page_search: { graph: page_search, team: qaTeam, agent: "page_search" },
  code_agent: { graph: code_agent },
  researcher: { graph: researcher, team: researchTeam },
  chat: { graph: chat, team: chatTeam, agent: "chat" },
  assistant: { graph: assistant, team: assistantTeam, agent: "assistant" },
  web_search: { graph: web_search, team: assistantTeam, agent: "web_search" },
};
