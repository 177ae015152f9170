#!/usr/bin/env node
// `npm run studio [-- --port N]`: langgraphjs dev for langgraph.json, stopping with a clear error
// when its port is taken (see src/cli/studio.ts). Host-side TypeScript runs through tsx.
import { register } from "tsx/esm/api";

register();
const { runStudio } = await import("../src/cli/studio.ts");
process.exitCode = await runStudio(process.argv.slice(2), {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
});
