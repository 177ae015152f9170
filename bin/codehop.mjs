#!/usr/bin/env node
// The `codehop` command. The installed package ships no src/ (package.json "files") and runs its
// build in dist/. In a clone (src/ is there) it runs dist/ too while the build is current with the
// sources (bin/dist-current.mjs: a stat per source file, a few ms), and otherwise the TypeScript
// sources through tsx's ESM loader, so `npx codehop` always runs the code as it is now: right
// after an edit, at tsx's cost (about a second more per start) until the next `npm run build`.
// `codehop --version` alone is answered here, from package.json, with nothing else loaded.
import { existsSync, readFileSync } from "node:fs";
import module from "node:module";
import { fileURLToPath } from "node:url";

// Node 22.1+ keeps the code it compiles on disk (NODE_COMPILE_CACHE's folder, else the OS temp
// folder) and reuses it at the next start: about a fifth less CPU to load codehop (measured on
// 22.13). Node 20 has no such cache (no enableCompileCache). NODE_DISABLE_COMPILE_CACHE=1 turns
// it off.
try {
  module.enableCompileCache?.();
} catch {
  // A cache that cannot be written is only a slower start.
}

const args = process.argv.slice(2);
const source = new URL("../src/cli/main.ts", import.meta.url);
let main;
const versionOnly = args.length === 1 && (args[0] === "--version" || args[0] === "-V");
if (versionOnly) {
  // The version is package.json's, built or not: nothing else to load (src/cli/main.ts says the same).
  const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  process.stdout.write(`${version}\n`);
} else if (
  existsSync(source) &&
  (await import("./dist-current.mjs")).whyDistIsStale() !== undefined
) {
  const { register } = await import("tsx/esm/api");
  // The repository's tsconfig.json whatever the working directory: its `paths` resolve the
  // workspace packages (packages/*) to their sources.
  register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
  ({ main } = await import(source.href));
} else {
  // Commands run from the bundled CLI (dist/bundle, bin/bundle.mjs: one file to load instead of
  // a thousand modules); the command list, and a `serve` or `worker` whose langgraph.json names
  // the operator's own graphs (they must share node_modules' LangGraph with the server: the
  // bundled command throws the marked error first thing), from dist/cli.
  const name = args.find((a) => !a.startsWith("-"));
  const bundled = new URL("../dist/bundle/cli.js", import.meta.url);
  const bundle = name && existsSync(bundled) ? await import(bundled.href) : undefined;
  if (bundle && Object.hasOwn(bundle.commands, name)) {
    try {
      await bundle.main(process.argv, bundle.commands);
    } catch (err) {
      if (!err?.[Symbol.for("codehop.runUnbundled")]) throw err;
      ({ main } = await import("../dist/cli/main.js"));
    }
  } else ({ main } = await import("../dist/cli/main.js"));
}
await main?.(process.argv);
