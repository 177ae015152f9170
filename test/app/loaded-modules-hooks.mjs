// Loader hooks of test/app/loaded-modules.mjs: every file module loaded, appended to a file as it
// loads (synchronously: the list is complete whenever the process ends).
import { appendFileSync } from "node:fs";

let out;

export function initialize(data) {
  out = data.out;
}

export async function load(url, context, next) {
  const result = await next(url, context);
  if (url.startsWith("file:")) appendFileSync(out, `${url}\n`);
  return result;
}
