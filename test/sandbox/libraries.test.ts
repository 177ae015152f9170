/**
 * Authorized libraries (issue 26): the vetted default set works from guest code in every form a
 * model writes (globals, `import`, `require`, `import()`), frozen; packages that reach for I/O or
 * pollute shared objects are refused with the reason (CODEHOP_SANDBOX_LIBRARY_REFUSED); what a
 * loaded library tries later, when a guest calls it, finds nothing to reach.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { createCodeAgent } from "../../src/framework/code-agent.ts";
import { createSandbox, parseLibrariesSetting } from "../../src/sandbox/index.ts";
import { ScriptedChatModel } from "../../src/testing/scripted-chat-model.ts";

const FIXTURES = join(import.meta.dirname, "../fixtures/libraries");
const fixture = (name: string) => ({ name, dir: join(FIXTURES, name) });

const sandbox = createSandbox({
  poolSize: 1,
  libraries: [...parseLibrariesSetting("default"), fixture("lazy-tricks")],
});
const opened = [sandbox];
afterAll(() => Promise.all(opened.map((s) => s.close())));

async function run(code: string, session = "run-1") {
  return sandbox.run({ code, session, tools: {} });
}

describe("the default set", () => {
  it("parses CSV, does date arithmetic and exact decimals from the globals", async () => {
    const r = await run(`
      const rows = Papa.parse("city,pop\\nParis,2100000\\nLyon,520000", { header: true, dynamicTyping: true }).data;
      const days = dateFns.differenceInDays(new Date(2024, 2, 1), new Date(2024, 1, 1));
      const sum = new Decimal("0.1").plus("0.2").toString();
      const D50 = Decimal.clone({ precision: 50 });
      final_answer({ rows, days, sum, third: new D50(1).div(3).toString(), csv: Papa.unparse(rows) });
    `);
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toEqual({
      rows: [
        { city: "Paris", pop: 2100000 },
        { city: "Lyon", pop: 520000 },
      ],
      days: 29,
      sum: "0.3",
      third: `0.${"3".repeat(50)}`,
      csv: "city,pop\r\nParis,2100000\r\nLyon,520000",
    });
  });

  it("import declarations, import() and require give the same frozen objects", async () => {
    const r = await run(`
      import P from "papaparse";
      import * as fns from "date-fns";
      import { addDays, format as fmt } from "date-fns";
      const dyn = await import("decimal.js");
      final_answer([P === Papa, fns === dateFns, addDays === dateFns.addDays,
        fmt(addDays(new Date(2024, 0, 30), 3), "yyyy-MM-dd"), dyn === Decimal,
        require("papaparse") === Papa, Object.isFrozen(Papa), Object.isFrozen(dateFns.addDays),
        Object.isFrozen(Decimal.prototype)]);
    `);
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toEqual([true, true, true, "2024-02-02", true, true, true, true, true]);
  });

  it("other modules are refused with the list of libraries; export is refused", async () => {
    const fromImport = await run('import fs from "fs";');
    expect(fromImport.error?.name).toBe("SyntaxError");
    expect(fromImport.error?.message).toContain(
      'module "fs" is not available in the sandbox: the libraries you can import are papaparse, date-fns, decimal.js, lazy-tricks',
    );
    const fromRequire = await run('require("child_process")');
    expect(fromRequire.error?.message).toContain('Cannot find module "child_process"');
    const dynamic = await run('await import("node:fs")');
    expect(dynamic.error?.message).toContain('module "node:fs" is not available');
    const computed = await run('const m = "fs"; await import(m)');
    expect(computed.error?.message).toContain("import() needs a library name as a string");
    const exported = await run("export const x = 1;");
    expect(exported.error?.message).toContain("export statements are not available");
  });

  it("a guest cannot change a library, for itself or for a later action", async () => {
    const r = await run(`
      const out = [];
      for (const f of [() => { Papa.parse = () => "pwned" }, () => { Decimal.prototype.plus = null },
        () => { dateFns.addDays.call = null }, () => { Object.prototype.polluted = 1 }]) {
        try { f(); out.push("changed") } catch (e) { out.push(e.name) }
      }
      final_answer(out);
    `);
    expect(r.finalAnswer).toEqual(["TypeError", "TypeError", "TypeError", "TypeError"]);
    const after = await run('final_answer(Papa.parse("a,b").data)');
    expect(after.finalAnswer).toEqual([["a", "b"]]);
  });
});

describe("a loaded library's functions, called by a guest", () => {
  it("find no process, fetch, modules or global object; cannot pollute or tamper", async () => {
    const r = await run(`
      const t = require("lazy-tricks");
      const out = {};
      for (const k of ["steal", "phone", "pollute", "arrayPollute", "escape", "viaFunction"]) {
        try { out[k] = String(await t[k]()) } catch (e) { out[k] = e.name + ": " + e.message }
      }
      try { out.load = String(t.load()) } catch (e) { out.load = e.message }
      try { out.tamper = t.tamper(Papa) } catch (e) { out.tamper = e.name }
      out.parse = Papa.parse("x").data;
      out.polluted = ({}).polluted === undefined;
      out.helper = t.helper.twice(21);
      out.version = t.version;
      final_answer(out);
    `);
    expect(r.error).toBeNull();
    const out = r.finalAnswer as Record<string, unknown>;
    expect(out.steal).toBe("Error: process is not available in the sandbox (library lazy-tricks)");
    expect(out.phone).toBe("Error: fetch is not available in the sandbox (library lazy-tricks)");
    expect(out.pollute).toMatch(/^TypeError/);
    expect(out.arrayPollute).toMatch(/^TypeError/);
    // The global object of the library's compartment: nothing named process on it either.
    expect(out.escape).toMatch(/process is not available|undefined/);
    expect(out.viaFunction).toMatch(/process is not available|undefined/);
    expect(out.load).toBe('require("fs") is not available in the sandbox (library lazy-tricks)');
    expect(out).toMatchObject({
      tamper: "TypeError",
      parse: [["x"]],
      polluted: true,
      helper: 42,
      version: "1.0.0",
    });
  });

  it("keeps its private state per process: one copy per run, never shared between runs", async () => {
    await run('require("lazy-tricks").bump()', "counter-a");
    const a = await run('final_answer(require("lazy-tricks").bump())', "counter-a");
    const b = await run('final_answer(require("lazy-tricks").bump())', "counter-b");
    expect(a.finalAnswer).toBe(2);
    expect(b.finalAnswer).toBe(1);
  });
});

describe("refused packages", () => {
  const refusedAtStart = (name: string) => {
    try {
      opened.push(createSandbox({ poolSize: 0, libraries: [fixture(name)] }));
    } catch (err) {
      expect(CodehopError.isInstance(err)).toBe(true);
      expect((err as CodehopError).code).toBe(ErrorCodes.SANDBOX_LIBRARY_REFUSED);
      return (err as Error).message;
    }
    throw new Error(`${name} was not refused`);
  };

  it("at sandbox creation: native code, install scripts, import(), computed require, ESM only, not installed", () => {
    expect(refusedAtStart("native-addon")).toBe(
      "library native-addon refused: it builds native code (gypfile)",
    );
    expect(refusedAtStart("install-script")).toBe(
      "library install-script refused: it runs an postinstall script (node steal.js)",
    );
    expect(refusedAtStart("dynamic-import")).toContain(
      "it imports modules dynamically (import() at index.js:2)",
    );
    expect(refusedAtStart("computed-require")).toContain(
      "it calls require with a computed module name (index.js:3)",
    );
    expect(refusedAtStart("esm-only")).toContain("ES-module-only packages are not supported");
    expect(() => createSandbox({ libraries: [{ name: "no-such-package-here" }] })).toThrow(
      "library no-such-package-here refused: it is not installed",
    );
    expect(() => createSandbox({ libraries: [{ name: "../etc" }] })).toThrow(
      "not an npm package name",
    );
    expect(() => createSandbox({ libraries: [{ name: "papaparse", global: "JSON" }] })).toThrow(
      '"JSON" cannot be its global name',
    );
  });

  const refusedAtLoad = async (name: string) => {
    const s = createSandbox({ poolSize: 0, libraries: [fixture(name)] });
    opened.push(s);
    const err = await s.run({ code: "1", tools: {} }).catch((e: unknown) => e);
    expect(CodehopError.isInstance(err)).toBe(true);
    expect((err as CodehopError).code).toBe(ErrorCodes.SANDBOX_LIBRARY_REFUSED);
    return (err as Error).message;
  };

  it("at load, with the reason: process, fetch, require, the global object, prototype pollution", async () => {
    const [proc, fetch, req, glob, pollute] = await Promise.all(
      ["evil-process", "evil-fetch", "evil-require", "evil-global", "evil-pollute"].map(
        refusedAtLoad,
      ),
    );
    expect(proc).toBe("library evil-process refused: it reached for process while loading");
    expect(fetch).toBe("library evil-fetch refused: it reached for fetch while loading");
    expect(req).toBe(
      'library evil-require refused: it required "fs" while loading (only its own files exist in the sandbox)',
    );
    expect(glob).toBe("library evil-global refused: it reached for process while loading");
    expect(pollute).toMatch(
      /^library evil-pollute refused: loading it failed \(TypeError: Cannot add property polluted/,
    );
  });
});

it("an agent's system prompt lists the libraries its sandbox has", async () => {
  let system = "";
  const agent = createCodeAgent({
    name: "csv",
    description: "d",
    sandbox,
    model: new ScriptedChatModel([
      async (m: BaseMessage[]) => {
        system = String(m[0].content);
        return 'Thought: go\nCode:\n```js\nfinal_answer(Papa.parse("a,b").data[0].length)\n```<end_action>';
      },
    ]),
  });
  const out = await agent.builder.compile().invoke({ task: "count" }, { recursionLimit: 20 });
  expect(out).toMatchObject({ status: "final_answer", answer: 2 });
  expect(system).toContain(
    "libraries, ready as globals (no import needed; import/require of these names works too): Papa (papaparse 5.5.3;",
  );
  expect(system).toContain("dateFns (date-fns 4.1.0;");
  expect(system).toContain("Decimal (decimal.js 10.6.0;");
});
