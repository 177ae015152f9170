import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { clientCheckpoint, HttpError, parse, queryInt, threadJson } from "./requests.ts";
import type { RouteContext } from "./route-context.ts";
import { stateToThreadState } from "./serialize.ts";
import { TERMINAL_RUN_STATUSES } from "./store.ts";

/**
 * The threads routes of `codehop serve`: create, search, count, read, patch, copy, delete a
 * thread; its state (read, at a checkpoint, update) and history, read through the graph the thread
 * was run with. Every route checks the user may touch the thread (another user's is not found).
 */

const ThreadCount = z.object({
  metadata: z.record(z.string(), z.unknown()).nullish(),
  values: z.record(z.string(), z.unknown()).nullish(),
  status: z.enum(["idle", "busy", "interrupted", "error"]).nullish(),
});

/**
 * A state update of the client's: LangGraph refusing it (a node the graph has not, values that
 * are not an update) is the client's error, a 422 with LangGraph's message, not a server error.
 */
async function clientUpdate<T>(update: () => Promise<T>): Promise<T> {
  try {
    return await update();
  } catch (err) {
    const name = (err as Error).name;
    if (name === "InvalidUpdateError" || name === "EmptyInputError")
      throw new HttpError(422, (err as Error).message.split("\n")[0]);
    throw err;
  }
}

