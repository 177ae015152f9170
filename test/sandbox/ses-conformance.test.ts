/** The SES child-process backend (createSandbox) against the sandbox port's conformance suite. */
import { createSandbox } from "../../src/sandbox/index.ts";
import { describeSandboxConformance } from "./conformance.ts";

describeSandboxConformance({
  name: "ses",
  create: (options) => createSandbox({ poolSize: 1, ...options }),
});
