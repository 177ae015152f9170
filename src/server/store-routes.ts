import type { Item, SearchItem } from "@langchain/langgraph-checkpoint";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { CodehopError, ErrorCodes } from "../errors.ts";
import type { CodehopStore } from "../memory/store.ts";
import type { AuthFilters } from "./auth.ts";
import { RequestRefused } from "./limits.ts";

/**
 * The `/store` routes of the LangGraph server API (`client.store.*` of the SDK: put, get, delete,
 * search items; list namespaces) over the long-term memory store the workers' runs use
 * (`config.store`, the memory tools): one store, seen by graphs and clients alike.
 *
 * Ownership: each route runs the `store:<action>` authorization handler with `{ namespace, ... }`
 * as LangGraph Platform does, and uses the namespace the handler leaves (a handler may rewrite it).
 * codehop's built-in `ownerOnly` refuses (403) a namespace whose first label is not the user's
 * identity, and scopes a search or listing without a prefix to the user's own namespaces.
 * Filters a handler returns narrow a search in SQL and must match an item read or deleted.
 */

/** What the routes need of the server. */
export interface StoreRoutesOptions {
  /** The memory store (opened on first use). */
  store: () => Promise<CodehopStore>;
  /** Runs the authorization handler of `event` (undefined without authentication). */
  authorize: (
    req: FastifyRequest,
    event: string,
    value: Record<string, unknown>,
  ) => Promise<AuthFilters | undefined>;
}

const Namespace = z.array(z.string());
const PutBody = z.object({
  namespace: Namespace.min(1),
  key: z.string().min(1),
  value: z.record(z.string(), z.unknown()),
  index: z.union([z.literal(false), z.array(z.string())]).nullish(),
  ttl: z.number().positive().nullish(),
});
const ItemRef = z.object({ namespace: Namespace.min(1), key: z.string().min(1) });
const SearchBody = z.object({
  namespace_prefix: Namespace.nullish(),
  filter: z.record(z.string(), z.unknown()).nullish(),
  limit: z.number().int().positive().max(1000).default(10),
  offset: z.number().int().nonnegative().default(0),
  query: z.string().nullish(),
  refresh_ttl: z.boolean().nullish(),
});
const NamespacesBody = z.object({
  prefix: Namespace.nullish(),
  suffix: Namespace.nullish(),
  max_depth: z.number().int().positive().nullish(),
  limit: z.number().int().positive().max(1000).default(100),
  offset: z.number().int().nonnegative().default(0),
});

/** A body or query parsed with a schema, or a 422 naming what is wrong. */
function parsed<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (!r.success)
    throw new RequestRefused(
      422,
      r.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "),
    );
  return r.data;
}

/** The namespace a handler left in `value` (it may rewrite it), checked to be a list of labels. */
function namespaceOf(value: Record<string, unknown>): string[] {
  const ns = value.namespace ?? [];
  if (!Array.isArray(ns) || ns.some((l) => typeof l !== "string"))
    throw new RequestRefused(
      500,
      "The store authorization handler left a namespace that is not a list of strings.",
    );
  return ns as string[];
}

/** A store refusal of the client's input (a bad namespace label, filter operator) as a 422. */
async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const e = err as Error;
    if (
      e.name === "InvalidNamespaceError" ||
      (err instanceof CodehopError && err.code === ErrorCodes.INPUT_INVALID)
    )
      throw new RequestRefused(422, e.message);
    throw err;
  }
}

/** An authorization handler's filters as store filters (`{ field: { $eq: value } }`). */
function storeFilter(filters: AuthFilters | undefined): Record<string, { $eq: unknown }> {
  const out: Record<string, { $eq: unknown }> = {};
  for (const [key, condition] of Object.entries(filters ?? {})) {
    if (condition && typeof condition === "object" && !Array.isArray(condition)) {
      const ops = Object.keys(condition);
      if (ops.length !== 1 || ops[0] !== "$eq")
        throw new RequestRefused(
          500,
          `Unsupported store filter on "${key}" from the authorization handler: use a value or { $eq }.`,
        );
      out[key] = { $eq: (condition as { $eq: unknown }).$eq };
    } else out[key] = { $eq: condition };
  }
  return out;
}

/** Whether an item's value satisfies a handler's filters. */
function matches(item: Item, filter: Record<string, { $eq: unknown }>): boolean {
  return Object.entries(filter).every(
    ([key, c]) => JSON.stringify(item.value[key]) === JSON.stringify(c.$eq),
  );
}

