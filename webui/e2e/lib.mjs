// Shared by the browser tests: Debian's chromium driven by playwright-core (no browser download), screenshots
// at 360 and 1440 px with a horizontal-overflow check, axe-core with no serious or critical violations, and
// CSP violations collected from the console.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
export const BASE = process.env.BERTH_UI_BASE;
export const ARTIFACTS = process.env.WEBUI_ARTIFACTS || "webui-artifacts";
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
mkdirSync(ARTIFACTS, { recursive: true });

// One browser per process (launching one is the slow part); every openBrowser() gets a fresh context in it, as
// isolated as a fresh profile (its own cookies, storage and cache). The browser goes when its last context does.
let browser = null;
let contexts = 0;
export async function launch() {
  browser ??= chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
    ],
  });
  contexts++;
  const ctx = await (await browser).newContext({ viewport: { width: 1440, height: 900 }, baseURL: BASE });
  // count the page's fetches until their bodies have arrived: settled() waits for that instead of a quiet network
  await ctx.addInitScript(() => {
    const f = window.fetch;
    window.__inflight = 0;
    window.fetch = function (...args) {
      window.__inflight++;
      const done = () => window.__inflight--;
      const r = f.apply(this, args);
      r.then((res) => res.clone().arrayBuffer()).then(done, done);
      return r;
    };
  });
  return ctx;
}

export async function close(ctx) {
  await ctx.close();
  if (--contexts === 0) {
    const b = browser;
    browser = null;
    await (await b).close();
  }
}

/** A new page that records CSP violations and uncaught errors. */
export async function newPage(ctx) {
  const page = await ctx.newPage();
  page.problems = [];
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused to/.test(m.text())) page.problems.push("CSP: " + m.text());
  });
  page.on("pageerror", (e) => page.problems.push("page error: " + e.message));
  return page;
}

/** Wait until the document has loaded, none of its fetches is still arriving and no loading indicator is shown,
 * and that still holds after two frames and a task (when effects have run and may have started more requests). */
export async function settled(page) {
  const quiet = () => document.readyState === "complete" && window.__inflight === 0 && !document.querySelector(".state.loading");
  const deadline = Date.now() + 15000;
  for (;;) {
    await page.waitForFunction(quiet, null, { timeout: Math.max(1, deadline - Date.now()) });
    const still = await page.evaluate(async () => {
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      await new Promise((r) => setTimeout(r, 0));
      return document.readyState === "complete" && window.__inflight === 0 && !document.querySelector(".state.loading");
    });
    if (still) return;
  }
}

/** axe-core on the current page: no serious or critical violations. */
export async function axe(page, name) {
  // evaluate runs outside the page's CSP, unlike an injected <script>; once per document is enough
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE);
  const res = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({
      id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")),
    }));
  });
  assert.deepEqual(res, [], `${name}: axe violations\n${JSON.stringify(res, null, 1)}`);
}

/** Screenshots at 360 and 1440 px (light, and dark at 1440), asserting nothing overflows horizontally. */
export async function shots(page, name) {
  // only what changes from shot to shot (each change lays the page out again); pages start and end at 1440 light
  let width = page.viewportSize().width, current = "light";
  const show = async (w, scheme) => {
    if (w !== width) await page.setViewportSize({ width: (width = w), height: 900 });
    if (scheme !== current) await page.emulateMedia({ colorScheme: (current = scheme) });
  };
  for (const [w, scheme] of [[360, "light"], [1440, "light"], [1440, "dark"]]) {
    await show(w, scheme);
    // two frames: the new size and scheme are laid out and painted, resize observers (charts) have run
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const over = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    const file = join(ARTIFACTS, `${name}-${w}${scheme === "dark" ? "-dark" : ""}.png`);
    await page.screenshot({ path: file, fullPage: true });
    assert.ok(over <= 0, `${name} overflows horizontally by ${over}px at ${w}px (${file})`);
  }
  await show(1440, "light");
}

/** Every page check in one: settled, no CSP/JS problems, axe, screenshots. */
export async function checkPage(page, name, { settle = true } = {}) {
  if (settle) await settled(page);
  await axe(page, name);
  await shots(page, name);
  assert.deepEqual(page.problems, [], `${name}: ${page.problems.join("\n")}`);
}

export async function signIn(page, user, password, expectOk = true) {
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  if (expectOk) await page.waitForFunction(() => !location.pathname.startsWith("/login"));
}

/** A fresh browser with one page, signed in as `user` when given. */
export async function openBrowser(user, password) {
  const ctx = await launch();
  const page = await newPage(ctx);
  if (user) {
    await page.goto(BASE + "/login");
    await signIn(page, user, password);
  }
  return { ctx, page };
}
