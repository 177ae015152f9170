import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { ClientSettingError, clientSchemaOf, vetClientRun } from "../core/client-settings.ts";
import { storeUploads } from "../core/uploads.ts";
import { STREAM_MODES } from "./execute.ts";
import type { ServedGraph } from "./graphs.ts";
import { limitVariable } from "./limits.ts";
import { inClient, RUNS_QUEUE } from "./queue.ts";
import { clientCheckpoint, HttpError, settingRefused } from "./requests.ts";
import type { RouteContext } from "./route-context.ts";
import {
  type MultitaskStrategy,
  RunConflict,
  type RunKwargs,
  RunLimitReached,
  type ServerStore,
} from "./store.ts";

/**
 * Creating a run of `codehop serve` (`POST /runs`, `/threads/:id/runs` and their `wait` /
 * `stream`): the body's schema, the client's settings vetted, uploads stored under the thread's
 * and user's limits, the run's row and its queue job written in one transaction.
 */

/** Retry-After of a run refused because its user has as many pending or running as they may. */
const RUN_LIMIT_RETRY_SECONDS = 5;

const StreamMode = z.enum(STREAM_MODES);
/** The body of a run request. */
export const RunCreate = z.object({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  command: z
    .object({
      resume: z.unknown().optional(),
      update: z.unknown().optional(),
      goto: z.unknown().optional(),
    })
    .nullish(),
  config: z
    .object({
      configurable: z.record(z.string(), z.unknown()).optional(),
      recursion_limit: z.number().int().positive().optional(),
      tags: z.array(z.string()).optional(),
    })
    .passthrough()
    .nullish(),
  context: z.record(z.string(), z.unknown()).nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  stream_mode: z.union([StreamMode, z.array(StreamMode)]).nullish(),
  stream_subgraphs: z.boolean().nullish(),
  stream_resumable: z.boolean().nullish(),
  checkpoint_id: z.string().nullish(),
  checkpoint: z.record(z.string(), z.unknown()).nullish(),
  interrupt_before: z.union([z.literal("*"), z.array(z.string())]).nullish(),
  interrupt_after: z.union([z.literal("*"), z.array(z.string())]).nullish(),
  multitask_strategy: z.enum(["reject", "enqueue", "interrupt", "rollback"]).nullish(),
  if_not_exists: z.enum(["create", "reject"]).nullish(),
  on_disconnect: z.enum(["cancel", "continue"]).nullish(),
  on_completion: z.enum(["delete", "keep"]).nullish(),
  // At most a year: PostgreSQL's interval and the queue's timestamps hold no more.
  after_seconds: z.number().nonnegative().max(31_536_000).nullish(),
});
export type RunCreateBody = z.infer<typeof RunCreate>;

/**
 * A run request's context and configurable as the graph's clients may set them (403 / 422
 * naming the first key refused), and its recursion limit held to the graph's own.
 */
function vetRunSettings(graph: ServedGraph, body: RunCreateBody) {
  const configurable: Record<string, unknown> = {
    ...body.config?.configurable,
    ...(body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : {}),
    ...clientCheckpoint(body.checkpoint, "checkpoint"),
  };
  let vetted;
  try {
    vetted = vetClientRun(clientSchemaOf(graph), { context: body.context, configurable });
  } catch (err) {
    if (err instanceof ClientSettingError) throw settingRefused(err);
    throw err;
  }
  // The steps a run may take: at most what the graph was built with (LangGraph's 25 without).
  const own = (graph as { config?: { recursionLimit?: number } }).config?.recursionLimit ?? 25;
  const asked = body.config?.recursion_limit;
  return {
    context: vetted.context ?? {},
    configurable: vetted.configurable ?? {},
    recursionLimit: asked ? Math.min(asked, own) : undefined,
  };
}

