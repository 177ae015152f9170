import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { assistantIdOf } from "./graphs.ts";
import { HttpError, matchesFilters, parse } from "./requests.ts";
import type { RouteContext } from "./route-context.ts";

/**
 * The meta routes (`/ok`, `/info`) and the assistants of `codehop serve`: one assistant per graph
 * of langgraph.json, read-only, filtered by the `assistants:*` authorization handlers.
 */

const VERSION = "0.1.0";

/** The assistant of a served graph. */
const assistantJson = (graphId: string) => ({
  assistant_id: assistantIdOf(graphId),
  graph_id: graphId,
  name: graphId,
  description: null,
  config: {},
  context: {},
  metadata: { created_by: "system" },
  version: 1,
  created_at: new Date(0).toISOString(),
  updated_at: new Date(0).toISOString(),
});

/** Adds the meta and assistants routes. */
export function addAssistantRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, graphs, options } = ctx.backend;
  const { authorize, graphOf } = ctx;
  app.get("/ok", async () => ({ ok: true }));
  app.get("/info", async () => ({
    version: VERSION,
    flags: { assistants: true, crons: false, langsmith: false },
    host: { kind: "codehop", project_id: null, revision_id: null },
    workers: await store.liveWorkers(3 * (options.leaseSeconds ?? 30)),
  }));
  app.post("/assistants/search", async (req) => {
    const body = parse(
      z.object({
        graph_id: z.string().nullish(),
        metadata: z.record(z.string(), z.unknown()).nullish(),
        limit: z.number().int().positive().default(10),
        offset: z.number().int().nonnegative().default(0),
      }),
      req.body,
    );
    const filters = await authorize(req, "assistants:search", { ...body });
    // Every assistant here is a graph's, with metadata { created_by: "system" }; the whole list
    // is filtered before a page of it is taken.
    const system: Record<string, unknown> = { created_by: "system" };
    const matches = Object.entries(body.metadata ?? {}).every(([k, v]) => system[k] === v);
    return graphs.ids
      .filter((id) => matches && (!body.graph_id || id === body.graph_id))
      .map(assistantJson)
      .filter((a) => matchesFilters(a.metadata, filters))
      .slice(body.offset, body.offset + body.limit);
  });
  app.post("/assistants/count", async (req) => {
    const filters = await authorize(req, "assistants:search", {});
    return graphs.ids.map(assistantJson).filter((a) => matchesFilters(a.metadata, filters)).length;
  });
  /** An assistant the request's user may read (404 otherwise). */
  const readableAssistant = async (req: FastifyRequest, id: string) => {
    const found = graphOf(id);
    const filters = await authorize(req, "assistants:read", { assistant_id: id });
    const assistant = assistantJson(found.graphId);
    if (!matchesFilters(assistant.metadata, filters))
      throw new HttpError(404, `Assistant "${id}" not found.`);
    return { ...found, assistant };
  };
  app.get<{ Params: { id: string } }>(
    "/assistants/:id",
    async (req) => (await readableAssistant(req, req.params.id)).assistant,
  );
  app.get<{ Params: { id: string }; Querystring: { xray?: string } }>(
    "/assistants/:id/graph",
    async (req) => {
      const { graph } = await readableAssistant(req, req.params.id);
      const xray = req.query.xray;
      const drawing = await graph.getGraphAsync({
        xray: xray === "true" ? true : xray && /^\d+$/.test(xray) ? Number(xray) : undefined,
      });
      return drawing.toJSON();
    },
  );
}
