import type { SitePage } from "../../src/testing/web-test-server.ts";

/**
 * Pages only a real browser reads: one whose text its script fetches and writes, and one whose
 * article loads only after the cookie banner's "Accept all" is clicked (the server answers the
 * article only to a request carrying the consent cookie).
 */
export const jsPages: Record<string, SitePage> = {
  "/js-only": {
    body: `<!doctype html><html><head><title>Launch schedule</title></head><body><div id="app">Loading…</div><noscript>Please enable JavaScript to view this page.</noscript>
<script>
fetch("/api/schedule").then((r) => r.json()).then((data) => {
  document.getElementById("app").innerHTML = "<h1>" + data.title + "</h1>" + data.items.map((i) => "<p>" + i + "</p>").join("");
});
</script></body></html>`,
  },
  "/api/schedule": {
    body: JSON.stringify({
      title: "Launch schedule 2024",
      items: [
        "The first launch of the season is on 14 March from pad 39A.",
        "The second launch carries the weather satellite and is planned for 2 May.",
        "Every launch is streamed live; the schedule may change with the weather.",
      ],
    }),
    type: "application/json",
    unlisted: true,
  },
  "/consent": {
    body: `<!doctype html><html><head><title>Museum news</title>
<style>#banner{position:fixed;bottom:0;left:0;right:0;background:#eee;padding:1em;z-index:99}</style></head>
<body><div id="banner"><p>We use cookies to improve your experience.</p><button id="reject">Reject</button> <button id="accept">Accept all</button></div>
<main id="content"></main>
<script>
function load() {
  fetch("/api/museum-article", { credentials: "same-origin" }).then((r) => r.ok ? r.text() : "").then((html) => {
    document.getElementById("content").innerHTML = html;
  });
}
if (document.cookie.includes("consent=yes")) { document.getElementById("banner").remove(); load(); }
document.getElementById("accept").addEventListener("click", () => {
  document.cookie = "consent=yes; path=/";
  document.getElementById("banner").remove();
  load();
});
</script></body></html>`,
  },
};

/** The article behind the banner: only with the consent cookie (checked by the test server hook). */
export const MUSEUM_ARTICLE =
  "<h1>The museum reopens</h1><p>The museum reopens on 3 September after two years of renovation, with 40 new rooms and free entry on the first Sunday of each month.</p>";
