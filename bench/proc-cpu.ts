/**
 * CPU time of process trees on Linux (/proc): what each part of a serving setup (server, workers
 * with their sandbox children, PostgreSQL) spent on a round, whatever else the machine was doing.
 */
import { readdirSync, readFileSync } from "node:fs";

const TICK_MS = 10; // USER_HZ is 100 on Linux

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime + cutime + cstime, ms (reaped children included). */
  cpuMs: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may contain spaces and parentheses: fields start after the last ")".
    const f = raw.slice(raw.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    return { pid, ppid: Number(f[1]), cpuMs: ticks * TICK_MS };
  } catch {
    return undefined;
  }
}

/** CPU ms of `root` and every live descendant (with what they reaped), or NaN off Linux. */
export function treeCpuMs(root: number | undefined): number {
  if (!root) return NaN;
  let all: ProcStat[];
  try {
    all = readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .map((d) => readStat(Number(d)))
      .filter((s): s is ProcStat => !!s);
  } catch {
    return NaN;
  }
  const children = new Map<number, ProcStat[]>();
  for (const s of all) {
    const list = children.get(s.ppid) ?? [];
    list.push(s);
    children.set(s.ppid, list);
  }
  const top = all.find((s) => s.pid === root);
  if (!top) return NaN;
  let total = 0;
  const stack = [top];
  while (stack.length) {
    const s = stack.pop()!;
    total += s.cpuMs;
    stack.push(...(children.get(s.pid) ?? []));
  }
  return total;
}

/** CPU ms of `pid` itself (no children), or NaN. */
export function ownCpuMs(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = raw.slice(raw.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return NaN;
  }
}
