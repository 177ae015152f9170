import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import type { AppConfigOverrides } from "../../src/runs/config.ts";
import { ensureDemoCorpus, startDemoModelServer } from "../../src/apps/qa/demo.ts";
import { createManagerGraph } from "../../src/apps/qa/team.ts";
import {
  openPersistence,
  type SqlitePersistence as Persistence,
} from "../../src/persistence/index.ts";
import {
  ScriptedOpenAIServer,
  trajectoryResponder,
  type ChatRequest,
  type Responder,
  type TrajectoryRule,
} from "../../src/testing/scripted-openai-server.ts";
import { cliEnv, type CliRun } from "./cli-helpers.ts";

/**
 * What a reference-app test file runs against: a fresh data directory holding the demo corpus,
 * and a scripted OpenAI-compatible server for the model. Read its fields inside tests and hooks
 * (they are set by the file's `beforeAll`).
 */
export interface DemoWorld {
  /** CODEHOP_HOME of the file's runs (a new temporary directory). */
  readonly home: string;
  /** The demo corpus, ingested into `home`. */
  readonly corpus: string;
  readonly server: ScriptedOpenAIServer;
  /** Persistence open on `home` (only with `{ persistence: true }`). */
  readonly persistence: Persistence;
  /** Configuration of an in-process run (`ask`, `resume` ...) against the scripted model. */
  config(extra?: AppConfigOverrides): AppConfigOverrides;
  /** Environment of a `codehop` CLI run against the scripted model. */
  cliEnv(extra?: Record<string, string | undefined>): NodeJS.ProcessEnv;
}

/**
 * Registers the `beforeAll` / `afterAll` hooks of a {@link DemoWorld}: `responder` answers the
 * model requests (default: every demo trajectory, as `codehop demo` serves them).
 */
export function useDemoWorld(
  tmpPrefix: string,
  options: { responder?: () => Responder; persistence?: boolean } = {},
): DemoWorld {
  let home: string;
  let corpus: string;
  let server: ScriptedOpenAIServer | undefined;
  let persistence: Persistence | undefined;
  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), tmpPrefix));
    corpus = await ensureDemoCorpus(home);
    server = options.responder
      ? await ScriptedOpenAIServer.start({ responder: options.responder() })
      : await startDemoModelServer();
    if (options.persistence) persistence = openPersistence(home);
  });
  afterAll(async () => {
    persistence?.close();
    await server?.close();
  });
  return {
    get home() {
      return home;
    },
    get corpus() {
      return corpus;
    },
    get server() {
      return server!;
    },
    get persistence() {
      if (!persistence) throw new Error("useDemoWorld was called without { persistence: true }");
      return persistence;
    },
    config: (extra = {}) => ({
      home,
      corpus,
      baseURL: server!.baseURL,
      apiKey: "test",
      model: "scripted",
      models: {},
      ...extra,
    }),
    cliEnv: (extra = {}) =>
      cliEnv({
        OPENAI_BASE_URL: server!.baseURL,
        OPENAI_API_KEY: "test",
        CODEHOP_MODEL: "scripted",
        CODEHOP_HOME: home,
        ...extra,
      }),
  };
}

/** The task (first user message) of a model request. */
export const taskOf = (req: ChatRequest): string =>
  req.messages.find((m) => m.role === "user")?.content ?? "";

/** The system prompt of a model request (it names the agent). */
export const systemOf = (req: ChatRequest): string =>
  req.messages.find((m) => m.role === "system")?.content ?? "";

/** Waits for `point` while the CLI run is going; fails if the process ends before it. */
export async function whileRunning(run: CliRun, point: Promise<unknown>, what: string) {
  await Promise.race([
    point,
    run.done.then((r) => {
      throw new Error(`the CLI ended before ${what}: ${r.stderr}`);
    }),
  ]);
}

/**
 * Opens the persistence of `home` (as a separate process would), hands `read` the manager's
 * latest state values of `threadId` with the persistence, and closes it.
 */
export async function readThread<T>(
  home: string,
  threadId: string,
  read: (state: any, persistence: Persistence) => Promise<T> | T,
): Promise<T> {
  const p = openPersistence(home);
  try {
    const graph = createManagerGraph({ checkpointer: p.checkpointer });
    const state = (await graph.getState({ configurable: { thread_id: threadId } })).values;
    return await read(state, p);
  } finally {
    p.close();
  }
}

/**
 * A responder for `rules` that holds the first model request of the sub-task containing `task`
 * (20 s: longer than any test waits) while `held` is on, so a test can kill or interrupt the CLI
 * in the middle of that sub-agent call. `reached` resolves when the request arrives; `release()`
 * answers later requests at once (e.g. those of the resumed run).
 */
export function holdingSubtask(rules: () => TrajectoryRule[], task: string) {
  let arrived!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  let held = true;
  const responder = (): Responder => {
    const inner = trajectoryResponder(rules());
    return async (req, ctx) => {
      const reply = await inner(req, ctx);
      if (held && taskOf(req).includes(task)) {
        arrived();
        return { ...(reply as object), delayMs: 20_000 } as typeof reply;
      }
      return reply;
    };
  };
  return { responder, reached, release: () => (held = false) };
}
