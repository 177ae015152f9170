import type { RecordingApp } from "../../runs/thread-record.ts";

/**
 * The assistant's name and what its threads record (nothing beyond the app and model names; the
 * task's file names are recorded as its input), without loading its agents.
 */
export const assistantRecording: RecordingApp = { name: "assistant", record: () => ({}) };
