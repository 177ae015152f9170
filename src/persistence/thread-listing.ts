import { countRootCheckpoints } from "@codehop/checkpoint-sqlite/thread-counts";
import type { PersistenceLocation } from "./index.ts";
import type { ThreadStore } from "./port.ts";
import {
  checkpointDbPath,
  openCodehopDatabase,
  type OpenDatabaseOptions,
} from "./sqlite-database.ts";
import { ThreadRegistry } from "./sqlite-threads.ts";

/** The threads of a persistence, read-only: what listing them needs and nothing more. */
export interface ThreadListing {
  /** Where the data lives, for messages (as {@link Persistence.location}). */
  readonly location: string;
  /** All threads, most recently updated first. */
  list: ThreadStore["list"];
  /** One thread, or undefined. */
  get: ThreadStore["get"];
  /** Closes the connection(s); idempotent. */
  close(): Promise<void> | void;
}

/**
 * Opens the threads of the persistence a configuration names, for listing them (`codehop
 * threads`). SQLite reads the thread registry and counts checkpoints from the saver's tables as
 * they are (`countRootCheckpoints`), so it loads neither the checkpointer nor LangGraph: most of
 * a full adapter's start-up. PostgreSQL opens the full adapter, loaded only then.
 */
export async function openThreadListing(
  location: PersistenceLocation,
  options: OpenDatabaseOptions = {},
): Promise<ThreadListing> {
  if (location.databaseUrl !== undefined) {
    const { openPersistenceFor } = await import("./index.ts");
    const p = await openPersistenceFor(location, options);
    return {
      location: p.location,
      list: () => p.threads.list(),
      get: (threadId) => p.threads.get(threadId),
      close: () => p.close(),
    };
  }
  const db = openCodehopDatabase(location.home, options);
  const threads = new ThreadRegistry(db, (threadId) => countRootCheckpoints(db, threadId));
  return {
    location: checkpointDbPath(location.home),
    list: () => threads.list(),
    get: (threadId) => threads.get(threadId),
    close: () => {
      if (db.open) db.close();
    },
  };
}
