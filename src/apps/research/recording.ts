import type { RecordingApp } from "../../runs/thread-record.ts";
import { knowledgeSourceRecord } from "../common/source-record.ts";

/**
 * The research app's name and what its threads record (the knowledge source), without loading its
 * agents: `codehop research` records the thread with it before anything slow is imported.
 */
export const researchRecording: RecordingApp = { name: "research", record: knowledgeSourceRecord };
