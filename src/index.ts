/**
 * codehop's public API (`import { ... } from "codehop"`).
 *
 * - The reference application: `ask`, `resume`, `replay`, `history`, `createManagerGraph` and the
 *   QA team (manager → wikipedia_search → page_search); the run lifecycle every app shares.
 * - The chat app: `chat(threadId, message, { files, urls })`, `createChatGraph`, the per-thread
 *   knowledge base of attached files.
 * - The framework: `createCodeAgent`, `defineTeam`, `agentAsTool`, `defineTool`, the run context,
 *   `resolveModel`, `createSandbox`, human approval of tool calls, MCP tools.
 * - Knowledge sources, persistence and the scripted OpenAI-compatible server used for tests/demos.
 */

// Application: the QA app (ask / resume / replay / history / trace) and the run lifecycle of every app
export {
  ask,
  resume,
  replay,
  history,
  trace,
  readResult,
  runConfigurable,
  qaApp,
} from "./apps/qa/app.ts";
export type { AskOptions } from "./apps/qa/app.ts";
export {
  APPS,
  appForThread,
  resumeThread,
  replayThread,
  historyOfThread,
  traceOfThread,
  deleteThread,
} from "./apps/index.ts";
export {
  startRun,
  resumeRun,
  replayRun,
  readRunResult,
  runTurn,
  reflectOnScore,
} from "./runs/lifecycle.ts";
export type { StartOptions, ReplayOptions, ResumeOptions, TurnOptions } from "./runs/lifecycle.ts";
export { threadHistory, traceThread, type CheckpointSummary } from "./runs/inspect.ts";
export type { RunApp, RunOptions, RunServices, AppGraph } from "./runs/app.ts";
export type { AskResult, UsageReport, SourceReport } from "./runs/result.ts";
export { loadAppConfig, assertModelConfigured, modelSetupHelp } from "./runs/config.ts";
export type { AppConfig, AppConfigOverrides } from "./runs/config.ts";
export { RunProgress, type StreamEvent, type AgentView, type StepView } from "./runs/progress.ts";
export { createLiveView, type LiveView } from "./runs/tree-renderer.ts";
export { ensureDemoCorpus, startDemoModelServer } from "./apps/qa/demo.ts";
export { demoRules, DEMO_QUESTIONS, DEMO_ANSWERS } from "./apps/qa/demo-trajectories.ts";
export { sourceFromConfig, openSourceFor, lazySource } from "./apps/common/knowledge-source.ts";

// The research app (planner → researcher → page_reader, then writer, verifier, report)
export { research, researchApp, researchHtml, researchResultFields } from "./apps/research/app.ts";
export type {
  ResearchOptions,
  ResearchResult,
  ResearchQuestionReport,
} from "./apps/research/app.ts";
export {
  researchTeam,
  createResearcherGraph,
  createResearcherBuilder,
  createPlannerAgent,
  RESEARCH_AGENT_NAMES,
  RESEARCH_MODEL_USERS,
  RESEARCH_RECURSION_LIMIT,
} from "./apps/research/team.ts";
export type { ResearchAgentOptions, ResearcherGraphOptions } from "./apps/research/team.ts";
export {
  ResearchSettingsSchema,
  resolveResearchSettings,
  checkTopic,
  MAX_TOPIC_CHARS,
  MAX_QUESTIONS,
} from "./apps/research/base/settings.ts";
export type { ResearchSettings, ResearchSettingsInput } from "./apps/research/base/settings.ts";
export { ResearchInput } from "./apps/research/base/state.ts";
export type { Citation, ReportSection } from "./apps/research/base/state.ts";
export type { CitedPassage, Note, QuestionRecord } from "./apps/research/base/records.ts";
export { renderReportHtml } from "./apps/research/report/html.ts";
export {
  demoResearchScript,
  researchResponder,
  DEMO_RESEARCH,
} from "./apps/research/demo-trajectories.ts";
export { judgeClaims, parseVerdicts } from "./apps/common/verifier.ts";
export type {
  ClaimJudgement,
  ClaimResult,
  ClaimToCheck,
  ClaimVerdict,
  EvidencePassage,
  VerificationReport,
} from "./apps/common/verifier.ts";

// The QA team (manager → wikipedia_search → page_search)
export {
  qaTeam,
  AGENT_NAMES,
  MODEL_SETUP_HELP,
  ManagerInput,
  createManagerGraph,
  createManagerBuilder,
  createManagerAgent,
  createWikipediaSearchAgent,
  createWikipediaSearchBuilder,
  createPageSearchAgent,
  createPageSearchBuilder,
  createSearchInfoTool,
  pageSearchTask,
  MANAGER_MAX_STEPS,
  MANAGER_RECURSION_LIMIT,
} from "./apps/qa/team.ts";
export type { ManagerGraphOptions, ReferenceAgentOptions, AgentName } from "./apps/qa/team.ts";

