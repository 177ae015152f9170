import type { RecordingApp } from "../../runs/thread-record.ts";
import { knowledgeSourceRecord } from "../common/source-record.ts";

/**
 * The QA app's name and what its threads record (the knowledge source), without loading its
 * agents: `codehop ask` records the thread with it before anything slow is imported.
 */
export const qaRecording: RecordingApp = { name: "qa", record: knowledgeSourceRecord };
