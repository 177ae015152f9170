/**
 * The decision given for an approval, and what a call journal stores of it: apart from the rest of
 * the approval machinery (src/core/approval.ts), which uses the journal, so that the journal
 * (src/core/journal.ts), which stores decisions, does not import it back.
 */
import { z } from "zod";

/** The approval id a resume value names. */
export const approvalIdField = z.string().min(1).describe("the approvalId of the request answered");

/**
 * The resume value of an approval: `Command({ resume: { approvalId, decision: "approve" } })`,
 * `{ approvalId, decision: "reject", reason? }` (the reason becomes the tool's error for the model)
 * or `{ approvalId, decision: "edit", args }` (the tool runs with these arguments instead, validated
 * by its schema; arguments that don't validate reject the call with the validation error).
 */
export const ApprovalResumeSchema = z.discriminatedUnion("decision", [
  z.object({ approvalId: approvalIdField, decision: z.literal("approve") }),
  z.object({
    approvalId: approvalIdField,
    decision: z.literal("reject"),
    reason: z.string().optional(),
  }),
  z.object({
    approvalId: approvalIdField,
    decision: z.literal("edit"),
    args: z.record(z.string(), z.unknown()),
  }),
]);

/** The resume value of an approval (see {@link ApprovalResumeSchema}). */
export type ApprovalResume = z.infer<typeof ApprovalResumeSchema>;

/** What a journal stores about one approval: the decision given for it (first one wins). */
export interface ApprovalJournal {
  /** The decision recorded for `approvalId` in the thread, if any. */
  getDecision(threadId: string, approvalId: string): Promise<ApprovalResume | undefined>;
  /** Records a decision unless one is already recorded for its approval id. */
  putDecision(threadId: string, decision: ApprovalResume): Promise<void>;
  /** Records that the run paused showing `approvalId` (what a HITL resume value may answer). */
  markAsked?(threadId: string, approvalId: string): Promise<void>;
  /** Whether the run ever paused showing `approvalId`. */
  wasAsked?(threadId: string, approvalId: string): Promise<boolean>;
}
