// LDAP through the UI, against a real slapd started by test_webui.py: an admin finds an LDAP group and adds it,
// makes it a project member, and a directory user in that group signs in and sees the project with its role.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { checkPage, close, openBrowser, settled, signIn } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
const SITE = `http://${F.ldap_site}`;
let ctx, page;

before(async () => {
  ({ ctx, page } = await openBrowser());
  await page.goto(SITE + "/login");
  await signIn(page, "admin", F.admin_password);
});
after(async () => close(ctx));

test("find an LDAP group and add it", async () => {
  await page.goto(SITE + "/admin/system");
  await settled(page);
  await page.getByRole("button", { name: "Test the LDAP connection" }).click();
  await page.getByText("LDAP answers.").waitFor();
  await page.getByLabel("Find LDAP groups").fill("devs");
  await page.getByRole("button", { name: "Search" }).nth(1).click();
  await page.getByText(F.group_dn).waitFor();
  await page.getByRole("button", { name: "Add", exact: true }).click();
  await page.getByText("devs added").waitFor();
  await checkPage(page, "admin-ldap");
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
