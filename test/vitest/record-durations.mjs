// `npm run test:durations [report.json]`: records how long each test file took in a full run, for
// test/vitest/sequencer.ts to start the longest files first on a machine with no vitest cache (a
// fresh clone, CI). Reads a vitest JSON report (`vitest run --reporter=json --outputFile=...`);
// without one, runs the whole suite to make it.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
let report = process.argv[2];
if (!report) {
  report = join(mkdtempSync(join(tmpdir(), "codehop-durations-")), "report.json");
  const npx = process.platform === "win32" ? "npx.cmd" : "npx";
  spawnSync(
    npx,
    ["vitest", "run", "--reporter=default", "--reporter=json", `--outputFile=${report}`],
    {
      cwd: root,
      stdio: "inherit",
    },
  );
}
const { testResults } = JSON.parse(readFileSync(report, "utf8"));
// Paths relative to the checkout the report was made in (another clone's report works too): the
// deepest directory holding every file, the repository root when test/ and packages/ both ran.
const names = testResults.map((r) => r.name);
let base = names.length ? dirname(names[0]) : root;
while (!names.every((n) => n.startsWith(`${base}${sep}`)) && dirname(base) !== base)
  base = dirname(base);
const files = {};
for (const r of testResults.sort((a, b) => a.name.localeCompare(b.name)))
  files[relative(base, r.name)] = Math.round((r.endTime - r.startTime) / 100) / 10;
writeFileSync(
  join(root, "test/vitest/durations.json"),
  `${JSON.stringify({ note: "seconds per test file in one full run (npm run test:durations)", files }, null, 2)}\n`,
);
console.log(`recorded ${Object.keys(files).length} test files in test/vitest/durations.json`);
