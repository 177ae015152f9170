import { existsSync } from "node:fs";
import { createAutoLoader, createTextLoader, type PageLoader } from "./browser.ts";
import { createChromiumLoader } from "./chromium.ts";
import type { WebSettings } from "./settings.ts";

/**
 * The page loader `settings.browser` chooses: `text` (HTTP + readable content), `chromium` (the
 * real browser for every page) or `auto` (text, and the real browser for pages that need
 * JavaScript — only when its executable exists, else the text browser's page stands).
 */
export function createPageLoader(settings: WebSettings): PageLoader {
  switch (settings.browser) {
    case "text":
      return createTextLoader(settings);
    case "chromium":
      return createChromiumLoader(settings);
    case "auto":
      return createAutoLoader(createTextLoader(settings), () =>
        existsSync(settings.chromiumPath) ? createChromiumLoader(settings) : undefined,
      );
  }
}