// The chat app (conversations with files and links)
export {
  chat,
  chatApp,
  chatHistory,
  attachToThread,
  threadFiles,
  removeThreadFile,
} from "./apps/chat/app.ts";
export type { ChatOptions, ChatResult } from "./apps/chat/app.ts";
export {
  chatTeam,
  createChatGraph,
  createChatBuilder,
  createChatAgent,
  CHAT_AGENT,
  CHAT_MAX_STEPS,
} from "./apps/chat/team.ts";
export type { ChatAgentOptions, ChatGraphOptions } from "./apps/chat/team.ts";
export { ChatState, ChatInput, type ConversationSummary } from "./apps/chat/conversation/state.ts";
export {
  ChatFiles,
  citeLabel,
  type ThreadFile,
  type FilePassage,
} from "./apps/chat/conversation/knowledge-base.ts";
export type { AttachmentInput, AttachmentResult } from "./apps/chat/conversation/attachments.ts";
export {
  grantChatAccess,
  LOCAL_USER_ACCESS,
  type ChatAccess,
} from "./apps/chat/conversation/access.ts";
export type { Citation as ChatCitation } from "./apps/chat/conversation/citations.ts";
export {
  CHAT_DEFAULTS,
  ChatSettingsSchema,
  type ChatSettings,
} from "./apps/chat/conversation/settings.ts";
export { ChatRunContextSchema } from "./apps/chat/conversation/context.ts";
export { createSearchFilesTool } from "./apps/chat/tools/search-files.ts";
export { startChatDemo } from "./apps/chat/demo.ts";
export { DEMO_ROUNDS, chatResponder } from "./apps/chat/demo-trajectories.ts";

// The general assistant (assistant → web_search: web, files, images, audio; docs/assistant.md)
export { assist, assistantApp, type AssistOptions } from "./apps/assistant/app.ts";
export {
  ASSISTANT_AGENT_NAMES,
  AssistantInput,
  assistantTeam,
  createAssistantAgent,
  createAssistantGraph,
  createWebSearchAgent,
  type AssistantGraphOptions,
} from "./apps/assistant/team.ts";
export type { AssistantAgentOptions } from "./apps/assistant/agents/options.ts";
export { AssistantFiles } from "./apps/assistant/base/files.ts";
export {
  AssistantRunContextSchema,
  LOCAL_ASSISTANT_ACCESS,
  grantAssistantAccess,
  webSettingsOf,
  type AssistantAccess,
} from "./apps/assistant/base/context.ts";
export { createWebTools } from "./apps/assistant/tools/web.ts";
export { createInspectFileTool } from "./apps/assistant/tools/inspect-file.ts";
export { createVisualizerTool } from "./apps/assistant/tools/visualizer.ts";

// Web ports (search providers, text and real browsers, web archive, downloads)
export {
  WebBrowser,
  WebError,
  WEB_DEFAULTS,
  createPageLoader,
  createSearchProvider,
  createTextLoader,
  createChromiumLoader,
  closeChromiumBrowsers,
  findSnapshot,
  formatSearchResults,
  downloadFile,
  resolveWebSettings,
  webSettingsFromEnv,
  type PageLoader,
  type SearchProvider,
  type SearchResponse,
  type SearchResult,
  type WebPage,
  type WebSettings,
} from "./web/index.ts";
export { WebTestServer, type SitePage } from "./testing/web-test-server.ts";

