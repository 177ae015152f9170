import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Command } from "commander";
import { CodehopError } from "../errors.ts";

/**
 * The `codehop` CLI. Each subcommand lives in src/cli/commands/<name>.ts and default-exports a
 * function returning a commander `Command`; they are discovered here so commands can be added
 * without touching this file.
 */
export async function buildProgram(argv?: string[]): Promise<Command> {
  const program = new Command("codehop")
    .description("Multi-agent code-action agents on LangGraph.js")
    .version("0.1.0")
    .showHelpAfterError();
  const dir = join(dirname(fileURLToPath(import.meta.url)), "commands");
  let files = (existsSync(dir) ? readdirSync(dir) : [])
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.startsWith("_"))
    .sort();
  // Running one command loads only its module: the others pull in the whole agent stack, and
  // `ask` must record its thread as early as possible (a kill during startup loses nothing else).
  const name = argv?.slice(2).find((a) => !a.startsWith("-"));
  if (name && files.includes(`${name}.ts`)) files = [`${name}.ts`];
  for (const file of files) {
    const mod = await import(pathToFileURL(join(dir, file)).href);
    const make = mod.default as (() => Command) | undefined;
    if (typeof make !== "function")
      throw new Error(`src/cli/commands/${file} must default-export a Command factory`);
    program.addCommand(make());
  }
  return program;
}

/** Entry point used by bin/codehop.mjs. Errors with a code are printed plainly (no stack). */
export async function main(argv = process.argv): Promise<void> {
  try {
    const program = await buildProgram(argv);
    await program.parseAsync(argv);
  } catch (err) {
    if (CodehopError.isInstance(err)) {
      process.stderr.write(`codehop: ${err.message} [${err.code}]\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
}
