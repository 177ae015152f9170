import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { quote } from "shell-quote";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CHAT_AGENT_MARKER,
  DEMO_FILES,
  DEMO_ROUNDS,
  SUMMARIZER_MARKER,
  chatResponder,
  type DemoRound,
} from "../../src/apps/chat/demo-trajectories.ts";
import {
  DEMO_ANSWER,
  assistantDemoResponder,
  code,
  demoAssistantScript,
} from "../../src/apps/assistant/demo-trajectories.ts";
import { action } from "../../src/apps/qa/demo-trajectories.ts";
import { openPersistence } from "../../src/persistence/index.ts";
import { ScriptedOpenAIServer } from "../../src/testing/scripted-openai-server.ts";
import { CODEHOP_BIN, cliEnv, runCli, spawnCli } from "./cli-helpers.ts";
import { systemOf } from "./fixtures.ts";

// Issue 24: every command codehop prints for the user to paste works when pasted — as printed, by
// a shell, at the clone's root (`npx codehop ...`: the tests' PATH has no codehop), with the same
// environment — and does what its line says. Every place that prints one (grep of src/ for
// cliCommand, src/config/cli-command.ts, the one helper that writes them) and where it is pasted:
//
//   chat demo: note's `chat --file`, `chat --thread`, `history`, `threads --delete`  here
//   assistant demo: `assist`; its result's `show` / `history` / `replay`            here
//   chat (src/cli/commands/chat.ts): exit line, /help's `chat --thread`              here
//   approval pause, `resume --reject | --edit | --approve` (src/cli/approval-prompt.ts):
//     printed by chat (input ended at the question) and by resume (printResult)       here
//   failed run "continue it with `resume`" (src/runs/lifecycle.ts failRun)          here (chat round),
//                                                                                   next-steps (ask)
//   Ctrl-C "Run interrupted ... continue it with `resume`" (failRun)                here (chat demo)
//   failRun after a configuration error: `chat --thread`                           test/chat/approval.test.ts (text)
//   failRun of a replay: `replay --checkpoint`; "already holds a run"               same helper, not run
//   usage errors "(see `... --help`)" (src/cli/main.ts)                             here
//   unknown thread: `threads` (runs/lifecycle.ts, cli/commands/threads.ts)          here, next-steps
//   result's `show` / `history` / `replay` (src/cli/cli-support.ts printResult)     here, next-steps
//   research result and demo, `demo`'s listings, `demo --serve`                     demo-commands
//   history's "Show one" / "Re-run from one"; runs/inspect.ts unknown checkpoint    next-steps
//   doctor's "Try:", eval's `doctor`, runs/config.ts `demo`, ingest's `ask <question>`,
//   store/corpus-db.ts `ingest <file>`, check's `--repair`, eval HTML report's `history`:
//   same helper, not run here
//   installed form (`codehop ...`, the package's bin on PATH)                       test/package/pack.test.ts
//
// A printed line runs in `sh -c` exactly as printed. `npx codehop` costs ~1.5-2 CPU-s of npm per
// call (it reifies the clone into npm's cache each time), so one printed line per file goes
// through the real npx — proving the prefix finds this CLI from the repository root — and the
// others through a shell function `npx` that runs bin/codehop.mjs with the shell's words (the rest
// of the line: quoting, flags, placeholders, is the shell's, as when pasted).

const ROOT = process.cwd();
const TALLEST = "What is the tallest building in Europe?";
const TALLEST_ANSWER = "The Lakhta Center in Saint Petersburg (462 m).";
const CONTINUE = "What did I ask you first?";
const CONTINUE_REPLY = "You first asked what the two attached files are about.";
const NOTES = "Write the span to a.txt, b.txt and c.txt.";
/** The chat rounds the pasted commands send (after the demo's own). */
const ROUNDS: DemoRound[] = [
  ...DEMO_ROUNDS,
  {
    message: CONTINUE,
    steps: [
      action("It is in the conversation.", `final_answer(${JSON.stringify(CONTINUE_REPLY)});`),
    ],
    expect: { reply: CONTINUE_REPLY, cites: [] },
  },
  {
    // Three writes, each waiting for an approval: refused (caught), edited, approved.
    message: NOTES,
    steps: [
      {
        get content() {
          const write = (name: string) =>
            `await write_file(${JSON.stringify(join(notes, name))}, "span: 503 m")`;
          return action(
            "I write the three notes.",
            [
              `let a; try { a = ${write("a.txt")}; } catch (e) { a = "refused: " + e.message; }`,
              `const b = ${write("b.txt")};`,
              `const c = ${write("c.txt")};`,
              'final_answer("Handled the notes.");',
            ].join("\n"),
          );
        },
      },
    ],
    expect: { reply: "Handled the notes.", cites: [] },
  },
];

