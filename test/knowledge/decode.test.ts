import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { decodeText, detectEncoding } from "../../src/ingest/decode.ts";
import { ingestPath } from "../../src/ingest/index.ts";
import { CorpusSource } from "../../src/store/corpus-source.ts";
import { tempDir } from "./helpers.ts";

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const utf16le = (s: string, bom = true) =>
  Buffer.concat([Buffer.from(bom ? [0xff, 0xfe] : []), Buffer.from(s, "utf16le")]);

async function decodeAll(bytes: Buffer, chunk = 3): Promise<string> {
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) parts.push(bytes.subarray(i, i + chunk));
  let out = "";
  for await (const s of decodeText(Readable.from(parts))) out += s;
  return out;
}

describe("input encodings", () => {
  it("detects UTF-8 and UTF-16 (LE/BE, with or without BOM) and XML declarations", () => {
    expect(detectEncoding(Buffer.from('{"title":"A"}'))).toBe("utf-8");
    expect(detectEncoding(Buffer.from([0xef, 0xbb, 0xbf, 0x7b]))).toBe("utf-8");
    expect(detectEncoding(utf16le("<x/>"))).toBe("utf-16le");
    expect(detectEncoding(utf16le("<x/>", false))).toBe("utf-16le");
    expect(detectEncoding(Buffer.from(utf16le("<x/>", false)).swap16())).toBe("utf-16be");
    expect(detectEncoding(Buffer.from([0xfe, 0xff, 0x00, 0x3c]))).toBe("utf-16be");
    const latin1 = Buffer.from('<?xml version="1.0" encoding="ISO-8859-1"?><x/>', "latin1");
    expect(detectEncoding(latin1, { xml: true })).toBe("iso-8859-1");
    expect(() => detectEncoding(Buffer.from([0xff, 0xfe, 0, 0, 0x3c, 0, 0, 0]))).toThrow(
      /UTF-32.*iconv/,
    );
    expect(() =>
      detectEncoding(Buffer.from('<?xml version="1.0" encoding="X-NOPE"?>'), { xml: true }),
    ).toThrow(/declares encoding "X-NOPE".*iconv/);
  });

  it("decodes across chunk boundaries without losing split characters, BOM dropped", async () => {
    const text = "Šynthétic 東京 — 1453 🙂";
    expect(await decodeAll(utf16le(text))).toBe(text);
    // Without a byte order mark, UTF-16 shows in the zero bytes of ASCII text ("{", "<").
    expect(await decodeAll(Buffer.from(utf16le(`{${text}`, false)).swap16())).toBe(`{${text}`);
    expect(
      await decodeAll(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)])),
    ).toBe(text);
    expect(await decodeAll(Buffer.alloc(0))).toBe("");
  });

  it("ingests UTF-16 JSONL and folder files; UTF-32 is reported as unreadable", async () => {
    const lines = [
      JSON.stringify({ title: "Tōkyō", text: "Tōkyō is the capital of Japan." }),
      JSON.stringify({ title: "Zürich", text: "Zürich is a city in Switzerland." }),
    ].join("\r\n");
    const jsonl = join(tmp.dir, "windows.jsonl");
    writeFileSync(jsonl, utf16le(lines));
    const db = join(tmp.dir, "u16.db");
    expect(await ingestPath(db, jsonl)).toMatchObject({ added: 2, skipped: 0 });
    const folder = join(tmp.dir, "notes");
    mkdirSync(folder);
    writeFileSync(join(folder, "kyoto.md"), utf16le("# Kyōto\n\nKyōto was the capital."));
    expect(await ingestPath(db, folder)).toMatchObject({ added: 1, skipped: 0 });
    const s = CorpusSource.open(db);
    const kyoto = await s.getPage("Kyōto");
    expect(kyoto.status === "found" && kyoto.page.text).toBe("Kyōto was the capital.");
    expect((await s.search("Zürich Switzerland"))[0].title).toBe("Zürich");
    await s.close();

    const utf32 = join(tmp.dir, "utf32.jsonl");
    writeFileSync(utf32, Buffer.from([0xff, 0xfe, 0, 0, 0x7b, 0, 0, 0]));
    const report = await ingestPath(join(tmp.dir, "u32.db"), utf32);
    expect(report.added).toBe(0);
    expect(report.skippedRecords[0].reason).toMatch(/unreadable input.*UTF-32/);
  });
});
