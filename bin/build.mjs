// `npm run build`: builds the workspace packages (packages/*, which codehop imports by name), then
// compiles src/ into dist/ with tsc, copies the sandbox child's plain JavaScript and bundles it
// into the one file children run, and bundles the CLI's commands into dist/bundle (both
// bin/bundle.mjs). Last, and only when every step succeeded, it records in dist/.build.json when
// the build started and what it read, so bin/codehop.mjs runs dist/ only while it is current with
// those sources (bin/dist-current.mjs); a failed build leaves dist/ marked stale.
// It compiles into .cache/dist-next and swaps that in only when complete, so dist/ never goes
// missing under a running `codehop` (or a Ctrl-C'd build): the old build stays until the new one
// is whole. `--if-stale` (package.json "prepare") builds only when dist/ is not current: npm runs
// "prepare" after `npm install`, and npm 11's `npx codehop` in the clone installs the clone into
// the npx cache as a link, which runs "prepare" again: with a current build that costs nothing.
import { spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { bundleChild, bundleCli } from "./bundle.mjs";
import { ROOT, whyDistIsStale } from "./dist-current.mjs";

if (process.argv.includes("--if-stale")) {
  const why = whyDistIsStale();
  if (why === undefined) {
    process.stderr.write("codehop build: dist/ is current with the sources; nothing to build\n");
    process.exit(0);
  }
  process.stderr.write(`codehop build: ${why}; building\n`);
}

/** Runs a step of the build in the repository; a failure ends the build with its exit code. */
function step(command, args) {
  const r = spawnSync(command, args, { cwd: ROOT, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const started = Date.now();
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
/** The workspace packages (folders named by package.json "workspaces", e.g. packages/*). */
const workspaces = existsSync(join(ROOT, "packages"))
  ? readdirSync(join(ROOT, "packages"))
      .map((name) => `packages/${name}`)
      .filter((dir) => existsSync(join(ROOT, dir, "package.json")))
  : [];
/** What dist/ is built from: a change to any of these makes it stale. */
const sources = ["src", "tsconfig.json", "tsconfig.build.json", "package.json", "bin/bundle.mjs"];
for (const dir of workspaces)
  for (const part of ["src", "package.json", "tsconfig.json", "tsconfig.build.json"])
    if (existsSync(join(ROOT, dir, part))) sources.push(`${dir}/${part}`);

const NEXT = ".cache/dist-next";
rmSync(join(ROOT, NEXT), { recursive: true, force: true });
mkdirSync(join(ROOT, ".cache"), { recursive: true });
if (pkg.workspaces && workspaces.length) {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  step(npm, ["run", "build", "--workspaces", "--if-present"]);
}
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
step(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", NEXT]);
cpSync(join(ROOT, "src/sandbox/child"), join(ROOT, NEXT, "sandbox/child"), { recursive: true });
// The sandbox child as one file (bin/bundle.mjs): each child process starts with less CPU.
await bundleChild(join(ROOT, NEXT));
// The bundled CLI (bin/bundle.mjs): most commands start from it, at well under half the CPU.
await bundleCli(ROOT, join(ROOT, NEXT));
writeFileSync(join(ROOT, NEXT, ".build.json"), `${JSON.stringify({ started, sources })}\n`);
// The swap: two renames, so dist/ is missing only between them (microseconds, not a build).
const old = join(ROOT, `.cache/dist-old-${process.pid}`);
if (existsSync(join(ROOT, "dist"))) renameSync(join(ROOT, "dist"), old);
renameSync(join(ROOT, NEXT), join(ROOT, "dist"));
rmSync(old, { recursive: true, force: true });
