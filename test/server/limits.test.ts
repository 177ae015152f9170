import { connect } from "node:net";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { type CliRun, runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { killAll, startServe, startWorker } from "./processes.ts";

// Issue 21's per-user limits and request checks, as hostile clients meet them: `codehop serve`
// (tight limits set by flags and CODEHOP_SERVE_* variables) + a `codehop worker` on a throwaway
// PostgreSQL, driven by the official SDK and raw HTTP. Each user below holds an API key of
// `codehop keys` and exercises one limit, so the limits of one never touch another's test.

const GRAPHS = join(import.meta.dirname, "../fixtures/auth/builtin.langgraph.json");
const RATE = 40;
const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
const world = useDemoWorld("codehop-limits-", {
  responder: () =>
    trajectoryResponder([
      {
        name: "slow",
        task: "Take your time",
        steps: [{ content: action("final_answer('done')"), delayMs: 1500 }],
      },
      { name: "whoami", task: "Who am I?", steps: [action("final_answer(await whoami())")] },
    ]),
});
const cluster = useTestCluster();
let db: pg.Pool;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let serverUrl = "";
const keys: Record<string, string> = {};
const USERS = ["alice", "rater", "runner", "parallel", "uploader", "filler", "prober"];

const clientOf = (user: string) =>
  new Client({
    apiUrl: serverUrl,
    defaultHeaders: { "x-api-key": keys[user] },
    callerOptions: { maxRetries: 0 },
  });

/** A raw HTTP call as `user` with a body sent exactly as given: status, JSON body, headers. */
async function raw(user: string, method: string, path: string, body?: string | Buffer) {
  const res = await fetch(`${serverUrl}${path}`, {
    method,
    headers: {
      "x-api-key": keys[user],
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body,
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** The HTTP status and parsed body of an SDK call that must fail. */
async function failure(call: Promise<unknown>): Promise<{ status: number; body: any }> {
  const err = (await call.then(
    () => undefined,
    (e: unknown) => e,
  )) as { status?: number; text?: string } | undefined;
  if (!err) throw new Error("the call succeeded");
  let body: any = err.text;
  try {
    body = JSON.parse(err.text ?? "");
  } catch {
    // not JSON
  }
  return { status: err.status ?? 0, body };
}

beforeAll(async () => {
  if (postgresMissing) return;
  const databaseUrl = await cluster().createDatabase("limits");
  db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const env = world.cliEnv({
    CODEHOP_DATABASE_URL: databaseUrl,
    CODEHOP_MAX_RETRIES: "0",
    // Half by variables, half by flags: both reach the server.
    CODEHOP_SERVE_MAX_ACTIVE_RUNS: "2",
    CODEHOP_SERVE_MAX_RUNNING_RUNS: "1",
    CODEHOP_SERVE_MAX_THREAD_UPLOAD_MB: String(3000 / 1024 / 1024),
    CODEHOP_SERVE_MAX_USER_UPLOAD_MB: String(5000 / 1024 / 1024),
  });
  for (const name of USERS) {
    const made = await runCli(["keys", "add", name, "--json"], env);
    expect(made.code, made.stderr).toBe(0);
    keys[name] = JSON.parse(made.stdout).key;
  }
  ({ run: server, url: serverUrl } = await startServe(
    [
      "--graphs",
      GRAPHS,
      "--auth",
      "keys",
      "--requests-per-minute",
      String(RATE),
      "--max-body-mb",
      "32",
    ],
    env,
  ));
  worker = await startWorker("lw1", ["--concurrency", "3", "--graphs", GRAPHS], env);
}, 180_000);

afterAll(async () => {
  await killAll([worker, server]);
  await db?.end();
});

describe.skipIf(postgresMissing)("per-user limits of codehop serve", { timeout: 120_000 }, () => {
  it("request rate: 429 with Retry-After past the user's rate; other users are not slowed", async () => {
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<typeof raw>> | undefined;
    for (let i = 0; i < RATE + 5; i++) {
      const res = await raw("rater", "POST", "/threads/search", "{}");
      statuses.push(res.status);
      if (res.status === 429) refused ??= res;
    }
    expect(statuses.slice(0, RATE).every((s) => s === 200)).toBe(true);
    expect(statuses.slice(RATE)).toEqual([429, 429, 429, 429, 429]);
    expect(Number(refused!.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(refused!.json.message).toMatch(/at most 40 a minute per user/);
    // Another user at the same moment: served.
    expect((await raw("alice", "POST", "/threads/search", "{}")).status).toBe(200);
    // The SDK sees the 429 (and would wait Retry-After with retries on).
    expect((await failure(clientOf("rater").threads.search())).status).toBe(429);
  });

  it("runs pending or running per user: 429 with Retry-After beyond; room again once one ends", async () => {
    const runner = clientOf("runner");
    const threads = await Promise.all([0, 1, 2].map(() => runner.threads.create()));
    // Runs scheduled for later are pending: they count.
    const later = { input: { task: "Who am I?" }, afterSeconds: 600 };
    const first = await runner.runs.create(threads[0].thread_id, "whoami", later);
    await runner.runs.create(threads[1].thread_id, "whoami", later);
    const refused = await failure(runner.runs.create(threads[2].thread_id, "whoami", later));
    expect(refused.status).toBe(429);
    expect(refused.body.message).toMatch(
      /2 runs pending or running.*CODEHOP_SERVE_MAX_ACTIVE_RUNS/,
    );
    // A stateless run is refused too, and leaves no thread behind.
    const before = await runner.threads.count();
    expect((await failure(runner.runs.wait(null, "whoami", { input: { task: "x" } }))).status).toBe(
      429,
    );
    expect(await runner.threads.count()).toBe(before);
    expect(await runner.runs.list(threads[2].thread_id)).toEqual([]);
    // Another user is not held by the runner's runs.
    const alice = clientOf("alice");
    const mine = await alice.threads.create();
    expect(
      await alice.runs.wait(mine.thread_id, "whoami", { input: { task: "Who am I?" } }),
    ).toBeTruthy();
    // One ends (cancelled while pending): the third goes through.
    await runner.runs.cancel(threads[0].thread_id, first.run_id);
    const third = await runner.runs.create(threads[2].thread_id, "whoami", later);
    expect(third.status).toBe("pending");
  });

  it("runs executing per user: one at a time, the others wait in the queue and all finish", async () => {
    const parallel = clientOf("parallel");
    const threads = await Promise.all([0, 1].map(() => parallel.threads.create()));
    const runs = await Promise.all(
      threads.map((t) =>
        parallel.runs.create(t.thread_id, "whoami", { input: { task: "Take your time" } }),
      ),
    );
    let most = 0;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { rows } = await db.query<{ status: string }>(
        "SELECT status FROM codehop_runs WHERE owner = 'parallel'",
      );
      most = Math.max(most, rows.filter((r) => r.status === "running").length);
      if (rows.every((r) => r.status === "success") || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(most).toBe(1);
    for (const [i, run] of runs.entries())
      expect((await parallel.runs.get(threads[i].thread_id, run.run_id)).status).toBe("success");
  });

  it("upload bytes per thread and per user: 413 naming the limit; a file already there counts once", async () => {
    const uploader = clientOf("uploader");
    const file = (fill: string, bytes: number) => ({
      messages: [
        {
          type: "human",
          content: [
            { type: "text", text: "Keep this." },
            {
              type: "file",
              mimeType: "text/plain",
              data: Buffer.alloc(bytes, fill).toString("base64"),
              metadata: { filename: `${fill}.txt` },
            },
          ],
        },
      ],
    });
    const upload = (threadId: string, fill: string, bytes = 2000) =>
      uploader.runs.create(threadId, "chat", {
        input: file(fill, bytes),
        interruptBefore: ["respond", "summarize"],
      } as never);
    const [a, b, c] = await Promise.all([0, 1, 2].map(() => uploader.threads.create()));
    await upload(a.thread_id, "a");
    await uploader.runs.join(a.thread_id, (await uploader.runs.list(a.thread_id))[0].run_id);
    // 2000 + 2000 > the thread's 3000 bytes.
    const thread = await failure(upload(a.thread_id, "b"));
    expect(thread.status).toBe(413);
    expect(thread.body.message).toMatch(/the thread past its 3000 bytes.*MAX_THREAD_UPLOAD_MB/);
    // The same file again is no new byte.
    await uploader.runs.join(a.thread_id, (await upload(a.thread_id, "a")).run_id);
    await uploader.runs.join(b.thread_id, (await upload(b.thread_id, "b")).run_id);
    // 4000 held + 2000 > the user's 5000 bytes, though the new thread is empty.
    const user = await failure(upload(c.thread_id, "c"));
    expect(user.status).toBe(413);
    expect(user.body.message).toMatch(/your account past its 5000 bytes.*MAX_USER_UPLOAD_MB/);
    expect(await uploader.runs.list(c.thread_id)).toEqual([]);
    const { rows } = await db.query(
      "SELECT thread_id, octet_length(bytes) AS n FROM codehop_uploads WHERE owner = 'uploader'",
    );
    expect(rows.map((r) => Number(r.n))).toEqual([2000, 2000]);
    // Another user's uploads are their own account's.
    const filler = clientOf("filler");
    const theirs = await filler.threads.create();
    await filler.runs.create(theirs.thread_id, "chat", {
      input: file("c", 2000),
      interruptBefore: ["respond", "summarize"],
    } as never);
    // Deleting a thread gives its bytes back.
    await uploader.threads.delete(a.thread_id);
    await uploader.runs.join(c.thread_id, (await upload(c.thread_id, "c")).run_id);
  });
});

describe.skipIf(postgresMissing)(
  "request bodies checked before parsing",
  { timeout: 120_000 },
  () => {
    it("a 2-million-key body is refused at its first keys, in about no time (413)", async () => {
      const parts: string[] = ['{"metadata":{'];
      for (let i = 0; i < 2_000_000; i++) parts.push(`${i ? "," : ""}"k${i}":0`);
      parts.push("}}");
      const body = Buffer.from(parts.join(""));
      expect(body.length).toBeLessThan(32 * 1024 * 1024);
      const started = Date.now();
      const res = await raw("alice", "POST", "/threads", body);
      const seconds = (Date.now() - started) / 1000;
      expect(res.status).toBe(413);
      expect(res.json.message).toMatch(/more than 100000 keys and array items/);
      // (was over 60 s: the whole body was parsed, then walked); a loose bound for a loaded machine
      expect(seconds).toBeLessThan(10);
      // The server is fine afterwards.
      expect((await raw("alice", "POST", "/threads/search", "{}")).status).toBe(200);
    });

    it("a body over the size limit: 413 naming it, before reading it all", async () => {
      const body = Buffer.alloc(33 * 1024 * 1024, "a");
      body.write('{"metadata":{"note":"', 0);
      body.write('"}}', body.length - 3);
      const res = await raw("alice", "POST", "/threads", body);
      expect(res.status).toBe(413);
      expect(res.json.message).toMatch(/larger than 33554432 bytes \(CODEHOP_SERVE_MAX_BODY_MB\)/);
    });

    it("nesting deeper than the limit: 422, in any field (thread metadata, search filters, run input)", async () => {
      const deep = (n: number) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`;
      const arrays = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
      for (const [path, body] of [
        ["/threads", `{"metadata":${deep(100)}}`],
        ["/threads/search", `{"metadata":${deep(5000)}}`],
        ["/runs/wait", `{"assistant_id":"whoami","input":{"task":${arrays(200_000)}}}`],
      ]) {
        const res = await raw("alice", "POST", path, body);
        expect(res.status, path).toBe(422);
        expect(res.json.message).toMatch(/nests deeper than 64 levels/);
      }
      // A deep-but-allowed filter is an answer (no thread matches), not a server error.
      const ok = await raw("alice", "POST", "/threads/search", `{"metadata":${deep(60)}}`);
      expect(ok.status).toBe(200);
      expect(ok.json).toEqual([]);
    });

    it("brackets and colons inside strings are text, not structure", async () => {
      const tricky = `${"[{:,".repeat(30_000)}\\"]}`;
      const alice = clientOf("alice");
      const thread = await alice.threads.create({ metadata: { tricky } });
      expect((await alice.threads.get(thread.thread_id)).metadata?.tricky).toBe(tricky);
    });

    it("NUL and lone surrogates in any field: 422 naming the field, never a database error", async () => {
      const cases: Array<[string, string, string, string]> = [
        ["POST", "/threads", `{"metadata":{"note":"a\\u0000b"}}`, "body.metadata.note"],
        ["POST", "/threads", `{"metadata":{"note":"\\ud800"}}`, "body.metadata.note"],
        ["POST", "/threads", `{"metadata":{"k\\u0000":"v"}}`, "body.metadata.k?"],
        ["POST", "/threads", `{"thread_id":"\\udfff-x"}`, "body.thread_id"],
        ["POST", "/threads/search", `{"metadata":{"owner":"\\u0000"}}`, "body.metadata.owner"],
        [
          "POST",
          "/runs/wait",
          JSON.stringify({
            assistant_id: "chat",
            input: {
              messages: [
                {
                  type: "human",
                  content: [
                    { type: "text", text: "hi" },
                    {
                      type: "file",
                      mimeType: "text/plain",
                      data: "aGk=",
                      metadata: { filename: "evil\u0000.txt" },
                    },
                  ],
                },
              ],
            },
          }),
          "body.input.messages.0.content.1.metadata.filename",
        ],
        ["GET", "/threads/abc%00def", "", "path.tid"],
        ["GET", "/threads/x/history?before=%00", "", "query.before"],
      ];
      for (const [method, path, body, field] of cases) {
        const res = await raw("alice", method, path, body || undefined);
        expect(res.status, `${method} ${path} ${body}`).toBe(422);
        expect(res.json.field, path).toBe(field);
        expect(res.json.message).toMatch(/NUL character|unpaired UTF-16 surrogate/);
      }
      // Percent-encoded bytes that are not UTF-8 (a lone surrogate's): refused as a bad URL.
      const bad = await raw("alice", "GET", "/threads/abc%ED%A0%80");
      expect(bad.status).toBe(400);
      expect(bad.json.message).toMatch(/not a valid url/i);
      // A proper pair (an emoji) and other unicode in keys and values are fine.
      const alice = clientOf("alice");
      const thread = await alice.threads.create({
        metadata: { "clé 🔑": "🎉 naïve ﻿ zero-width\u200b", "\u202eevil": "rtl" },
      });
      expect((await alice.threads.get(thread.thread_id)).metadata).toMatchObject({
        "clé 🔑": "🎉 naïve ﻿ zero-width\u200b",
        "\u202eevil": "rtl",
      });
    });

    it("identity headers: two keys at once, a key with trailing junk, a raw CRLF: 401/400, never another user", async () => {
      const twoKeys = await fetch(`${serverUrl}/threads/search`, {
        method: "POST",
        headers: {
          "x-api-key": `${keys.alice}, ${keys.rater}`,
          "content-type": "application/json",
        },
        body: "{}",
      });
      expect(twoKeys.status).toBe(401);
      // A header line smuggled into the key (a bare CR): Node's parser refuses the request.
      const url = new URL(serverUrl);
      const status = await new Promise<number>((resolve) => {
        const s = connect(Number(url.port), url.hostname, () =>
          s.write(
            `POST /threads/search HTTP/1.1\r\nHost: x\r\nx-api-key: ${keys.alice}\rx-api-key: ${keys.rater}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`,
          ),
        );
        let got = "";
        s.on("data", (d) => (got += d));
        s.on("close", () => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(got)?.[1] ?? 0)));
        s.on("error", () => resolve(0));
      });
      expect([400, 401]).toContain(status);
    });
  },
);

describe.skipIf(postgresMissing)(
  "client values the database or LangGraph refuse: 422 naming them, never a 500",
  { timeout: 120_000 },
  () => {
    let threadId = "";
    let runId = "";
    beforeAll(async () => {
      const prober = clientOf("prober");
      const thread = await prober.threads.create();
      threadId = thread.thread_id;
      await prober.runs.wait(threadId, "whoami", { input: { task: "Who am I?" } });
      runId = (await prober.runs.list(threadId))[0].run_id;
    });

    it("query numbers: NaN, negative, repeated, past bigint: 422 naming the parameter", async () => {
      for (const [path, field] of [
        [`/threads/${threadId}/runs?limit=abc`, "query.limit"],
        [`/threads/${threadId}/runs?limit=-5`, "query.limit"],
        [`/threads/${threadId}/runs?limit=1&limit=2`, "query.limit"],
        [`/threads/${threadId}/runs?offset=99999999999999999999`, "query.offset"],
        [`/threads/${threadId}/runs?status=zzz`, "query.status"],
        [`/threads/${threadId}/history?limit=abc`, "query.limit"],
        [`/threads/${threadId}/history?limit=1e400`, "query.limit"],
      ]) {
        const res = await raw("prober", "GET", path);
        expect(res.status, path).toBe(422);
        expect(res.json.field, path).toBe(field);
        expect(res.text, path).not.toMatch(/bigint|column|does not exist|\bat \S+:\d+/);
      }
      const ok = await raw("prober", "GET", `/threads/${threadId}/runs?limit=5&status=success`);
      expect(ok.status).toBe(200);
      expect(ok.json.map((r: { run_id: string }) => r.run_id)).toEqual([runId]);
    });

    it("a run after 10^20 seconds or before now: 422, nothing created", async () => {
      const before = (await clientOf("prober").threads.search({ limit: 100 })).length;
      for (const after_seconds of [1e20, -5]) {
        const res = await raw(
          "prober",
          "POST",
          "/runs",
          JSON.stringify({ assistant_id: "whoami", input: { task: "Who am I?" }, after_seconds }),
        );
        expect(res.status, String(after_seconds)).toBe(422);
        expect(res.json.message).toMatch(/after_seconds/);
      }
      expect((await clientOf("prober").threads.search({ limit: 100 })).length).toBe(before);
    });

    it("a Last-Event-ID past bigint replays the stream from its start, without a database error", async () => {
      const res = await fetch(`${serverUrl}/threads/${threadId}/runs/${runId}/stream`, {
        headers: { "x-api-key": keys.prober, "last-event-id": "99999999999999999999999999" },
      });
      const text = await res.text();
      expect(res.status).toBe(200);
      expect(text).toMatch(/event: values/);
      expect(text).not.toMatch(/event: error|out of range/);
    });

    it("a state update LangGraph refuses (no such node, values not an update): 422 with its reason", async () => {
      for (const [body, reason] of [
        [{ values: {}, as_node: "nope" }, /Node "nope" does not exist/],
        [{ values: "x" }, /to return an object/],
        [{ values: [1, 2] }, /to return an object/],
      ] as const) {
        const res = await raw("prober", "POST", `/threads/${threadId}/state`, JSON.stringify(body));
        expect(res.status, JSON.stringify(body)).toBe(422);
        expect(res.json.message).toMatch(reason);
        expect(res.json.message).not.toMatch(/Troubleshooting|\n/);
      }
      // The thread reads as before.
      expect((await raw("prober", "GET", `/threads/${threadId}/state`)).status).toBe(200);
    });
  },
);
