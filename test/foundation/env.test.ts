import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cliProgram, readEnvFile } from "../../src/config/env.ts";
import { cliCommand, placeholder } from "../../src/config/cli-command.ts";
import { cliEnv, runCli } from "../app/cli-helpers.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "codehop-env-"));
const BIN = join(process.cwd(), "bin/codehop.mjs");

describe(".env file", () => {
  it("is read from the current directory or CODEHOP_ENV_FILE, and turned off with none", () => {
    const dir = tmp();
    const file = join(dir, "my.env");
    writeFileSync(file, "CODEHOP_MODEL=from-file\n# a comment\nOPENAI_BASE_URL='http://x/v1'\n");
    expect(readEnvFile({ CODEHOP_ENV_FILE: file })).toEqual({
      CODEHOP_MODEL: "from-file",
      OPENAI_BASE_URL: "http://x/v1",
    });
    expect(readEnvFile({ CODEHOP_ENV_FILE: "none" })).toEqual({});
    expect(() => readEnvFile({ CODEHOP_ENV_FILE: join(dir, "missing.env") })).toThrow(
      /CODEHOP_ENV_FILE names .*missing\.env, which does not exist/,
    );
  });

  it("the CLI reads .env under the real environment and the flags (precedence: flags > env > .env)", async () => {
    const dir = tmp();
    writeFileSync(
      join(dir, ".env"),
      ["CODEHOP_HOME=from-dotenv", "CODEHOP_MODEL_TIMEOUT_MS=not-a-number"].join("\n"),
    );
    // No CODEHOP_ENV_FILE: the default .env of the working directory.
    const { CODEHOP_ENV_FILE: _off, ...base } = cliEnv({});
    const fromFile = await runCli(["threads"], base, dir);
    // The .env's value is read (and a bad one is a coded error, not a crash).
    expect(fromFile.code).toBe(2);
    expect(fromFile.stderr).toContain("CODEHOP_MODEL_TIMEOUT_MS must be a number");
    expect(fromFile.stderr).toContain("[CODEHOP_CONFIG_INVALID]");
    writeFileSync(join(dir, ".env"), "CODEHOP_HOME=from-dotenv\n");
    const [file, env, flag] = await Promise.all([
      runCli(["threads"], base, dir),
      runCli(["threads"], { ...base, CODEHOP_HOME: "from-env" }, dir),
      runCli(["threads", "--home", "from-flag"], { ...base, CODEHOP_HOME: "from-env" }, dir),
    ]);
    expect(file.stdout).toContain(join(dir, "from-dotenv", "checkpoints.db"));
    expect(env.stdout).toContain(join(dir, "from-env", "checkpoints.db"));
    expect(flag.stdout).toContain(join(dir, "from-flag", "checkpoints.db"));
  });
});

describe("printed commands", () => {
  it("say codehop only when that name on PATH is this CLI, and npx codehop under npm", () => {
    const bin = tmp();
    symlinkSync(BIN, join(bin, "codehop"));
    const other = tmp();
    mkdirSync(join(other, "sub"));
    writeFileSync(join(other, "codehop"), "#!/bin/sh\n");
    expect(cliProgram({ PATH: `${other}:${bin}` })).toBe("codehop");
    expect(cliProgram({ PATH: other })).toBe("npx codehop");
    expect(cliProgram({ PATH: "" })).toBe("npx codehop");
    expect(cliProgram({ PATH: bin, npm_command: "exec" })).toBe("npx codehop");
  });

  it("quote what the shell would split and append --home / --corpus as given", () => {
    const cmd = cliCommand(["history", "t 1", "--checkpoint", placeholder("id")], {
      home: "/data dir",
      corpus: "c.db",
    });
    expect(cmd).toMatch(
      /codehop history 't 1' --checkpoint <id> --home '\/data dir' --corpus c\.db$/,
    );
  });
});
