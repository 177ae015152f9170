/**
 * The newest ECMAScript edition whose syntax this Node's V8 accepts, for acorn: guest code is
 * parsed with it, so syntax acorn knows but the child cannot compile (block `using` on Node 20,
 * duplicate named groups, ...) is a syntax error with a position, found before the action runs.
 * The child runs the same Node binary as the host, so the host probes itself (compile only).
 */
import { Script } from "node:vm";

/** One probe per edition: source that compiles only on engines that have that edition's syntax. */
const PROBES: readonly [edition: 2022 | 2023 | 2024 | 2025 | 2026, source: string][] = [
  [2022, "class A { static {} #x; m(o) { return #x in o } }; /(?<n>a)/d"],
  [2023, "#!/hashbang\n;"],
  [2024, "/[\\p{L}--[a-z]]/v"],
  [2025, "/(?<a>x)|(?<a>y)/; /(?i:a)/"],
  [2026, "{ using x = null; }"],
];

function compiles(source: string): boolean {
  try {
    new Script(source);
    return true;
  } catch {
    return false;
  }
}

/** The edition acorn parses guest code with (2021 when even ES2022's syntax is missing). */
export const GUEST_ECMA_VERSION: 2021 | 2022 | 2023 | 2024 | 2025 | 2026 = (() => {
  let edition: 2021 | 2022 | 2023 | 2024 | 2025 | 2026 = 2021;
  for (const [year, source] of PROBES) {
    if (!compiles(source)) break;
    edition = year;
  }
  return edition;
})();