/** Adds the threads, thread state and history routes. */
export function addThreadRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, persistence } = ctx.backend;
  const { authorize, ownerOf, requireThread, threadGraph } = ctx;
  app.post("/threads", async (req) => {
    const body = parse(
      z.object({
        thread_id: z.string().min(1).nullish(),
        metadata: z.record(z.string(), z.unknown()).nullish(),
        if_exists: z.enum(["raise", "do_nothing"]).nullish(),
      }),
      req.body,
    );
    const value = {
      thread_id: body.thread_id ?? undefined,
      metadata: { ...body.metadata },
      if_exists: body.if_exists ?? "raise",
    };
    await authorize(req, "threads:create", value);
    const thread = await store.createThread(value.thread_id, value.metadata, "raise");
    if (thread) return threadJson(thread);
    // The id is taken: with do_nothing, the existing thread — if it is the user's to read.
    const existing =
      value.if_exists === "do_nothing"
        ? await store.getThread(
            value.thread_id!,
            await authorize(req, "threads:read", { thread_id: value.thread_id }),
          )
        : undefined;
    if (!existing) throw new HttpError(409, `Thread ${body.thread_id} already exists`);
    return threadJson(existing);
  });
  app.post("/threads/search", async (req) => {
    const body = parse(
      z.object({
        metadata: z.record(z.string(), z.unknown()).nullish(),
        values: z.record(z.string(), z.unknown()).nullish(),
        ids: z.array(z.string()).max(1000).nullish(),
        status: z.enum(["idle", "busy", "interrupted", "error"]).nullish(),
        limit: z.number().int().positive().max(1000).default(10),
        offset: z.number().int().nonnegative().default(0),
        sort_by: z.enum(["created_at", "updated_at", "thread_id", "status"]).nullish(),
        sort_order: z.enum(["asc", "desc"]).nullish(),
      }),
      req.body,
    );
    const filters = await authorize(req, "threads:search", { ...body });
    const threads = await store.searchThreads({
      metadata: body.metadata ?? undefined,
      values: body.values ?? undefined,
      status: body.status ?? undefined,
      ids: body.ids ?? undefined,
      filters,
      limit: body.limit,
      offset: body.offset,
      sortBy: body.sort_by ?? undefined,
      sortOrder: body.sort_order ?? undefined,
    });
    return threads.map(threadJson);
  });
  app.post("/threads/count", async (req) => {
    const body = parse(ThreadCount, req.body);
    const filters = await authorize(req, "threads:search", { ...body });
    return store.countThreads({
      metadata: body.metadata ?? undefined,
      values: body.values ?? undefined,
      status: body.status ?? undefined,
      filters,
    });
  });
  app.get<{ Params: { tid: string } }>("/threads/:tid", async (req) =>
    threadJson(await requireThread(req, req.params.tid)),
  );
  app.patch<{ Params: { tid: string } }>("/threads/:tid", async (req) => {
    const body = parse(
      z.object({ metadata: z.record(z.string(), z.unknown()).default({}) }),
      req.body,
    );
    const value = { thread_id: req.params.tid, metadata: { ...body.metadata } };
    const filters = await authorize(req, "threads:update", value);
    const thread = await store.patchThread(req.params.tid, value.metadata, filters);
    if (!thread) throw new HttpError(404, `Thread ${req.params.tid} not found`);
    return threadJson(thread);
  });
  app.post<{ Params: { tid: string } }>("/threads/:tid/copy", async (req) => {
    const source = await requireThread(req, req.params.tid);
    const value = { thread_id: randomUUID(), metadata: { ...source.metadata } };
    await authorize(req, "threads:create", value);
    return threadJson(
      await store.copyThread(source, value.thread_id, value.metadata, ownerOf(req)),
    );
  });
  app.delete<{ Params: { tid: string } }>("/threads/:tid", async (req, reply) => {
    const thread = await requireThread(req, req.params.tid, "threads:delete");
    const inflight = await store.listRuns(thread.thread_id, { limit: 100, offset: 0 });
    for (const run of inflight)
      if (!TERMINAL_RUN_STATUSES.includes(run.status))
        await store.requestCancel(store.pool, run.run_id, "interrupt");
    await persistence.deleteThread(thread.thread_id);
    await store.deleteThreadRows(thread.thread_id);
    return reply.code(204).send();
  });

  const readState = async (
    req: FastifyRequest,
    threadId: string,
    checkpoint: Record<string, unknown> | undefined,
    subgraphs: boolean,
  ) => {
    const thread = await requireThread(req, threadId);
    const graph = threadGraph(thread);
    if (!graph) {
      return {
        values: {},
        next: [],
        tasks: [],
        metadata: null,
        created_at: null,
        checkpoint: null,
        parent_checkpoint: null,
        interrupts: [],
      };
    }
    const state = await graph.getState(
      { configurable: { ...checkpoint, thread_id: threadId } },
      { subgraphs },
    );
    return stateToThreadState(state);
  };
  app.get<{ Params: { tid: string }; Querystring: { subgraphs?: string } }>(
    "/threads/:tid/state",
    async (req) => readState(req, req.params.tid, undefined, req.query.subgraphs === "true"),
  );
  app.get<{ Params: { tid: string; cid: string }; Querystring: { subgraphs?: string } }>(
    "/threads/:tid/state/:cid",
    async (req) =>
      readState(
        req,
        req.params.tid,
        { checkpoint_id: req.params.cid },
        req.query.subgraphs === "true",
      ),
  );
  app.post<{ Params: { tid: string } }>("/threads/:tid/state/checkpoint", async (req) => {
    const body = parse(
      z.object({
        checkpoint: z.record(z.string(), z.unknown()),
        subgraphs: z.boolean().nullish(),
      }),
      req.body,
    );
    return readState(
      req,
      req.params.tid,
      clientCheckpoint(body.checkpoint, "checkpoint"),
      Boolean(body.subgraphs),
    );
  });
  app.post<{ Params: { tid: string } }>("/threads/:tid/state", async (req) => {
    const body = parse(
      z.object({
        values: z.unknown(),
        as_node: z.string().nullish(),
        checkpoint_id: z.string().nullish(),
        checkpoint: z.record(z.string(), z.unknown()).nullish(),
      }),
      req.body,
    );
    const thread = await requireThread(req, req.params.tid, "threads:update");
    const graph = threadGraph(thread);
    if (!graph) throw new HttpError(409, "The thread has no graph yet: run it once first.");
    const config = await clientUpdate(() =>
      graph.updateState(
        {
          configurable: {
            ...clientCheckpoint(body.checkpoint, "checkpoint"),
            ...(body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : {}),
            thread_id: thread.thread_id,
          },
        },
        body.values,
        body.as_node ?? undefined,
      ),
    );
    return { checkpoint: config.configurable };
  });
  const history = async (
    req: FastifyRequest,
    threadId: string,
    q: { limit?: number; before?: unknown; metadata?: unknown; checkpoint?: unknown },
  ) => {
    const thread = await requireThread(req, threadId);
    const graph = threadGraph(thread);
    if (!graph) return [];
    const out = [];
    // A checkpoint id, a checkpoint ({ checkpoint_id ... }) or a config ({ configurable }).
    const beforeCheckpoint =
      typeof q.before === "string"
        ? { checkpoint_id: q.before }
        : q.before && typeof q.before === "object"
          ? clientCheckpoint(
              ("configurable" in q.before
                ? (q.before as { configurable: unknown }).configurable
                : q.before) as Record<string, unknown>,
              "before",
            )
          : undefined;
    const before = beforeCheckpoint
      ? { configurable: { ...beforeCheckpoint, thread_id: threadId } }
      : undefined;
    for await (const state of graph.getStateHistory(
      {
        configurable: {
          ...clientCheckpoint(q.checkpoint as Record<string, unknown> | undefined, "checkpoint"),
          thread_id: threadId,
        },
      },
      { limit: q.limit ?? 10, before, filter: q.metadata ?? undefined },
    ))
      out.push(stateToThreadState(state));
    return out;
  };
  app.post<{ Params: { tid: string } }>("/threads/:tid/history", async (req) =>
    history(
      req,
      req.params.tid,
      parse(
        z.object({
          limit: z.number().int().positive().max(1000).default(10),
          before: z.unknown().optional(),
          metadata: z.record(z.string(), z.unknown()).nullish(),
          checkpoint: z.record(z.string(), z.unknown()).nullish(),
        }),
        req.body,
      ),
    ),
  );
  app.get<{ Params: { tid: string }; Querystring: { limit?: string; before?: string } }>(
    "/threads/:tid/history",
    async (req) =>
      history(req, req.params.tid, {
        limit: queryInt(req.query.limit, "limit", { min: 1, max: 1000, fallback: 10 }),
        before: req.query.before,
      }),
  );
}