let model: ScriptedOpenAIServer;
/** Every model request answers HTTP 500 while set (a failed round). */
let down = false;
/** The data directory every command here is given with --home. */
let home: string;
/** The data directory of the approval rounds (its codehop.config.json adds an MCP server). */
let approvals: string;
let notes: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  const base = mkdtempSync(join(tmpdir(), "codehop-pasted-"));
  home = join(base, "home");
  approvals = join(base, "approvals");
  notes = join(base, "notes");
  mkdirSync(approvals);
  mkdirSync(notes);
  writeFileSync(
    join(approvals, "codehop.config.json"),
    JSON.stringify({
      mcpServers: {
        files: {
          command: process.execPath,
          args: [
            join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
            notes,
          ],
          tools: ["write_file"],
          approval: { write_file: "always" },
          agents: ["chat"],
        },
      },
    }),
  );
  const chat = chatResponder(ROUNDS);
  // The assistant demo's replies (a replay of its thread needs them), and the task `assist` prints.
  const assistant = assistantDemoResponder("http://127.0.0.1:9", (turn) =>
    turn.task.includes(TALLEST)
      ? code("I know this one.", `final_answer(${JSON.stringify(TALLEST_ANSWER)});`)
      : demoAssistantScript(turn),
  );
  model = await ScriptedOpenAIServer.start({
    responder: async (req, ctx) => {
      if (down) return { status: 500, body: '{"error":{"message":"model crashed"}}' };
      const system = systemOf(req);
      return system.includes(CHAT_AGENT_MARKER) || system.includes(SUMMARIZER_MARKER)
        ? chat(req, ctx)
        : assistant(req, ctx);
    },
  });
  env = cliEnv({
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "k",
    CODEHOP_MODEL: "scripted",
    CODEHOP_MAX_RETRIES: "0",
    // Every printed command carries --home: one that lost it would look here and find nothing.
    CODEHOP_HOME: join(base, "not-the-home"),
  });
});

afterAll(async () => {
  await model?.close();
});

/**
 * The command lines a CLI output prints for pasting, as printed: in backquotes in prose, else
 * from `npx codehop` to a `   # comment` or to a `  /  ` between two of them.
 */
