/**
 * The sandbox child as one CommonJS file (src/sandbox/child-bundle.ts, bin/bundle.mjs bundleChild):
 * children run the build's bundle only while it was made from exactly the child's modules, read
 * nothing else of codehop, and a child of the modules still starts (what runs after an edit).
 */
import { execSync } from "node:child_process";
import {
  appendFileSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  CHILD_BUNDLE_NAME,
  childBundleFor,
  childModuleFiles,
} from "../../src/sandbox/child-bundle.ts";
import {
  CHILD_MODULES_ENTRY,
  CHILD_PROGRAM,
  SES_PATH,
  childCommand,
} from "../../src/sandbox/child-launch.ts";
import { createSandbox } from "../../src/sandbox/index.ts";
import { SandboxChild } from "../../src/sandbox/pool.ts";

const SOURCES = fileURLToPath(new URL("../../src/sandbox/child/", import.meta.url));
const BUILT = fileURLToPath(
  new URL(`../../dist/sandbox/child/${CHILD_BUNDLE_NAME}`, import.meta.url),
);
const tmp = mkdtempSync(join(tmpdir(), "codehop-child-bundle-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the child's modules in a folder of its own (and the build's bundle, if `bundle`). */
function copyOfModules(name: string, bundle: boolean): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  for (const f of childModuleFiles(SOURCES)) copyFileSync(f, join(dir, basename(f)));
  if (bundle) copyFileSync(BUILT, join(dir, CHILD_BUNDLE_NAME));
  return dir;
}

describe("the bundled sandbox child", () => {
  it("the suite's children run the build's bundle, allowed to read it and SES only", () => {
    // (the suite's global setup brings dist/ up to date with the sources first)
    expect(CHILD_PROGRAM).toEqual({ entry: BUILT, bundled: true });
    const { args } = childCommand({ heapMb: 128, addressSpaceMb: null }, 1, undefined, false);
    expect(args.filter((a) => a.startsWith("--allow-fs-read="))).toEqual([
      `--allow-fs-read=${BUILT}`,
      `--allow-fs-read=${SES_PATH}`,
    ]);
    expect(args).toContain(BUILT);
    expect(args.some((a) => a.endsWith(".mjs"))).toBe(false);
  });

  it("a bundle is used only when it names the digest of exactly the modules beside it", () => {
    const same = copyOfModules("same", true);
    expect(childBundleFor(same, [join(same, CHILD_BUNDLE_NAME)])).toBe(
      join(same, CHILD_BUNDLE_NAME),
    );
    // One module edited after the build: its modules, not a bundle of older code.
    const edited = copyOfModules("edited", true);
    appendFileSync(join(edited, "format.mjs"), "\n// edited\n");
    expect(childBundleFor(edited, [join(edited, CHILD_BUNDLE_NAME)])).toBeUndefined();
    // A module added (or renamed) counts too.
    const added = copyOfModules("added", true);
    writeFileSync(join(added, "extra.mjs"), "export {};\n");
    expect(childBundleFor(added, [join(added, CHILD_BUNDLE_NAME)])).toBeUndefined();
    // No header, a truncated one, no file: not a bundle.
    const bare = copyOfModules("bare", false);
    const text = readFileSync(BUILT, "utf8");
    writeFileSync(join(bare, CHILD_BUNDLE_NAME), text.slice(text.indexOf("\n") + 1));
    expect(childBundleFor(bare, [join(bare, CHILD_BUNDLE_NAME)])).toBeUndefined();
    writeFileSync(join(bare, CHILD_BUNDLE_NAME), text.slice(0, 70));
    expect(
      childBundleFor(bare, [join(bare, CHILD_BUNDLE_NAME), join(bare, "missing.cjs")]),
    ).toBeUndefined();
    // The first that fits wins: the modules' own folder, then (from the sources) dist/'s.
    expect(
      childBundleFor(same, [join(bare, CHILD_BUNDLE_NAME), join(same, CHILD_BUNDLE_NAME)]),
    ).toBe(join(same, CHILD_BUNDLE_NAME));
  });

  it("an agent run's process runs the bundle", async () => {
    const sandbox = createSandbox({ poolSize: 0 });
    try {
      const programs = () => execSync(`ps -o args= --ppid ${process.pid} || true`).toString();
      const r = await sandbox.run({
        code: `const doubled = [1, 2, 3].map((x) => x * 2);\nfinal_answer((await look()) + doubled.join(","))`,
        tools: { look: async () => (programs().includes(BUILT) ? "bundle:" : "other:") },
        session: "bundle",
      });
      expect(r.error).toBeNull();
      expect(r.finalAnswer).toBe("bundle:2,4,6");
    } finally {
      await sandbox.close();
    }
  });

  it("a child of the modules (no bundle) still starts, with the SES code cache", async () => {
    const spec = { heapMb: 256, addressSpaceMb: null };
    // A child of the bundle first: the code cache of this heap size exists after it.
    const caches: (string | null)[] = [];
    for (const entry of [undefined, CHILD_MODULES_ENTRY]) {
      const child = new SandboxChild({ ...spec, entry });
      await child.ready;
      caches.push(child.codeCache);
      child.kill("test");
      await child.exited;
    }
    expect(caches[1]).toBe("used");
  });
});
