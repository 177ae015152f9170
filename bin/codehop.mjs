#!/usr/bin/env node
// In a clone (src/ is there) the CLI runs the TypeScript sources through tsx's ESM loader, so
// `npx codehop` works right after `npm install` and always runs the code as it is now. The
// installed package ships no src/ (package.json "files") and runs its build in dist/ instead.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const source = new URL("../src/cli/main.ts", import.meta.url);
let main;
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  // The repository's tsconfig.json whatever the working directory: its `paths` resolve the
  // workspace packages (packages/*) to their sources.
  register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
  ({ main } = await import(source.href));
} else {
  ({ main } = await import("../dist/cli/main.js"));
}
await main(process.argv);
