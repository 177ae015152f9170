import { InvalidArgumentError } from "commander";

/**
 * A commander parser for a whole-number option between `min` and `max`: anything else ("abc",
 * "1.5", "-3", "") is a usage error (`codehop: option '--limit <n>' argument 'abc' is invalid.
 * --limit must be a whole number from 1 ...`, exit 2) instead of a silent default.
 */
export function wholeNumberOption(
  name: string,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): (value: string) => number {
  return (value: string): number => {
    const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(
        `${name} must be a whole number${max === Number.MAX_SAFE_INTEGER ? ` of at least ${min}` : ` from ${min} to ${max}`}.`,
      );
    return n;
  };
}
