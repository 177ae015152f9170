import type { ArchivedSnapshot, SitePage } from "../../src/testing/web-test-server.ts";

/** A small website for the web tests: an article long enough for several viewports, a table, ... */
export function testSite(): { pages: Record<string, SitePage>; snapshots: ArchivedSnapshot[] } {
  const paragraphs = Array.from(
    { length: 40 },
    (_, i) =>
      `<p>Paragraph ${i + 1} of the history of the Eiffel Tower. Gustave Eiffel's company built it between 1887 and 1889 for the World's Fair, and paragraph ${i + 1} says so at length for the viewport tests.</p>`,
  ).join("\n");
  return {
    pages: {
      "/": {
        body: `<!doctype html><html><head><title>Local site</title></head><body><nav><a href="/">Home</a></nav><h1>Welcome</h1><p>Read <a href="/eiffel">the Eiffel Tower article</a> or <a href="/plywood">the plywood table</a>.</p></body></html>`,
      },
      "/eiffel": {
        body: `<!doctype html><html><head><title>Eiffel Tower - Local Encyclopedia</title></head><body><nav><a href="/">Home</a> | <a href="/plywood">Plywood</a></nav><article><h1>Eiffel Tower</h1>${paragraphs}<h2>Height</h2><p>The tower is 330 metres tall since the 2022 antenna. Its original height was 312 metres. See <a href="/plywood">materials</a>.</p><img src="/tower.png" alt="the tower at night"></article><footer>Local Encyclopedia</footer></body></html>`,
      },
      "/plywood": {
        body: `<!doctype html><html><head><title>Plywood densities</title></head><body><h1>Plywood densities</h1><table><thead><tr><th>Material</th><th>Density (kg/m³)</th></tr></thead><tbody><tr><td>Birch plywood</td><td>680</td></tr><tr><td>Pine plywood</td><td>520</td></tr></tbody></table></body></html>`,
      },
      "/notes.txt": {
        body: "Plain notes: the answer is 42.\n",
        type: "text/plain; charset=utf-8",
        unlisted: true,
      },
      "/data.json": {
        body: '{"name":"tower","height":330}',
        type: "application/json",
        unlisted: true,
      },
      "/empty": {
        body: "<!doctype html><html><head><title>Empty</title></head><body></body></html>",
        unlisted: true,
      },
      "/photo.png": {
        body: new Uint8Array([
          0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52,
        ]),
        type: "image/png",
        unlisted: true,
      },
      "/gone": { body: "<h1>Gone</h1>", status: 410, unlisted: true },
    },
    snapshots: [
      {
        url: "http://tower.example/prices",
        timestamp: "20150301120000",
        html: "<html><head><title>Tower prices 2015</title></head><body><h1>Prices</h1><p>A ticket to the top cost 15 euros in 2015.</p></body></html>",
      },
      {
        url: "http://tower.example/prices",
        timestamp: "20200615080000",
        html: "<html><head><title>Tower prices 2020</title></head><body><h1>Prices</h1><p>A ticket to the top cost 25.90 euros in 2020.</p></body></html>",
      },
    ],
  };
}
