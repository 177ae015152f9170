import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ErrorCodes } from "../../src/errors.ts";
import { openSqliteMemoryStore } from "../../src/memory/sqlite-store.ts";
import { describeStoreConformance } from "./conformance.ts";

let last = "";
describeStoreConformance({
  name: "sqlite",
  async open(options) {
    last = join(mkdtempSync(join(tmpdir(), "codehop-memory-")), "memory.db");
    return openSqliteMemoryStore(last, options);
  },
  async reopen(options) {
    return openSqliteMemoryStore(last, options);
  },
});

describe("sqlite memory store files", () => {
  it("a file that is not SQLite fails with CODEHOP_DB_INVALID naming it", () => {
    const path = join(mkdtempSync(join(tmpdir(), "codehop-memory-bad-")), "memory.db");
    writeFileSync(path, "this is not a database ".repeat(100));
    let code: string | undefined;
    let message = "";
    try {
      openSqliteMemoryStore(path);
    } catch (err: any) {
      code = err.code;
      message = err.message;
    }
    expect(code).toBe(ErrorCodes.DB_INVALID);
    expect(message).toContain(path);
  });
});
