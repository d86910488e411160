// A benchmark, not a test (docs/benchmarks.md): first paint of a cold load, a project with 10,000
// repositories (first page, next page, sort, search) and an artifact with 1,000 tags, in Debian's chromium.
// Started by tests/integration/bench_webui.py, which seeds the data; prints one JSON object.
import { BASE, openBrowser, close } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
const REPS = Number(process.env.REPS || 5);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const out = {};
// each step is timed from the action to the moment its rows are visible (page.goto includes loading the app)

async function timed(page, action, ready) {
  const t0 = Date.now();
  await action();
  await ready();
  return Date.now() - t0;
}

// cold first load: a fresh profile each time (empty cache), anonymous, the projects list
const fp = [], fcp = [], bytes = [], ready = [];
for (let i = 0; i < REPS; i++) {
  const { ctx, page } = await openBrowser();
  let transferred = 0;
  page.on("response", async (r) => {
    const len = Number((await r.allHeaders())["content-length"] || 0);
    transferred += len;
  });
  const t0 = Date.now();
  await page.goto(BASE + "/projects");
  await page.locator("table").waitFor();
  ready.push(Date.now() - t0);
  const paint = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType("paint").map((e) => [e.name, e.startTime])));
  fp.push(paint["first-paint"]);
  fcp.push(paint["first-contentful-paint"]);
  bytes.push(transferred);
  await close(ctx);
}
out.cold_load = { first_paint_ms: median(fp), first_contentful_paint_ms: median(fcp), projects_table_ms: median(ready), bytes_on_wire: median(bytes) };

const { ctx, page } = await openBrowser("admin", F.admin_password);
const rows = () => page.locator("tbody tr").first().waitFor();
const proj = `${BASE}/projects/${F.big_project}/repositories`;
const m = { first_page: [], next_page: [], sort_by_pulls: [], search: [], page_100_of_100: [] };
for (let i = 0; i < REPS; i++) {
  m.first_page.push(await timed(page, () => page.goto(proj), rows));
  m.next_page.push(await timed(page, () => page.getByRole("button", { name: "Next ›" }).click(), () => page.getByText("Page 2 of").waitFor()));
  m.sort_by_pulls.push(await timed(page, () => page.getByRole("button", { name: "Pulls" }).click(), () => page.waitForFunction(() => !document.querySelector("table[aria-busy=true]") && location.search.includes("sort=pull_count"))));
  m.search.push(await timed(page, () => page.goto(proj + "?q=r07777"), async () => { await page.getByText("1 total").waitFor(); }));
  m.page_100_of_100.push(await timed(page, () => page.goto(proj + "?size=100&page=100&sort=-update_time"), async () => { await page.getByText("Page 100 of 100").waitFor(); }));
}
out.project_10000_repos = Object.fromEntries(Object.entries(m).map(([k, v]) => [k + "_ms", median(v)]));

const art = `${BASE}/projects/${F.big_project}/repositories/tagged/artifacts/${F.tagged_digest}`;
const a = { artifact_page: [], tags_last_page: [] };
for (let i = 0; i < REPS; i++) {
  a.artifact_page.push(await timed(page, () => page.goto(art), () => page.getByRole("table", { name: "Tags" }).waitFor()));
  a.tags_last_page.push(await timed(page, () => page.goto(art + "?size=100&page=10"), () => page.getByText("Page 10 of 10").waitFor()));
}
out.artifact_1000_tags = Object.fromEntries(Object.entries(a).map(([k, v]) => [k + "_ms", median(v)]));
await close(ctx);
console.log(JSON.stringify(out, null, 1));
