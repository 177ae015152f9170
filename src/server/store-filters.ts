import type { AuthFilters } from "./auth.ts";

/**
 * An authorization handler's filters as SQL conditions on a JSONB column (`metadata`), with their
 * values appended to `args`: `{ owner: "ada" }` and `{ owner: { $eq: "ada" } }` match that value,
 * `{ tags: { $contains: "x" } }` a list holding it. Applied in the query itself, so a page of
 * results is never filtered after the fact.
 */
export function filterSql(
  filters: AuthFilters | undefined,
  args: unknown[],
  column = "metadata",
): string[] {
  const where: string[] = [];
  const equals = (key: string, value: unknown) => {
    if (value === null || typeof value !== "object") {
      // Containment of a scalar is equality, and uses the GIN index.
      args.push(JSON.stringify({ [key]: value }));
      where.push(`${column} @> $${args.length}::jsonb`);
    } else {
      args.push(key, JSON.stringify(value));
      where.push(`(${column} -> $${args.length - 1}) = $${args.length}::jsonb`);
    }
  };
  for (const [key, condition] of Object.entries(filters ?? {})) {
    if (condition && typeof condition === "object" && !Array.isArray(condition)) {
      const ops = Object.keys(condition);
      const c = condition as { $eq?: unknown; $contains?: unknown };
      if (!ops.length || ops.some((op) => op !== "$eq" && op !== "$contains"))
        throw new Error(
          `Unsupported auth filter on "${key}": use a value, { $eq } or { $contains }.`,
        );
      if ("$eq" in c) equals(key, c.$eq);
      if ("$contains" in c) {
        args.push(key, JSON.stringify(Array.isArray(c.$contains) ? c.$contains : [c.$contains]));
        where.push(`(${column} -> $${args.length - 1}) @> $${args.length}::jsonb`);
      }
    } else equals(key, condition);
  }
  return where;
}

/** `AND`-joined conditions, or `TRUE`. */
export const all = (conditions: string[]) =>
  conditions.length ? conditions.join(" AND ") : "TRUE";
