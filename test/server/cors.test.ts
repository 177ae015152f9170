import { request } from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliRun, cliEnv, runCli, spawnCli } from "../app/cli-helpers.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { waitForStderr } from "./processes.ts";

// `codehop serve --cors-origin`: agent-chat-ui (or any page) served from another origin calls
// the server from the browser, which sends a preflight (no credentials) before a request with an
// x-api-key header and reads an answer only when it names the page's origin. Requests are sent
// with node:http so the Origin header goes out as a browser sends it.

const ORIGIN = "http://localhost:3000";
const KEY = "cors-test-key-0123456789abcdef";
const cluster = useTestCluster();
let server: CliRun | undefined;
let url: string;

beforeAll(async () => {
  if (postgresMissing) return;
  const databaseUrl = await cluster().createDatabase("cors");
  server = spawnCli(
    ["serve", "--port", "0", "--api-key", KEY, "--cors-origin", `${ORIGIN},http://127.0.0.1:3001`],
    cliEnv({
      CODEHOP_DATABASE_URL: databaseUrl,
      CODEHOP_HOME: mkdtempSync(join(tmpdir(), "codehop-cors-")),
    }),
  );
  url = (await waitForStderr(server, /listening on (http:\/\/\S+)/, "codehop serve"))[1];
}, 120_000);

afterAll(async () => {
  if (server && server.child.exitCode === null) server.child.kill("SIGKILL");
  await server?.done;
});

/** One HTTP exchange: status, headers, body. */
function send(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), { method, headers }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe.skipIf(postgresMissing)("codehop serve --cors-origin", () => {
  it("answers an allowed origin's preflight without credentials, then its keyed request", async () => {
    const preflight = await send("OPTIONS", "/threads", {
      origin: ORIGIN,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type,x-api-key",
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe(ORIGIN);
    expect(String(preflight.headers["access-control-allow-methods"])).toContain("POST");
    const created = await send(
      "POST",
      "/threads",
      { origin: ORIGIN, "content-type": "application/json", "x-api-key": KEY },
      "{}",
    );
    expect(created.status).toBe(200);
    expect(created.headers["access-control-allow-origin"]).toBe(ORIGIN);
    // The SDK reads these from a page (a streamed run's id, a search's total).
    expect(String(created.headers["access-control-expose-headers"])).toContain("content-location");
  });

  it("a streamed run's answer (written outside fastify's reply) carries them too", async () => {
    const thread = JSON.parse(
      (
        await send(
          "POST",
          "/threads",
          { "content-type": "application/json", "x-api-key": KEY },
          "{}",
        )
      ).body,
    ).thread_id;
    // Only the head is read: no worker runs it here, the stream would wait for one.
    const head = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const req = request(
        new URL(`/threads/${thread}/runs/stream`, url),
        {
          method: "POST",
          headers: { origin: ORIGIN, "content-type": "application/json", "x-api-key": KEY },
        },
        (res) => {
          resolve({ status: res.statusCode, ...res.headers });
          req.destroy();
        },
      );
      req.on("error", reject);
      req.end(
        JSON.stringify({ assistant_id: "chat", input: { messages: [] }, stream_mode: ["values"] }),
      );
    });
    expect(head.status).toBe(200);
    expect(head["content-type"]).toBe("text/event-stream");
    expect(head["access-control-allow-origin"]).toBe(ORIGIN);
    expect(String(head["access-control-expose-headers"])).toContain("content-location");
  });

  it("a missing key is still 401, readable by the allowed page", async () => {
    const res = await send(
      "POST",
      "/threads",
      { origin: ORIGIN, "content-type": "application/json" },
      "{}",
    );
    expect(res.status).toBe(401);
    expect(res.headers["access-control-allow-origin"]).toBe(ORIGIN);
  });

  it("another origin gets no CORS headers (its page reads nothing)", async () => {
    const preflight = await send("OPTIONS", "/threads", {
      origin: "http://evil.example",
      "access-control-request-method": "POST",
      "access-control-request-headers": "x-api-key",
    });
    expect(preflight.headers["access-control-allow-origin"]).toBeUndefined();
    const res = await send("GET", "/info", { origin: "http://evil.example", "x-api-key": KEY });
    expect(res.headers["access-control-allow-origin"]).toBeUndefined();
  });
});

describe("codehop serve --cors-origin refuses what is not an origin", () => {
  it.each(["localhost:3000", "http://localhost:3000/", "http://localhost:3000/app", "ftp://x.org"])(
    "%s: exit 2 naming it, before connecting anywhere",
    async (origin) => {
      const r = await runCli(
        ["serve", "--port", "0", "--cors-origin", origin],
        cliEnv({ CODEHOP_DATABASE_URL: "postgres://127.0.0.1:1/none" }),
      );
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`${origin} is not an origin`);
    },
  );
});
