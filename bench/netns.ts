/**
 * Simulated hosts for the serving benchmark: Linux network namespaces, each joined to this host
 * by a veth pair (its own network stack, interfaces and routes; traffic to the database and the
 * model crosses the veth link like it would a LAN link), with an optional netem delay on the link.
 * Needs root and iproute2 (`ip`, `tc`); `available()` says why not when they are missing.
 */
import { spawnSync } from "node:child_process";
import { onExit } from "./exit-cleanup.ts";

/** Namespaces created by {@link createHosts}. */
export interface SimulatedHosts {
  /** Namespace names, one per simulated host. */
  netns: string[];
  /** Address of this (the database's) host on host k's link. */
  hostAddress(k: number): string;
  /** Every host-side address (for the database's listen_addresses). */
  hostAddresses: string[];
  /** One-way delay added on each link (ms), 0 when netem is not available. */
  delayMs: number;
  remove(): void;
}

function ip(args: string[]): { ok: boolean; err: string } {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  return { ok: r.status === 0, err: (r.stderr || r.error?.message || "").trim() };
}

/** Why namespaces cannot be made here, or undefined when they can. */
export function unavailable(): string | undefined {
  if (process.platform !== "linux") return "network namespaces are Linux-only";
  if (process.getuid?.() !== 0) return "network namespaces need root (`ip netns add`)";
  const probe = `chbench-probe-${process.pid}`;
  const add = ip(["netns", "add", probe]);
  if (!add.ok) return `\`ip netns add\` failed: ${add.err}`;
  ip(["netns", "del", probe]);
  return undefined;
}

/**
 * Creates `count` namespaces `chb<pid>-<k>` with links 10.<200+k>.<pid%250>.1 (this host) <->
 * .2 (the namespace), adding `delayMs` each way with netem when the kernel has it.
 */
export function createHosts(count: number, delayMs = 0): SimulatedHosts {
  const tag = process.pid % 250;
  const netns: string[] = [];
  const links: string[] = [];
  let delay = delayMs;
  // Removed however the bench ends (a namespace outlives its processes).
  const remove = onExit(() => {
    for (const l of links) ip(["link", "del", l]);
    for (const n of netns) ip(["netns", "del", n]);
  });
  try {
    for (let k = 0; k < count; k++) {
      const name = `chb${process.pid}-${k}`;
      const outer = `chb${tag}h${k}`;
      const inner = `chb${tag}n${k}`;
      const net = `10.${200 + k}.${tag}`;
      const steps: string[][] = [
        ["netns", "add", name],
        ["link", "add", outer, "type", "veth", "peer", "name", inner],
        ["link", "set", inner, "netns", name],
        ["addr", "add", `${net}.1/24`, "dev", outer],
        ["link", "set", outer, "up"],
        ["-n", name, "addr", "add", `${net}.2/24`, "dev", inner],
        ["-n", name, "link", "set", inner, "up"],
        ["-n", name, "link", "set", "lo", "up"],
      ];
      for (const s of steps) {
        const r = ip(s);
        if (!r.ok) throw new Error(`ip ${s.join(" ")}: ${r.err}`);
        if (s[0] === "netns") netns.push(name);
        if (s[1] === "add" && s[0] === "link") links.push(outer);
      }
      if (delay > 0) {
        // Both directions: egress of each end of the pair.
        for (const args of [
          ["qdisc", "add", "dev", outer, "root", "netem", "delay", `${delay}ms`],
          ["-n", name, "qdisc", "add", "dev", inner, "root", "netem", "delay", `${delay}ms`],
        ]) {
          const r = spawnSync("tc", args, { encoding: "utf8" });
          if (r.status !== 0) delay = 0; // no netem in this kernel: plain links
        }
      }
    }
  } catch (err) {
    remove();
    throw err;
  }
  return {
    netns,
    hostAddress: (k) => `10.${200 + k}.${tag}.1`,
    hostAddresses: netns.map((_, k) => `10.${200 + k}.${tag}.1`),
    delayMs: delay,
    remove,
  };
}
