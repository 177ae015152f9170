import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CODEHOP_BIN, cliEnv } from "./cli-helpers.ts";

// No output after the final line (issue 24): with a terminal (a pseudo-terminal from util-linux's
// `script`, so the live progress display is on), nothing follows the last printed line but the
// escape that shows the cursor again: no spinner or progress frame, no carriage return.
describe("the live display in a terminal", { timeout: 120_000 }, () => {
  it("prints nothing after the final line of `codehop demo` but the cursor's return", () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-final-line-"));
    try {
      const r = spawnSync(
        "script",
        ["-qec", `${process.execPath} ${CODEHOP_BIN} demo`, "/dev/null"],
        { env: cliEnv({ CODEHOP_HOME: home, TERM: "xterm" }), encoding: "utf8" },
      );
      expect(r.status).toBe(0);
      const out = r.stdout;
      // The live display ran (it hides the cursor while it draws).
      expect(out).toContain("\u001b[?25l");
      // The final line is the last next step the demo prints (a command ready to paste).
      const lastLine = out.lastIndexOf("npx codehop ");
      expect(lastLine).toBeGreaterThan(0);
      const after = out.slice(out.indexOf("\n", lastLine) + 1);
      expect(after.replaceAll("\u001b[?25h", "").trim()).toBe("");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