function itemJson(item: Item | SearchItem) {
  return {
    namespace: item.namespace,
    key: item.key,
    value: item.value,
    created_at: new Date(item.createdAt).toISOString(),
    updated_at: new Date(item.updatedAt).toISOString(),
    ...("score" in item && item.score !== undefined ? { score: item.score } : {}),
  };
}

/** Adds the `/store` routes to `app`. */
export function addStoreRoutes(app: FastifyInstance, options: StoreRoutesOptions): void {
  const { authorize } = options;

  app.put("/store/items", async (req, reply) => {
    const body = parsed(PutBody, req.body);
    const value: Record<string, unknown> = { ...body };
    await authorize(req, "store:put", value);
    const store = await options.store();
    await storeCall(() =>
      store.put(namespaceOf(value), body.key, body.value, body.index ?? undefined, {
        ...(body.ttl ? { ttl: body.ttl } : {}),
      }),
    );
    return reply.code(204).send();
  });

  app.get<{ Querystring: Record<string, string | undefined> }>("/store/items", async (req) => {
    const q = parsed(
      z.object({
        namespace: z.string().default(""),
        key: z.string().min(1),
        refresh_ttl: z.enum(["true", "false"]).optional(),
      }),
      req.query,
    );
    const value: Record<string, unknown> = {
      namespace: q.namespace ? q.namespace.split(".") : [],
      key: q.key,
    };
    const filter = storeFilter(await authorize(req, "store:get", value));
    const store = await options.store();
    const item = await storeCall(() =>
      store.get(namespaceOf(value), q.key, { refreshTtl: q.refresh_ttl !== "false" }),
    );
    // (null, as LangGraph's server answers for a missing item: the SDK returns null)
    return item && matches(item, filter) ? itemJson(item) : null;
  });

  app.delete("/store/items", async (req, reply) => {
    const body = parsed(ItemRef, req.body);
    const value: Record<string, unknown> = { ...body };
    const filter = storeFilter(await authorize(req, "store:delete", value));
    const store = await options.store();
    const namespace = namespaceOf(value);
    // With filters, only an item that matches them goes.
    const item = Object.keys(filter).length
      ? await storeCall(() => store.get(namespace, body.key, { refreshTtl: false }))
      : undefined;
    if (item === undefined || (item && matches(item, filter)))
      await storeCall(() => store.delete(namespace, body.key));
    return reply.code(204).send();
  });

  app.post("/store/items/search", async (req) => {
    const body = parsed(SearchBody, req.body);
    const value: Record<string, unknown> = {
      namespace: body.namespace_prefix ?? [],
      filter: body.filter ?? undefined,
      limit: body.limit,
      offset: body.offset,
      query: body.query ?? undefined,
    };
    const own = storeFilter(await authorize(req, "store:search", value));
    // The client's filter and the handler's, both in the query; a field both name with different
    // values matches nothing.
    const filter: Record<string, unknown> = { ...body.filter };
    for (const [key, c] of Object.entries(own)) {
      const theirs = filter[key];
      if (
        theirs !== undefined &&
        JSON.stringify(theirs) !== JSON.stringify(c.$eq) &&
        JSON.stringify(theirs) !== JSON.stringify(c)
      )
        return { items: [] };
      filter[key] = c;
    }
    const store = await options.store();
    const items = await storeCall(() =>
      store.search(namespaceOf(value), {
        filter,
        limit: body.limit,
        offset: body.offset,
        ...(body.query ? { query: body.query } : {}),
        refreshTtl: body.refresh_ttl ?? true,
      }),
    );
    return { items: items.map(itemJson) };
  });

  app.post("/store/namespaces", async (req) => {
    const body = parsed(NamespacesBody, req.body);
    const value: Record<string, unknown> = {
      namespace: body.prefix ?? [],
      suffix: body.suffix ?? undefined,
      max_depth: body.max_depth ?? undefined,
      limit: body.limit,
      offset: body.offset,
    };
    await authorize(req, "store:list_namespaces", value);
    const prefix = namespaceOf(value);
    const store = await options.store();
    const namespaces = await storeCall(() =>
      store.listNamespaces({
        ...(prefix.length ? { prefix } : {}),
        ...(body.suffix?.length ? { suffix: body.suffix } : {}),
        ...(body.max_depth ? { maxDepth: body.max_depth } : {}),
        limit: body.limit,
        offset: body.offset,
      }),
    );
    return { namespaces };
  });
}
