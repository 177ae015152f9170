import { readFileSync } from "node:fs";
import { hostname } from "node:os";

import type { ThreadRecord, ThreadStatus } from "./port.ts";

/**
 * What the thread registries of every adapter share: the registry row's columns (codehop_threads),
 * how a row becomes a {@link ThreadRecord}, and whether a thread marked running is still being run
 * (the process that marked it, pid + host + start time, must still exist on this host).
 */

/** A registry row as both adapters store it (column names of codehop_threads). */
export interface ThreadRow {
  thread_id: string;
  question: string | null;
  status: string;
  answer: string | null;
  error: string | null;
  options_json: string | null;
  forked_from_thread: string | null;
  forked_from_checkpoint: string | null;
  created_at: string;
  updated_at: string;
  pid: number | null;
  host: string | null;
  pid_start: string | null;
  duration_ms: number | null;
}

/**
 * The registry's threads as records, plus the threads that have checkpoints but no registry row
 * (created directly through the graph API), most recently updated first.
 */
export function threadRecords(
  rows: readonly ThreadRow[],
  counts: Map<string, number>,
): ThreadRecord[] {
  const out: ThreadRecord[] = rows.map((r) => ({
    threadId: r.thread_id,
    question: r.question,
    status:
      r.status === "running" && !runnerAlive(r.pid, r.host, r.pid_start)
        ? "interrupted"
        : (r.status as ThreadStatus),
    answer: r.answer,
    error: r.error,
    options: safeJson(r.options_json),
    forkedFrom: r.forked_from_thread
      ? { threadId: r.forked_from_thread, checkpointId: r.forked_from_checkpoint ?? "" }
      : null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    checkpoints: counts.get(r.thread_id) ?? 0,
    pid: r.host === hostname() ? (r.pid ?? null) : null,
    durationMs:
      r.duration_ms === null || r.duration_ms === undefined ? null : Number(r.duration_ms),
  }));
  const known = new Set(out.map((t) => t.threadId));
  for (const [threadId, n] of counts) {
    if (known.has(threadId)) continue;
    out.push({
      threadId,
      question: null,
      status: "unknown",
      answer: null,
      error: null,
      options: {},
      forkedFrom: null,
      createdAt: null,
      updatedAt: null,
      checkpoints: n,
      pid: null,
      durationMs: null,
    });
  }
  return out.sort((a, b) => (b.updatedAt ?? "").localeCompare(a.updatedAt ?? ""));
}

/** Who marks a thread running: this process on this host (with its start time, against pid reuse). */
export function runnerIdentity(): { pid: number; host: string; pidStart: string | null } {
  return { pid: process.pid, host: hostname(), pidStart: processStart(process.pid) ?? null };
}

/** Whether the process that marked a thread running still exists (unknown hosts count as alive). */
export function runnerAlive(
  pid: number | null,
  host: string | null,
  started: string | null,
): boolean {
  if (!pid || host !== hostname()) return true;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  // A live pid may have been reused by another process: compare start times where /proc has them.
  const now = processStart(pid);
  return !(started && now && now !== started);
}

/** Start time of a process in clock ticks since boot (Linux /proc), to tell reused pids apart. */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the parenthesised command name; starttime is field 22 (index 19 here).
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** A JSON object column, or {} when it is missing or malformed. */
export function safeJson(text: string | null): Record<string, unknown> {
  try {
    const v = JSON.parse(text ?? "{}");
    return v && typeof v === "object" ? v : {};
  } catch {
    return {};
  }
}
