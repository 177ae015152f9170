// CI's last lines: the totals of one or more vitest JSON reports, then every failed test with the
// first lines of its error, so the tail of the CI log names what failed.
import { readFileSync } from "node:fs";
let passed = 0,
  failed = 0,
  skipped = 0;
const failures = [];
for (const file of process.argv.slice(2)) {
  let report;
  try {
    report = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    failures.push(`${file}: no JSON report (${error.message})`);
    continue;
  }
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  for (const result of report.testResults) {
    const name = result.name.replace(process.cwd() + "/", "");
    const tests = result.assertionResults.filter((t) => t.status === "failed");
    if (result.status === "failed" && tests.length === 0) {
      failures.push(`${name}: ${String(result.message).split("\n").slice(0, 12).join("\n  ")}`);
    }
    for (const t of tests) {
      const message = (t.failureMessages ?? []).join("\n").split("\n").slice(0, 12).join("\n  ");
      failures.push(`${name} > ${t.fullName}\n  ${message}`);
    }
  }
}
console.log(`Node ${process.version}: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (failures.length > 0) console.log(`Failed:\n${failures.map((f) => `- ${f}`).join("\n")}`);
