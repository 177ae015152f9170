import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliRun, runCli } from "../app/cli-helpers.ts";
import { useDemoWorld } from "../app/fixtures.ts";
import { postgresMissing, useTestCluster } from "../persistence/postgres-cluster.ts";
import { killAll, startServe } from "./processes.ts";

// The LangGraph server API's /store routes on `codehop serve` (PostgreSQL), driven by the official
// SDK's `client.store.*` as three users holding API keys: alice, bob, and ali (whose identity is a
// prefix of alice's). Each user's namespaces start with their identity; another user's are refused
// (403) or invisible.

const GRAPHS = join(import.meta.dirname, "../fixtures/auth/builtin.langgraph.json");
const world = useDemoWorld("codehop-store-api-");
const cluster = useTestCluster();
let db: pg.Pool;
let server: CliRun | undefined;
let serverUrl = "";
const keys: Record<string, string> = {};

const clientOf = (user: string) =>
  new Client({
    apiUrl: serverUrl,
    defaultHeaders: { "x-api-key": keys[user] },
    callerOptions: { maxRetries: 0 },
  });

/** A raw HTTP call as `user`: status and parsed body. */
async function raw(user: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${serverUrl}${path}`, {
    method,
    headers: {
      "x-api-key": keys[user],
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: typeof body === "string" ? body : body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** The HTTP status and message of an SDK call that must fail. */
async function failure(call: Promise<unknown>): Promise<{ status: number; message: string }> {
  const err = (await call.then(
    () => undefined,
    (e: unknown) => e,
  )) as { status?: number; text?: string } | undefined;
  if (!err) throw new Error("the call succeeded");
  let message = err.text ?? "";
  try {
    message = JSON.parse(message).message;
  } catch {
    // not JSON
  }
  return { status: err.status ?? 0, message };
}

beforeAll(async () => {
  if (postgresMissing) return;
  const databaseUrl = await cluster().createDatabase("store_api");
  db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const env = world.cliEnv({ CODEHOP_DATABASE_URL: databaseUrl });
  for (const name of ["alice", "bob", "ali"]) {
    const made = await runCli(["keys", "add", name, "--json"], env);
    expect(made.code, made.stderr).toBe(0);
    keys[name] = JSON.parse(made.stdout).key;
  }
  ({ run: server, url: serverUrl } = await startServe(["--graphs", GRAPHS, "--auth", "keys"], env));
}, 180_000);

afterAll(async () => {
  await killAll([server]);
  await db?.end();
});

describe.skipIf(postgresMissing)("/store on codehop serve", { timeout: 120_000 }, () => {
  it("put, get, search, list and delete one's own items with the SDK", async () => {
    const alice = clientOf("alice").store;
    await alice.putItem(["alice", "notes"], "n1", { text: "buy milk", kind: "todo" });
    await alice.putItem(["alice", "notes"], "n2", { text: "call the bank", kind: "todo" });
    await alice.putItem(["alice", "prefs"], "tone", { text: "short answers", kind: "pref" });
    const got = await alice.getItem(["alice", "notes"], "n1");
    expect(got).toMatchObject({
      namespace: ["alice", "notes"],
      key: "n1",
      value: { text: "buy milk", kind: "todo" },
    });
    expect(Date.parse(got!.createdAt)).toBeGreaterThan(0);
    expect(await alice.getItem(["alice", "notes"], "missing")).toBeNull();
    // Search: by prefix, by filter (in SQL), by query (lexical ranking), paged.
    const todos = await alice.searchItems(["alice"], { filter: { kind: "todo" } });
    expect(todos.items.map((i) => i.key).sort()).toEqual(["n1", "n2"]);
    const bank = await alice.searchItems(["alice"], { query: "bank" });
    expect(bank.items.map((i) => i.key)).toEqual(["n2"]);
    const page = await alice.searchItems(["alice"], { limit: 2, offset: 1 });
    expect(page.items).toHaveLength(2);
    // No prefix: the user's own items.
    expect((await alice.searchItems([])).items).toHaveLength(3);
    expect((await alice.listNamespaces()).namespaces).toEqual([
      ["alice", "notes"],
      ["alice", "prefs"],
    ]);
    expect((await alice.listNamespaces({ maxDepth: 1 })).namespaces).toEqual([["alice"]]);
    await alice.deleteItem(["alice", "notes"], "n1");
    expect(await alice.getItem(["alice", "notes"], "n1")).toBeNull();
  });

  it("another user's namespaces: refused (403) on every route, invisible in searches and listings", async () => {
    const alice = clientOf("alice").store;
    await alice.putItem(["alice", "secrets"], "s1", { text: "the vault code is swordfish" });
    for (const user of ["bob", "ali"]) {
      const them = clientOf(user).store;
      // (thunks: each call starts when it is awaited)
      const attempts: Array<() => Promise<unknown>> = [
        () => them.getItem(["alice", "secrets"], "s1"),
        () => them.putItem(["alice", "secrets"], "s1", { text: "overwritten" }),
        () => them.deleteItem(["alice", "secrets"], "s1"),
        () => them.searchItems(["alice"]),
        () => them.searchItems(["alice", "secrets"], { query: "vault" }),
        () => them.listNamespaces({ prefix: ["alice"] }),
      ];
      for (const attempt of attempts) {
        const refused = await failure(attempt());
        expect(refused.status).toBe(403);
        expect(refused.message).toMatch(
          new RegExp(`must start with your identity \\("${user}"\\)`),
        );
      }
      // Their own store is empty of alice's: nothing under no prefix, no listing of hers.
      await them.putItem([user, "notes"], "mine", { text: `${user}'s note` });
      const everything = await them.searchItems([], { limit: 100 });
      expect(everything.items.map((i) => i.namespace[0])).toEqual([user]);
      expect(JSON.stringify(everything)).not.toContain("swordfish");
      expect((await them.listNamespaces()).namespaces).toEqual([[user, "notes"]]);
      // A namespace of their own named like alice's, further down: still theirs only.
      await them.putItem([user, "alice", "secrets"], "s1", { text: "decoy" });
      expect((await alice.getItem(["alice", "secrets"], "s1"))!.value).toEqual({
        text: "the vault code is swordfish",
      });
    }
    // Nothing alice has changed; every row is in the namespace its owner wrote.
    const { rows } = await db.query("SELECT prefix FROM codehop_store_items ORDER BY 1");
    expect(rows.map((r) => r.prefix)).toContain("alice.secrets");
    expect((await alice.searchItems(["alice", "secrets"])).items).toHaveLength(1);
  });

  it("bad input is a 422 naming what is wrong, never a server error", async () => {
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["PUT", "/store/items", { namespace: ["alice", "a.b"], key: "k", value: {} }, /periods/],
      ["PUT", "/store/items", { namespace: ["alice"], key: "k", value: [1] }, /value/],
      ["PUT", "/store/items", { namespace: [], key: "k", value: {} }, /namespace/],
      ["PUT", "/store/items", { namespace: ["alice"], key: "k\u0000", value: {} }, /body\.key/],
      ["PUT", "/store/items", { namespace: ["alice", "\ud800"], key: "k", value: {} }, /surrogate/],
      [
        "POST",
        "/store/items/search",
        { namespace_prefix: ["alice"], filter: { text: { $regex: ".*" } } },
        /\$regex/,
      ],
      ["POST", "/store/items/search", { namespace_prefix: ["alice"], limit: 0 }, /limit/],
      ["POST", "/store/namespaces", { prefix: "alice" }, /prefix/],
      ["GET", "/store/items?namespace=alice", undefined, /key/],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await raw("alice", method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(422);
      expect(res.json.message).toMatch(message);
    }
    // Unicode labels and keys that are valid text are fine.
    const alice = clientOf("alice").store;
    await alice.putItem(["alice", "notizen 📝"], "schlüssel 🔑", { text: "naïve ✓" });
    expect((await alice.getItem(["alice", "notizen 📝"], "schlüssel 🔑"))!.value).toEqual({
      text: "naïve ✓",
    });
  });
});
