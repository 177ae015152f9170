import { defineConfig } from "vitest/config";

// The package's own tests (`npm test` here); codehop's suite runs them too (its vitest.config.ts).
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
  },
});
