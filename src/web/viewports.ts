/**
 * A page's text cut into viewports of about `size` characters, as the GAIA submission's text
 * browser showed pages: each viewport ends at a line break (else a space) in its last fifth, so
 * no word — and, where lines allow, no line — is cut in two. Every character is in exactly one
 * viewport; an empty text has one empty viewport.
 */
export function splitViewports(text: string, size: number): Array<[start: number, end: number]> {
  const bounds: Array<[number, number]> = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + size, text.length);
    if (end < text.length) {
      const floor = start + Math.floor(size * 0.8);
      const newline = text.lastIndexOf("\n", end);
      const space = text.lastIndexOf(" ", end);
      if (newline > floor) end = newline + 1;
      else if (space > floor) end = space + 1;
    }
    bounds.push([start, end]);
    start = end;
  }
  if (!bounds.length) bounds.push([0, 0]);
  return bounds;
}

/** The viewport (0-based) that holds character `offset`. */
export function viewportAt(bounds: ReadonlyArray<[number, number]>, offset: number): number {
  for (let i = 0; i < bounds.length; i++) if (offset < bounds[i][1]) return i;
  return bounds.length - 1;
}

/**
 * Where `query` occurs in `text`: case-insensitive, any run of whitespace in the query matching any
 * run in the text, `*` matching any characters within a line (the GAIA browser's find); the
 * offsets of every match, in order.
 */
export function findAll(text: string, query: string): number[] {
  const words = query.trim().split(/\s+/).filter(Boolean);
  if (!words.length) return [];
  const pattern = words
    .map((w) =>
      w
        .split("*")
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
        .join("[^\\n]*?"),
    )
    .join("\\s+");
  const re = new RegExp(pattern, "giu");
  const out: number[] = [];
  for (const m of text.matchAll(re)) {
    out.push(m.index);
    if (out.length >= 10_000) break;
  }
  return out;
}
