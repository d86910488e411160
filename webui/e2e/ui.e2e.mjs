// The web UI in real Chromium against a real berthd + PostgreSQL (started by tests/integration/test_webui.py,
// which passes what it set up in BERTH_UI_FIXTURE). Steps run in order and share one browser.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { BASE, checkPage, close, openBrowser, settled, signIn } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
const psql = (sql) => execFileSync("psql", [...F.psql, "-Atq", "-c", sql], { encoding: "utf8" }).trim();
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser()));
after(async () => close(ctx));

test("the shell is served with a strict CSP and hashed, immutable assets", async () => {
  const r = await page.goto(BASE + "/projects");
  const h = r.headers();
  assert.match(h["content-security-policy"], /script-src 'self'/);
  assert.doesNotMatch(h["content-security-policy"], /unsafe-inline/);
  assert.equal(h["x-frame-options"], "DENY");
  assert.equal(h["cache-control"], "no-cache");
  const js = await page.evaluate(() => document.querySelector("script[type=module]").getAttribute("src"));
  assert.match(js, /^\/assets\/main-[A-Z0-9]+\.js$/);
  const a = await page.request.get(BASE + js, { headers: { "Accept-Encoding": "gzip" } });
  assert.match(a.headers()["cache-control"], /immutable/);
  assert.equal(a.headers()["content-encoding"], "gzip");
});

test("anonymous visitors see public projects read-only", async () => {
  await page.goto(BASE + "/projects");
  await settled(page);
  await page.getByRole("link", { name: F.public_project }).waitFor();
  assert.equal(await page.getByRole("link", { name: F.private_project }).count(), 0);
  assert.equal(await page.getByRole("button", { name: "New project" }).count(), 0);
  await checkPage(page, "projects-anonymous");
  // a public repository and artifact: readable, with no controls that change anything
  await page.goto(BASE + `/projects/${F.public_project}/repositories/hpc%2Fapp`);
  await settled(page);
  await page.getByText("linux/amd64/v4").waitFor();
  assert.equal(await page.getByRole("button", { name: /Delete/ }).count(), 0);
  await page.goto(BASE + `/projects/${F.public_project}/repositories/hpc%2Fapp/artifacts/${F.isa_index}`);
  await page.getByRole("heading", { name: "CPU-ISA variants" }).waitFor();
  await settled(page);
  assert.equal(await page.getByRole("button", { name: /Add tag|Remove tag/ }).count(), 0);
  await checkPage(page, "artifact-anonymous");
});

test("sign in: a wrong password says so; the right one returns to the page the user came from", async () => {
  await page.goto(BASE + `/login?next=${encodeURIComponent("/projects/" + F.private_project)}`);
  await settled(page);
  await page.getByText("Your Berth account.").waitFor(); // no LDAP here: systeminfo's auth_mode is db_auth
  await signIn(page, "admin", "wrong-password", false);
  await page.getByRole("alert").filter({ hasText: "Wrong username or password" }).waitFor();
  await checkPage(page, "login-error");
  await signIn(page, "admin", F.admin_password);
  await page.waitForURL(BASE + "/projects/" + F.private_project);
  await page.getByRole("heading", { name: F.private_project }).waitFor();
});

test("repeated wrong passwords lock the account for a while, and the page says for how long", async () => {
  await page.goto(BASE + "/login");
  await settled(page);
  let text = "";
  for (let i = 0; i < 8 && !/locked/.test(text); i++) {
    await signIn(page, "lockme", "not-the-password", false);
    await page.locator(".form-error").waitFor();
    await page.waitForFunction(() => !document.querySelector("button[type=submit]")?.disabled);
    text = await page.locator(".form-error").textContent();
  }
  assert.match(text, /Too many failed attempts: this account is locked for now\. Try again in \d+ s\./);
  await checkPage(page, "login-locked");
});

test("LDAP unavailable: a directory user is told so, not that the password is wrong", async () => {
  await page.goto(`http://${F.ldap_down}/login`);
  await settled(page);
  await signIn(page, "ldap-person", "whatever-1A", false);
  await page.getByRole("alert").filter({ hasText: "The sign-in service (LDAP) is unavailable" }).waitFor();
  await checkPage(page, "login-ldap-down");
});

