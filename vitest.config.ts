import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// One config for the whole suite. Integration tests start real local servers (OpenAI-compatible,
// MediaWiki-like, langgraph dev), so timeouts are generous and files run in forks (the sandbox
// spawns child processes; forks keep a crashing test from taking the runner with it).
export default defineConfig({
  // The workspace packages by name, as their sources (as tsconfig.json's paths map them).
  resolve: {
    alias: {
      "@codehop/checkpoint-sqlite": fileURLToPath(
        new URL("./packages/checkpoint-sqlite/src/index.ts", import.meta.url),
      ),
    },
  },
  test: {
    include: ["test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default"],
    // In-process runs read the environment too: a developer's .env must not change what tests see.
    env: { CODEHOP_ENV_FILE: "none" },
  },
});
