import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "shell-quote";
import { describe, expect, it } from "vitest";
import { DEMO_RESEARCH } from "../../src/apps/research/demo-trajectories.ts";
import { cliEnv, runCli, spawnCli } from "./cli-helpers.ts";

/**
 * Every `npx codehop ...` command of a demo's output (the tests' PATH has no codehop), as words:
 * a line may hold two (`a  /  b`), a `#` starts a comment, `<thread>` / `<id>` stay placeholders.
 */
function printedCommands(text: string): string[][] {
  const commands: string[][] = [];
  for (const line of text.split("\n"))
    for (const part of line.split("  /  ")) {
      const at = part.indexOf("npx codehop ");
      if (at < 0) continue;
      const words = parse(part.slice(at + "npx codehop ".length).replace(/<(\w+)>/g, "__$1__"));
      const args: string[] = [];
      for (const w of words) {
        if (typeof w !== "string") break; // a `# comment`
        args.push(w.replace(/^__(\w+)__$/, "<$1>"));
      }
      commands.push(args);
    }
  return commands;
}

/** The variables of the `export A=1 B=2` line `demo --serve` prints. */
function exported(text: string): Record<string, string> {
  const line = text.split("\n").find((l) => l.trim().startsWith("export "));
  expect(line, text).toBeDefined();
  return Object.fromEntries(
    line!
      .trim()
      .slice("export ".length)
      .split(/\s+/)
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
}

// Many CLI processes, one of them a whole research run, on a loaded 2-core machine.
describe("the research demo's output and every command it prints", { timeout: 900_000 }, () => {
  it("--out writes report.md and report.html; each printed command works against demo --serve", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "codehop-demo-cmds-"));
    const home = join(cwd, "data");
    // No model variables: the demo brings its scripted server.
    const demo = await runCli(
      ["demo", "--question", "research", "--out", "report.md", "--delay", "0", "--home", home],
      cliEnv({}),
      cwd,
    );
    expect(demo.code, demo.stderr).toBe(0);
    const markdown = readFileSync(join(cwd, "report.md"), "utf8");
    expect(markdown.startsWith(`# ${DEMO_RESEARCH.title}\n`)).toBe(true);
    expect(markdown).toContain("## References");
    const html = readFileSync(join(cwd, "report.html"), "utf8");
    expect(html).toMatch(/^<!doctype html>/i);
    expect(html).toContain(DEMO_RESEARCH.title);
    expect(demo.stderr).toContain(
      `Report written to ${join(cwd, "report.md")} and ${join(cwd, "report.html")}`,
    );
    // The report went to the files, not to stdout.
    expect(demo.stdout).not.toContain("## References");
    const thread = /\(threads: research ([0-9a-f-]{36})\)/.exec(demo.stderr)?.[1];
    expect(thread, demo.stderr).toBeDefined();

    const fromDemo = printedCommands(demo.stderr);
    expect(fromDemo.map((c) => c[0])).toEqual([
      // The research result's own next steps, then the demo's.
      "show",
      "history",
      "replay",
      "threads",
      "show",
      "history",
      "history",
      "demo",
      "resume",
      "replay",
      "doctor",
      "ask",
      "research",
    ]);
    // Every printed command keeps the data directory the demo was given.
    for (const c of fromDemo) expect(c).toContain(home);

    // The scripted server the demo points at, answering every printed command.
    const serve = spawnCli(["demo", "--serve", "--delay", "0", "--home", home], cliEnv({}), cwd);
    try {
      const started = Date.now();
      while (!serve.stderr().includes("Ctrl-C stops it.")) {
        expect(serve.child.exitCode, serve.stderr()).toBeNull();
        expect(Date.now() - started).toBeLessThan(180_000);
        await new Promise((r) => setTimeout(r, 200));
      }
      const env = cliEnv(exported(serve.stderr()));
      const fromServe = printedCommands(serve.stderr());
      expect(fromServe.map((c) => c[0])).toEqual(["doctor", "research", "resume", "replay"]);

      // A checkpoint of the demo thread with work after it, for `<id>`.
      const history = await runCli(["history", thread!, "--home", home, "--json"], env, cwd);
      expect(history.code, history.stderr).toBe(0);
      const checkpoint = JSON.parse(history.stdout).find((r: any) => r.next.length > 0);
      expect(checkpoint).toBeDefined();
      const fill = (w: string) =>
        w === "<thread>" ? thread! : w === "<id>" ? checkpoint.checkpoint_id : w;

      const seen = new Set<string>();
      for (const command of [...fromDemo, ...fromServe]) {
        const args = command.map(fill);
        const key = args.join("\0");
        // `demo --serve` is the one running; a command printed twice runs once.
        if (args[0] === "demo" || seen.has(key)) continue;
        seen.add(key);
        const r = await runCli(args, env, cwd);
        expect(r.code, `${args.join(" ")}:\n${r.stderr}`).toBe(0);
        if (args[0] === "doctor") expect(r.stdout).toContain("All checks passed");
        if (args[0] === "research") expect(existsSync(join(cwd, "report.html"))).toBe(true);
      }
      expect([...seen].map((k) => k.split("\0")[0]).sort()).toEqual([
        "ask",
        "doctor",
        "history",
        "history",
        "replay",
        "research",
        "resume",
        "show",
        "threads",
      ]);
    } finally {
      serve.child.kill("SIGINT");
      const stopped = await serve.done;
      expect(stopped.code).toBe(0);
    }
  });

  it("--out without the research demo is refused before anything runs (exit 2)", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "codehop-demo-out-"));
    const r = await runCli(
      ["demo", "--question", "towers", "--out", "report.md", "--home", join(cwd, "data")],
      cliEnv({}),
      cwd,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--out writes the research demo's report: add --question research");
    expect(existsSync(join(cwd, "data"))).toBe(false);
  });
});
