// Administration as a system admin: users, registries (a second Berth site started by the test), a replication
// policy run to Succeed while the execution page polls, the audit log with filters, LDAP/system, garbage collection
// (dry run, run, log, schedule), statistics.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BASE, checkPage, close, openBrowser, settled, signIn } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser("admin", F.admin_password)));
after(async () => close(ctx));

test("users: create, make admin, reset password", async () => {
  await page.goto(BASE + "/admin/users");
  await settled(page);
  await page.getByRole("button", { name: "New user" }).click();
  const d = page.getByRole("dialog");
  await d.getByLabel("Username").fill("made-by-ui");
  await d.getByLabel("Email").fill("ui@example.org");
  await d.getByLabel(/^Password/).fill(F.user_password);
  await d.getByRole("button", { name: "Create", exact: true }).click();
  await page.getByRole("cell", { name: "made-by-ui", exact: true }).waitFor();
  await page.getByLabel("made-by-ui is a system administrator").click(); // checked once the server has it
  await page.waitForFunction(() => document.querySelector('[aria-label="made-by-ui is a system administrator"]')?.checked);
  // berthd's own replication user: marked, and nothing on its row can change or delete it (the API refuses too)
  const internal = page.locator("tbody tr", { hasText: "berth-replication" });
  await internal.getByText("internal", { exact: true }).waitFor();
  await internal.getByText("Used by replication").waitFor();
  assert.equal(await internal.getByRole("button").count(), 0);
  assert.ok(await internal.getByLabel("berth-replication is a system administrator").isDisabled());
  assert.equal(await page.locator("tbody tr", { hasText: "made-by-ui" }).getByRole("button", { name: "Delete" }).count(), 1);
  await checkPage(page, "admin-users");
});

test("registries: add the second site and test it", async () => {
  await page.goto(BASE + "/admin/registries");
  await settled(page);
  await page.getByRole("button", { name: "New registry" }).click();
  const d = page.getByRole("dialog");
  await d.getByLabel("Name", { exact: true }).fill("site-b");
  await d.getByLabel("URL").fill("http://" + F.site_b);
  await d.getByLabel("Username (empty: anonymous)").fill("admin");
  await d.getByLabel(/^Password or token/).fill(F.admin_password);
  await d.getByRole("button", { name: "Test connection" }).click();
  await d.getByText("Reachable with these settings.").waitFor();
  await checkPage(page, "admin-registry-form");
  await d.getByRole("button", { name: "Create", exact: true }).click();
  await page.getByRole("cell", { name: "site-b" }).waitFor();
  await page.getByRole("button", { name: "Test" }).click();
  await page.getByText("site-b: reachable.").waitFor();
  await checkPage(page, "admin-registries");
});

