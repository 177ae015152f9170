import { ForkSafePostgresSaver } from "@codehop/checkpoint-postgres/official";

/**
 * LangGraph's official Postgres checkpointer (@langchain/langgraph-checkpoint-postgres, its layout)
 * with fork-safe channel versions, root checkpoint counts and corrupt rows as
 * CODEHOP_CHECKPOINT_CORRUPT: @codehop/checkpoint-postgres's ForkSafePostgresSaver under codehop's
 * name (exported by codehop since before the package existed).
 *
 * codehop serve's checkpointer is LinearPostgresSaver (same package) since issue 23: this layout
 * writes a list channel whole at every step (quadratic), which made reads of long threads slow
 * (bench/postgres-saver.bench.ts). LinearPostgresSaver reads schemas written in this layout
 * through it; it stays for users who want the official layout.
 */
export class CodehopPostgresSaver extends ForkSafePostgresSaver {}
