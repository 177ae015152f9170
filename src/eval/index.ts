/** The evaluation harness (`codehop eval`): datasets, metrics, systems, runner, reports. */
export { runEval, writeReports, type RunEvalOptions, type EvalRunOutcome } from "./runner.ts";
export {
  loadDataset,
  detectFormat,
  describeBadRecord,
  type LoadDatasetOptions,
} from "./datasets.ts";
export {
  normalizeAnswer,
  exactMatch,
  f1Score,
  coverExactMatch,
  scoreAnswer,
  type AnswerScores,
} from "./metrics.ts";
export {
  summarize,
  terminalTable,
  markdownReport,
  summaryRows,
  type EvalReport,
} from "./report.ts";
export { htmlReport } from "./html.ts";
export { exportTrajectories, isCorrect } from "./trajectories.ts";
export {
  datasetDocuments,
  openEvalSource,
  DATASET_CORPUS_FILE,
  type EvalSourceInfo,
} from "./corpus.ts";
export { AnswerJudge, parseVerdict } from "./judge.ts";
export { EvalRecorder } from "./recorder.ts";
export { ResultsStore, RESULTS_DB_FILE } from "./results-store.ts";
export { createChatModel, evalModelSettings, type EvalModelSettings } from "./model.ts";
export { createDirectSystem, createRagSystem, formatPassages } from "./system-baselines.ts";
export { createAgenticSystem, type AgenticSystemOptions } from "./system-agentic.ts";
export { createSystems, type SystemFactoryContext } from "./systems.ts";
export { extractAnswer, type EvalSystem, type SystemAnswer, type SystemContext } from "./system.ts";
export * from "./types.ts";
