/**
 * The SES backend's own defences behind the isolation part of the conformance suite: lazily created
 * prototypes are hardened in every process, Node's TextEncoder/TextDecoder internals are out of
 * reach, a process serves one session, a grown heap retires it, and a native crash is reported as
 * a crash (not as running out of memory).
 */
import { execSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { CHILD_PROGRAM } from "../../src/sandbox/child-launch.ts";
import { createSandbox, type HostToolFn } from "../../src/sandbox/index.ts";

const sandbox = createSandbox({ poolSize: 1, limits: { timeoutMs: 10_000 } });
afterAll(() => sandbox.close());

/** Pids of this process's sandbox children. */
function childPids(): number[] {
  return execSync(`ps -o pid=,args= --ppid ${process.pid} || true`)
    .toString()
    .split("\n")
    .filter((l) => l.includes(CHILD_PROGRAM.entry))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

describe("hardened in every process", () => {
  it("every prototype guest code can reach through Intl, TextEncoder/TextDecoder and their errors is frozen", async () => {
    const r = await sandbox.run({
      code: `
        const unfrozen = [];
        const chain = (label, o) => {
          for (let p = Object.getPrototypeOf(o), i = 1; p; p = Object.getPrototypeOf(p), i++)
            if (!Object.isFrozen(p)) unfrozen.push(label + " @" + i);
        };
        const catching = (label, f) => { try { f() } catch (e) { chain(label, e) } };
        const segs = new Intl.Segmenter("en", { granularity: "word" }).segment("a b");
        chain("segments", segs);
        chain("segment iterator", segs[Symbol.iterator]());
        chain("segment data", segs.containing(0));
        for (const C of [Intl.NumberFormat, Intl.DateTimeFormat, Intl.Collator, Intl.PluralRules,
                         Intl.ListFormat, Intl.RelativeTimeFormat, Intl.Segmenter]) {
          const o = new C("en");
          chain(C.name, o);
          for (const k of Object.getOwnPropertyNames(Object.getPrototypeOf(o))) {
            try { const v = o[k]; if (typeof v === "function") chain(C.name + "." + k, v) } catch {}
          }
        }
        chain("Locale", new Intl.Locale("en"));
        chain("DisplayNames", new Intl.DisplayNames("en", { type: "region" }));
        const d = new TextDecoder("utf-16le");
        chain("TextDecoder", d);
        chain("TextEncoder", new TextEncoder());
        chain("encodeInto", new TextEncoder().encodeInto("a", new Uint8Array(2)));
        catching("bad encoding", () => new TextDecoder("nope"));
        catching("fatal decode", () => new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([255])));
        catching("bad input", () => new TextDecoder().decode(5));
        catching("bad destination", () => new TextEncoder().encodeInto("a", 5));
        final_answer({ unfrozen, decoderKeys: Reflect.ownKeys(d).length });
      `,
      tools: {},
    });
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toEqual({ unfrozen: [], decoderKeys: 0 });
  });

  it("patching Intl.Segmenter's segment and iterator prototypes fails", async () => {
    const r = await sandbox.run({
      code: `
        const segs = new Intl.Segmenter("en").segment("a");
        const out = [];
        for (const p of [Object.getPrototypeOf(segs), Object.getPrototypeOf(segs[Symbol.iterator]())]) {
          try { p.next = () => 1; out.push("patched") } catch (e) { out.push(e.name) }
        }
        final_answer(out);
      `,
      tools: {},
    });
    expect(r.finalAnswer).toEqual(["TypeError", "TypeError"]);
  });

  it("TextDecoder works as before: encodings, streaming, BOM, fatal errors as plain TypeErrors", async () => {
    const r = await sandbox.run({
      code: `
        const d = new TextDecoder("utf-8");
        const bytes = new TextEncoder().encode("héllo");
        const stream = new TextDecoder();
        const parts = [stream.decode(bytes.subarray(0, 2), { stream: true }), stream.decode(bytes.subarray(2))];
        let fatal;
        try { new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([0xff])) } catch (e) { fatal = [e instanceof TypeError, e.name] }
        final_answer([d.decode(bytes), parts.join(""), d.encoding, d.fatal, d.ignoreBOM,
          new TextDecoder("utf-16le").decode(new Uint8Array([104, 0, 105, 0])), fatal,
          String(new TextEncoder()), new TextDecoder().decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41]))]);
      `,
      tools: {},
    });
    expect(r.error).toBeNull();
    expect(r.finalAnswer).toEqual([
      "héllo",
      "héllo",
      "utf-8",
      false,
      false,
      "hi",
      [true, "TypeError"],
      "[object TextEncoder]",
      "A",
    ]);
  });
});

describe("a process that served a session", () => {
  it("a process whose heap grew past half its limit is replaced before the session's next action", async () => {
    const heap = { timeoutMs: 30_000 }; // the default heap: 256 MB
    const grow = await sandbox.run({
      // ~160 MB the process can never free: registered symbols live as long as the process.
      code: 'for (let i = 0; i < 150000; i++) Symbol.for(String(i).padStart(1000, "z"));\nconst done = 1;',
      tools: {},
      session: "grower",
      limits: heap,
    });
    expect(grow.error).toBeNull();
    // The same session's next step starts in a process with an empty registry: it can allocate
    // ~150 MB, which the grown process could not hold next to its registry.
    const next = await sandbox.run({
      code: "const keep = [];\nfor (let i = 0; i < 150; i++) keep.push(new Array(125000).fill(i));\nfinal_answer(done + keep.length)",
      tools: {},
      session: "grower",
      snapshot: grow.snapshot,
      limits: heap,
    });
    expect(next.error).toBeNull();
    expect(next.finalAnswer).toBe(151);
  });
});

describe("crash reports", () => {
  it("a process that dies of a native crash is reported as crashed, not as out of memory", async () => {
    // A sandbox of its own with no process started ahead: the crash hits only the process running
    // the action (a spare killed with it could be handed to the next action before its death is seen).
    const lone = createSandbox({ poolSize: 0, limits: { timeoutMs: 10_000 } });
    try {
      const before = new Set(childPids());
      const crash: HostToolFn = async () => {
        for (const pid of childPids()) if (!before.has(pid)) process.kill(pid, "SIGSEGV");
        await new Promise((r) => setTimeout(r, 5_000));
        return null;
      };
      const r = await lone.run({
        code: "const before = 1;\nawait crash();",
        tools: { crash },
        session: "crash",
      });
      expect(r.error?.name).toBe("SandboxError");
      expect(r.error?.message).toMatch(/^The sandbox process crashed \(SIGSEGV\)/);
      const next = await lone.run({ code: "final_answer(2)", tools: {}, session: "crash" });
      expect(next.error).toBeNull();
      expect(next.finalAnswer).toBe(2);
    } finally {
      await lone.close();
    }
  });
});
