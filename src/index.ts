/**
 * codehop's public API (`import { ... } from "codehop"`).
 *
 * - The reference application: `ask`, `resume`, `replay`, `history`, `createManagerGraph` and the
 *   three agents (manager → wikipedia_search → page_search).
 * - The framework: `createCodeAgent`, `agentAsTool`, `defineTool`, `resolveModel`, `createSandbox`.
 * - Knowledge sources, persistence and the scripted OpenAI-compatible server used for tests/demos.
 */

// Application
export { ask, resume, replay, history, trace, readResult, runConfigurable } from "./app/run.ts";
export type { AskOptions, RunOptions, ReplayOptions, CheckpointSummary } from "./app/run.ts";
export type { AskResult, UsageReport, SourceReport } from "./app/result.ts";
export {
  loadAppConfig,
  assertModelConfigured,
  AGENT_NAMES,
  MODEL_SETUP_HELP,
} from "./app/config.ts";
export type { AppConfig, AppConfigOverrides, AgentName } from "./app/config.ts";
export { RunProgress, type StreamEvent, type AgentView, type StepView } from "./app/progress.ts";
export { createLiveView, type LiveView } from "./app/tree-renderer.ts";
export { ensureDemoCorpus, startDemoModelServer } from "./app/demo.ts";
export { demoRules, DEMO_QUESTIONS, DEMO_ANSWERS } from "./app/demo-trajectories.ts";
export { sourceFromConfig, openSourceFor } from "./app/source.ts";

// Reference graphs
export {
  createManagerGraph,
  createManagerBuilder,
  createManagerAgent,
  MANAGER_MAX_STEPS,
  MANAGER_RECURSION_LIMIT,
} from "./graphs/manager.ts";
export type { ManagerGraphOptions } from "./graphs/manager.ts";
export {
  createWikipediaSearchAgent,
  createWikipediaSearchBuilder,
  createSearchInfoTool,
} from "./graphs/wikipedia-search.ts";
export {
  createPageSearchAgent,
  createPageSearchBuilder,
  pageSearchTask,
  type ReferenceAgentOptions,
} from "./graphs/page-search.ts";

// Framework
export {
  createCodeAgent,
  type CodeAgent,
  type CodeAgentOptions,
  type CodeAgentInputMapping,
} from "./graphs/code-agent.ts";
export { agentAsTool, type AgentToolOptions } from "./agent/agent-as-tool.ts";
export {
  defineTool,
  renderToolDoc,
  type CodeTool,
  type ToolCallContext,
} from "./tools/define-tool.ts";
export { resolveModel } from "./models/index.ts";
export { createSandbox } from "./sandbox/index.ts";
export type { CallJournal, CallKey, CallOutcome } from "./agent/journal.ts";
export { taskEpochTag } from "./agent/journal.ts";

// Knowledge sources and tools
export {
  openKnowledgeSource,
  ingestDocuments,
  CorpusSource,
  WikipediaSource,
} from "./store/index.ts";
export type { KnowledgeSource, Page, PageLookup, PageSummary, Passage } from "./store/types.ts";
export { createSearchWikipediaTool } from "./tools/search-wikipedia.ts";
export { createRetrievePassagesTool } from "./tools/retrieve-passages.ts";

// Persistence
export {
  openPersistence,
  SqliteCallJournal,
  ThreadRegistry,
  checkpointDbPath,
} from "./persistence/index.ts";
export type { Persistence, ThreadRecord } from "./persistence/index.ts";

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
