import { LinearPostgresSaver } from "../../src/persistence/index.ts";
import { validatePostgresSaver } from "./postgres-saver-validation.ts";

// LangGraph's own conformance suite for checkpointers against the Postgres adapter's linear saver.
await validatePostgresSaver(
  "LinearPostgresSaver",
  "lin",
  (pool, schema) => new LinearPostgresSaver(pool, schema),
);
