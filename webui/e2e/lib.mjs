// Shared by the browser tests: Debian's chromium driven by playwright-core (no browser download), screenshots
// at 360 and 1440 px with a horizontal-overflow check, axe-core with no serious or critical violations, and
// CSP violations collected from the console.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
export const BASE = process.env.BERTH_UI_BASE;
export const ARTIFACTS = process.env.WEBUI_ARTIFACTS || "webui-artifacts";
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
mkdirSync(ARTIFACTS, { recursive: true });

const profiles = new Map(); // context -> its profile directory: two browsers may be open at once
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "berth-chromium-"));
  // launchPersistentContext gives a fresh --user-data-dir we own and remove
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
    ],
    viewport: { width: 1440, height: 900 },
    baseURL: BASE,
  });
  profiles.set(ctx, profile);
  return ctx;
}

export async function close(ctx) {
  await ctx.close();
  rmSync(profiles.get(ctx), { recursive: true, force: true });
  profiles.delete(ctx);
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

/** Wait until no loading indicator is shown. */
export async function settled(page) {
  await page.waitForLoadState("networkidle");
  await page.waitForFunction(() => !document.querySelector(".state.loading"), null, { timeout: 15000 });
}

/** axe-core on the current page: no serious or critical violations. */
export async function axe(page, name) {
  await page.evaluate(AXE); // evaluate runs outside the page's CSP, unlike an injected <script>
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
  for (const [w, scheme] of [[360, "light"], [1440, "light"], [1440, "dark"]]) {
    await page.setViewportSize({ width: w, height: 900 });
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(50);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    const file = join(ARTIFACTS, `${name}-${w}${scheme === "dark" ? "-dark" : ""}.png`);
    await page.screenshot({ path: file, fullPage: true });
    assert.ok(over <= 0, `${name} overflows horizontally by ${over}px at ${w}px (${file})`);
  }
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.emulateMedia({ colorScheme: "light" });
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