test("keyboard only: sign-in form reachable with Tab and submitted with Enter", async () => {
  await page.goto(BASE + "/login?next=/projects/" + F.public_project);
  await settled(page);
  for (let i = 0; i < 12; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate(() => document.activeElement?.id === "login-user")) break;
  }
  assert.equal(await page.evaluate(() => document.activeElement?.id), "login-user");
  await page.keyboard.type("admin");
  await page.keyboard.press("Tab");
  await page.keyboard.type(F.admin_password);
  await page.keyboard.press("Enter");
  await page.waitForURL(BASE + "/projects/" + F.public_project);
});

test("create a project", async () => {
  await page.goto(BASE + "/projects");
  await settled(page);
  await page.getByRole("button", { name: "New project" }).click();
  await page.getByLabel("Name").fill("made-in-ui");
  await page.getByLabel("ISA policy").selectOption("warn");
  await checkPage(page, "project-create-dialog");
  await page.getByRole("dialog").getByRole("button", { name: "Create", exact: true }).click();
  await page.waitForURL(BASE + "/projects/made-in-ui");
  await page.getByText("ISA: warn").waitFor();
  const r = JSON.parse(psql("SELECT json_build_object('isa', isa_policy, 'public', public) FROM projects WHERE name = 'made-in-ui'"));
  assert.deepEqual(r, { isa: "warn", public: false });
  await page.goto(BASE + "/projects?q=made");
  await settled(page);
  await page.getByRole("link", { name: "made-in-ui" }).waitFor();
  await checkPage(page, "projects-admin");
  await page.goto(BASE + "/projects");
  await settled(page);
  await page.getByLabel("Access").selectOption("true"); // public only
  await page.waitForURL(/public=true/);
  await page.getByRole("link", { name: F.private_project }).waitFor({ state: "detached" });
  await page.getByRole("link", { name: F.public_project }).waitFor();
});

test("delete: Harbor's pre-check refuses a project with repositories; an empty one goes", async () => {
  await page.goto(BASE + `/projects/${F.private_project}/settings`);
  await settled(page);
  await page.getByRole("button", { name: "Delete project" }).click();
  await page.getByRole("alert").filter({ hasText: /still has \d+ repositories/ }).waitFor();
  await page.goto(BASE + "/projects/made-in-ui/settings");
  await settled(page);
  page.once("dialog", (d) => d.accept());
  await page.getByRole("button", { name: "Delete project" }).click();
  await page.waitForURL(BASE + "/projects");
  assert.equal(psql("SELECT count(*) FROM projects WHERE name = 'made-in-ui'"), "0");
});

test("a change without the CSRF header is refused", async () => {
  const st = await page.evaluate(async () => {
    const r = await fetch("/api/v2.0/projects", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ project_name: "csrf-less" }),
    });
    return r.status;
  });
  assert.equal(st, 403);
  assert.equal(psql("SELECT count(*) FROM projects WHERE name = 'csrf-less'"), "0");
});

test("an expired session brings the sign-in back over the page, which carries on afterwards", async () => {
  await page.goto(BASE + "/projects/" + F.private_project);
  await settled(page);
  psql("DELETE FROM sessions");
  await page.getByRole("link", { name: "Members" }).click();
  const dlg = page.getByRole("dialog");
  await dlg.getByText("sign in again").waitFor();
  await checkPage(page, "session-expired", { settle: false }); // the page underneath waits for the session
  await dlg.getByLabel("Username").fill("admin");
  await dlg.getByLabel("Password").fill(F.admin_password);
  await dlg.getByRole("button", { name: "Sign in" }).click();
  await dlg.waitFor({ state: "hidden" });
  await page.getByRole("table", { name: "Members" }).waitFor();
  assert.equal(new URL(page.url()).pathname, `/projects/${F.private_project}/members`);
});

test("sign out", async () => {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login/);
  assert.equal(psql("SELECT count(*) FROM sessions"), "0");
});
