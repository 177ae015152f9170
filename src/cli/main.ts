import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Command, CommanderError } from "commander";
import { CodehopError, ErrorCodes } from "../errors.ts";

/** package.json's version (src/cli/main.ts and dist/cli/main.js both sit two folders below it). */
function packageVersion(): string {
  const pkg = new URL("../../package.json", import.meta.url);
  return (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
}

const isHelpFlag = (a: string) => a === "-h" || a === "--help";

/** Command modules: `<name>.ts` when running the sources (tsx), `<name>.js` in the built package. */
const COMMAND_FILE = /^(?!_)[a-z][a-z0-9-]*\.(ts|js)$/;

/**
 * The CLI's subcommands by name, each loaded only when asked for. By default the files of
 * src/cli/commands (dist/cli/commands when built); the bundled CLI (dist/bundle, bin/bundle.mjs)
 * passes its own, compiled into it.
 */
export type CommandModules = Record<string, () => Promise<Record<string, unknown>>>;

/** The command modules in the commands folder beside this file. */
function commandFiles(): CommandModules {
  const dir = join(dirname(fileURLToPath(import.meta.url)), "commands");
  // `.d.ts` files sit beside the `.js` ones in dist/: the pattern leaves them out.
  const files = (existsSync(dir) ? readdirSync(dir) : []).filter((f) => COMMAND_FILE.test(f));
  return Object.fromEntries(
    files.map((f) => [
      f.replace(/\.(ts|js)$/, ""),
      () => import(pathToFileURL(join(dir, f)).href) as Promise<Record<string, unknown>>,
    ]),
  );
}

/**
 * The `codehop` CLI. Each subcommand lives in src/cli/commands/<name>.ts and default-exports a
 * function returning a commander `Command`; they are discovered here so commands can be added
 * without touching this file.
 */
export async function buildProgram(
  argv?: string[],
  modules: CommandModules = commandFiles(),
): Promise<Command> {
  const program = new Command("codehop")
    .description("Multi-agent code-action agents on LangGraph.js")
    .version(packageVersion());
  let names = Object.keys(modules).sort();
  // Running one command loads only its module: the others pull in the whole agent stack, and
  // `ask` must record its thread as early as possible (a kill during startup loses nothing else).
  const name = argv?.slice(2).find((a) => !a.startsWith("-"));
  if (name !== undefined && names.includes(name)) names = [name];
  // `codehop --version` needs no command at all; the list of commands (help, an unknown command)
  // loads them all, each cheap since a command module loads its work only when it runs.
  else if (!name && argv?.some((a) => a === "-V" || a === "--version") && !argv.some(isHelpFlag))
    names = [];
  for (const n of names) {
    const mod = await modules[n]();
    const make = mod.default as (() => Command) | undefined;
    if (typeof make !== "function")
      throw new Error(`src/cli/commands/${n}.ts must default-export a Command factory`);
    program.addCommand(make());
  }
  return ownErrorFormat(program);
}

/**
 * Makes commander throw its parse errors (unknown flag, bad value, missing argument) instead of
 * printing them and exiting with its own code, so they reach {@link main} and come out like every
 * other codehop error: `codehop: <message> [CODEHOP_CONFIG_INVALID]`, exit code 2. Help and
 * --version still print and exit 0. Applied to every subcommand: `addCommand` does not pass
 * these settings down.
 */
function ownErrorFormat(command: Command): Command {
  command.exitOverride().configureOutput({ outputError: () => {} });
  for (const sub of command.commands) ownErrorFormat(sub);
  return command;
}

/** The command path of a parse error's command ("ask", "threads"), for the --help hint. */
function commandName(argv: string[], program: Command | undefined): string | undefined {
  const names = new Set(program?.commands.map((c) => c.name()) ?? []);
  return argv.slice(2).find((a) => names.has(a));
}

/**
 * "codehop:", in red on a terminal that wants colour. Loaded only for an error, like everything
 * `codehop --version` does not need.
 */
async function errorPrefix(): Promise<string> {
  const { colorsFor } = await import("../config/colors.ts");
  return colorsFor(process.stderr).red("codehop:");
}

/**
 * A reader that closes early (`codehop resume --help | head -1`) makes the next write to stdout
 * or stderr fail with EPIPE, which Node raises as an unhandled 'error' event (a stack trace and
 * exit 1). Nobody reads that stream any more: later writes to it are dropped and the command
 * ends with its own exit code (0 for help). Any other stream error still surfaces.
 */
export function quietOnBrokenPipe(stream: NodeJS.WriteStream): void {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
    stream.write = (() => true) as typeof stream.write;
  });
}

/**
 * Entry point used by bin/codehop.mjs. Errors with a code are printed plainly (no stack).
 * `modules`: the subcommands to offer (default: the commands folder's files).
 */
export async function main(argv = process.argv, modules?: CommandModules): Promise<void> {
  quietOnBrokenPipe(process.stdout);
  quietOnBrokenPipe(process.stderr);
  let program: Command | undefined;
  try {
    program = await buildProgram(argv, modules);
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version: nothing went wrong (exit 0).
      if (err.exitCode === 0) {
        process.exitCode = 0;
        return;
      }
      // A bare `codehop` (or a command group without its subcommand): commander printed the help
      // on stderr; like every other usage error, exit 2.
      if (err.code === "commander.help") {
        process.exitCode = 2;
        return;
      }
      const message = err.message.replace(/^error: /, "");
      const name = commandName(argv, program);
      const { cliCommand } = await import("../config/cli-command.ts");
      const help = cliCommand(name ? [name, "--help"] : ["--help"]);
      process.stderr.write(
        `${await errorPrefix()} ${message} (see \`${help}\`) [${ErrorCodes.CONFIG_INVALID}]\n`,
      );
      process.exitCode = 2;
      return;
    }
    if (CodehopError.isInstance(err)) {
      // An input error from a graph already ends with its code (the LangGraph API sends no code).
      const code = err.message.endsWith(`[${err.code}]`) ? "" : ` [${err.code}]`;
      process.stderr.write(`${await errorPrefix()} ${err.message}${code}\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
}
