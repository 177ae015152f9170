import { CodehopPostgresSaver } from "../../src/persistence/index.ts";
import { validatePostgresSaver } from "./postgres-saver-validation.ts";

// LangGraph's own conformance suite for checkpointers against the Postgres adapter's saver.
await validatePostgresSaver(
  "CodehopPostgresSaver",
  "lgv",
  (pool, schema) => new CodehopPostgresSaver(pool, schema),
);
