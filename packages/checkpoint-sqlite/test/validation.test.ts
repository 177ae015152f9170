import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IncrementalSqliteSaver } from "../src/index.ts";
import { checkpointValidation } from "./validation-suite.ts";

// LangGraph's own conformance suite for checkpointers on IncrementalSqliteSaver.
const validate = await checkpointValidation();

const dirs = new Map<IncrementalSqliteSaver, string>();

validate({
  checkpointerName: "codehop IncrementalSqliteSaver",
  createCheckpointer() {
    const dir = mkdtempSync(join(tmpdir(), "codehop-lgi-"));
    const saver = IncrementalSqliteSaver.fromConnString(join(dir, "checkpoints.db"));
    dirs.set(saver, dir);
    return saver;
  },
  destroyCheckpointer(saver) {
    saver.db.close();
    rmSync(dirs.get(saver)!, { recursive: true, force: true });
    dirs.delete(saver);
  },
});
