import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { HttpError, parse, queryInt, runJson } from "./requests.ts";
import type { RouteContext } from "./route-context.ts";
import { RunCreate, runCreator } from "./run-create.ts";
import { toJson } from "./serialize.ts";
import { type RunRecord, type RunStatus, TERMINAL_RUN_STATUSES } from "./store.ts";

const RUN_STATUSES: readonly RunStatus[] = [
  "pending",
  "running",
  "success",
  "error",
  "timeout",
  "interrupted",
];

/** A `Last-Event-ID` a client sent: an event id (a bigint), else the stream's start. */
const afterEventId = (header: unknown) =>
  typeof header === "string" && /^\d{1,18}$/.test(header) ? header : "0";

/**
 * The runs routes of `codehop serve`: create (and wait for, or stream) a run on a thread or
 * stateless; list, read, delete, join, stream again (from the last event id) and cancel a run.
 * A run's stream and result are read back from the events workers write (src/server/events.ts).
 */

/** Adds the runs routes. */
export function addRunRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store } = ctx.backend;
  const { reader, authorize, requireThread } = ctx;
  const createRun = runCreator(ctx);

  /** The CORS headers set on `reply` (lost when a hijacked reply writes its own head). */
  const corsHeaders = (reply: FastifyReply) =>
    Object.fromEntries(
      Object.entries(reply.getHeaders()).filter(([name]) => name.startsWith("access-control-")),
    );

  /** Streams a run's events as SSE (from `after`, ending when the run ends). */
  const sse = async (
    req: FastifyRequest,
    reply: FastifyReply,
    run: RunRecord,
    options: { after?: string; cancelOnDisconnect?: boolean; location: string },
  ) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      ...corsHeaders(reply),
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "content-location": options.location,
      location: `/threads/${run.thread_id}/runs/${run.run_id}/stream`,
    });
    const closed = new AbortController();
    res.on("close", () => {
      closed.abort();
      if (options.cancelOnDisconnect && !res.writableFinished)
        void store.requestCancel(store.pool, run.run_id, "interrupt").catch(() => {});
    });
    try {
      for await (const e of reader.events(run.run_id, {
        after: options.after,
        signal: closed.signal,
        // A comment line alone (no blank line: the SDK would read one as an empty event).
        onIdle: () => res.write(": heartbeat\n"),
      })) {
        res.write(`id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`);
      }
    } catch (err) {
      res.write(
        `event: error\ndata: ${toJson({ error: "StreamError", message: (err as Error).message })}\n\n`,
      );
    }
    res.end();
  };

  /** Answers with a run's result, sending newlines while it runs (keeps proxies and clients from timing out). */
  const waitResult = async (reply: FastifyReply, run: RunRecord, location: string) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      ...corsHeaders(reply),
      "content-type": "application/json",
      "content-location": location,
    });
    const closed = new AbortController();
    res.on("close", () => closed.abort());
    let result = await reader.result(run.run_id, closed.signal, () => res.write("\n"));
    if (result === null) result = (await store.getThread(run.thread_id))?.values ?? null;
    res.end(toJson(result));
  };

  const location = (run: RunRecord, stateless: boolean) =>
    stateless ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`;

  for (const stateless of [false, true]) {
    const prefix = stateless ? "" : "/threads/:tid";
    app.post<{ Params: { tid?: string } }>(`${prefix}/runs`, async (req, reply) => {
      const run = await createRun(req, req.params.tid, parse(RunCreate, req.body));
      reply.header("content-location", location(run, stateless));
      return runJson(run);
    });
    app.post<{ Params: { tid?: string } }>(`${prefix}/runs/wait`, async (req, reply) => {
      const run = await createRun(req, req.params.tid, parse(RunCreate, req.body));
      await waitResult(reply, run, location(run, stateless));
    });
    app.post<{ Params: { tid?: string } }>(`${prefix}/runs/stream`, async (req, reply) => {
      const body = parse(RunCreate, req.body);
      const run = await createRun(req, req.params.tid, body);
      await sse(req, reply, run, {
        cancelOnDisconnect: body.on_disconnect === "cancel",
        location: location(run, stateless),
      });
    });
  }

  /** A run of a thread the request's user may touch for `event` (404 otherwise). */
  const requireRun = async (
    req: FastifyRequest,
    threadId: string,
    runId: string,
    event = "threads:read",
  ) => {
    await requireThread(
      req,
      threadId,
      event,
      event === "threads:read" ? { thread_id: threadId } : { thread_id: threadId, run_id: runId },
    );
    const run = await store.getRun(runId, threadId);
    if (!run) throw new HttpError(404, `Run ${runId} not found on thread ${threadId}`);
    return run;
  };
  app.get<{
    Params: { tid: string };
    Querystring: { limit?: string; offset?: string; status?: string };
  }>("/threads/:tid/runs", async (req) => {
    await requireThread(req, req.params.tid);
    const status = req.query.status;
    if (status !== undefined && !RUN_STATUSES.includes(status as RunStatus))
      throw new HttpError(422, `query.status: expected one of ${RUN_STATUSES.join(", ")}.`, {
        field: "query.status",
      });
    const runs = await store.listRuns(req.params.tid, {
      limit: queryInt(req.query.limit, "limit", { min: 1, max: 1000, fallback: 10 }),
      offset: queryInt(req.query.offset, "offset", { min: 0, max: 1e15, fallback: 0 }),
      status,
    });
    return runs.map(runJson);
  });
  app.get<{ Params: { tid: string; rid: string } }>("/threads/:tid/runs/:rid", async (req) =>
    runJson(await requireRun(req, req.params.tid, req.params.rid)),
  );
  app.delete<{ Params: { tid: string; rid: string } }>(
    "/threads/:tid/runs/:rid",
    async (req, reply) => {
      const run = await requireRun(req, req.params.tid, req.params.rid, "threads:delete");
      if (!TERMINAL_RUN_STATUSES.includes(run.status))
        throw new HttpError(409, `Run ${run.run_id} is ${run.status}: cancel it first.`);
      await store.deleteRun(run.run_id, run.thread_id);
      return reply.code(204).send();
    },
  );
  app.get<{ Params: { tid: string; rid: string } }>(
    "/threads/:tid/runs/:rid/join",
    async (req, reply) => {
      const run = await requireRun(req, req.params.tid, req.params.rid);
      await waitResult(reply, run, location(run, false));
    },
  );
  app.get<{ Params: { tid: string; rid: string }; Querystring: { cancel_on_disconnect?: string } }>(
    "/threads/:tid/runs/:rid/stream",
    async (req, reply) => {
      const run = await requireRun(req, req.params.tid, req.params.rid);
      const lastEventId = req.headers["last-event-id"];
      await sse(req, reply, run, {
        after: afterEventId(lastEventId),
        cancelOnDisconnect: req.query.cancel_on_disconnect === "true",
        location: location(run, false),
      });
    },
  );
  app.post<{
    Params: { tid: string; rid: string };
    Querystring: { wait?: string; action?: string };
  }>("/threads/:tid/runs/:rid/cancel", async (req, reply) => {
    const run = await requireRun(req, req.params.tid, req.params.rid, "threads:update");
    const action = req.query.action ?? "interrupt";
    if (action !== "interrupt")
      throw new HttpError(422, `Cancel action "${action}" is not supported (use "interrupt").`);
    await store.requestCancel(store.pool, run.run_id, "interrupt");
    const wait = req.query.wait === "1" || req.query.wait === "true";
    if (wait) for await (const _ of reader.events(run.run_id)) void _;
    return reply.code(wait ? 204 : 202).send();
  });

  // A run by its id alone (a stateless run, whose thread is gone when it ends): the user's filters
  // apply to the run's own metadata, which its creator's authorization marked.
  app.get<{ Params: { rid: string }; Querystring: { cancel_on_disconnect?: string } }>(
    "/runs/:rid/stream",
    async (req, reply) => {
      const filters = await authorize(req, "threads:read", { run_id: req.params.rid });
      const run = await store.getRun(req.params.rid, undefined, filters);
      if (!run) throw new HttpError(404, `Run ${req.params.rid} not found`);
      const lastEventId = req.headers["last-event-id"];
      await sse(req, reply, run, {
        after: afterEventId(lastEventId),
        cancelOnDisconnect: req.query.cancel_on_disconnect === "true",
        location: location(run, true),
      });
    },
  );
}
