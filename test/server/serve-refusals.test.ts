import { describe, expect, it } from "vitest";
import { isLoopback } from "../../src/server/auth-modes.ts";
import { cliEnv, runCli } from "../app/cli-helpers.ts";

// `codehop serve` does not start an open server by accident: not on a routable address without
// authentication, not with an empty key (docs/deploy.md's `--api-key "$CODEHOP_API_KEY"` pasted
// with the variable unset). These checks come before the database is opened.

const NO_DATABASE = "postgres://codehop@127.0.0.1:1/none";

// Each test starts `codehop serve` (a CLI start: a second or two of CPU); the starts of one test
// run at once and its timeout leaves room for a loaded machine.
describe("codehop serve refuses to start open", { timeout: 180_000 }, () => {
  it.each([
    [["--host", "0.0.0.0"]],
    [["--host", "::"]],
    [["--host", "10.1.2.3"]],
    [["--host", "example.org"]],
  ])("no authentication on %j: refused, naming the ways to turn it on", async (args) => {
    const run = await runCli(
      ["serve", ...args, "--database-url", NO_DATABASE],
      cliEnv({ CODEHOP_DATABASE_URL: NO_DATABASE }),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/Refusing to listen on .* without authentication/);
    expect(run.stderr).toContain("--auth keys");
    expect(run.stderr).toContain("--insecure");
    expect(run.stderr).not.toContain("listening on");
  });

  it.each([[""], ["   "]])("an empty --api-key (%j, an unset variable) is refused", async (key) => {
    const runs = await Promise.all(
      ["127.0.0.1", "0.0.0.0"].map((host) =>
        runCli(
          ["serve", "--host", host, "--api-key", key, "--database-url", NO_DATABASE],
          cliEnv({}),
        ),
      ),
    );
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/--api-key is empty \(was CODEHOP_API_KEY set\?\)/);
    }
  });

  it("--insecure, or any authentication, gets past the check (to the database)", async () => {
    const runs = await Promise.all(
      [
        ["--host", "0.0.0.0", "--insecure"],
        ["--host", "0.0.0.0", "--auth", "keys"],
        ["--host", "0.0.0.0", "--api-key", "a-long-random-key-0123456789"],
      ].map((args) => runCli(["serve", ...args, "--database-url", NO_DATABASE], cliEnv({}))),
    );
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stderr).not.toMatch(/Refusing to listen/);
      expect(run.stderr).toMatch(/CODEHOP_DB_INVALID|Cannot connect/);
    }
  });

  it("JWT authentication without an issuer and audience is refused", async () => {
    const run = await runCli(
      ["serve", "--jwks-url", "https://idp.example/certs", "--database-url", NO_DATABASE],
      cliEnv({}),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/JWT authentication needs --jwt-issuer/);
  });

  it("an unknown --auth mode is a usage error", async () => {
    const run = await runCli(["serve", "--auth", "passwords"], cliEnv({}));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/unknown authentication mode passwords/);
  });

  it("tells loopback addresses from others", () => {
    for (const h of ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
      expect(isLoopback(h), h).toBe(true);
    for (const h of ["0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "example.org", "::ffff:127.0.0.1"])
      expect(isLoopback(h), h).toBe(false);
  });
});
