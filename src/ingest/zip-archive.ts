import yauzl from "yauzl";
import { CodehopError, ErrorCodes } from "../errors.ts";
import { limitError, mbToBytes, type ReaderLimits } from "./reader-limits.ts";

/**
 * A ZIP archive (DOCX, XLSX, PPTX, ODT, EPUB are ZIPs) read within limits: its central directory
 * by yauzl (which also checks that no entry inflates to more than its declared size), its
 * entries inflated only when a reader asks for them, counting the bytes as they stream out of
 * zlib — the archive's total against `maxInflatedMb`, each entry's ratio against `maxRatio` —
 * so a bomb stops after the first megabytes past a limit, never after inflating it all.
 */

/** One entry of an archive, as its central directory lists it. */
export interface ZipEntryInfo {
  /** Path inside the archive ("word/document.xml"). */
  name: string;
  /** Declared inflated size in bytes. */
  size: number;
  /** Stored (compressed) size in bytes. */
  compressedSize: number;
  /** A folder entry (name ends with "/"). */
  directory: boolean;
  /** Encrypted entries cannot be read. */
  encrypted: boolean;
}

/** Bytes an entry may inflate to before its compression ratio is checked. */
const RATIO_FLOOR = 1024 * 1024;

function invalid(message: string, cause?: unknown): CodehopError {
  return new CodehopError(ErrorCodes.INPUT_INVALID, message, cause ? { cause } : undefined);
}

/** A ZIP archive open for bounded reading; see the module comment. */
export class BoundedZip {
  /** Every entry, in central directory order. */
  readonly entries: readonly ZipEntryInfo[];
  private readonly byName: Map<string, yauzl.Entry>;
  /** Bytes inflated from this archive so far (every read counts). */
  private inflated = 0;

  private constructor(
    private readonly zip: yauzl.ZipFile,
    raw: yauzl.Entry[],
    /** The archive's file name, for messages. */
    readonly file: string,
    private readonly limits: ReaderLimits,
  ) {
    this.byName = new Map(raw.map((e) => [e.fileName, e]));
    this.entries = raw.map((e) => ({
      name: e.fileName,
      size: e.uncompressedSize,
      compressedSize: e.compressedSize,
      directory: e.fileName.endsWith("/"),
      encrypted: e.isEncrypted(),
    }));
  }

  /**
   * Opens `bytes` (a `what`) as a ZIP archive: INPUT_INVALID when it is not one (or is damaged),
   * INPUT_LIMIT when it lists more than `maxEntries` entries.
   */
  static async open(
    bytes: Uint8Array,
    file: string,
    limits: ReaderLimits,
    /** What the archive is, for messages ("DOCX file"). */
    what = "ZIP archive",
  ): Promise<BoundedZip> {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let zip: yauzl.ZipFile;
    try {
      zip = await yauzl.fromBufferPromise(buffer, {
        lazyEntries: true,
        autoClose: false,
        strictFileNames: false,
        validateEntrySizes: true,
      });
    } catch (err) {
      throw invalid(
        `${file} is a corrupt ${what} (its ZIP structure is damaged: ${(err as Error).message})`,
        err,
      );
    }
    // The count comes from the end record: a bomb of a million entries is refused unread.
    if (zip.entryCount > limits.maxEntries) {
      zip.close();
      throw limitError(
        file,
        "maxEntries",
        limits.maxEntries,
        `the archive lists ${zip.entryCount} entries, which`,
      );
    }
    const raw: yauzl.Entry[] = [];
    try {
      for await (const entry of zip.eachEntry()) raw.push(entry);
    } catch (err) {
      zip.close();
      throw invalid(`${file} has a damaged ZIP directory (${(err as Error).message}).`, err);
    }
    return new BoundedZip(zip, raw, file, limits);
  }

  /** Whether the archive has an entry of this exact name. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /**
   * The inflated bytes of entry `name` (INPUT_INVALID when there is none, it is encrypted or
   * damaged); INPUT_LIMIT as soon as the archive's inflated total or the entry's ratio passes
   * its limit.
   */
  async read(name: string): Promise<Buffer> {
    const entry = this.byName.get(name);
    if (!entry) throw invalid(`${this.file} has no entry ${name}.`);
    const where = `${this.file} (${name})`;
    if (entry.isEncrypted()) throw invalid(`${where} is encrypted; codehop cannot read it.`);
    const maxBytes = mbToBytes(this.limits.maxInflatedMb);
    // The declared size is checked first (a lying one is caught while streaming, by yauzl).
    if (this.inflated + entry.uncompressedSize > maxBytes) throw this.tooMuch(where);
    if (
      entry.uncompressedSize > RATIO_FLOOR &&
      entry.uncompressedSize / Math.max(entry.compressedSize, 1) > this.limits.maxRatio
    )
      throw this.ratio(where, entry.uncompressedSize / Math.max(entry.compressedSize, 1));
    let stream: NodeJS.ReadableStream & { destroy(err?: Error): void };
    try {
      stream = await this.zip.openReadStreamPromise(entry);
    } catch (err) {
      throw invalid(`${where} cannot be read (${(err as Error).message}).`, err);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    return new Promise<Buffer>((resolve, reject) => {
      let failed = false;
      const fail = (err: Error) => {
        if (failed) return;
        failed = true;
        stream.destroy();
        reject(err);
      };
      stream.on("data", (chunk: Buffer) => {
        size += chunk.length;
        this.inflated += chunk.length;
        if (this.inflated > maxBytes) return fail(this.tooMuch(where));
        if (size > RATIO_FLOOR && size / Math.max(entry.compressedSize, 1) > this.limits.maxRatio)
          return fail(this.ratio(where, size / Math.max(entry.compressedSize, 1)));
        chunks.push(chunk);
      });
      stream.on("error", (err: Error) =>
        fail(
          CodehopError.isInstance(err)
            ? err
            : invalid(`${where} is damaged (${err.message}).`, err),
        ),
      );
      stream.on("end", () => {
        if (!failed) resolve(Buffer.concat(chunks, size));
      });
    });
  }

  /** Entry `name` as UTF-8 text (a byte order mark dropped). */
  async text(name: string): Promise<string> {
    return (await this.read(name)).toString("utf8").replace(/^\uFEFF/, "");
  }

  /**
   * Inflates every entry within the limits, checking every XML part's depth and entity
   * declarations (`checkXml`): for archives a library then reads whole (SheetJS inflates every
   * entry), so that it meets only what passed here.
   */
  async checkAll(checkXml: (xml: string, where: string) => void): Promise<void> {
    for (const entry of this.entries) {
      if (entry.directory || entry.encrypted) continue;
      const data = await this.read(entry.name);
      if (/\.(xml|rels)$/i.test(entry.name))
        checkXml(data.toString("utf8"), `${this.file} (${entry.name})`);
    }
  }

  /** Releases the archive. */
  close(): void {
    this.zip.close();
  }

  private tooMuch(where: string) {
    return limitError(
      where,
      "maxInflatedMb",
      this.limits.maxInflatedMb,
      "the bytes inflated from the archive",
    );
  }

  private ratio(where: string, ratio: number) {
    return limitError(
      where,
      "maxRatio",
      this.limits.maxRatio,
      `its compression ratio (${Math.round(ratio)}:1, a ZIP bomb?)`,
    );
  }
}
