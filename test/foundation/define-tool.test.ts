import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  defineTool,
  parseToolArgs,
  renderToolDoc,
  ToolArgumentError,
} from "../../src/tools/define-tool.ts";

const searchInfo = defineTool({
  name: "search_info",
  description: "Finds information about a query on one Wikipedia page.",
  parameters: z.object({
    query: z.string().min(1).describe("what to look for"),
    page: z.string().min(1).describe("exact page title"),
    k: z.number().int().optional().describe("passages to return"),
  }),
  returns: "string",
  invoke: async ({ query, page }) => `${query}@${page}`,
});

describe("tool arguments", () => {
  it("maps positional arguments in schema order", () => {
    expect(parseToolArgs(searchInfo, ["height", "Eiffel Tower"])).toEqual({
      query: "height",
      page: "Eiffel Tower",
    });
  });

  it("accepts a single object with parameter names", () => {
    expect(parseToolArgs(searchInfo, [{ page: "P", query: "q" }])).toEqual({
      query: "q",
      page: "P",
    });
  });

  it("rejects missing and mistyped arguments with the signature in the message", () => {
    expect(() => parseToolArgs(searchInfo, ["only query"])).toThrow(ToolArgumentError);
    expect(() => parseToolArgs(searchInfo, [1, "P"])).toThrow(
      /query.*Usage: async function search_info\(query: string, page: string, k\?: number\)/,
    );
    expect(() => parseToolArgs(searchInfo, ["a", "b", 1, "extra"])).toThrow(/takes 3 argument/);
  });

  it("rejects identifiers that guest code could not call", () => {
    expect(() => defineTool({ ...searchInfo, name: "search-info" })).toThrow(/identifier/);
  });
});

describe("renderToolDoc", () => {
  it("renders JSDoc and a JS signature from the zod schema", () => {
    expect(renderToolDoc(searchInfo)).toBe(
      [
        "/** Finds information about a query on one Wikipedia page.",
        " * @param query - what to look for",
        " * @param page - exact page title",
        " * @param k - passages to return */",
        "async function search_info(query: string, page: string, k?: number): Promise<string>",
      ].join("\n"),
    );
  });
});
