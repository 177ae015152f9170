import { describe } from "vitest";
import type { CodeSandbox, SandboxLimits } from "../../src/sandbox/contract.ts";
import { describeBoundary } from "./conformance/boundary.ts";
import { describeCarriedValues } from "./conformance/carried-values.ts";
import { describeDenialOfService } from "./conformance/denial-of-service.ts";
import { describeFailedActions } from "./conformance/failed-actions.ts";
import { describeIsolation } from "./conformance/isolation.ts";
import { describeRestoreAsData } from "./conformance/restore-as-data.ts";
import { describeSemantics } from "./conformance/semantics.ts";
import { describeToolSignals } from "./conformance/tool-signals.ts";

/**
 * The sandbox port's conformance suite: what every backend of `CodeSandbox`
 * (src/sandbox/contract.ts) must do, as the agent core and the apps rely on it — REPL semantics,
 * variables carried over as data (restore runs no model code), tool calls, errors reported to the
 * model, cancellation, limits under attack, failed actions that keep the run's variables, the
 * boundary's budgets and notes, and isolation between agent runs (sessions). A backend's test file calls {@link describeSandboxConformance} with a factory
 * (test/sandbox/ses-conformance.test.ts does it for the SES child-process backend). Tests of one
 * backend's own mechanisms (its pool, its lockdown, its CLI) stay in that backend's test files.
 */
export interface SandboxFactory {
  /** A human name for the describe block ("ses"). */
  name: string;
  /**
   * A new sandbox with these default limits for every action (the suite closes it). Per-action
   * limits go through `run({ limits })`, as the contract says.
   */
  create(options?: { limits?: Partial<SandboxLimits> }): CodeSandbox;
}

/** Registers the whole suite for one backend. */
export function describeSandboxConformance(factory: SandboxFactory): void {
  describe(`sandbox port conformance: ${factory.name}`, () => {
    describe("semantics", () => describeSemantics(factory));
    describe("denial of service", () => describeDenialOfService(factory));
    describe("tool signals", () => describeToolSignals(factory));
    describe("isolation between runs", () => describeIsolation(factory));
    describe("restore is data", () => describeRestoreAsData(factory));
    describe("carried values are what the snapshot says", () => describeCarriedValues(factory));
    describe("failed actions keep everything", () => describeFailedActions(factory));
    describe("the boundary", () => describeBoundary(factory));
  });
}
