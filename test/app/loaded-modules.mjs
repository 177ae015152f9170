// `node --import ./test/app/loaded-modules.mjs ...`: when the process exits, the file named by
// CODEHOP_TEST_MODULE_LIST holds one line per module it loaded (ES modules as file: URLs, from a
// loader hook; CommonJS ones as paths, from require's cache). Used by test/app/cli-modules.test.ts.
import { appendFileSync } from "node:fs";
import { createRequire, register } from "node:module";

const out = process.env.CODEHOP_TEST_MODULE_LIST;
if (out) {
  register(new URL("./loaded-modules-hooks.mjs", import.meta.url), { data: { out } });
  const require = createRequire(import.meta.url);
  process.on("exit", () => {
    appendFileSync(
      out,
      Object.keys(require.cache)
        .map((file) => `${file}\n`)
        .join(""),
    );
  });
}
