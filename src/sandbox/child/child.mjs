// @ts-check
/**
 * Entry of the sandbox child process. Plain ESM (no tsx: startup time matters).
 *
 * Started by src/sandbox/child-launch.ts as `node [flags] child/child.mjs <path to ses.cjs>` with an empty
 * environment, Node's permission model (read access to this folder and ses only), a V8 heap limit
 * and an OS address-space limit. It locks itself down once (lockdown.mjs, imported before anything
 * that runs guest code), then runs one code action at a time, each in a fresh SES Compartment
 * (action.mjs). The protocol is in protocol.mjs; commons.mjs holds the built-ins captured at start.
 *
 * Everything that touches guest values does so without calling guest code where it can (own
 * property descriptors, intrinsic methods captured before the guest runs, Proxy detection).
 */
import { startWatchdog } from "./watchdog.mjs";
import { process } from "./commons.mjs";
import { getStackString, harden, Compartment, sesScript } from "./lockdown.mjs";
import { currentAction, deliverResult, finish, startAction } from "./action.mjs";
import { toJson } from "./copy.mjs";
import { describeError } from "./errors.mjs";
import { formatValue } from "./format.mjs";
import { loadLibraries } from "./libraries.mjs";
import { receive, send } from "./io.mjs";
import { CHILD_MAKE_CODE_CACHE_ARG, childArg } from "./protocol.mjs";

// A guest promise nobody handles must not kill the process (Node's default for unhandled rejections).
process.on("unhandledRejection", () => {});
// Guest code can raise an exception outside any promise chain (e.g. a throwing reject function of
// a Promise subclass, called from a reaction job). That is the action's error, reported as such;
// the process is then replaced anyway, since its state after an uncaught exception is not trusted.
process.on("uncaughtException", (err) => {
  try {
    const act = currentAction();
    if (act && !act.ended) finish(act, { error: describeError(err, act) }, false);
    else send({ t: "fatal", message: "uncaught exception outside an action" });
  } finally {
    process.exit(70);
  }
});

receive((msg) => {
  if (msg.t === "run") startAction(msg);
  else if (msg.t === "result") deliverResult(msg);
  else if (msg.t === "ping") send({ t: "pong" });
});

/** Asked to send the host the SES code cache (see lockdown.mjs and code-cache.ts), before `ready`. */
const MAKE_CODE_CACHE = childArg(process.argv, CHILD_MAKE_CODE_CACHE_ARG) === true;

function ready() {
  // After the warm-up, the cache holds the bytecode of every SES function lockdown and a first
  // evaluation compiled. Sent before `ready`: no guest code has run in this process yet.
  if (MAKE_CODE_CACHE)
    send({ t: "code-cache", data: sesScript.createCachedData().toString("base64") });
  const rejected = sesScript.cachedDataRejected;
  send({ t: "ready", codeCache: rejected === undefined ? "none" : rejected ? "rejected" : "used" });
  startWatchdog();
}

// Authorized libraries: loaded once, now, before any guest code (a refused one ends the process).
loadLibraries();

// Warm-up before reporting ready: the first Compartment, evaluation and stack capture each cost
// tens of milliseconds once per process; pay that here rather than in the first action.
try {
  const c = new Compartment({ __options__: true, globals: {} });
  harden(c.globalThis);
  const f = c.evaluate(
    "(function () { return { run: async function () { await null; null.x; } }; })",
  );
  f()
    .run()
    .catch((/** @type {unknown} */ err) => {
      getStackString(/** @type {object} */ (err));
      formatValue({ a: [1, "x"] }, 100);
      toJson({ a: [1, "x"] }, 1000, 10, "warmup");
      ready();
    });
} catch {
  ready();
}
