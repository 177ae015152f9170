import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatHistory, threadFiles } from "../../src/apps/chat/app.ts";
import { DEMO_FILES, DEMO_ROUNDS, chatResponder } from "../../src/apps/chat/demo-trajectories.ts";
import type { DemoRound } from "../../src/apps/chat/demo-trajectories.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { attachTargets } from "../../src/cli/commands/chat.ts";
import { startHttpServer, writeDemoDocuments } from "./documents.ts";

// `codehop chat` as a user runs it: a real process whose stdin the test types into, talking to
// the scripted model over HTTP. Ctrl-C (SIGINT) while a reply is being worked on stops that reply
// and the session goes on; a second session on the same thread continues the conversation.

const BIN = resolve(import.meta.dirname, "../../bin/codehop.mjs");
const SLOW: DemoRound = {
  message: "Summarize the whole report in detail, please.",
  steps: [{ content: action("Slow.", 'final_answer("never sent");'), delayMs: 20_000 }],
  expect: { reply: "", cites: [] },
};
const ROUNDS = [DEMO_ROUNDS[0], DEMO_ROUNDS[1], SLOW, DEMO_ROUNDS[3]];
let model: ScriptedOpenAIServer;
let home: string;
let docs: { report: string; budget: string };

/** A running `codehop chat` with its output so far. */
class Session {
  readonly proc: ChildProcess;
  stdout = "";
  stderr = "";
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.proc = spawn(process.execPath, [BIN, "chat", "--home", home, "-q", ...args], {
      env: {
        ...process.env,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: "scripted",
        CODEHOP_MODEL: "scripted",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.proc.stdout!.on("data", (d) => (this.stdout += d));
    this.proc.stderr!.on("data", (d) => (this.stderr += d));
    this.exited = new Promise((ok) => this.proc.on("exit", (code) => ok(code)));
  }

  type(line: string): void {
    this.proc.stdin!.write(`${line}\n`);
  }

  /** Waits until stdout matches `pattern` `count` times. */
  async waitFor(pattern: RegExp, count = 1, ms = 120_000): Promise<void> {
    const deadline = Date.now() + ms;
    const g = new RegExp(pattern.source, `${pattern.flags.replace("g", "")}g`);
    while ((this.stdout.match(g)?.length ?? 0) < count) {
      if (this.proc.exitCode !== null)
        throw new Error(
          `codehop chat exited (${this.proc.exitCode}):\n${this.stdout}\n${this.stderr}`,
        );
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${pattern}:\n${this.stdout}\n${this.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "codehop-cli-chat-"));
  docs = await writeDemoDocuments(mkdtempSync(join(tmpdir(), "codehop-cli-chat-docs-")));
  model = await ScriptedOpenAIServer.start({ responder: chatResponder(ROUNDS) });
});

afterAll(async () => {
  await model?.close();
});

describe("codehop chat in a terminal session", () => {
  it("attaches, answers, survives Ctrl-C during a reply, lists and forgets files, exits", async () => {
    const s = new Session(["--thread", "cli"]);
    s.type(`/attach ${docs.report} ${docs.budget}`);
    await s.waitFor(/^attached: /m, 2);
    expect(s.stdout).toContain(`attached: ${DEMO_FILES.report} (3 pages, `);
    s.type(DEMO_ROUNDS[0].message);
    await s.waitFor(/^assistant> /m);
    expect(s.stdout).toContain(`[${DEMO_FILES.report}, p. 1]`);

    // Ctrl-C while the model works on a reply: that reply stops, the session goes on.
    s.type(SLOW.message);
    const deadline = Date.now() + 120_000;
    while (!model.requestsFor("chat:round3").length && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    s.proc.kill("SIGINT");
    await s.waitFor(/^\(stopped — the conversation is kept; ask again or go on\)$/m);
    expect(s.proc.exitCode).toBeNull();

    s.type(DEMO_ROUNDS[1].message);
    await s.waitFor(/^assistant> /m, 2);
    expect(s.stdout).toContain(`assistant> ${"The main span is 503 metres, about 1650 feet"}`);

    s.type("/files");
    await s.waitFor(new RegExp(`^- ${DEMO_FILES.budget.replace(".", "\\.")} \\(docx, `, "m"));
    s.type(`/forget ${DEMO_FILES.budget}`);
    await s.waitFor(/^removed budget-2025\.docx$/m);
    s.type("/nonsense");
    await s.waitFor(/^unknown command \/nonsense; \/help lists them$/m);
    s.type("/exit");
    expect(await s.exited).toBe(0);
    // The next step pastes as is: `npx codehop` in a clone, with the --home this session was given.
    expect(s.stderr).toContain(
      `bye — continue with \`npx codehop chat --thread cli --home ${home}\``,
    );

    expect(threadFiles("cli", { config: { home } }).map((f) => f.name)).toEqual([
      DEMO_FILES.report,
    ]);
    // The stopped round's message is kept, unanswered, between the two answered rounds.
    const history = await chatHistory("cli", { config: { home } });
    expect(history.map((r) => [r.user, r.reply !== undefined])).toEqual([
      [DEMO_ROUNDS[0].message, true],
      [SLOW.message, false],
      [DEMO_ROUNDS[1].message, true],
    ]);
  }, 240_000);

  it("/attach takes quoted paths with spaces; Ctrl-C while attaching keeps what was attached", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "codehop-cli-chat-spaces-")), "my docs");
    mkdirSync(dir);
    copyFileSync(docs.report, join(dir, "bridge report.pdf"));
    // A link that never answers: only Ctrl-C ends its download before the 15 s deadline.
    let asked!: () => void;
    const requested = new Promise<void>((ok) => (asked = ok));
    const never = await startHttpServer(() => asked());
    try {
      const s = new Session(["--thread", "spaces"]);
      s.type(`/attach "${join(dir, "bridge report.pdf")}"`);
      await s.waitFor(/^attached: bridge report\.pdf \(3 pages, /m);
      s.type(`/attach ${never.url("/slow")}`);
      await requested;
      s.proc.kill("SIGINT");
      await s.waitFor(/^\(stopped attaching — the files attached before are kept; see \/files\)$/m);
      s.type("/files");
      await s.waitFor(/^- bridge report\.pdf \(pdf, 3 pages, /m);
      s.type("/exit");
      expect(await s.exited).toBe(0);
      expect(threadFiles("spaces", { config: { home } }).map((f) => f.name)).toEqual([
        "bridge report.pdf",
      ]);
    } finally {
      await never.close();
    }
  }, 240_000);

  it("splits /attach arguments as a shell does", () => {
    expect(attachTargets(`"a b.pdf" 'c d.md' e\\ f.txt https://x.org/p?q=1`)).toEqual([
      "a b.pdf",
      "c d.md",
      "e f.txt",
      "https://x.org/p?q=1",
    ]);
    expect(attachTargets("$HOME/notes.md *.pdf")).toEqual(["$HOME/notes.md", "*.pdf"]);
    expect(attachTargets("")).toMatch(/^usage: \/attach/);
    expect(attachTargets("a.pdf | rm -rf /")).toMatch(/^usage: \/attach/);
  });

  it("a second session on the thread continues the conversation", async () => {
    const s = new Session(["--thread", "cli"]);
    await s.waitFor(/^assistant> /m);
    expect(s.stdout).toContain(`you> ${DEMO_ROUNDS[1].message}`);
    expect(s.stderr).toContain("(continuing: 3 rounds so far)");
    s.type(DEMO_ROUNDS[3].message);
    await s.waitFor(/^assistant> 17 engineers/m);
    // The agent saw the earlier rounds, the stopped one included.
    const task = model
      .requestsFor("chat:round4")[0]
      .request.messages.find((m) => m.role === "user")!.content;
    expect(task).toContain(`User: ${DEMO_ROUNDS[0].message}`);
    expect(task).toContain(`User: ${SLOW.message}\nUser: ${DEMO_ROUNDS[1].message}`);
    // Closing stdin (Ctrl-D) ends the session cleanly.
    s.proc.stdin!.end();
    expect(await s.exited).toBe(0);
  }, 240_000);

  it("/forget forgets the whole conversation and starts a new thread", async () => {
    const s = new Session(["--thread", "cli", "--json"]);
    s.type("/forget");
    await s.waitFor(/^forgot the conversation cli \(history and files\); new thread /m);
    s.type("/exit");
    expect(await s.exited).toBe(0);
    expect(await chatHistory("cli", { config: { home } })).toEqual([]);
    expect(threadFiles("cli", { config: { home } })).toEqual([]);
  }, 240_000);

  /**
   * A piped session on thread "piped" with two files, run once for the file (by whichever test
   * needs it first): one test checks its replies, the next deletes its conversation.
   */
  let piped: Promise<{ s: Session; code: number | null }> | undefined;
  const pipedSession = () =>
    (piped ??= (async () => {
      const s = new Session(["--thread", "piped", "--file", docs.report, "--file", docs.budget]);
      // Everything is written, and the input closed, before the files are even read.
      s.type(DEMO_ROUNDS[0].message);
      s.type(DEMO_ROUNDS[1].message);
      s.proc.stdin!.end();
      return { s, code: await s.exited };
    })());

  it("piped lines sent while --file attaches are answered in order; end of input exits 0", async () => {
    const { s, code } = await pipedSession();
    expect(code).toBe(0);
    const replies = s.stdout.split("\n").filter((l) => l.startsWith("assistant> "));
    expect(replies).toHaveLength(2);
    expect(s.stdout.indexOf("attached: ")).toBeLessThan(s.stdout.indexOf("assistant> "));
    expect(replies[1]).toContain("The main span is 503 metres, about 1650 feet");
    const history = await chatHistory("piped", { config: { home } });
    expect(history.map((r) => [r.user, r.reply !== undefined])).toEqual([
      [DEMO_ROUNDS[0].message, true],
      [DEMO_ROUNDS[1].message, true],
    ]);
  }, 240_000);

  it("codehop threads --delete deletes a conversation with its files", async () => {
    // The conversation: the piped session's (two files attached, two rounds answered).
    const { s, code } = await pipedSession();
    expect(code).toBe(0);
    expect(s.stdout).toMatch(/^attached: /m);
    expect(s.stdout).toMatch(/^assistant> /m);
    expect(threadFiles("piped", { config: { home } })).toHaveLength(2);
    const del = spawn(process.execPath, [BIN, "threads", "--delete", "piped", "--home", home]);
    expect(await new Promise((ok) => del.on("exit", ok))).toBe(0);
    expect(threadFiles("piped", { config: { home } })).toEqual([]);
    expect(await chatHistory("piped", { config: { home } })).toEqual([]);
  }, 240_000);

  it("piped input whose reply fails ends with the error and exit 2", async () => {
    const proc = spawn(process.execPath, [BIN, "chat", "--home", home, "-q", "--thread", "dead"], {
      // Nothing listens on port 9 (discard) of this machine: the model call fails at once.
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
        OPENAI_API_KEY: "k",
        CODEHOP_MODEL: "m",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    proc.stdout!.on("data", (d) => (out += d));
    proc.stderr!.on("data", (d) => (err += d));
    proc.stdin!.end("What is the main span?\nAnd the budget?\n");
    const code = await new Promise((ok) => proc.on("exit", ok));
    expect(code).toBe(2);
    expect(err).toMatch(/\ncodehop: [\s\S]*\[CODEHOP_MODEL_ENDPOINT_FAILED\]\n$/);
    expect(out).not.toContain("assistant> ");
  }, 240_000);

  it("fails fast without a model endpoint", async () => {
    const proc = spawn(process.execPath, [BIN, "chat", "--home", home], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let err = "";
    proc.stderr!.on("data", (d) => (err += d));
    const code = await new Promise((ok) => proc.on("exit", ok));
    expect(code).toBe(2);
    expect(err).toContain("[CODEHOP_MODEL_NOT_CONFIGURED]");
  }, 240_000);
});
