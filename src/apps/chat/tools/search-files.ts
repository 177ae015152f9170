import { z } from "zod";
import { type CodeTool, defineTool } from "../../../tools/define-tool.ts";
import type { ChatFiles } from "../conversation/knowledge-base.ts";

const parameters = z.object({
  query: z.string().describe('what to look for, e.g. "maintenance costs 2019"'),
});

/**
 * `search_files(query)`: the passages of the conversation's attached files that best match the
 * query, each after its citation label ("[report.pdf, p. 2] ..."), best first. Reports every
 * passage it returns as a source (`{ file, section, page?, cite }`), which the chat app turns into
 * the reply's citations.
 */
export function createSearchFilesTool(
  files: ChatFiles,
  threadId: string,
  options: { k?: number } = {},
): CodeTool<typeof parameters.shape> {
  const k = options.k ?? 5;
  return defineTool({
    name: "search_files",
    description: `Searches the files attached to this conversation and returns up to ${k} passages, best first, each after its citation label, e.g. "[report.pdf, p. 2] ...".`,
    parameters,
    returns: "string",
    async invoke({ query }, ctx) {
      const q = query.trim();
      if (!q)
        return 'The query is empty. Say what you are looking for, e.g. search_files("maintenance costs").';
      const attached = files.list(threadId);
      if (!attached.length)
        return "No files are attached to this conversation. Ask the user to attach one.";
      const hits = await files.search(threadId, q, k);
      if (!hits.length) {
        return `No passage of the attached files (${attached.map((f) => f.name).join(", ")}) matches "${q}". Try other words.`;
      }
      ctx.report?.({
        sources: hits.map((h) => ({
          file: h.file,
          section: h.section,
          ...(h.page !== undefined ? { page: h.page } : {}),
          cite: h.cite,
        })),
      });
      return hits.map((h) => `[${h.cite}] ${h.text.replace(/\s+/g, " ").trim()}`).join("\n");
    },
  });
}
