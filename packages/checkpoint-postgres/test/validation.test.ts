import { validatePostgresSaver } from "../../../test/persistence/postgres-saver-validation.ts";
import { LinearPostgresSaver } from "../src/index.ts";

// LangGraph's own conformance suite for checkpointers (@langchain/langgraph-checkpoint-validation)
// against LinearPostgresSaver, each checkpointer in a fresh schema of a throwaway cluster (the
// runner is the repository's, shared with codehop's ForkSafePostgresSaver suite).
await validatePostgresSaver(
  "LinearPostgresSaver",
  "lin",
  (pool, schema) => new LinearPostgresSaver(pool, schema),
);
