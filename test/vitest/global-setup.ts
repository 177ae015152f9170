import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { whyDistIsStale } from "../../bin/dist-current.mjs";

/**
 * Before the suite: tests about the CLI's behaviour spawn `bin/codehop.mjs`, which runs dist/ when
 * the build is current with src/ and the sources through tsx (about a second more per start)
 * otherwise. After an edit, one build here (about 20 s of CPU) saves that second on each of the
 * suite's hundreds of CLI starts. A failed build (a type error) is reported and the suite goes
 * on: the CLI then runs the sources, which is still what the user would run.
 */
export default function setup(): void {
  const stale = whyDistIsStale();
  if (!stale) return;
  process.stderr.write(`vitest global setup: ${stale}; running \`npm run build\` first\n`);
  const r = spawnSync(process.execPath, [join(import.meta.dirname, "../../bin/build.mjs")], {
    stdio: "inherit",
  });
  if (r.status !== 0)
    process.stderr.write(
      "vitest global setup: the build failed; CLI tests run the sources through tsx (slower)\n",
    );
}