// Framework
export {
  createCodeAgent,
  type CodeAgent,
  type CodeAgentOptions,
  type CodeAgentInputMapping,
} from "./framework/code-agent.ts";
export { agentAsTool, type AgentToolOptions } from "./core/agent-as-tool.ts";
export {
  defineTool,
  renderToolDoc,
  type CodeTool,
  type ToolCallContext,
  type ApprovalPolicy,
} from "./tools/define-tool.ts";
// Human approval of tool calls (interrupt payload and resume value schemas)
export {
  APPROVAL_INTERRUPT_TYPE,
  ApprovalRequestSchema,
  ApprovalResumeSchema,
  ApprovalDecisionSchema,
  isApprovalRequest,
  pendingApprovals,
  approvalResume,
  type ApprovalRequest,
  type ApprovalResume,
  type ApprovalDecision,
} from "./core/approval.ts";
// MCP tools and the configuration file
export {
  connectMcpServers,
  codeNameOf,
  type McpToolSet,
  type McpServerTools,
  type McpServerOptions,
  type McpApproval,
} from "./tools/mcp.ts";
export {
  CONFIG_FILE_NAME,
  CodehopConfigFileSchema,
  McpServerConfigSchema,
  findConfigFile,
  readConfigFile,
  parseConfig,
  type CodehopConfigFile,
  type McpServerConfig,
} from "./config/config-file.ts";
/** The environment as codehop reads it (what `knowledgeSourceOptionsFromEnv` and others take). */
export { readEnv, type CodehopEnv } from "./config/env.ts";
export { resolveModel } from "./core/models.ts";
export { parseModelName, ProviderChatModel } from "./core/providers.ts";
export { runTracing, type RunTracing } from "./tracing/index.ts";
export {
  createMemoryTools,
  memoryUserOf,
  recallMemories,
  type MemorySettings,
} from "./core/memory.ts";
export { CodehopStore, type MemoryStoreOptions, type StoreTtl } from "./memory/store.ts";
export { openSqliteMemoryStore } from "./memory/sqlite-store.ts";
export { openPostgresMemoryStore } from "./memory/postgres-store.ts";
export { openMemoryStore, memoryStoreOptions } from "./memory/open.ts";
export { createSandbox } from "./sandbox/index.ts";
export type {
  CodeSandbox,
  ActionResult,
  RunActionRequest,
  VariablesSnapshot,
} from "./sandbox/contract.ts";
export type {
  CallJournal,
  CallKey,
  CallOutcome,
  JournalRow,
  JournalRowStore,
  ReplayableJournal,
} from "./core/journal.ts";
export { taskEpochTag, createCallJournal } from "./core/journal.ts";
export {
  authUserOf,
  readRunContext,
  withRunContext,
  runContext,
  RunContextSchema,
  type RunAuthUser,
  type RunContext,
} from "./core/run-context.ts";
export {
  clientSettable,
  clientSettableFields,
  ClientSettingError,
  describeClientAccess,
  guardClientRuns,
  oneOf,
  upTo,
  type ClientAccess,
} from "./core/client-settings.ts";
export {
  defineTeam,
  buildTeamAgent,
  teamAgentNames,
  withTeamMember,
  type Team,
  type TeamMember,
  type MemberBuild,
} from "./framework/team.ts";

// Knowledge sources and tools
export {
  openKnowledgeSource,
  knowledgeSourceOptionsFromEnv,
  CorpusSource,
  WikipediaSource,
} from "./store/index.ts";
export {
  ingestDocuments,
  removeDocument,
  extractDocument,
  detectDocumentKind,
  fetchDocument,
  isPublicAddress,
  type ExtractedDocument,
  type DocumentKind,
  type FetchedDocument,
} from "./ingest/index.ts";
export type { KnowledgeSource, Page, PageLookup, PageSummary, Passage } from "./store/types.ts";
export { createSearchWikipediaTool } from "./apps/qa/tools/search-wikipedia.ts";
export { createRetrievePassagesTool } from "./apps/qa/tools/retrieve-passages.ts";

// Persistence
export {
  openPersistence,
  openPersistenceFor,
  openPostgresPersistence,
  CodehopPostgresSaver,
  SqliteCallJournal,
  ThreadRegistry,
  checkpointDbPath,
} from "./persistence/index.ts";
export type {
  Persistence,
  PostgresPersistence,
  SqlitePersistence,
  ThreadRecord,
  ThreadStore,
  ThreadStatus,
} from "./persistence/index.ts";

// Server and workers (LangGraph server API over PostgreSQL)
export { startServer, type ServerOptions, type RunningServer } from "./server/app.ts";
export { startWorker, type WorkerOptions, type RunningWorker } from "./server/worker.ts";

// Evaluation harness
export {
  runEval,
  loadDataset,
  scoreAnswer,
  normalizeAnswer,
  exactMatch,
  f1Score,
  coverExactMatch,
} from "./eval/index.ts";
export type {
  RunEvalOptions,
  EvalRunOutcome,
  EvalReport,
  EvalExample,
  QuestionResult,
  SystemSummary,
  DatasetFormat,
  SystemName,
} from "./eval/index.ts";

// Errors and testing helpers
export { CodehopError, ErrorCodes, type ErrorCode } from "./errors.ts";
export { ScriptedOpenAIServer, trajectoryResponder } from "./testing/scripted-openai-server.ts";