/** The function that creates a run for a request of `ctx`'s server. */
export function runCreator(ctx: RouteContext) {
  const { store, queue } = ctx.backend;
  const { limits, authorize, authConfigurable, ownerOf, graphOf } = ctx;
  /**
   * Refuses (413) uploads that would take a thread or a user past their upload bytes; files the
   * thread already holds count once. Called in the transaction that creates the run, under the
   * user's lock (store.createRun), so two runs cannot both pass.
   */
  const checkUploadRoom = async (
    threadId: string,
    owner: string | null,
    uploads: Array<{ sha256: string; bytes: Buffer }>,
    client: Parameters<ServerStore["uploadBytes"]>[2],
  ) => {
    if (!uploads.length || (!limits.maxThreadUploadBytes && !limits.maxUserUploadBytes)) return;
    const held = await store.uploadBytes(threadId, owner, client);
    const seen = new Set(held.hashes);
    let added = 0;
    for (const u of uploads) {
      if (seen.has(u.sha256)) continue;
      seen.add(u.sha256);
      added += u.bytes.length;
    }
    const over = (limit: number, used: number, what: string, variable: string) => {
      if (limit && used + added > limit)
        throw new HttpError(
          413,
          `These uploads (${added} bytes) would take ${what} past its ${limit} bytes of files (${used} held; ${variable}): delete a thread or send smaller files.`,
        );
    };
    over(
      limits.maxThreadUploadBytes,
      held.thread,
      "the thread",
      limitVariable("maxThreadUploadMb"),
    );
    if (owner)
      over(limits.maxUserUploadBytes, held.user, "your account", limitVariable("maxUserUploadMb"));
  };

  /** Creates a run (and its thread for stateless runs or `if_not_exists: "create"`). */
  const createRun = async (
    req: FastifyRequest,
    threadId: string | undefined,
    body: RunCreateBody,
  ) => {
    const { graphId, graph } = graphOf(body.assistant_id);
    // What the client may set, vetted before anything is stored (src/core/client-settings.ts).
    const settings = vetRunSettings(graph, body);
    if (body.multitask_strategy === "rollback") {
      throw new HttpError(
        422,
        'multitask_strategy "rollback" is not supported by codehop serve (use "interrupt": the thread keeps the stopped run\'s checkpoints).',
      );
    }
    const temporary = threadId === undefined && (body.on_completion ?? "delete") === "delete";
    // The run's authorization: its handler may mark the run's metadata (owner); its filters
    // apply to the thread the run goes on.
    const runValue: Record<string, unknown> = {
      thread_id: threadId ?? null,
      assistant_id: body.assistant_id,
      metadata: { ...body.metadata },
      multitask_strategy: body.multitask_strategy ?? "reject",
      if_not_exists: body.if_not_exists ?? "reject",
      after_seconds: body.after_seconds ?? null,
      kwargs: { input: body.input ?? null, context: settings.context },
    };
    const filters = await authorize(req, "threads:create_run", runValue);
    const newThread = async (thread_id: string | undefined) => {
      const value = { thread_id, metadata: {}, if_exists: "raise" };
      await authorize(req, "threads:create", value);
      return store.createThread(thread_id, value.metadata, "raise");
    };
    let id = threadId;
    // A thread made for this run goes again if the run is refused (limits).
    let madeHere = false;
    if (id === undefined) {
      id = (await newThread(undefined))!.thread_id;
      madeHere = true;
    } else if (!(await store.getThread(id, filters))) {
      // Creating it when the id is free; another user's thread is not found, as if absent.
      if (body.if_not_exists !== "create" || !(await newThread(id)))
        throw new HttpError(404, `Thread ${id} not found`);
    }
    const modes = body.stream_mode
      ? Array.isArray(body.stream_mode)
        ? body.stream_mode
        : [body.stream_mode]
      : [];
    // Uploaded files are stored once, outside the run's input, events and checkpoints — in the
    // transaction that creates the run, so a refused run (a busy thread) leaves none behind.
    const uploads: Array<{ sha256: string; bytes: Buffer }> = [];
    const input = await storeUploads(body.input ?? null, async (sha256, bytes) => {
      uploads.push({ sha256, bytes });
    });
    const kwargs: RunKwargs = {
      input,
      command: (body.command as RunKwargs["command"]) ?? null,
      config: {
        ...(body.config?.tags ? { tags: body.config.tags } : {}),
        ...(settings.recursionLimit ? { recursion_limit: settings.recursionLimit } : {}),
        configurable: { ...settings.configurable, ...authConfigurable(req) },
      },
      context: settings.context,
      stream_mode: modes.length ? modes : ["values"],
      subgraphs: Boolean(body.stream_subgraphs),
      ...(body.interrupt_before ? { interrupt_before: body.interrupt_before } : {}),
      ...(body.interrupt_after ? { interrupt_after: body.interrupt_after } : {}),
      temporary,
    };
    try {
      const { run } = await store.createRun(
        {
          threadId: id,
          assistantId: body.assistant_id,
          graphId,
          kwargs,
          metadata: runValue.metadata as Record<string, unknown>,
          multitaskStrategy: (body.multitask_strategy ?? "reject") as MultitaskStrategy,
          owner: ownerOf(req),
          maxActive: limits.maxActiveRuns,
          maxRunning: limits.maxRunningRuns,
          filters,
        },
        async (client, runId) => {
          await checkUploadRoom(id, ownerOf(req), uploads, client);
          for (const u of uploads)
            await store.putUpload(id, u.sha256, u.bytes, client, ownerOf(req));
          await queue.send(
            RUNS_QUEUE,
            { runId },
            {
              singletonKey: id,
              ...(body.after_seconds ? { startAfter: body.after_seconds } : {}),
              db: inClient(client),
            },
          );
        },
      );
      return run;
    } catch (err) {
      if (madeHere) await store.deleteThreadRows(id).catch(() => {});
      if (err instanceof RunConflict)
        throw new HttpError(err.message.endsWith("not found") ? 404 : 422, err.message);
      if (err instanceof RunLimitReached)
        throw new HttpError(
          429,
          `${err.message} (${limitVariable("maxActiveRuns")})`,
          {},
          { "retry-after": String(RUN_LIMIT_RETRY_SECONDS) },
        );
      throw err;
    }
  };
  return createRun;
}
