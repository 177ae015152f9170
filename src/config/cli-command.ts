import { quote } from "shell-quote";
import { cliProgram } from "./env.ts";

/** Flags a printed command repeats so it reaches the same data as the command that printed it. */
export interface CommandContext {
  /** `--home` as the user gave it (flag or API option); unset = CODEHOP_HOME / .codehop. */
  home?: string;
  /** `--corpus` as the user gave it. */
  corpus?: string;
}

/** A placeholder the user fills in (`<id>`), printed as it is instead of shell-quoted. */
export interface Placeholder {
  placeholder: string;
}

/**
 * A codehop command line to print as a next step: `codehop` or `npx codehop` (whichever works
 * here, see {@link cliProgram}), the arguments shell-quoted, then `--home` / `--corpus` when the
 * command that prints it was given them, so the suggestion reaches the same data directory and
 * corpus.
 */
export function cliCommand(
  args: ReadonlyArray<string | Placeholder>,
  context: CommandContext = {},
): string {
  const extra: string[] = [];
  if (context.home) extra.push("--home", context.home);
  if (context.corpus) extra.push("--corpus", context.corpus);
  const words = [...args, ...extra].map((a) =>
    typeof a === "string" ? quote([a]) : a.placeholder,
  );
  return `${cliProgram()} ${words.join(" ")}`;
}

/** A `<name>` placeholder for {@link cliCommand}. */
export function placeholder(name: string): Placeholder {
  return { placeholder: `<${name}>` };
}
