#!/usr/bin/env node
// `npm run --silent sandbox -- a.js b.js`: each file is one code action of one agent run; one JSON
// line per file on stdout (see src/sandbox/cli.ts). Host-side TypeScript runs through tsx; the
// sandbox children themselves are plain .mjs.
import { register } from "tsx/esm/api";

register();
const { runSandboxCli } = await import("../src/sandbox/cli.ts");
process.exitCode = await runSandboxCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(line + "\n"),
  err: (line) => process.stderr.write(line + "\n"),
});
