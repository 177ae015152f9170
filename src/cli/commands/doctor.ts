import { Command, InvalidArgumentError, Option } from "commander";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { cliCommand } from "../../config/cli-command.ts";
import { colorsFor } from "../../config/colors.ts";

function seconds(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0)
      throw new InvalidArgumentError(`${name} must be a positive number of seconds`);
    return n * 1000;
  };
}

/** `codehop doctor`: checks the model endpoint and the data directory, says what to fix. */
export default function doctorCommand(): Command {
  return (
    new Command("doctor")
      .description(
        "check the model endpoint (model list, a tiny completion, stop sequences, latency) and the data directory",
      )
      .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
      .option("--corpus <db>", "also check this corpus DB (default CODEHOP_CORPUS)")
      .option("--model <name>", "model to try (default CODEHOP_MODEL, else the endpoint's first)")
      // Parsed into milliseconds; the help shows the defaults in seconds, as they are typed.
      .addOption(
        new Option("--timeout <seconds>", "time limit of each request to the endpoint")
          .argParser(seconds("--timeout"))
          .default(30_000, "30"),
      )
      .addOption(
        new Option("--slow <seconds>", "a tiny completion slower than this is a warning")
          .argParser(seconds("--slow"))
          .default(10_000, "10"),
      )
      .option("--json", "print the report as one JSON object")
      .addHelpText(
        "after",
        "\nExit code 0 when no check failed (warnings allowed), 2 otherwise. Endpoint: OPENAI_BASE_URL, OPENAI_API_KEY, CODEHOP_MODEL; for CODEHOP_MODEL=anthropic:<model> ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL), for google-genai:<model> GOOGLE_API_KEY (GOOGLE_GEMINI_BASE_URL).",
      )
      .action(async (flags: RunFlags & { timeout: number; slow: number }) => {
        const { loadAppConfig } = await import("../../runs/config.ts");
        const { runDoctor } = await import("../doctor-checks.ts");
        const config = loadAppConfig(configFromFlags(flags));
        const report = await runDoctor(config, { timeoutMs: flags.timeout, slowMs: flags.slow });
        if (!report.ok) process.exitCode = 2;
        if (flags.json) {
          process.stdout.write(`${JSON.stringify(report)}\n`);
          return;
        }
        const c = colorsFor(process.stdout);
        const mark = { ok: c.green("✓"), warn: c.yellow("!"), fail: c.red("✗"), skip: c.dim("-") };
        const lines = report.checks.map(
          (x) =>
            `  ${mark[x.status]} ${x.name.replace("_", " ").padEnd(15)} ${x.status === "skip" ? c.dim(x.detail) : x.detail}`,
        );
        const failed = report.checks.filter((x) => x.status === "fail").length;
        const warned = report.checks.filter((x) => x.status === "warn").length;
        lines.push(
          "",
          failed
            ? c.red(`${failed} check${failed === 1 ? "" : "s"} failed.`)
            : `All checks passed${warned ? ` (${warned} warning${warned === 1 ? "" : "s"})` : ""}. Try: ${cliCommand(["demo"], { home: flags.home })}, or ${cliCommand(["ask", "Does birch plywood float in ethanol?"], { home: flags.home, corpus: flags.corpus })}`,
        );
        process.stdout.write(`codehop doctor\n${lines.join("\n")}\n`);
      })
  );
}
