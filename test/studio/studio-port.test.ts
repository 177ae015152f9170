import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenAddress, runStudio } from "../../src/cli/studio.ts";
import { spawn } from "node:child_process";
import { join } from "node:path";

// `npm run studio` on a busy port: langgraphjs dev alone logs EADDRINUSE and keeps running with no
// server; the wrapper (bin/studio.mjs) exits with codehop's error format and code 2.
let busy: Server;
let port: number;

beforeAll(async () => {
  busy = createServer();
  await new Promise<void>((ok) => busy.listen(0, "127.0.0.1", ok));
  port = (busy.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((ok) => busy.close(ok));
});

function studio(args: string[]) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [join(process.cwd(), "bin/studio.mjs"), ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

describe("npm run studio on a busy port", { timeout: 120_000 }, () => {
  it("reads --port / --host like langgraphjs dev (2024 on localhost by default)", () => {
    expect(listenAddress([])).toEqual({ port: 2024, host: "localhost" });
    expect(listenAddress(["--port", "3000", "--host=0.0.0.0"])).toEqual({
      port: 3000,
      host: "0.0.0.0",
    });
  });

  it("exits 2 at once with codehop's error format instead of running on", async () => {
    const r = await studio(["--port", String(port), "--host", "127.0.0.1"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
    expect(r.stderr).toContain(`npm run studio -- --port ${port + 1}`);
    expect(r.stderr).toContain("[CODEHOP_CONFIG_INVALID]");
  });

  it("also stops the server and exits 2 when the server itself meets EADDRINUSE (port taken after the check)", async () => {
    let out = "";
    let err = "";
    const code = await runStudio(
      ["--port", String(port), "--host", "127.0.0.1", "--no-reload"],
      { out: (s) => (out += s), err: (s) => (err += s) },
      { checkPort: false },
    );
    expect(code).toBe(2);
    expect(out + err).toContain("EADDRINUSE");
    expect(err).toContain(`codehop studio: port ${port} on 127.0.0.1 is already in use`);
  });
});
