import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { Source } from "../../../core/state.ts";
import {
  describeSource,
  sourceFromConfig,
  type KnowledgeSourceDeps,
} from "../../common/knowledge-source.ts";
import { assembleReport } from "../report/markdown.ts";
import type { ResearchStateValue, ResearchUpdate } from "../base/state.ts";

/** How the report names the run's knowledge source. */
function sourceName(config: LangGraphRunnableConfig, deps: KnowledgeSourceDeps): string {
  try {
    return describeSource(sourceFromConfig(config, deps));
  } catch {
    return "the sources";
  }
}

/**
 * report: assembles the finished report (src/apps/research/report/markdown.ts) from the verified
 * sections — numbered citations that all resolve, the References section, the gaps, the
 * verification figures — and records the documents it cites as the run's sources. Status
 * "no_evidence" when nothing relevant was found. No model call.
 */
export function makeReportNode(deps: KnowledgeSourceDeps) {
  return function report(
    state: ResearchStateValue,
    config: LangGraphRunnableConfig,
  ): ResearchUpdate {
    const verification = state.verification;
    const assembled = assembleReport({
      title: state.title || state.task || state.topic,
      topic: state.task || state.topic,
      sections: state.verified.length ? state.verified : state.draft,
      references: state.references,
      questions: state.questions,
      verification,
      sourceName: sourceName(config, deps),
    });
    // The verification's claims cite the report's numbers (dropped claims keep only those printed).
    const claims = (verification?.claims ?? []).map((c) => ({
      ...c,
      citations: c.citations
        .map((n) => assembled.renumber.get(n))
        .filter((n): n is number => n !== undefined),
    }));
    const documents = new Map<string, Source>();
    for (const c of assembled.citations) {
      if (!documents.has(c.title))
        documents.set(c.title, { title: c.title, ...(c.url ? { url: c.url } : {}) });
    }
    return {
      answer: assembled.markdown,
      title: assembled.title,
      citations: assembled.citations,
      ...(verification ? { verification: { ...verification, claims } } : {}),
      sources: [...documents.values()],
      status: assembled.empty ? "no_evidence" : "final_answer",
      stage: assembled.empty
        ? "report: nothing relevant was found"
        : `report: ${assembled.citations.length} reference(s)`,
    };
  };
}