test("replication: a policy with filters and a destination namespace, run now, watched to Succeed", async () => {
  await page.goto(BASE + "/admin/replication");
  await settled(page);
  await page.getByRole("button", { name: "New policy" }).click();
  const d = page.getByRole("dialog");
  await d.getByLabel("Name", { exact: true }).fill("to-b");
  await d.getByLabel("Registry", { exact: true }).selectOption({ label: `site-b (http://${F.site_b})` });
  await d.getByLabel(/^Repository filter/).fill("open/tools/**");
  await d.getByLabel(/^Destination namespace/).fill("mirror");
  await d.getByLabel(/^Bandwidth limit/).fill("64");
  await checkPage(page, "admin-policy-form");
  await d.getByRole("button", { name: "Create", exact: true }).click();
  await page.getByRole("cell", { name: "to-b" }).waitFor();
  await page.getByRole("button", { name: "Run now" }).click();
  await page.getByRole("link", { name: /^#\d+$/ }).first().click();
  await page.getByRole("heading", { name: /^Execution #\d+/ }).waitFor();
  // 512 KiB at 64 KiB/s: the page shows the execution running, then polls it to the end
  await page.locator("h2 .badge", { hasText: "InProgress" }).waitFor();
  await page.getByText("running (refreshing)").waitFor();
  await checkPage(page, "admin-execution-running", { settle: false });
  await page.locator("h2 .badge", { hasText: "Succeed" }).waitFor({ timeout: 60000 });
  await page.getByRole("table", { name: "Tasks" }).getByText(/mirror\/tools\/hello/).first().waitFor();
  await checkPage(page, "admin-execution");
  await page.getByRole("button", { name: "Log" }).first().click();
  await page.getByRole("dialog").locator("pre").waitFor();
  await page.getByRole("dialog").getByRole("button", { name: "Close" }).click();
});

test("registries and policies: edit and delete; event-based and scheduled triggers", async () => {
  const apiGet = async (path) => (await page.request.get(BASE + "/api/v2.0" + path)).json();
  page.on("dialog", (d) => d.accept()); // the confirm() of every delete below
  // a second registry, renamed through Edit (its password stays: "empty: unchanged")
  await page.goto(BASE + "/admin/registries");
  await settled(page);
  await page.getByRole("button", { name: "New registry" }).click();
  let d = page.getByRole("dialog");
  await d.getByLabel("Name", { exact: true }).fill("site-c");
  await d.getByLabel("URL").fill("http://" + F.site_b);
  await d.getByLabel("Username (empty: anonymous)").fill("admin");
  await d.getByLabel(/^Password or token/).fill(F.admin_password);
  await d.getByRole("button", { name: "Create", exact: true }).click();
  const rowC = page.locator("tbody tr", { hasText: "site-c" });
  await rowC.getByRole("button", { name: "Edit" }).click();
  assert.equal(await d.getByLabel("Name", { exact: true }).inputValue(), "site-c");
  await d.getByLabel("Name", { exact: true }).fill("site-c2");
  await checkPage(page, "admin-registry-edit");
  await d.getByRole("button", { name: "Save" }).click();
  await page.getByRole("cell", { name: "site-c2", exact: true }).waitFor();
  const reg = (await apiGet("/registries")).find((r) => r.name === "site-c2");
  assert.equal(reg.credential.access_key, "admin");
  await page.locator("tbody tr", { hasText: "site-c2" }).getByRole("button", { name: "Test" }).click();
  await page.getByText("site-c2: reachable.").waitFor(); // the kept password still works

  // a policy on it, made scheduled: an invalid cron is explained and not sent; a preset is
  await page.goto(BASE + "/admin/replication");
  await settled(page);
  await page.getByRole("button", { name: "New policy" }).click();
  d = page.getByRole("dialog");
  await d.getByLabel("Name", { exact: true }).fill("nightly");
  await d.getByLabel("Registry", { exact: true }).selectOption({ label: `site-c2 (http://${F.site_b})` });
  await d.getByLabel(/^Repository filter/).fill("open/**");
  await d.getByLabel("On a schedule").check();
  assert.equal(await d.getByLabel(/^Cron:/).inputValue(), "0 0 0 * * *"); // the default preset
  await d.getByText("Runs every day at 00:00.").waitFor();
  await d.getByLabel(/^Cron:/).fill("0 0 2 * * MON");
  await d.getByText(/Not a schedule Berth runs: the day of week field "MON"/).waitFor();
  await d.getByRole("button", { name: "Create", exact: true }).click();
  assert.equal(await d.isVisible(), true); // nothing was sent
  await d.getByLabel("Schedule", { exact: true }).selectOption({ label: "every Sunday at 02:00" });
  await d.getByText("Runs every Sunday at 02:00.").waitFor();
  await checkPage(page, "admin-policy-scheduled");
  await d.getByRole("button", { name: "Create", exact: true }).click();
  const rowP = page.locator("tbody tr", { hasText: "nightly" });
  await rowP.getByText("scheduled: every Sunday at 02:00").waitFor();
  let pol = (await apiGet("/replication/policies")).find((p) => p.name === "nightly");
  assert.deepEqual(pol.trigger, { type: "scheduled", trigger_settings: { cron: "0 0 2 * * 0" } });

  // edit: event-based, deletions replicated too; the form starts from what is stored
  await rowP.getByRole("button", { name: "Edit" }).click();
  assert.equal(await d.getByLabel(/^Cron:/).inputValue(), "0 0 2 * * 0");
  assert.equal(await d.getByLabel(/^Repository filter/).inputValue(), "open/**");
  await d.getByLabel("When something is pushed here").check();
  await d.getByLabel("Also delete on the other side what is deleted here").check();
  await checkPage(page, "admin-policy-event");
  await d.getByRole("button", { name: "Save" }).click();
  await rowP.getByText("on push and delete").waitFor();
  pol = (await apiGet("/replication/policies")).find((p) => p.name === "nightly");
  assert.equal(pol.trigger.type, "event_based");
  assert.equal(pol.replicate_deletion, true);
  assert.equal(pol.dest_registry.name, "site-c2");

  // a registry a policy uses cannot go; once the policy is deleted it can
  await page.goto(BASE + "/admin/registries");
  await settled(page);
  await page.locator("tbody tr", { hasText: "site-c2" }).getByRole("button", { name: "Delete" }).click();
  await page.getByText("proxy-cache projects still use this registry").waitFor();
  await page.goto(BASE + "/admin/replication");
  await settled(page);
  await page.locator("tbody tr", { hasText: "nightly" }).getByRole("button", { name: "Delete" }).click();
  await page.locator("tbody tr", { hasText: "nightly" }).waitFor({ state: "detached" });
  assert.equal((await apiGet("/replication/policies")).some((p) => p.name === "nightly"), false);
  await page.goto(BASE + "/admin/registries");
  await settled(page);
  await page.locator("tbody tr", { hasText: "site-c2" }).getByRole("button", { name: "Delete" }).click();
  await page.locator("tbody tr", { hasText: "site-c2" }).waitFor({ state: "detached" });
  assert.equal((await apiGet("/registries")).some((r) => r.name === "site-c2"), false);
  page.removeAllListeners("dialog");
});

test("audit log: filters are part of the URL", async () => {
  await page.goto(BASE + "/admin/audit?op=create&rt=project");
  await settled(page);
  await page.getByRole("cell", { name: "secret" }).first().waitFor();
  assert.equal(await page.getByRole("cell", { name: "pull", exact: true }).count(), 0);
  // changing a filter on the page asks the server again
  await page.getByLabel("Resource type").selectOption("");
  await page.waitForURL((u) => !u.search.includes("rt="));
  await page.getByLabel("Operation").selectOption("login");
  await page.waitForURL(/op=login/);
  await page.getByRole("cell", { name: "session" }).first().waitFor();
  await checkPage(page, "admin-audit");
});

test("LDAP and system", async () => {
  // this site has no LDAP (systeminfo auth_mode db_auth): the LDAP tab says so instead of offering searches
  await page.goto(BASE + "/admin/ldap");
  await settled(page);
  await page.getByText("LDAP is not configured").waitFor();
  assert.equal(await page.getByLabel("Find LDAP users").count(), 0);
  await checkPage(page, "admin-ldap-off");
  await page.goto(BASE + "/admin/system");
  await settled(page);
  await page.getByText("database").first().waitFor();
  await checkPage(page, "admin-system");
});

test("garbage collection: dry run, run, history with progress, log, schedule", async () => {
  await page.goto(BASE + "/admin/gc");
  await settled(page);
  await page.getByRole("heading", { name: "Schedule" }).waitFor();
  await page.getByRole("button", { name: "Dry run" }).click();
  await page.getByText(/would free/).first().waitFor({ timeout: 30000 });
  await page.getByRole("button", { name: "Run garbage collection" }).click();
  await page.getByText(/^freed /).first().waitFor({ timeout: 30000 });
  // the history polls until both runs have ended
  await page.waitForFunction(() => document.querySelectorAll(".badge.ok").length === 2, null, { timeout: 30000 });
  assert.equal(await page.getByRole("progressbar").first().getAttribute("value"), "100");
  await page.getByRole("button", { name: "Log" }).first().click();
  await page.getByText(/done: deleted/).waitFor();
  await checkPage(page, "admin-gc-log");
  await page.getByRole("button", { name: "Close" }).first().click();
  await page.getByRole("button", { name: "Edit schedule" }).click();
  await page.getByLabel("Run", { exact: true }).selectOption("Custom");
  await page.getByLabel(/^Cron/).fill("0 30 2 * * 6");
  await checkPage(page, "admin-gc-schedule-form");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText(/next:/).waitFor();
  await checkPage(page, "admin-gc");
});

test("statistics: counts and charts", async () => {
  await page.goto(BASE + "/statistics");
  await settled(page);
  await page.locator(".chart canvas").first().waitFor();
  await page.locator(".chart canvas").nth(2).waitFor(); // storage, activity and replication throughput
  await page.getByRole("img", { name: /Storage per project: .*open/ }).waitFor();
  await checkPage(page, "statistics");
});

test("a non-admin cannot open administration", async () => {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login/);
  await signIn(page, "guest1", F.user_password);
  await page.goto(BASE + "/admin/users");
  await settled(page);
  await page.getByText("You do not have permission to see this.").waitFor();
  assert.equal(await page.getByRole("link", { name: "Administration" }).count(), 0);
  await checkPage(page, "admin-forbidden");
});
