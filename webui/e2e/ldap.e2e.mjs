// LDAP through the UI, against a real slapd started by test_webui.py: an admin imports directory users before
// their first sign-in (one refused: a local user owns the name), finds LDAP groups, adds and removes them, makes
// one a project member, and a directory user in that group signs in and sees the project with its role.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { checkPage, close, openBrowser, settled, signIn } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
const SITE = `http://${F.ldap_site}`;
let ctx, page;
const apiGet = async (path) => (await page.request.get(SITE + "/api/v2.0" + path)).json();

before(async () => {
  ({ ctx, page } = await openBrowser());
  await page.goto(SITE + "/login");
  // systeminfo says ldap_auth here: the sign-in page names directory accounts
  await page.getByText("Your directory (LDAP) account, or a local Berth account.").waitFor();
  await signIn(page, "admin", F.admin_password);
});
after(async () => close(ctx));

test("the LDAP tab: the connection answers", async () => {
  await page.goto(SITE + "/admin/ldap");
  await settled(page);
  await page.getByRole("button", { name: "Test the LDAP connection" }).click();
  await page.getByText("LDAP answers.").waitFor();
});

test("import directory users before their first sign-in; a name a local user owns is refused, saying so", async () => {
  await page.getByLabel("Find LDAP users").fill("");
  await page.getByRole("button", { name: "Search users" }).click();
  const table = page.getByRole("table", { name: "LDAP users" });
  for (const u of F.import_users) await table.getByRole("cell", { name: u, exact: true }).waitFor();
  const importButton = page.getByRole("button", { name: /^Import selected/ });
  assert.ok(await importButton.isDisabled());
  for (const u of [...F.import_users, F.local_clash]) await page.getByLabel(`Select ${u}`).check();
  await page.getByRole("button", { name: `Import selected (${F.import_users.length + 1})` }).click();
  const status = page.getByRole("status").filter({ hasText: "Imported" });
  await status.getByText(`Imported: ${F.import_users.join(", ")}.`).waitFor();
  await page.getByRole("list", { name: "Not imported" }).getByText(`${F.local_clash}: a local user has this name`).waitFor();
  // the refused row says why: the local account of that name is not the directory user
  await table.locator("tr", { has: page.getByRole("cell", { name: F.local_clash, exact: true }) }).getByText("a local user has this name").waitFor();
  for (const u of F.import_users) {
    await table.locator("tr", { has: page.getByRole("cell", { name: u, exact: true }) }).getByText("user", { exact: true }).waitFor();
    const found = await apiGet(`/users?username=${u}`);
    assert.deepEqual(found.map((x) => x.username), [u]);
  }
  await checkPage(page, "admin-ldap-import");
});

test("find LDAP groups, add two, remove one", async () => {
  await page.getByLabel("Find LDAP groups").fill("");
  await page.getByRole("button", { name: "Search groups" }).click();
  const table = page.getByRole("table", { name: "LDAP groups" });
  await table.getByText(F.group_dn).waitFor();
  await page.getByRole("button", { name: "Add group devs" }).click();
  await page.getByText("devs added").waitFor();
  await table.locator("tr", { hasText: F.group_dn }).getByText("added").waitFor();
  await page.getByRole("button", { name: "Add group ops" }).click();
  await page.getByText("ops added").waitFor();
  const ours = page.getByRole("table", { name: "Berth's LDAP groups" });
  await ours.getByRole("cell", { name: "ops", exact: true }).waitFor();
  await checkPage(page, "admin-ldap");
  page.once("dialog", (d) => d.accept());
  await page.getByRole("button", { name: "Remove group ops" }).click();
  await page.getByText("ops removed.").waitFor();
  await ours.getByRole("cell", { name: "ops", exact: true }).waitFor({ state: "detached" });
  await page.getByRole("button", { name: "Add group ops" }).waitFor(); // the search result offers it again
  assert.deepEqual((await apiGet("/usergroups")).map((g) => g.group_name), ["devs"]);
});

test("make the group a project member; a directory user in it signs in and sees the project", async () => {
  await page.goto(SITE + "/projects/ldapproj/members");
  await settled(page);
  await page.getByRole("button", { name: "Add member" }).click();
  await page.getByLabel("LDAP group (DN)").check();
  await page.getByLabel("Group DN").fill(F.group_dn);
  await page.getByLabel("Role", { exact: true }).selectOption("2");
  await page.getByRole("dialog").getByRole("button", { name: "Add", exact: true }).click();
  await page.getByRole("cell", { name: "LDAP group" }).waitFor();
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login/);
  await signIn(page, F.ldap_user, F.ldap_password);
  await page.goto(SITE + "/projects");
  await settled(page);
  const row = page.locator("tbody tr", { hasText: "ldapproj" });
  await row.getByText("Developer").waitFor();
  assert.equal(await page.locator(".who .user").textContent(), F.ldap_user);
  await checkPage(page, "ldap-user-projects");
});
