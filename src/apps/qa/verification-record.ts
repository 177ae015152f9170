import { getThreadRecord } from "../../core/journal.ts";
import { openPersistenceFor } from "../../persistence/open.ts";
import type { RunOptions } from "../../runs/app.ts";
import { loadAppConfig, persistenceLocation } from "../../runs/config.ts";
import type { Citation } from "../common/citations.ts";
import type { AnswerVerification } from "./verify.ts";

// Reading a recorded verification (`codehop show`) loads none of the QA app (src/apps/qa/app.ts,
// which writes it and re-exports these).

/** Name of the thread record holding the answer's latest verification (src/core/journal.ts). */
export const VERIFICATION_RECORD = "verification";

/** A verification as recorded with its thread (`codehop show`, {@link verificationOf}). */
export interface RecordedVerification {
  /** The answer checked. */
  answer: string;
  /** The thread's checkpoint the answer was read at. */
  checkpoint_id: string | null;
  /** When it was checked (ISO time). */
  verified_at: string;
  citations: Citation[];
  verification: AnswerVerification;
}

/** The latest verification recorded with a thread (`ask --verify`, `resume --verify`), if any. */
export async function verificationOf(
  threadId: string,
  options: Pick<RunOptions, "config" | "persistence"> = {},
): Promise<RecordedVerification | undefined> {
  const persistence =
    options.persistence ??
    (await openPersistenceFor(persistenceLocation(loadAppConfig(options.config)), {
      mustExist: true,
    }));
  try {
    return await getThreadRecord<RecordedVerification>(
      persistence.journalRows,
      threadId,
      VERIFICATION_RECORD,
    );
  } finally {
    if (!options.persistence) await persistence.close();
  }
}
