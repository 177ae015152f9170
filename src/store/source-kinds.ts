import { CodehopError, ErrorCodes } from "../errors.ts";
import type { SourceKind } from "./types.ts";

/** The knowledge sources a run may search, by the names `--source` and CODEHOP_SOURCES take. */
export const SOURCE_KINDS: readonly SourceKind[] = ["web", "wikipedia", "corpus"];

/**
 * A source choice ("web", "corpus", "web,corpus" ...) as a list of kinds, in the order given,
 * duplicates dropped. CODEHOP_CONFIG_INVALID naming `where` for an empty list or an unknown name.
 */
export function parseSources(value: string | readonly string[], where = "--source"): SourceKind[] {
  const names = (typeof value === "string" ? value.split(/[\s,]+/) : [...value])
    .map((n) => n.trim().toLowerCase())
    .filter(Boolean);
  const unknown = names.filter((n) => !(SOURCE_KINDS as readonly string[]).includes(n));
  if (!names.length || unknown.length) {
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      `${where} takes ${SOURCE_KINDS.join(", ")} or a comma list of them (e.g. web,corpus)${unknown.length ? `, not "${unknown.join('", "')}"` : ", not nothing"}.`,
    );
  }
  return [...new Set(names)] as SourceKind[];
}
