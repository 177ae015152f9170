import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { askDecision } from "../../src/cli/approval-prompt.ts";
import { findConfigFile, parseConfig, readConfigFile } from "../../src/config/config-file.ts";
import type { ApprovalRequest } from "../../src/core/approval.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { type McpTestServer, startMcpTestServer } from "../../src/testing/mcp-test-server.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
} from "../../src/testing/scripted-openai-server.ts";
import { connectMcpServers, type McpToolSet } from "../../src/tools/mcp.ts";

// MCP tools inside a code agent (the real ChatOpenAI over HTTP, the real sandbox, the test MCP
// server over streamable HTTP): the prompt shows them like native tools; results, tool errors and
// bad arguments become observations. Plus the configuration file and the terminal prompt.

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
let model: ScriptedOpenAIServer;
let mcp: McpTestServer;
let set: McpToolSet;
const sandbox = createSandbox();

beforeAll(async () => {
  mcp = await startMcpTestServer();
  set = await connectMcpServers({ dict: { url: mcp.url, prefix: "dict_" } });
  model = await ScriptedOpenAIServer.start({
    responder: trajectoryResponder([
      {
        name: "words",
        task: "Define hop.",
        steps: [
          action(
            'const d = await dict_lookup_word("hop", 1);\nconsole.log(d);\ntry { await dict_fail_always(); } catch (e) { console.log("caught:", e.message); }\nconsole.log((await dict_double({ n: 4 })).double);',
          ),
          action("await dict_lookup_word(42);"),
          action("final_answer(d);"),
        ],
      },
    ]),
  });
}, 60_000);
afterAll(async () => {
  await set?.close();
  await mcp?.close();
  await model?.close();
  await sandbox.close();
});

describe("MCP tools in a code agent's actions", () => {
  it("are in the prompt like native tools and their results and errors are observations", async () => {
    const agent = createCodeAgent({ name: "words", description: "defines", maxSteps: 3, sandbox });
    const out = await agent.invoke({ task: "Define hop." }, {
      context: {
        agentTools: { words: set.tools },
        model: "scripted",
        modelSettings: { baseURL: model.baseURL, apiKey: "test", maxRetries: 0 },
      },
    } as any);
    const system = model.requestsFor("words")[0].request.messages[0].content;
    expect(system).toContain(
      "async function dict_lookup_word(word: string, limit?: number): Promise<string>",
    );
    expect(system).toContain("async function dict_double(n: number): Promise<{ double: number }>");
    expect(out.steps[0].observation).toBe(
      "Execution logs:\nhop: a word (1 senses)\ncaught: dict_fail_always() failed: quota exceeded for today\n8",
    );
    expect(out.steps[1].error?.message).toMatch(
      /^Invalid arguments for dict_lookup_word\(\): word: .*Usage: async function dict_lookup_word\(word: string, limit\?: number\)/,
    );
    expect(out.answer).toBe("hop: a word (1 senses)");
  });
});

describe("codehop.config.json", () => {
  const dir = mkdtempSync(join(tmpdir(), "codehop-config-"));

  it("is found explicitly, in the project, then in CODEHOP_HOME", () => {
    const project = join(dir, "project");
    const home = join(dir, "home");
    for (const d of [project, home]) {
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, "codehop.config.json"), "{}");
    }
    expect(findConfigFile({ cwd: project, home })).toBe(join(project, "codehop.config.json"));
    expect(findConfigFile({ cwd: dir, home })).toBe(join(home, "codehop.config.json"));
    expect(findConfigFile({ cwd: dir, home: dir })).toBeUndefined();
    expect(() => findConfigFile({ explicit: join(dir, "nope.json"), home })).toThrow(
      /CODEHOP_CONFIG names .*nope\.json, which does not exist/,
    );
  });

  it("bad files are CODEHOP_CONFIG_INVALID naming the file and each problem", () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, "{ mcpServers: ");
    const notJson = (() => {
      try {
        readConfigFile(bad);
      } catch (e) {
        return e;
      }
    })();
    expect(CodehopError.isInstance(notJson) && notJson.code).toBe(ErrorCodes.CONFIG_INVALID);
    expect((notJson as Error).message).toMatch(
      /^The configuration file .*bad\.json is not valid JSON/,
    );

    expect(() =>
      parseConfig(
        {
          mcpServers: {
            fs: { command: "npx", approval: "sometimes" },
            web: { url: "ftp://x" },
            both: { command: "a", url: "http://x" },
            "bad name": { command: "x" },
          },
          extra: 1,
        },
        "test.json",
      ),
    ).toThrow(
      [
        "Invalid test.json:",
        '  mcpServers.fs: a server needs "command" (stdio) or "url" (streamable HTTP), and only the keys of that form',
        "  mcpServers.web.url: Invalid URL",
        '  mcpServers.both: a server needs "command" (stdio) or "url" (streamable HTTP), and only the keys of that form',
        "  mcpServers.bad name: Invalid key in record",
        '  (top level): Unrecognized key: "extra"',
      ].join("\n"),
    );
    expect(() => parseConfig({ extra: 1 })).toThrow(
      /Invalid configuration:\n {2}\(top level\): Unrecognized key: "extra"/,
    );
    expect(
      parseConfig({
        mcpServers: {
          fs: {
            command: "npx",
            args: ["-y", "x"],
            approval: { write_file: "always", "*": "never" },
          },
          web: { url: "https://example.org/mcp", headers: { authorization: "Bearer x" } },
        },
      }).mcpServers,
    ).toMatchObject({ fs: { command: "npx" }, web: { url: "https://example.org/mcp" } });
  });
});

describe("the terminal's approval prompt", () => {
  const request: ApprovalRequest = {
    type: "codehop.approval",
    approvalId: "ap_1",
    agent: "worker",
    agentPath: ["manager", "worker"],
    tool: "delete_note",
    args: { id: "a" },
    step: 2,
    callIndex: 0,
    line: 3,
    lineText: 'await delete_note("a")',
    code: 'await delete_note("a")',
    parameters: {},
  };
  const answer = async (...lines: string[]) => {
    const input = new PassThrough();
    const output = new PassThrough();
    let shown = "";
    output.on("data", (d) => (shown += d));
    const decision = askDecision(request, { input, output });
    for (const line of lines) input.write(`${line}\n`);
    input.end();
    return { decision: await decision, shown };
  };

  it("approve, reject with a reason, edit (asked again until the JSON parses), or leave", async () => {
    const approved = await answer("a");
    expect(approved.decision).toEqual({ decision: "approve" });
    expect(approved.shown).toContain(
      'Approval needed: delete_note() called by agent worker (manager › worker), step 2\n  line 3: await delete_note("a")\n  arguments: {"id":"a"}',
    );
    expect((await answer("maybe", "r", "keep it")).decision).toEqual({
      decision: "reject",
      reason: "keep it",
    });
    const edited = await answer("e", "{id:", '{"id": "b"}');
    expect(edited.decision).toEqual({ decision: "edit", args: { id: "b" } });
    expect(edited.shown).toContain("--edit needs the arguments as a JSON object");
    expect((await answer()).decision).toBeUndefined();
  });
});
