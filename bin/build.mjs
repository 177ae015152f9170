// `npm run build`: builds the workspace packages (packages/*, which codehop imports by name), then
// compiles src/ into dist/ with tsc and copies the sandbox child's plain JavaScript. Last, and only
// when every step succeeded, it records in dist/.build.json when the build started and what it
// read, so bin/codehop.mjs runs dist/ only while it is current with those sources
// (bin/dist-current.mjs); a failed build leaves dist/ marked stale.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { ROOT, STAMP } from "./dist-current.mjs";

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
const sources = ["src", "tsconfig.json", "tsconfig.build.json", "package.json"];
for (const dir of workspaces)
  for (const part of ["src", "package.json", "tsconfig.json", "tsconfig.build.json"])
    if (existsSync(join(ROOT, dir, part))) sources.push(`${dir}/${part}`);

rmSync(join(ROOT, "dist"), { recursive: true, force: true });
if (pkg.workspaces && workspaces.length) {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  step(npm, ["run", "build", "--workspaces", "--if-present"]);
}
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
step(process.execPath, [tsc, "-p", "tsconfig.build.json"]);
cpSync(join(ROOT, "src/sandbox/child"), join(ROOT, "dist/sandbox/child"), { recursive: true });
writeFileSync(join(ROOT, STAMP), `${JSON.stringify({ started, sources })}\n`);
