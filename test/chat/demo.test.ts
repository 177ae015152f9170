import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { CHAT_DEMO_DIR } from "../../src/apps/chat/demo.ts";
import {
  DEMO_BUDGET_SECTIONS,
  DEMO_FILES,
  DEMO_REPORT_PAGES,
  DEMO_ROUNDS,
} from "../../src/apps/chat/demo-trajectories.ts";
import { extractDocument } from "../../src/ingest/documents.ts";

const run = promisify(execFile);
const BIN = resolve(import.meta.dirname, "../../bin/codehop.mjs");

describe("codehop demo --question chat", () => {
  it("ships demo documents that say what the scripted dialogue expects", async () => {
    const report = await extractDocument(
      { name: DEMO_FILES.report },
      readFileSync(join(CHAT_DEMO_DIR, DEMO_FILES.report)),
    );
    expect(report.text).toBe(DEMO_REPORT_PAGES.map((p, i) => `## p. ${i + 1}\n${p}`).join("\n\n"));
    const budget = await extractDocument(
      { name: DEMO_FILES.budget },
      readFileSync(join(CHAT_DEMO_DIR, DEMO_FILES.budget)),
    );
    for (const s of DEMO_BUDGET_SECTIONS)
      expect(budget.text).toContain(`# ${s.heading}\n\n${s.paragraphs[0]}`);
  });

  // The dialogue played with -q (files and a link attached, every answer cited, the command that
  // continues it): test/app/pasted-commands.test.ts, whose first test pastes that demo's commands.

  it("--json prints one result per round", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-chat-demo-json-"));
    const { stdout } = await run(
      process.execPath,
      [BIN, "demo", "--question", "chat", "--home", home, "--json", "--delay", "0"],
      { env: { PATH: process.env.PATH, HOME: process.env.HOME }, timeout: 300_000 },
    );
    const results = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(results.map((r) => r.round)).toEqual(DEMO_ROUNDS.map((_, i) => i + 1));
    expect(results.map((r) => r.citations.map((c: { cite: string }) => c.cite))).toEqual(
      DEMO_ROUNDS.map((r) => r.expect.cites),
    );
    expect(new Set(results.map((r) => r.thread_id)).size).toBe(1);
  }, 330_000);
});
