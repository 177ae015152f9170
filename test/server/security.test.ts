import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_ANSWERS, DEMO_QUESTIONS, demoRules } from "../../src/apps/qa/demo-trajectories.ts";
import { trajectoryResponder } from "../../src/testing/scripted-openai-server.ts";
import { type CliRun, runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { killAll, startServe, startWorker } from "./processes.ts";

// `codehop serve` + a `codehop worker` on a throwaway PostgreSQL, attacked through the official
// SDK and raw HTTP as hostile clients would. Three users: alice and mallory hold API keys made
// with `codehop keys add`, bob signs in with a JWT of an identity provider this test runs (its
// JWKS served over HTTP). Every leak of issue 21 is attempted; a listener stands where a client
// would like the worker's model requests to go, and must hear nothing.

const GRAPHS = join(import.meta.dirname, "../fixtures/auth/builtin.langgraph.json");
const OPERATOR_MAX_TOKENS = 300;
const ISSUER = "https://idp.codehop.test/realms/acme";
const AUDIENCE = "codehop-api";

const action = (code: string) => `Thought: go\nCode:\n\`\`\`js\n${code}\n\`\`\`<end_action>`;
const world = useDemoWorld("codehop-security-", {
  responder: () =>
    trajectoryResponder([
      ...demoRules(),
      { name: "whoami", task: "Who am I?", steps: [action("final_answer(await whoami())")] },
    ]),
});
const cluster = useTestCluster();
let databaseUrl = "";
let db: pg.Pool;
let server: CliRun | undefined;
let worker: CliRun | undefined;
let serverUrl = "";

/** Where a client would like the worker's model requests to go: it must never be reached. */
let listener: Server;
let listenerUrl = "";
const reached: string[] = [];

/** The identity provider: its signing key and JWKS endpoint. */
let idp: Server;
let jwksUrl = "";
type SigningKey = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
let signingKey: SigningKey;
let jwksFetches = 0;

const keys: Record<string, string> = {};
let revokedKeyId = "";
let bobToken = "";

/** A JWT as the identity provider would issue it (override any claim or header). */
async function token(
  claims: Record<string, unknown> = {},
  options: {
    key?: SigningKey;
    kid?: string;
    issuer?: string;
    audience?: string;
    exp?: string | number;
  } = {},
) {
  return new SignJWT({ scope: "threads:write", name: "Bob B.", ...claims })
    .setProtectedHeader({ alg: "RS256", kid: options.kid ?? "k1" })
    .setSubject((claims.sub as string) ?? "bob")
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(options.exp ?? "10m")
    .sign(options.key ?? signingKey);
}

const headersOf = (user: string): Record<string, string> =>
  user === "bob"
    ? { authorization: `Bearer ${bobToken}` }
    : user === "nobody"
      ? {}
      : { "x-api-key": keys[user] };

const clientOf = (user: string) =>
  new Client({
    apiUrl: serverUrl,
    defaultHeaders: headersOf(user),
    callerOptions: { maxRetries: 0 },
  });

/** A raw HTTP call as `user`: status and parsed body. */
async function call(user: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${serverUrl}${path}`, {
    method,
    headers: {
      ...headersOf(user),
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

beforeAll(async () => {
  listener = createHttpServer((req, res) => {
    reached.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  await new Promise<void>((ok) => listener.listen(0, "127.0.0.1", ok));
  listenerUrl = `http://127.0.0.1:${(listener.address() as { port: number }).port}/v1`;
  const pair = await generateKeyPair("RS256");
  signingKey = pair.privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  idp = createHttpServer((_req, res) => {
    jwksFetches++;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((ok) => idp.listen(0, "127.0.0.1", ok));
  jwksUrl = `http://127.0.0.1:${(idp.address() as { port: number }).port}/certs`;
  bobToken = await token();
  if (postgresMissing) return;
  databaseUrl = await cluster().createDatabase("security");
  db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  // The operator's registry of knowledge sources: clients choose by name, never by path.
  const config = join(world.home, "codehop.config.json");
  writeFileSync(config, JSON.stringify({ knowledgeSources: { demo: { corpus: world.corpus } } }));
  const env = world.cliEnv({
    CODEHOP_DATABASE_URL: databaseUrl,
    CODEHOP_CORPUS: world.corpus,
    CODEHOP_MAX_RETRIES: "0",
    CODEHOP_MAX_TOKENS: String(OPERATOR_MAX_TOKENS),
    CODEHOP_CONFIG: config,
    OPENAI_API_KEY: "operator-secret-key",
  });
  // The operator makes keys with the CLI before the server runs.
  for (const [name, label] of [
    ["alice", "laptop"],
    ["mallory", ""],
    ["alice", "old"],
  ]) {
    const made = await runCli(
      ["keys", "add", name, "--json", ...(label ? ["--label", label] : [])],
      env,
    );
    expect(made.code, made.stderr).toBe(0);
    const { key, key_id } = JSON.parse(made.stdout);
    if (label === "old") revokedKeyId = key_id;
    else keys[name] = key;
    if (label === "old") keys["alice-old"] = key;
  }
  ({ run: server, url: serverUrl } = await startServe(
    [
      "--graphs",
      GRAPHS,
      "--auth",
      "keys",
      "--jwks-url",
      jwksUrl,
      "--jwt-issuer",
      ISSUER,
      "--jwt-audience",
      AUDIENCE,
    ],
    env,
  ));
  worker = await startWorker("sw1", ["--concurrency", "2", "--graphs", GRAPHS], env);
}, 180_000);

afterAll(async () => {
  await killAll([worker, server]);
  await db?.end();
  await new Promise((ok) => listener?.close(ok));
  await new Promise((ok) => idp?.close(ok));
});

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

describe.skipIf(postgresMissing)("authentication on codehop serve", { timeout: 120_000 }, () => {
  it("prints what authenticates clients", () => {
    expect(server!.stderr()).toMatch(
      /authentication: API keys of the database \(codehop keys\), JWTs of https:\/\/idp\.codehop\.test/,
    );
  });

  it("no credentials, a wrong key, a malformed header: 401; /ok stays open", async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { "x-api-key": "chk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" },
      { "x-api-key": `${keys.alice}x` },
      { authorization: `Basic ${Buffer.from(`alice:${keys.alice}`).toString("base64")}` },
      { authorization: `Bearer ${keys.alice.slice(0, -1)}` },
      { authorization: "Bearer" },
    ];
    for (const headers of attempts) {
      const res = await fetch(`${serverUrl}/threads/search`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    expect((await fetch(`${serverUrl}/info`)).status).toBe(401);
    expect((await fetch(`${serverUrl}/ok`)).status).toBe(200);
    // The key in the Authorization header works as well as in x-api-key.
    const res = await fetch(`${serverUrl}/threads/search`, {
      method: "POST",
      headers: { authorization: `Bearer ${keys.alice}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
  });

  it("two users' credentials in one request (x-api-key and Authorization): 401, never either user", async () => {
    const search = (headers: Record<string, string>) =>
      fetch(`${serverUrl}/threads/search`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: "{}",
      });
    for (const headers of [
      { "x-api-key": keys.alice, authorization: `Bearer ${bobToken}` },
      { "x-api-key": keys.alice, authorization: `Bearer ${keys.mallory}` },
      { "x-api-key": keys.mallory, authorization: `bearer ${keys.alice}` },
    ]) {
      const res = await search(headers);
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(((await res.json()) as { message: string }).message).toMatch(/two different users/);
    }
    // The same key twice, or a bearer that is no credential of codehop's (a proxy's): the key's user.
    expect(
      (await search({ "x-api-key": keys.alice, authorization: `Bearer ${keys.alice}` })).status,
    ).toBe(200);
    expect(
      (await search({ "x-api-key": keys.alice, authorization: "Bearer proxy-session-token" }))
        .status,
    ).toBe(200);
  });

  it("keys are stored hashed, listed without secrets, and a revoked key stops working", async () => {
    const { rows } = await db.query("SELECT * FROM codehop_api_keys");
    expect(rows).toHaveLength(3);
    const dump = JSON.stringify(rows);
    // chk_<id>_<secret>: the secret is base64url, which may itself hold "_".
    for (const key of Object.values(keys))
      expect(dump).not.toContain(key.split("_").slice(2).join("_"));
    const old = clientOf("alice-old");
    expect((await old.threads.search()).length).toBeGreaterThanOrEqual(0);
    const env = world.cliEnv({ CODEHOP_DATABASE_URL: databaseUrl });
    const revoked = await runCli(["keys", "revoke", revokedKeyId], env);
    expect(revoked.code, revoked.stderr).toBe(0);
    const listed = await runCli(["keys", "list", "--json"], env);
    const list = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(list.map((k) => k.user).sort()).toEqual(["alice", "alice", "mallory"]);
    expect(list.find((k) => k.key_id === revokedKeyId)?.revoked_at).toBeTruthy();
    expect(listed.stdout).not.toContain(keys.alice.split("_").slice(2).join("_"));
    // Servers trust a verified key for a few seconds at most.
    await new Promise((r) => setTimeout(r, 5_500));
    expect((await failure(old.threads.search())).status).toBe(401);
    expect((await runCli(["keys", "revoke", revokedKeyId], env)).code).toBe(2);
  });

  it("JWTs: the provider's token works; wrong audience, issuer, signer, expiry, alg none and HS256 do not", async () => {
    const bob = clientOf("bob");
    expect(Array.isArray(await bob.threads.search())).toBe(true);
    const other = (await generateKeyPair("RS256")).privateKey;
    const payload = Buffer.from(
      JSON.stringify({ sub: "alice", iss: ISSUER, aud: AUDIENCE, exp: 9e9 }),
    ).toString("base64url");
    const bad: Array<[string, string]> = [
      ["audience", await token({}, { audience: "another-api" })],
      ["issuer", await token({}, { issuer: "https://evil.test" })],
      ["signer", await token({ sub: "alice" }, { key: other })],
      ["unknown kid", await token({ sub: "alice" }, { key: other, kid: "k2" })],
      ["expired", await token({}, { exp: Math.floor(Date.now() / 1000) - 3600 })],
      ["alg none", `${Buffer.from('{"alg":"none"}').toString("base64url")}.${payload}.`],
      [
        "HS256",
        `${Buffer.from('{"alg":"HS256","kid":"k1"}').toString("base64url")}.${payload}.c2lnbmF0dXJl`,
      ],
      ["no sub", await token({ sub: "" })],
    ];
    for (const [what, jwt] of bad) {
      const res = await fetch(`${serverUrl}/threads/search`, {
        method: "POST",
        headers: { authorization: `Bearer ${jwt}`, "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status, what).toBe(401);
      expect(await res.text(), what).toMatch(/Invalid bearer token/);
    }
    // The JWKS was fetched once and cached, once more for the unknown key id (at most).
    expect(jwksFetches).toBeLessThanOrEqual(3);
  });
});

describe.skipIf(postgresMissing)(
  "ownership: another user's resources are not found",
  { timeout: 180_000 },
  () => {
    let threadId = "";
    let runId = "";
    let checkpointId = "";
    let bobThread = "";

    beforeAll(async () => {
      const alice = clientOf("alice");
      const thread = await alice.threads.create({ metadata: { project: "towers" } });
      threadId = thread.thread_id;
      await alice.runs.wait(threadId, "manager", { input: { question: DEMO_QUESTIONS.towers } });
      runId = (await alice.runs.list(threadId))[0].run_id;
      checkpointId = (await alice.threads.getState(threadId)).checkpoint.checkpoint_id!;
      bobThread = (await clientOf("bob").threads.create()).thread_id;
    }, 120_000);

    it("the owner is the authenticated user, whatever metadata the client sends", async () => {
      const alice = clientOf("alice");
      expect((await alice.threads.get(threadId)).metadata).toMatchObject({
        owner: "alice",
        project: "towers",
      });
      const patched = await alice.threads.update(threadId, { metadata: { owner: "bob" } });
      expect(patched.metadata!.owner).toBe("alice");
      const forged = await clientOf("bob").threads.create({ metadata: { owner: "alice" } });
      expect(forged.metadata!.owner).toBe("bob");
      expect((await failure(alice.threads.get(forged.thread_id))).status).toBe(404);
    });

    it("every route with another user's thread id answers 404 and changes nothing", async () => {
      const T = `/threads/${threadId}`;
      const R = `${T}/runs/${runId}`;
      const attempts: Array<[string, string, unknown?]> = [
        ["GET", T],
        ["PATCH", T, { metadata: { stolen: true } }],
        ["DELETE", T],
        ["GET", `${T}/state`],
        ["GET", `${T}/state?subgraphs=true`],
        ["GET", `${T}/state/${checkpointId}`],
        ["POST", `${T}/state/checkpoint`, { checkpoint: { checkpoint_id: checkpointId } }],
        ["POST", `${T}/state`, { values: { answer: "hijacked" } }],
        ["GET", `${T}/history`],
        ["POST", `${T}/history`, { limit: 100 }],
        ["POST", `${T}/copy`, {}],
        ["GET", `${T}/runs`],
        ["GET", R],
        ["GET", `${R}/join`],
        ["GET", `${R}/stream`],
        ["POST", `${R}/cancel`],
        ["POST", `${R}/cancel?wait=1`],
        ["DELETE", R],
        ["POST", `${T}/runs`, { assistant_id: "manager", input: { question: "q" } }],
        ["POST", `${T}/runs/wait`, { assistant_id: "manager", input: { question: "q" } }],
        ["POST", `${T}/runs/stream`, { assistant_id: "manager", input: { question: "q" } }],
        [
          "POST",
          `${T}/runs`,
          { assistant_id: "manager", input: { question: "q" }, if_not_exists: "create" },
        ],
        ["GET", `/threads/${bobThread}/runs/${runId}`],
        ["GET", `/threads/${bobThread}/runs/${runId}/stream`],
        ["GET", `/threads/${bobThread}/runs/${runId}/join`],
        ["POST", `/threads/${bobThread}/runs/${runId}/cancel`],
        ["GET", `/runs/${runId}/stream`],
      ];
      for (const user of ["bob", "mallory"]) {
        for (const [method, path, body] of attempts) {
          const res = await call(user, method, path, body);
          expect(res.status, `${user} ${method} ${path}`).toBe(404);
          expect(res.text).not.toContain(DEMO_ANSWERS.towers);
        }
      }
      // Creating a thread with the id: refused, and nothing of alice's comes back.
      for (const if_exists of ["raise", "do_nothing"]) {
        const res = await call("bob", "POST", "/threads", { thread_id: threadId, if_exists });
        expect(res.status).toBe(409);
        expect(res.text).not.toContain("towers");
      }
      // Alice's thread is as it was.
      const alice = clientOf("alice");
      const thread = await alice.threads.get(threadId);
      expect(thread.metadata!.stolen).toBeUndefined();
      expect((thread.values as any).answer).toBe(DEMO_ANSWERS.towers);
      expect(await alice.runs.list(threadId)).toHaveLength(1);
    });

    it("search and count see the user's own threads only, in SQL (pages are full)", async () => {
      const bob = clientOf("bob");
      for (let i = 0; i < 3; i++) await bob.threads.create({ metadata: { batch: "b" } });
      const alice = clientOf("alice");
      for (let i = 0; i < 3; i++) await alice.threads.create({ metadata: { batch: "b" } });
      const page = await bob.threads.search({ metadata: { batch: "b" }, limit: 3 });
      expect(page).toHaveLength(3);
      expect(page.every((t) => t.metadata!.owner === "bob")).toBe(true);
      expect(await bob.threads.search({ metadata: { owner: "alice" } })).toEqual([]);
      expect(await bob.threads.count({ metadata: { batch: "b" } })).toBe(3);
      const all = await bob.threads.search({ limit: 1000 });
      expect(all.map((t) => t.thread_id)).not.toContain(threadId);
      expect((await call("bob", "POST", "/threads/search", { ids: [threadId] })).json).toEqual([]);
      expect(await clientOf("mallory").threads.count()).toBe(0);
      expect((await alice.threads.search({ limit: 1000 })).map((t) => t.thread_id)).toContain(
        threadId,
      );
    });

    it("copy: the owner's copy is theirs, with the checkpoints; the graphs' assistants are everyone's", async () => {
      const alice = clientOf("alice");
      const copy = await alice.threads.copy(threadId);
      expect(copy.thread_id).not.toBe(threadId);
      expect(copy.metadata!.owner).toBe("alice");
      const state = await alice.threads.getState(copy.thread_id);
      expect((state.values as any).answer).toBe(DEMO_ANSWERS.towers);
      expect((await failure(clientOf("bob").threads.get(copy.thread_id))).status).toBe(404);
      const assistants = await clientOf("bob").assistants.search({ limit: 50 });
      expect(assistants.map((a) => a.graph_id).sort()).toEqual([
        "chat",
        "code_agent",
        "manager",
        "whoami",
      ]);
    });

    it("langgraph_auth_user reaches graphs and tools, and a client cannot forge it", async () => {
      for (const user of ["alice", "bob"]) {
        const c = clientOf(user);
        const thread = await c.threads.create();
        const values = (await c.runs.wait(thread.thread_id, "whoami", {
          input: { task: "Who am I?" },
        })) as Record<string, unknown>;
        expect(values.answer).toBe(user === "bob" ? "bob [threads:write]" : "alice []");
      }
      const thread = await clientOf("bob").threads.create();
      const forged = await failure(
        clientOf("bob").runs.create(thread.thread_id, "whoami", {
          input: { task: "Who am I?" },
          config: { configurable: { langgraph_auth_user: { identity: "alice" } } },
        }),
      );
      expect(forged.status).toBe(403);
    });

    it("an upload is reachable from its own thread only", async () => {
      const alice = clientOf("alice");
      const secret = "The vault code is swordfish-42.";
      const data = Buffer.from(secret).toString("base64");
      const sha = createHash("sha256").update(secret).digest("hex");
      const mine = await alice.threads.create();
      for await (const _ of alice.runs.stream(mine.thread_id, "chat", {
        input: {
          messages: [
            {
              type: "human",
              content: [
                { type: "text", text: "Keep this." },
                { type: "file", mimeType: "text/plain", data, metadata: { filename: "vault.txt" } },
              ],
            },
          ],
        },
        interruptBefore: ["respond", "summarize"],
      } as never))
        void _;
      const attached = (await alice.threads.getState(mine.thread_id)).values as any;
      expect(attached.attachments[0]).toMatchObject({ ok: true });
      // Bob names alice's upload by its hash in his own thread: not there.
      const bob = clientOf("bob");
      const his = await bob.threads.create();
      const events: unknown[] = [];
      for await (const e of bob.runs.stream(his.thread_id, "chat", {
        input: {
          messages: [
            {
              type: "human",
              content: [
                { type: "text", text: "Read it." },
                {
                  type: "file",
                  upload: `sha256:${sha}`,
                  mimeType: "text/plain",
                  metadata: { filename: "vault.txt" },
                },
              ],
            },
          ],
        },
        interruptBefore: ["respond", "summarize"],
      } as never))
        events.push(e);
      const state = (await bob.threads.getState(his.thread_id)).values as any;
      expect(state.attachments[0]).toMatchObject({ ok: false });
      expect(JSON.stringify([events, state])).not.toContain("swordfish");
    });
  },
);

describe.skipIf(postgresMissing)(
  "operator-only settings on codehop serve",
  { timeout: 120_000 },
  () => {
    it("a client's model endpoint, in context or configurable, on every run route: 403 naming the key; nothing reaches it", async () => {
      const client = clientOf("alice");
      const thread = await client.threads.create();
      const endpoint = { modelSettings: { baseURL: listenerUrl, apiKey: "mine" } };
      const attempts: Array<[string, () => Promise<unknown>]> = [
        [
          "create (context)",
          () =>
            client.runs.create(thread.thread_id, "manager", {
              input: { question: "q" },
              context: endpoint,
            } as never),
        ],
        [
          "create (configurable)",
          () =>
            client.runs.create(thread.thread_id, "manager", {
              input: { question: "q" },
              config: { configurable: endpoint },
            }),
        ],
        [
          "wait",
          () =>
            client.runs.wait(thread.thread_id, "manager", {
              input: { question: "q" },
              context: endpoint,
            } as never),
        ],
        [
          "stateless wait",
          () =>
            client.runs.wait(null, "manager", {
              input: { question: "q" },
              config: { configurable: endpoint },
            }),
        ],
        [
          "stream",
          async () => {
            for await (const _ of client.runs.stream(thread.thread_id, "code_agent", {
              input: { task: "t" },
              context: endpoint,
            } as never))
              void _;
          },
        ],
      ];
      for (const [what, attempt] of attempts) {
        const { status, body } = await failure(attempt());
        expect(status, what).toBe(403);
        expect(body.code).toBe("CODEHOP_CLIENT_SETTING_REFUSED");
        expect(body.key).toMatch(/^(context|config\.configurable)\.modelSettings\.baseURL$/);
        expect(body.message).toContain("is an operator setting");
      }
      // Nothing was queued, nothing ran.
      expect(await client.runs.list(thread.thread_id)).toEqual([]);
      expect(reached).toEqual([]);
    });

    it("another thread's files by path (the corpus key): 403; the operator's sources are chosen by name", async () => {
      const client = clientOf("alice");
      const thread = await client.threads.create();
      const victim = join(world.home, "chat-files", "victim-thread.db");
      for (const settings of [
        { context: { corpus: victim } },
        { config: { configurable: { corpus: victim } } },
      ]) {
        const { status, body } = await failure(
          client.runs.create(thread.thread_id, "manager", {
            input: { question: "q" },
            ...settings,
          } as never),
        );
        expect(status).toBe(403);
        expect(body.key).toMatch(/\.corpus$/);
      }
      const unknown = await failure(
        client.runs.create(thread.thread_id, "manager", {
          input: { question: "q" },
          context: { source: "victim" },
        } as never),
      );
      expect(unknown.status).toBe(403);
      expect(unknown.body.message).toContain('"demo"');
      const values = (await client.runs.wait(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
        context: { source: "demo" },
      } as never)) as Record<string, unknown>;
      expect(values.answer).toBe(DEMO_ANSWERS.towers);
    });

    it("limits a client may set are lowered to the operator's; a model name off the allow-list is refused", async () => {
      const client = clientOf("alice");
      const thread = await client.threads.create();
      const before = world.server.requests.length;
      const values = (await client.runs.wait(thread.thread_id, "manager", {
        input: { question: DEMO_QUESTIONS.towers },
        context: { modelSettings: { maxTokens: 1e9, maxRetries: 1e6, timeoutMs: 1e12 } },
        config: { recursion_limit: 1e6 },
      } as never)) as Record<string, unknown>;
      expect(values.answer).toBe(DEMO_ANSWERS.towers);
      const sent = world.server.requests.slice(before).map((r) => r.request.maxTokens);
      expect(sent.length).toBeGreaterThan(0);
      expect(new Set(sent)).toEqual(new Set([OPERATOR_MAX_TOKENS]));
      const [run] = await client.runs.list(thread.thread_id);
      expect(((run as any).kwargs as any).context.modelSettings).toEqual({
        maxTokens: OPERATOR_MAX_TOKENS,
        maxRetries: 0,
        timeoutMs: 120_000,
      });
      expect(((run as any).kwargs as any).config.recursion_limit).toBeLessThan(1e6);
      const model = await failure(
        client.runs.create(thread.thread_id, "manager", {
          input: { question: "q" },
          context: { model: "gpt-4o" },
        } as never),
      );
      expect(model.status).toBe(403);
      expect(model.body.key).toBe("context.model");
      expect(model.body.message).toContain("CODEHOP_CLIENT_MODELS");
    });

    it("unknown keys, LangGraph's private keys and server keys: refused by name, never dropped", async () => {
      const client = clientOf("alice");
      const thread = await client.threads.create();
      const cases: Array<[Record<string, unknown>, number, string]> = [
        [{ context: { modelz: "x" } }, 422, "context.modelz"],
        [
          { config: { configurable: { langgraph_auth_user: { identity: "admin" } } } },
          403,
          "config.configurable.langgraph_auth_user",
        ],
        [
          { config: { configurable: { __pregel_checkpointer: {} } } },
          403,
          "config.configurable.__pregel_checkpointer",
        ],
        [{ context: { chat: { filesRetentionDays: 0 } } }, 422, "context.chat"],
        [{ context: { sandbox: { run: "x" } } }, 403, "context.sandbox"],
      ];
      for (const [settings, status, key] of cases) {
        const got = await failure(
          client.runs.create(thread.thread_id, "manager", {
            input: { question: "q" },
            ...settings,
          } as never),
        );
        expect(got.status, key).toBe(status);
        expect(got.body.key).toBe(key);
      }
      const pregel = await failure(
        client.runs.create(thread.thread_id, "manager", {
          input: { question: "q" },
          checkpoint: { checkpoint_id: "x", __pregel_checkpointer: {} },
        } as never),
      );
      expect(pregel.status).toBe(422);
      expect(pregel.body.message).toContain("checkpoint.__pregel_checkpointer");
      const chat = await failure(
        client.runs.create(thread.thread_id, "chat", {
          input: { messages: [{ type: "human", content: "hi" }] },
          context: { chat: { filesRetentionDays: 0 } },
        } as never),
      );
      expect(chat.status).toBe(403);
      expect(chat.body.key).toBe("context.chat.filesRetentionDays");
      expect(reached).toEqual([]);
    });
  },
);
