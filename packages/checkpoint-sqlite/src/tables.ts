/**
 * The saver's table names. A module of its own, importing nothing, so the schema-only thread
 * counts (thread-counts.ts) can name the tables without loading the saver and LangGraph.
 */
export const T_NAMESPACES = "lgi_namespaces";
export const T_CHECKPOINTS = "lgi_checkpoints";
export const T_BLOBS = "lgi_blobs";
export const T_WRITES = "lgi_writes";
/** The official SqliteSaver's tables (read in place, deleted with their thread). */
export const LEGACY_CHECKPOINTS = "checkpoints";
export const LEGACY_WRITES = "writes";
