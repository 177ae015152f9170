import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { qaRecording } from "../../src/apps/qa/recording.ts";
import { recordInputEarly } from "../../src/runs/thread-record.ts";
import { openPersistence } from "../../src/persistence/index.ts";

const endpoint = { baseURL: "http://127.0.0.1:9/v1", apiKey: "k", model: "m", models: {} };

describe("recordInputEarly (what `codehop ask` writes before loading the agents)", () => {
  it("records the question, the app, the corpus (absolute) and the model names", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-rec-"));
    await recordInputEarly(qaRecording, "How tall is it?", "t1", {
      ...endpoint,
      home,
      corpus: "rel/corpus.db",
    });
    const p = openPersistence(home);
    try {
      expect(await p.threads.get("t1")).toMatchObject({
        question: "How tall is it?",
        checkpoints: 0,
        options: {
          app: "qa",
          source: "corpus",
          corpus: join(process.cwd(), "rel/corpus.db"),
          model: "m",
        },
      });
    } finally {
      p.close();
    }
  });

  it("leaves a thread with checkpoints alone, and does nothing without a model", async () => {
    const home = mkdtempSync(join(tmpdir(), "codehop-rec-"));
    const p = openPersistence(home);
    try {
      await p.threads.start("done", { question: "Old question?" });
      await p.checkpointer.put(
        { configurable: { thread_id: "done", checkpoint_ns: "" } },
        {
          v: 4,
          id: "1f000000-0000-6000-8000-000000000000",
          ts: new Date().toISOString(),
          channel_values: {},
          channel_versions: {},
          versions_seen: {},
        },
        { source: "input", step: -1, parents: {} },
      );
      await recordInputEarly(qaRecording, "New question?", "done", { ...endpoint, home });
      expect(await p.threads.get("done")).toMatchObject({
        question: "Old question?",
        checkpoints: 1,
      });
    } finally {
      p.close();
    }
    const empty = join(mkdtempSync(join(tmpdir(), "codehop-rec-")), "home");
    await recordInputEarly(qaRecording, "Q?", "t", {
      home: empty,
      baseURL: undefined,
      apiKey: undefined,
      model: undefined,
      models: {},
    });
    expect(existsSync(empty)).toBe(false);
  });
});
