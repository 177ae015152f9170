import pc from "picocolors";
import { colorWanted } from "./env.ts";

/** picocolors' styles, on or off. */
export type Colors = ReturnType<typeof pc.createColors>;

/**
 * The colours for output written to `stream` (see {@link colorWanted}: FORCE_COLOR, NO_COLOR,
 * TTY): every style is the identity when colour is off.
 */
export function colorsFor(stream: { isTTY?: boolean }): Colors {
  return pc.createColors(colorWanted(stream));
}
