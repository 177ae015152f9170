import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { renderReportHtml } from "../../src/apps/research/report/html.ts";

// The research report's HTML page in a real headless browser (when one is installed): it renders
// offline from file://, every [n] is a link to its reference, and what a model may have written as
// HTML or as a javascript: link stays inert.
const browser = ["chromium", "chromium-browser", "google-chrome"].find(
  (b) => spawnSync("which", [b]).status === 0,
);
if (!browser && process.env.CODEHOP_CI === "1") {
  throw new Error("CODEHOP_CI=1 but no headless browser is installed (apt-get install chromium)");
}

const markdown = `# The Eiffel Tower

Work on the foundations began on 28 January 1887 [1]. It was 300 metres tall [2].

## Construction

The legs met in 1888 [1]. <script>document.title = "pwned"</script> <img src=x onerror="document.title='pwned'"> [click](javascript:alert(1))

## References

1. **Eiffel Tower**, section "Construction" — passage 3 (corpus)
2. **Eiffel Tower**, section "Height" — passage 4 (corpus)

---

_Verification: 3 sentence(s) checked against the passages they cite: 3 supported, 0 corrected, 0 removed as unsupported._
`;
const citation = (n: number, section: string, text: string) => ({
  n,
  passage_id: String(n + 2),
  doc_id: "1",
  title: "Eiffel Tower",
  section,
  source: "corpus",
  text,
});

describe.skipIf(!browser)("research report HTML in a headless browser", () => {
  it("renders offline with citation links to the references, and model-written HTML stays text", () => {
    const file = join(mkdtempSync(join(tmpdir(), "codehop-research-html-")), "report.html");
    writeFileSync(
      file,
      renderReportHtml({
        markdown,
        citations: [
          citation(1, "Construction", "Work on the foundations began on 28 January 1887."),
          citation(2, "Height", "At completion the tower was 300 metres tall."),
        ],
      }),
    );
    const dom = execFileSync(
      browser!,
      [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--virtual-time-budget=2000",
        "--dump-dom",
        pathToFileURL(file).href,
      ],
      { encoding: "utf8", timeout: 60_000, stdio: ["ignore", "pipe", "ignore"] },
    );
    expect(dom).toContain("<title>The Eiffel Tower</title>");
    expect((dom.match(/<a class="cite" href="#ref-1">/g) ?? []).length).toBe(2);
    expect(dom).toContain('<a class="cite" href="#ref-2">');
    expect(dom).toMatch(/<li id="ref-1"><strong>Eiffel Tower<\/strong>, section “Construction”/);
    expect(dom).toContain("Work on the foundations began on 28 January 1887.</p></details>");
    // The model's <script> and <img onerror> are text, not elements; the javascript: link is no link.
    expect(dom).not.toContain("pwned</title>");
    expect(dom).toContain("&lt;script&gt;");
    expect(dom).not.toMatch(/<img|href="javascript/i);
    expect(dom).toContain("Verification: 3 sentence(s) checked");
  }, 90_000);
});
