import { Command } from "commander";
import { configFromFlags, type RunFlags } from "../cli-support.ts";
import { cliCommand, placeholder } from "../../config/cli-command.ts";

function short(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** `codehop history <thread>`: a thread's checkpoints (all branches), or the state at one. */
export default function historyCommand(): Command {
  return new Command("history")
    .description(
      "list a thread's checkpoints (newest first, all branches) or show the state at one",
    )
    .argument("<thread>", "thread id (see `codehop threads`)")
    .option("--checkpoint <id>", "show the full state at this checkpoint")
    .option(
      "--all",
      "also list the nested agents' checkpoints (wikipedia_search, page_search runs)",
    )
    .option("--home <dir>", "data directory (default CODEHOP_HOME or .codehop)")
    .option("--json", "print JSON")
    .action(async (threadId: string, flags: RunFlags & { checkpoint?: string; all?: boolean }) => {
      const { historyOfThread: history } = await import("../../apps/inspect.ts");
      const rows = await history(threadId, {
        config: configFromFlags(flags),
        checkpointId: flags.checkpoint,
        withValues: Boolean(flags.checkpoint),
        allNamespaces: Boolean(flags.all),
      });
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(flags.checkpoint ? rows[0] : rows)}\n`);
        return;
      }
      if (flags.checkpoint) {
        const r = rows[0];
        const v = (r.values ?? {}) as Record<string, any>;
        const out = [
          `checkpoint ${r.checkpoint_id} (parent ${r.parent_checkpoint_id ?? "-"}, step ${r.step}, ${r.source})`,
          `next: ${r.next.join(", ") || "(finished)"}`,
          `question: ${v.question ?? v.task ?? ""}`,
          `manager actions done: ${r.actions}; status: ${v.status ?? "-"}`,
        ];
        for (const s of (v.steps ?? []) as any[]) {
          out.push(
            `— step ${s.step} (${s.kind}): ${short(String(s.thought ?? "").replace(/\s+/g, " "), 160)}`,
          );
          if (s.code)
            out.push(
              ...String(s.code)
                .split("\n")
                .map((l: string) => `    | ${l}`),
            );
          if (s.observation)
            out.push(`    ↳ ${short(String(s.observation).replace(/\s+/g, " "), 300)}`);
        }
        if (v.pending && r.next.includes("act"))
          out.push(
            `pending action (step ${v.pending.step}):`,
            ...String(v.pending.code ?? "")
              .split("\n")
              .map((l) => `    | ${l}`),
          );
        const { foldVariables } = await import("../../core/variables.ts");
        const vars = foldVariables(v.variables)?.values ?? {};
        if (Object.keys(vars).length) out.push(`variables: ${short(JSON.stringify(vars), 600)}`);
        if (v.answer != null)
          out.push(`answer: ${typeof v.answer === "string" ? v.answer : JSON.stringify(v.answer)}`);
        process.stdout.write(`${out.join("\n")}\n`);
        return;
      }
      const lines = [
        `${"checkpoint".padEnd(38)} ${"parent".padEnd(12)} ${"step".padStart(4)} ${"next".padEnd(12)} summary`,
      ];
      let namespace = "";
      for (const r of rows) {
        if (r.namespace !== namespace) {
          namespace = r.namespace;
          lines.push(
            "",
            `${r.agent} run in namespace ${namespace} (inspect only; replay forks from the manager's checkpoints above):`,
          );
        }
        const next = r.namespace ? "" : r.next.join(",") || "done";
        lines.push(
          `${r.checkpoint_id.padEnd(38)} ${(r.parent_checkpoint_id ?? "-").slice(-10).padEnd(12)} ${String(r.step).padStart(4)} ${next.padEnd(12)} ${short(r.summary, 90)}`,
        );
      }
      lines.push(
        "",
        `Show one: ${cliCommand(["history", threadId, "--checkpoint", placeholder("id")], { home: flags.home })}`,
        `Re-run from one: ${cliCommand(["replay", threadId, "--checkpoint", placeholder("id")], { home: flags.home })}`,
      );
      process.stdout.write(`${lines.join("\n")}\n`);
    });
}