function printed(text: string): string[] {
  const found: string[] = [];
  for (const line of text.split("\n")) {
    if (line.includes("`")) {
      for (const m of line.matchAll(/`(npx codehop [^`]+)`/g)) found.push(m[1]);
      continue;
    }
    const at = line.indexOf("npx codehop ");
    if (at < 0) continue;
    for (const part of line.slice(at).split("  /  "))
      found.push(part.replace(/\s{2,}#.*$/, "").trim());
  }
  return found;
}

/**
 * Fails on a command printed without `npx` (command not found in a clone). Not commands: headers
 * (`codehop chat — thread ...`, `codehop chat demo — ...`, `codehop demo (assistant)`) and
 * commander's `Usage: codehop threads [options]`.
 */
function expectNoBareCommand(text: string) {
  const bare =
    /(?<!npx )\bcodehop (ask|assist|chat|check|demo|doctor|eval|history|ingest|replay|research|resume|show|threads) (?!—|\(|demo —|\[options\])/;
  for (const line of text.split("\n")) expect(line).not.toMatch(bare);
}

let realNpxUsed = false;

/**
 * Runs `line` as pasted into a shell at the repository root, with `input` on stdin. The first
 * call of the file goes through the real `npx`; later ones through the `npx` shell function.
 */
async function paste(line: string, input?: string) {
  expect(line.startsWith("npx codehop "), line).toBe(true);
  const viaNpm = !realNpxUsed;
  realNpxUsed = true;
  const shim = `npx() { [ "$1" = codehop ] || exit 97; shift; exec ${quote([process.execPath, CODEHOP_BIN])} "$@"; }`;
  const child = spawn("/bin/sh", ["-c", viaNpm ? line : `${shim}\n${line}`], {
    cwd: ROOT,
    env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  child.stdin.end(input ?? "");
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const result = { code, stdout, stderr };
  expectNoBareCommand(stdout + stderr);
  return { ...result, show: `${line}\n${stdout}\n${stderr}` };
}

/** The one printed line whose command starts with `words` (e.g. "chat --thread"). */
function pick(lines: string[], words: string): string {
  const hits = lines.filter((l) => l.startsWith(`npx codehop ${words} `));
  expect(hits, `${words} in:\n${lines.join("\n")}`).toHaveLength(1);
  return hits[0];
}

// Many CLI processes (two demos, a dozen pasted commands) on a loaded 2-core machine.
describe("every printed next step, pasted", { timeout: 600_000 }, () => {
  it("the chat demo plays its scripted file dialogue; its commands continue, list and delete its conversation; chat's exit line and /help continue a session", async () => {
    // No model variables: the demo brings its own scripted server (the pasted commands below
    // talk to this file's).
    const demo = await runCli(
      ["demo", "--question", "chat", "--delay", "0", "-q", "--home", home],
      cliEnv({}),
    );
    expect(demo.code, demo.stderr).toBe(0);
    // The dialogue as it plays: files and a link attached, every answer cited.
    expect(demo.stderr).toContain("NOTE: the model in this demo is SCRIPTED");
    expect(demo.stderr).toMatch(/codehop chat --thread [0-9a-f-]{36}/);
    for (const round of DEMO_ROUNDS) {
      expect(demo.stdout).toContain(`you> ${round.message}`);
      for (const cite of round.expect.cites) expect(demo.stdout).toContain(`[${cite}]`);
    }
    expect(demo.stdout).toContain(`(attached ${DEMO_FILES.report})`);
    expect(demo.stdout).toContain(`(attached ${DEMO_FILES.visitor})`);
    expect(demo.stdout).toContain("assistant> 90 dollars for two adults");
    expectNoBareCommand(demo.stdout + demo.stderr);
    const thread = /codehop chat demo — thread ([0-9a-f-]{36})/.exec(demo.stderr)![1];
    const lines = printed(demo.stderr);
    expect(lines.map((l) => l.split(" ").slice(2, 4).join(" "))).toEqual([
      "chat --file",
      "chat --thread",
      `history ${thread}`,
      "threads --delete",
    ]);
    // From the clone's root, the demo's documents by their path in it.
    expect(pick(lines, "chat --file")).toBe(
      `npx codehop chat --file data/chat-demo/harbor-bridge-report.pdf --file data/chat-demo/budget-2025.docx --home ${home}`,
    );
    for (const l of lines) expect(l.endsWith(`--home ${home}`), l).toBe(true);

    // history: the demo's checkpoints (through the real npx).
    const history = await paste(pick(lines, "history"));
    expect(history.code, history.show).toBe(0);
    expect(history.stdout).toContain("Show one: npx codehop history");

    // chat --thread: the conversation goes on where the demo left it.
    const resumed = await paste(pick(lines, "chat --thread"), `${CONTINUE}\n`);
    expect(resumed.code, resumed.show).toBe(0);
    expect(resumed.stderr).toContain(
      `thread ${thread} (continuing: ${DEMO_ROUNDS.length} rounds so far)`,
    );
    expect(resumed.stdout).toContain(`assistant> ${CONTINUE_REPLY}`);

    // chat --file: a new conversation about the demo's documents; its exit line and /help name
    // the command that continues it.
    const first = DEMO_ROUNDS[0];
    const fresh = await paste(pick(lines, "chat --file"), `${first.message}\n/help\n`);
    expect(fresh.code, fresh.show).toBe(0);
    expect(fresh.stdout).toContain("attached: harbor-bridge-report.pdf");
    expect(fresh.stdout).toContain("attached: budget-2025.docx");
    expect(fresh.stdout).toContain(first.expect.reply);
    const [fromHelp] = printed(fresh.stdout);
    const [bye] = printed(fresh.stderr);
    expect(fresh.stderr).toMatch(/^bye — continue with `npx codehop chat --thread /m);
    expect(fromHelp).toBe(bye);
    const next = await paste(bye, `${CONTINUE}\n`);
    expect(next.code, next.show).toBe(0);
    expect(next.stderr).toContain("(continuing: 1 rounds so far)");
    expect(next.stdout).toContain(`assistant> ${CONTINUE_REPLY}`);

    // threads --delete: the demo's conversation and its files are gone; the other one stays.
    const freshThread = /thread ([0-9a-f-]{36})/.exec(fresh.stderr)![1];
    expect(existsSync(join(home, "chat-files", `${thread}.db`))).toBe(true);
    const deleted = await paste(pick(lines, "threads --delete"));
    expect(deleted.code, deleted.show).toBe(0);
    expect(deleted.stdout + deleted.stderr).toContain("Deleted 1 thread");
    const persistence = openPersistence(home);
    try {
      expect(await persistence.threads.get(thread)).toBeUndefined();
      expect((await persistence.threads.get(freshThread))?.status).toBe("done");
    } finally {
      persistence.close();
    }
    expect(existsSync(join(home, "chat-files", `${thread}.db`))).toBe(false);
  });

  it("the assistant demo's commands: show, history and replay its thread; assist answers the task it prints", async () => {
    const demo = await runCli(
      ["demo", "--question", "assistant", "--delay", "0", "-q", "--home", home],
      env,
    );
    expect(demo.code, demo.stderr).toBe(0);
    expectNoBareCommand(demo.stdout + demo.stderr);
    expect(demo.stdout).toContain(`Answer: ${DEMO_ANSWER}`);
    const thread = /— thread ([0-9a-f-]{36})/.exec(demo.stderr)![1];
    const lines = [...printed(demo.stdout), ...printed(demo.stderr)];
    expect(lines.map((l) => l.split(" ")[2])).toEqual(["show", "history", "replay", "assist"]);
    for (const l of lines) expect(l.endsWith(`--home ${home}`), l).toBe(true);
    for (const l of lines.slice(0, 3)) expect(l.split(" ")[3]).toBe(thread);

    const show = await paste(pick(lines, "show"));
    expect(show.code, show.show).toBe(0);
    expect(show.stdout).toContain(DEMO_ANSWER);
    const history = await paste(pick(lines, "history"));
    expect(history.code, history.show).toBe(0);
    // <id>: the newest checkpoint with work after it (the listing is newest first).
    const rows = [...history.stdout.matchAll(/^([0-9a-f-]{36}) +\S+ +(\d+) (\S+)/gm)];
    const last = rows.find((r) => r[3] !== "done")![1];
    const replay = await paste(pick(lines, "replay").replace("<id>", last));
    expect(replay.code, replay.show).toBe(0);
    expect(replay.stdout).toContain(`Answer: ${DEMO_ANSWER}`);

    const assist = await paste(pick(lines, "assist"));
    expect(assist.code, assist.show).toBe(0);
    expect(assist.stdout).toContain(`Answer: ${TALLEST_ANSWER}`);
  });

  it("a chat round failed on the model endpoint: `resume` it prints answers it", async () => {
    down = true;
    const failed = await runCli(
      ["chat", "--thread", "down-1", "-q", "--home", home],
      env,
      undefined,
      `${CONTINUE}\n`,
    );
    down = false;
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain("[CODEHOP_MODEL_ENDPOINT_FAILED]");
    const [resume] = printed(failed.stderr);
    expect(resume).toBe(`npx codehop resume down-1 --home ${home}`);
    const resumed = await paste(resume);
    expect(resumed.code, resumed.show).toBe(0);
    expect(resumed.stdout).toContain(`Answer: ${CONTINUE_REPLY}`);
  });

  it("Ctrl-C in the chat demo: the `resume` it prints finishes the stopped round", async () => {
    // Each scripted reply of the demo takes 60 s: Ctrl-C lands while the first is awaited.
    const demo = spawnCli(
      ["demo", "--question", "chat", "--delay", "60000", "-q", "--home", home],
      env,
    );
    const started = Date.now();
    while (!demo.stdout().includes(`you> ${DEMO_ROUNDS[0].message}`)) {
      expect(demo.child.exitCode, demo.stderr()).toBeNull();
      expect(Date.now() - started).toBeLessThan(240_000);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Ctrl-C once the round runs (its thread is registered as running).
    const thread = /codehop chat demo — thread ([0-9a-f-]{36})/.exec(demo.stderr())![1];
    const persistence = openPersistence(home);
    try {
      while ((await persistence.threads.get(thread))?.status !== "running") {
        expect(demo.child.exitCode, demo.stderr()).toBeNull();
        expect(Date.now() - started).toBeLessThan(240_000);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      persistence.close();
    }
    demo.child.kill("SIGINT");
    const stopped = await demo.done;
    expect(stopped.code, stopped.stderr).toBe(2);
    expect(stopped.stderr).toContain(`Run interrupted on thread ${thread}.`);
    expectNoBareCommand(stopped.stderr);
    const [resume] = printed(stopped.stderr.slice(stopped.stderr.indexOf("Run interrupted")));
    expect(resume).toBe(`npx codehop resume ${thread} --home ${home}`);
    const resumed = await paste(resume);
    expect(resumed.code, resumed.show).toBe(0);
    expect(resumed.stdout).toContain(DEMO_ROUNDS[0].expect.reply);
  });

  it("a chat round paused for approval: each printed answer (reject, edit, approve) pastes and works", async () => {
    const thread = "approve-chat";
    /** The answers an output prints; the thread waits with nothing written yet but `done`. */
    const answers = (out: string, done: string[]) => {
      expectNoBareCommand(out);
      const lines = printed(out);
      expect(lines.map((l) => l.split(" ")[4])).toEqual(["--approve", "--reject", "--edit"]);
      for (const l of lines) expect(l.endsWith(`--home ${approvals}`), l).toBe(true);
      for (const name of ["a.txt", "b.txt", "c.txt"])
        expect(existsSync(join(notes, name)), name).toBe(done.includes(name));
      return lines;
    };
    // The input ends at the approval question: chat prints the answers and leaves (exit 0).
    const paused = await runCli(
      ["chat", "--thread", thread, "-q", "--home", approvals],
      env,
      undefined,
      `${NOTES}\n`,
    );
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toContain(
      "(the reply waits for this approval; answer it later with one of:)",
    );
    const [, reject] = answers(paused.stdout, []);
    expect(reject).toBe(`npx codehop resume ${thread} --reject "why" --home ${approvals}`);
    // Refused: a.txt is not written; the next write waits, and `resume` prints its answers.
    const rejected = await paste(reject);
    expect(rejected.code, rejected.show).toBe(3);
    const [, , edit] = answers(rejected.stdout, []);
    // --edit carries the call's own arguments: pasted unchanged, the call runs as asked.
    expect(edit).toContain(`--edit '{"path":${JSON.stringify(join(notes, "b.txt"))}`);
    const edited = await paste(edit);
    expect(edited.code, edited.show).toBe(3);
    const [approve] = answers(edited.stdout, ["b.txt"]);
    const approved = await paste(approve);
    expect(approved.code, approved.show).toBe(0);
    expect(approved.stdout).toContain("Answer: Handled the notes.");
    expect(readFileSync(join(notes, "c.txt"), "utf8")).toBe("span: 503 m");
    expect(existsSync(join(notes, "a.txt"))).toBe(false);
  });

  it("usage errors and unknown threads: the help and listing they point at work", async () => {
    const [usage, unknown] = await Promise.all([
      runCli(["threads", "--limit", "abc", "--home", home], env),
      runCli(["resume", "no-such-thread", "--home", home], env),
    ]);
    for (const r of [usage, unknown]) {
      expect(r.code).toBe(2);
      expectNoBareCommand(r.stderr);
    }
    const [help] = printed(usage.stderr);
    expect(help).toBe("npx codehop threads --help");
    const shown = await paste(help);
    expect(shown.code, shown.show).toBe(0);
    expect(shown.stdout).toContain("--limit");
    const [list] = printed(unknown.stderr);
    expect(list).toBe(`npx codehop threads --home ${home}`);
    const listed = await paste(list);
    expect(listed.code, listed.show).toBe(0);
    expect(listed.stdout).toContain("down-1");
  });
});
