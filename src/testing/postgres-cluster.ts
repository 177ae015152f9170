import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/**
 * A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` + `pg_ctl` from the Debian
 * package (/usr/lib/postgresql/<version>/bin) on a free loopback port under a temporary directory.
 * No system service is used. `initdb` refuses to run as root, so as root the server binaries run as
 * an unprivileged user (`postgres` when the package created it, else `nobody`) through `setpriv`,
 * and the directory is handed to that user.
 */

/** A running throwaway cluster. */
export interface TestCluster {
  /** Connection URL of the `postgres` database (superuser `codehop`, trust authentication). */
  readonly url: string;
  readonly port: number;
  /** The cluster's directory (data, socket, log). */
  readonly dir: string;
  /** A connection URL for a fresh database created on the cluster. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server (immediate shutdown) and removes the directory. Idempotent. */
  stop(): Promise<void>;
}

/** Where the PostgreSQL server binaries are (highest installed version), or undefined if none. */
export function findPostgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length) return join(root, versions[0], "bin");
  }
  const pgConfig = spawnSync("pg_config", ["--bindir"], { encoding: "utf8" });
  const dir = pgConfig.status === 0 ? pgConfig.stdout.trim() : "";
  return dir && existsSync(join(dir, "initdb")) ? dir : undefined;
}

/** Why no cluster can be started here (undefined when one can): for a clear skip message. */
export function postgresUnavailableReason(): string | undefined {
  if (!findPostgresBin())
    return "PostgreSQL server binaries not found (apt-get install postgresql; /usr/lib/postgresql/<version>/bin)";
  if (process.getuid?.() === 0 && !unprivilegedUser())
    return "running as root and no unprivileged user (postgres, nobody) to run initdb as";
  return undefined;
}

/** The user the server runs as when we are root. */
function unprivilegedUser(): { name: string; uid: number; gid: number } | undefined {
  for (const name of ["postgres", "nobody"]) {
    const r = spawnSync("id", ["-u", name], { encoding: "utf8" });
    const g = spawnSync("id", ["-g", name], { encoding: "utf8" });
    if (r.status === 0 && g.status === 0)
      return { name, uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
  }
  return undefined;
}

/** A free TCP port on 127.0.0.1 (bound and released; the cluster start retries on a clash). */
function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

/** Runs a server binary, as the unprivileged user when we are root; throws with its output on failure. */
function runAs(
  user: { uid: number; gid: number } | undefined,
  bin: string,
  args: string[],
): { stdout: string; stderr: string } {
  const [cmd, argv] = user
    ? [
        "setpriv",
        [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", bin, ...args],
      ]
    : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: "utf8", env: { ...process.env, LC_ALL: "C" } });
  if (r.status !== 0)
    throw new Error(`${bin} ${args.join(" ")} failed (${r.status}): ${r.stderr || r.stdout}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

/** Options of {@link startTestCluster}. */
export interface TestClusterOptions {
  /** fsync on (durable against power loss; slower). Default false: tests only kill processes. */
  fsync?: boolean;
  /** max_connections (workers and servers each hold a few). Default 200. */
  maxConnections?: number;
  /**
   * Addresses to listen on besides 127.0.0.1 (e.g. a veth address that processes in other network
   * namespaces connect to), each trusted from its /24. Default none.
   */
  extraListenAddresses?: string[];
}

/** Starts a throwaway cluster; throws with the reason when PostgreSQL is not installed. */
export async function startTestCluster(options: TestClusterOptions = {}): Promise<TestCluster> {
  const reason = postgresUnavailableReason();
  if (reason) throw new Error(`Cannot start a test PostgreSQL cluster: ${reason}`);
  const bin = findPostgresBin()!;
  const user = process.getuid?.() === 0 ? unprivilegedUser() : undefined;
  const dir = mkdtempSync(join(tmpdir(), "codehop-pg-"));
  const data = join(dir, "data");
  if (user) chownSync(dir, user.uid, user.gid);
  const pwfile = join(dir, "pw");
  writeFileSync(pwfile, "codehop\n");
  if (user) chownSync(pwfile, user.uid, user.gid);
  runAs(user, join(bin, "initdb"), [
    "-D",
    data,
    "-U",
    "codehop",
    "--auth=trust",
    "--encoding=UTF8",
    "--no-sync",
    `--pwfile=${pwfile}`,
  ]);
  const extra = options.extraListenAddresses ?? [];
  if (extra.length) {
    const hba = extra
      .map((a) => `host all all ${a.split(".").slice(0, 3).join(".")}.0/24 trust\n`)
      .join("");
    appendFileSync(join(data, "pg_hba.conf"), hba);
  }
  let port = 0;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    port = await freePort();
    const settings = [
      `-p ${port}`,
      `-k ${dir}`,
      `-c listen_addresses=${["127.0.0.1", ...extra].join(",")}`,
      `-c max_connections=${options.maxConnections ?? 200}`,
      `-c fsync=${options.fsync ? "on" : "off"}`,
      "-c full_page_writes=off",
      "-c shared_buffers=64MB",
    ].join(" ");
    try {
      runAs(user, join(bin, "pg_ctl"), [
        "start",
        "-w",
        "-t",
        "60",
        "-D",
        data,
        "-l",
        join(dir, "server.log"),
        "-o",
        settings,
      ]);
      lastError = undefined;
      break;
    } catch (err) {
      lastError = err;
    }
  }
  if (lastError) {
    rmSync(dir, { recursive: true, force: true });
    throw lastError;
  }
  let stopped = false;
  const stopNow = () => {
    if (stopped) return;
    stopped = true;
    try {
      runAs(user, join(bin, "pg_ctl"), ["stop", "-m", "immediate", "-w", "-D", data]);
    } catch {
      // already gone
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // A test runner or bench that exits or is stopped must not leave a server behind.
  const onSignal = (signal: NodeJS.Signals) => {
    stopNow();
    process.kill(process.pid, signal);
  };
  process.once("exit", stopNow);
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const url = `postgres://codehop@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    dir,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name.replace(/"/g, "")}"`);
      } finally {
        await client.end();
      }
      return `postgres://codehop@127.0.0.1:${port}/${encodeURIComponent(name)}`;
    },
    async stop() {
      process.removeListener("exit", stopNow);
      process.removeListener("SIGINT", onSignal);
      process.removeListener("SIGTERM", onSignal);
      stopNow();
    },
  };
}
