import { DOCUMENT_KIND_LABELS, kindOfName } from "./document-kinds.ts";
import { markdownTable } from "./format-sheet.ts";
import type { ArchiveEntry, FormatReader } from "./format-types.ts";
import { BoundedZip } from "./zip-archive.ts";

/**
 * ZIP archives, listed: one row per entry with its size and the document type codehop reads it as
 * (read one with the `member` option of extractDocument). Nothing is inflated to list it.
 */
export const readZip: FormatReader = async ({ name, bytes }, { limits }) => {
  const zip = await BoundedZip.open(bytes, name, limits);
  try {
    const entries: ArchiveEntry[] = zip.entries
      .filter((e) => !e.directory)
      .map((e) => {
        const kind = kindOfName(e.name);
        return { name: e.name, size: e.size, ...(kind ? { kind } : {}) };
      });
    const rows = [
      ["entry", "size", "type"],
      ...entries.map((e) => [
        e.name,
        sizeText(e.size),
        e.kind ? DOCUMENT_KIND_LABELS[e.kind] : "(not read by codehop)",
      ]),
    ];
    const count = `${entries.length} ${entries.length === 1 ? "file" : "files"}`;
    return {
      text: `## Archive: ${name} (${count})\n${entries.length ? markdownTable(rows) : "(no files)"}`,
      entries,
    };
  } finally {
    zip.close();
  }
};

/** A size in words ("512 B", "12.3 KB", "4.0 MB"). */
function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
