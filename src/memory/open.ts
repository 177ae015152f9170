import { join, resolve } from "node:path";
import { BaseStore, type Operation, type OperationResults } from "@langchain/langgraph-checkpoint";
import type { CodehopEnv } from "../config/env.ts";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { createEmbedder } from "../store/embeddings.ts";
import type { CodehopStore, MemoryStoreOptions } from "./store.ts";

/** Where a run's memory store is: `<home>/memory.db`, or the PostgreSQL database. */
export interface MemoryLocation {
  home: string;
  databaseUrl?: string;
  /** PostgreSQL schema (default public). */
  schema?: string;
}

/** Store options from the environment: semantic search with CODEHOP_EMBEDDINGS_*, TTL in days. */
export function memoryStoreOptions(env: CodehopEnv): MemoryStoreOptions {
  const options: MemoryStoreOptions = {};
  if (env.embeddingsBaseUrl && env.embeddingsModel)
    options.index = {
      embedder: createEmbedder({
        baseUrl: env.embeddingsBaseUrl,
        model: env.embeddingsModel,
        apiKey: env.embeddingsApiKey,
      }),
    };
  if (env.memoryTtlDays !== undefined) {
    if (env.memoryTtlDays < 0)
      throw new CodehopError(ErrorCodes.CONFIG_INVALID, "CODEHOP_MEMORY_TTL_DAYS must be >= 0.");
    if (env.memoryTtlDays > 0) options.ttl = { defaultTtl: env.memoryTtlDays * 24 * 60 };
  }
  return options;
}

/** Opens the memory store of a location (SQLite file, or tables in PostgreSQL). */
export async function openMemoryStore(
  location: MemoryLocation,
  options: MemoryStoreOptions = {},
): Promise<CodehopStore> {
  if (location.databaseUrl) {
    const { openPostgresMemoryStore } = await import("./postgres-store.ts");
    return openPostgresMemoryStore(
      { url: location.databaseUrl, schema: location.schema, poolSize: 4 },
      options,
    );
  }
  const { MEMORY_DB_FILE, openSqliteMemoryStore } = await import("./sqlite-store.ts");
  return openSqliteMemoryStore(join(resolve(location.home), MEMORY_DB_FILE), options);
}

/**
 * A store that opens its database on first use: every run gets one (LangGraph's `config.store`,
 * `getStore()`), and a run that never touches it costs no file and no connection.
 */
export class LazyStore extends BaseStore {
  private opened?: Promise<CodehopStore>;

  constructor(private readonly open: () => Promise<CodehopStore>) {
    super();
  }

  /** The store, opened now if it was not. */
  store(): Promise<CodehopStore> {
    if (!this.opened) {
      this.opened = this.open();
      this.opened.catch(() => (this.opened = undefined));
    }
    return this.opened;
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    return (await this.store()).batch(operations);
  }

  override stop(): void {
    // Runs end, the store stays (close() ends it).
  }

  /** Closes the database if it was opened. */
  async close(): Promise<void> {
    const opened = this.opened;
    this.opened = undefined;
    if (opened) await (await opened.catch(() => undefined))?.close();
  }
}
