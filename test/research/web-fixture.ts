import { action } from "../../src/apps/qa/demo-trajectories.ts";
import {
  RESEARCH_MARKERS,
  type ResearchScript,
} from "../../src/apps/research/demo-trajectories.ts";
import type { SitePage } from "../../src/testing/web-test-server.ts";

/**
 * A small website about Zstandard for web research (test/research/web.test.ts and
 * bench/research.bench.ts), and the scripted model of a research run over it: two sub-questions
 * answered from the web (each researcher reads `pagesPerQuestion` pages through page readers), and
 * optionally one answered from the demo corpus (`--source web,corpus`).
 */

const html = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body><main><h1>${title}</h1>${body}</main></body></html>`;

/** The site: paths → pages. */
export const ZSTD_SITE: Record<string, SitePage> = {
  "/zstd": {
    body: html(
      "Zstandard",
      `<p>Zstandard (zstd) is a lossless data compression algorithm and reference implementation.</p>
       <h2>History</h2><p>Zstandard was released in 2016 by Yann Collet at Facebook, as version 1.0 of the format.</p>
       <h2>Speed</h2><p>Zstandard compresses at about 500 MB/s per core and decompresses at more than 1500 MB/s on a modern processor.</p>`,
    ),
  },
  "/zstd-format": {
    body: html(
      "Zstandard frame format",
      `<p>The Zstandard format is specified in RFC 8878, published in February 2021.</p>
       <h2>Frames</h2><p>A Zstandard frame starts with the magic number 0xFD2FB528 and may carry a checksum.</p>`,
    ),
  },
  "/benchmarks": {
    body: html(
      "Compression benchmarks",
      `<p>In the compression benchmarks on a modern processor, Zstandard level 3 compresses at 500 MB/s while zlib level 6 compresses at about 100 MB/s.</p>`,
    ),
  },
  "/brotli": {
    body: html(
      "Brotli",
      `<p>Brotli is a compression format developed by Google and released in 2013.</p>`,
    ),
  },
};

export const WEB_TOPIC = "Zstandard compression: its history and its speed";
export const WEB_Q1 = "When was Zstandard released, and by whom?";
export const WEB_Q2 = "How fast does Zstandard compress?";
export const CORPUS_Q = "When was the Eiffel Tower completed?";

const planner = (topic: string, questions: string[]) => ({
  name: "planner:web",
  system: RESEARCH_MARKERS.planner,
  task: topic,
  steps: [
    action(
      "I research the sub-questions together.",
      `const notes = await Promise.all(${JSON.stringify(questions)}.map((q) => research(q)));\nnotes.forEach((n) => console.log(n));`,
    ),
    action("Done.", `final_answer(${JSON.stringify("Zstandard")});`),
  ],
});

const researcher = (question: string, query: string, reads: [string, string][]) => ({
  name: `researcher:${question}`,
  system: RESEARCH_MARKERS.researcher,
  task: question,
  steps: [
    action("I search.", `console.log(await search_wikipedia(${JSON.stringify(query)}));`),
    action(
      "I read the pages.",
      `const found = await Promise.all([${reads
        .map(([q, page]) => `search_info(${JSON.stringify(q)}, ${JSON.stringify(page)})`)
        .join(", ")}]);\nfound.forEach((f) => console.log(f));`,
    ),
    action("The pages answer it.", 'final_answer("See the pages read.");'),
  ],
});

const reader = (query: string, retrieve: string) => ({
  name: `page_reader:${query}`,
  system: RESEARCH_MARKERS.page_reader,
  task: query,
  steps: [
    action("I retrieve.", `console.log(await retrieve_passages(${JSON.stringify(retrieve)}));`),
    action("Found.", 'final_answer("The passages above.");'),
  ],
});

/**
 * The scripted research run over the site (and, with `corpus`, one question over the demo corpus).
 * `pagesPerQuestion` 2 makes each web researcher read a second page.
 */
export function webResearchScript(
  options: { corpus?: boolean; pagesPerQuestion?: 1 | 2 } = {},
): ResearchScript {
  const two = options.pagesPerQuestion === 2;
  const questions = [WEB_Q1, WEB_Q2, ...(options.corpus ? [CORPUS_Q] : [])];
  return {
    rules: [
      planner(WEB_TOPIC, questions),
      researcher(WEB_Q1, "Zstandard released", [
        ["release year and author", "Zstandard"],
        ...(two
          ? ([["format specification", "Zstandard frame format"]] as [string, string][])
          : []),
      ]),
      researcher(WEB_Q2, "Zstandard compression speed benchmarks", [
        ["compression speed", "Compression benchmarks"],
        ...(two ? ([["speed per core", "Zstandard"]] as [string, string][]) : []),
      ]),
      researcher(CORPUS_Q, "Eiffel Tower construction", [
        ["construction finished", "Eiffel Tower"],
      ]),
      reader("release year and author", "released 2016 Yann Collet"),
      reader("format specification", "format specified RFC"),
      reader("compression speed", "compresses MB/s zlib"),
      reader("speed per core", "compresses MB/s per core"),
      reader("construction finished", "construction finished 1889"),
    ],
    notes: {
      [WEB_Q1]: [
        {
          find: "2016 by Yann Collet",
          text: "Zstandard was released in 2016 by Yann Collet at Facebook.",
        },
        { find: "RFC 8878", text: "The format is specified in RFC 8878 (February 2021)." },
      ],
      [WEB_Q2]: [
        {
          find: "zlib level 6",
          text: "Zstandard level 3 compresses at 500 MB/s, zlib level 6 at about 100 MB/s.",
        },
      ],
      [CORPUS_Q]: [{ find: "31 March 1889", text: "The Eiffel Tower was finished in March 1889." }],
    },
    sections: {
      [WEB_Q1]: {
        heading: "Release",
        sentences: [{ text: "Zstandard was released in 2016 by Yann Collet.", from: ["2016"] }],
      },
      [WEB_Q2]: {
        heading: "Speed",
        sentences: [{ text: "Zstandard level 3 compresses at 500 MB/s.", from: ["500 MB/s"] }],
      },
      [CORPUS_Q]: {
        heading: "The Eiffel Tower",
        sentences: [{ text: "The Eiffel Tower was finished in March 1889.", from: ["March 1889"] }],
      },
    },
    summary: [{ text: "Zstandard was released in 2016.", from: ["2016"] }],
  };
}
