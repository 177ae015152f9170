import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { action, AGENT_MARKERS } from "../../src/apps/qa/demo-trajectories.ts";
import { trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { CODEHOP_BIN, runCli } from "./cli-helpers.ts";
import { readThread, useDemoWorld } from "./fixtures.ts";

// Human approval end to end through the CLI, inside a nested sub-agent's code: the QA manager asks
// the wikipedia_search agent, whose code writes files through a real MCP server package from npm
// (@modelcontextprotocol/server-filesystem over stdio, configured in codehop.config.json with
// `write_file` needing approval). Each pause ends `codehop` with exit code 3 and the request in
// the JSON; `codehop resume --reject / --edit / --approve` answer it; model request counts and the
// files prove nothing that finished ran again and each answered call ran once.

const QUESTION = "Save notes about the Eiffel Tower.";
const TASK = "Write the Eiffel Tower notes.";
let notes = "";

const world = useDemoWorld("codehop-approval-cli-", {
  responder: () =>
    trajectoryResponder([
      {
        name: "manager:notes",
        system: AGENT_MARKERS.manager,
        task: QUESTION,
        steps: [
          action(
            "Delegate.",
            `const report = await wikipedia_search_agent(${JSON.stringify(TASK)});\nconsole.log(report);`,
          ),
          action("Done.", "final_answer(report);"),
        ],
      },
      {
        name: "wiki:notes",
        system: AGENT_MARKERS.wikipedia_search,
        task: TASK,
        steps: [
          {
            get content() {
              const file = (name: string) => JSON.stringify(join(notes, name));
              return action(
                "Search, then write three files.",
                [
                  'const hits = await search_wikipedia("Eiffel Tower");',
                  "let a;",
                  `try { a = await write_file(${file("a.txt")}, "first"); } catch (e) { a = "refused: " + e.message; }`,
                  `const b = await write_file(${file("b.txt")}, "second");`,
                  `const d = await write_file(${file("d.txt")}, "third");`,
                  // write_file declares structured output: { content: string }.
                  'final_answer([a, b.content, d.content].join(" | "));',
                ].join("\n"),
              );
            },
          },
        ],
      },
    ]),
});

// The notes folder and the configuration file (in CODEHOP_HOME) every test here uses.
beforeAll(() => {
  notes = join(world.home, "notes");
  mkdirSync(notes, { recursive: true });
  const config = join(world.home, "codehop.config.json");
  writeFileSync(
    config,
    JSON.stringify({
      mcpServers: {
        files: {
          command: process.execPath,
          args: [
            join(
              process.cwd(),
              "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            ),
            notes,
          ],
          tools: ["write_file", "read_text_file"],
          approval: { write_file: "always" },
          agents: ["wikipedia_search"],
        },
      },
    }),
  );
});

const requests = () => ({
  manager: world.server.requestsFor("manager:notes").length,
  wiki: world.server.requestsFor("wiki:notes").length,
});

describe("approvals through the CLI, in a sub-agent's MCP tool calls", { timeout: 240_000 }, () => {
  it("ask pauses (exit 3); resume --reject, --edit, --approve answer; nothing finished re-runs", async () => {
    // The configuration file is found in CODEHOP_HOME.
    const env = world.cliEnv({ CODEHOP_MAX_RETRIES: "0" });
    const json = (r: { stdout: string }) => JSON.parse(r.stdout.trim().split("\n").at(-1)!);

    const asked = await runCli(
      ["ask", QUESTION, "--thread", "approve-1", "--corpus", world.corpus, "--json"],
      env,
    );
    expect(asked.stderr).not.toContain("Error:");
    expect(asked.code).toBe(3);
    const first = json(asked);
    expect(first).toMatchObject({
      thread_id: "approve-1",
      status: "awaiting_approval",
      approval: {
        type: "codehop.approval",
        agent: "wikipedia_search",
        agentPath: ["manager", "wikipedia_search"],
        tool: "write_file",
        args: { path: join(notes, "a.txt"), content: "first" },
        line: 3,
      },
    });
    expect(first.approval.lineText).toMatch(/^try \{ a = await write_file\(/);
    expect(requests()).toEqual({ manager: 1, wiki: 1 });

    // Asking again without an answer runs nothing and shows the same request.
    const waiting = await runCli(["resume", "approve-1", "--json"], env);
    expect(waiting.code).toBe(3);
    expect(json(waiting).approval.approvalId).toBe(first.approval.approvalId);
    const plain = await runCli(["resume", "approve-1"], env);
    expect(plain.code).toBe(3);
    expect(plain.stdout).toContain(
      "Approval needed: write_file() called by agent wikipedia_search (manager › wikipedia_search), step 1",
    );
    expect(plain.stdout).toContain('codehop resume approve-1 --reject "why"');

    // --approval-id names the approval answered: another id is refused, naming the pending one.
    const wrongId = await runCli(
      ["resume", "approve-1", "--approve", "--approval-id", "ap_0"],
      env,
    );
    expect(wrongId.code).toBe(2);
    expect(wrongId.stderr).toContain(
      `Thread "approve-1" is not waiting for approval "ap_0" (it waits for ${first.approval.approvalId}).`,
    );
    const idAlone = await runCli(["resume", "approve-1", "--approval-id", "ap_0"], env);
    expect(idAlone.code).toBe(2);
    expect(idAlone.stderr).toContain("--approval-id names the approval to answer");
    expect(requests()).toEqual({ manager: 1, wiki: 1 });

    const rejected = await runCli(
      [
        "resume",
        "approve-1",
        "--reject",
        "not that file",
        "--approval-id",
        first.approval.approvalId,
        "--json",
      ],
      env,
    );
    expect(rejected.code).toBe(3);
    expect(json(rejected).approval).toMatchObject({
      tool: "write_file",
      args: { path: join(notes, "b.txt"), content: "second" },
      line: 4,
    });

    const badEdit = await runCli(["resume", "approve-1", "--edit", "{path:"], env);
    expect(badEdit.code).toBe(2);
    expect(badEdit.stderr).toContain("--edit needs the arguments as a JSON object");

    const edited = await runCli(
      [
        "resume",
        "approve-1",
        "--edit",
        JSON.stringify({ path: join(notes, "c.txt"), content: "edited" }),
        "--json",
      ],
      env,
    );
    expect(edited.code).toBe(3);
    expect(json(edited).approval).toMatchObject({ args: { path: join(notes, "d.txt") }, line: 5 });

    const approved = await runCli(["resume", "approve-1", "--approve", "--json"], env);
    expect(approved.stderr).not.toContain("Error:");
    expect(approved.code).toBe(0);
    const done = json(approved);
    expect(done).toMatchObject({ status: "final_answer", approval: null });
    expect(done.answer).toMatch(
      /^refused: The user rejected this call to write_file\(\): not that file \| Successfully wrote to .*c\.txt \| Successfully wrote to .*d\.txt$/,
    );
    // The rejected call never ran, the edited one ran with the edit, the approved one once.
    expect(existsSync(join(notes, "a.txt"))).toBe(false);
    expect(existsSync(join(notes, "b.txt"))).toBe(false);
    expect(readFileSync(join(notes, "c.txt"), "utf8")).toBe("edited");
    expect(readFileSync(join(notes, "d.txt"), "utf8")).toBe("third");
    // One model request per action: no finished step was planned again across four runs.
    expect(requests()).toEqual({ manager: 2, wiki: 1 });
    // search_wikipedia ran once: the journal holds it once and served it three times.
    const journal = await readThread(world.home, "approve-1", (_s, p) =>
      p.journal.entries("approve-1"),
    );
    expect(journal.filter((e) => e.tool === "search_wikipedia")).toHaveLength(1);
    expect(journal.filter((e) => e.tool === "write_file").map((e) => e.outcome.approval)).toEqual([
      { decision: "reject", reason: "not that file" },
      { decision: "edit", args: { path: join(notes, "c.txt"), content: "edited" } },
      { decision: "approve" },
    ]);

    const late = await runCli(["resume", "approve-1", "--approve"], env);
    expect(late.code).toBe(2);
    expect(late.stderr).toContain('Thread "approve-1" is not waiting for an approval.');
  });

  it("a bad configuration file or a dead MCP server: a clear error (exit 2), before any model call", async () => {
    const bad = join(world.home, "bad.config.json");
    writeFileSync(bad, JSON.stringify({ mcpServers: { files: { url: "not a url" } } }));
    const before = world.server.requests.length;
    const invalid = await runCli(
      ["ask", QUESTION, "--thread", "bad-config", "--corpus", world.corpus],
      world.cliEnv({ CODEHOP_CONFIG: bad }),
    );
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toContain(`Invalid ${bad}:\n  mcpServers.files.url: Invalid URL`);
    expect(invalid.stderr).toContain("[CODEHOP_CONFIG_INVALID]");

    const dead = join(world.home, "dead.config.json");
    writeFileSync(
      dead,
      JSON.stringify({
        mcpServers: {
          broken: {
            command: process.execPath,
            args: ["-e", "console.error('no token'); process.exit(1)"],
          },
        },
      }),
    );
    const failed = await runCli(
      ["ask", QUESTION, "--thread", "dead-mcp", "--corpus", world.corpus, "--json"],
      world.cliEnv({ CODEHOP_CONFIG: dead }),
    );
    expect(failed.code).toBe(2);
    expect(failed.stderr).toMatch(
      /MCP server "broken" \(.+\) could not be started: .*\n[\s\S]*no token/,
    );
    expect(JSON.parse(failed.stdout)).toMatchObject({
      error: { code: "CODEHOP_MCP_SERVER_FAILED" },
      thread_id: "dead-mcp",
    });
    // Nothing was asked of the model.
    expect(world.server.requests.length).toBe(before);
  });

  it("in a terminal, ask prompts for each approval and continues with the answers", async () => {
    // `script` gives the CLI a pseudo-terminal (stdin and stderr are TTYs), as a user's shell does.
    const quote = (a: string) => `'${a.replace(/'/g, "'\\''")}'`;
    const command = [process.execPath, CODEHOP_BIN, "ask", QUESTION, "--thread", "tty-1"]
      .concat(["--corpus", world.corpus])
      .map(quote)
      .join(" ");
    const child = spawn("script", ["-qec", command, "/dev/null"], {
      env: world.cliEnv({ CODEHOP_MAX_RETRIES: "0" }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let screen = "";
    const answers = ["r", "keep a", "a", "a"];
    const prompts =
      /\[a\]pprove, \[e\]dit arguments, \[r\]eject\? |Reason \(the agent reads it\): /g;
    let answered = 0;
    child.stdout.on("data", (d) => {
      screen += d;
      const seen = screen.match(prompts)?.length ?? 0;
      while (answered < seen && answered < answers.length)
        child.stdin.write(`${answers[answered++]}\n`);
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    const text = screen.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");
    expect(code, text.slice(-2000)).toBe(0);
    expect(answered).toBe(4);
    expect(text).toContain("Approval needed: write_file() called by agent wikipedia_search");
    expect(text).toMatch(
      /Answer: refused: The user rejected this call to write_file\(\): keep a \| Successfully wrote to .*b\.txt \| Successfully wrote to .*d\.txt/,
    );
    expect(readFileSync(join(notes, "b.txt"), "utf8")).toBe("second");
  });
});
