// The project's webhooks tab as an administrator: the policies the test created, a new one through the dialog
// (a file:// address refused, the signing secret shown once), disable, recent deliveries with their attempts,
// and redelivery. The Python side (tests/integration/test_webhook.py) checks the receiver got the redelivery.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BASE, checkPage, close, openBrowser, settled } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser("admin", F.admin_password)));
after(async () => close(ctx));

test("webhooks tab: policies, a new one with its secret, deliveries, attempts, redeliver", async () => {
  await page.goto(`${BASE}/projects/${F.project}/webhooks`);
  await settled(page);
  await page.getByRole("cell", { name: "ci-hook", exact: true }).waitFor();
  await checkPage(page, "project-webhooks");

  await page.getByRole("button", { name: "New webhook" }).click();
  await page.getByLabel("Name").fill("from-the-browser");
  await page.getByLabel("Endpoint URL (http or https)").fill("file:///etc/passwd");
  await page.getByLabel("Payload format").selectOption("CloudEvents");
  await page.getByRole("button", { name: "Create" }).click();
  await page.getByRole("alert").filter({ hasText: "http:// or https://" }).waitFor();
  await page.getByLabel("Endpoint URL (http or https)").fill(F.receiver + "/browser");
  assert.equal(await page.getByRole("alert").count(), 0, "the refusal of file:// stays after the address changed");
  await page.getByLabel("PULL_ARTIFACT").check();
  await checkPage(page, "project-webhooks-new", { settle: false });
  await page.getByRole("button", { name: "Create" }).click();
  const secret = await page.locator("#wh-secret").inputValue();
  assert.match(secret, /^[0-9a-f]{64}$/);
  await checkPage(page, "project-webhooks-secret", { settle: false });
  await page.getByRole("button", { name: "Done" }).click();
  const row = page.getByRole("row").filter({ hasText: "from-the-browser" });
  await row.getByText("Enabled").waitFor();
  await row.getByRole("button", { name: "Disable" }).click();
  await row.getByText("Disabled").waitFor();

  const ci = page.getByRole("row").filter({ hasText: "ci-hook" });
  await ci.getByRole("button", { name: "Deliveries of ci-hook" }).click();
  const deliveries = page.getByRole("region", { name: "Deliveries of ci-hook" });
  await deliveries.getByText("PUSH_ARTIFACT").first().waitFor();
  await deliveries.getByText("Success").first().waitFor();
  await checkPage(page, "project-webhooks-deliveries");
  await deliveries.getByRole("button", { name: "Attempts" }).first().click();
  await page.getByText(/attempt 1 to .*: HTTP 200/).waitFor();
  await checkPage(page, "project-webhooks-attempts", { settle: false });
  await page.getByRole("dialog").getByRole("button", { name: "Close" }).click();
  await deliveries.getByRole("button", { name: "Redeliver" }).first().click();
  await settled(page);
  assert.deepEqual(page.problems, []);
});

test("edit a webhook policy: the dialog sends PUT, a bad address is refused in the dialog, focus comes back", async () => {
  await page.goto(`${BASE}/projects/${F.project}/webhooks`);
  await settled(page);
  await page.getByRole("button", { name: "Edit edit-me" }).click();
  const dialog = page.getByRole("dialog", { name: "Edit webhook edit-me" });
  assert.equal(await dialog.getByLabel("Name").inputValue(), "edit-me");
  assert.equal(await dialog.getByLabel("Endpoint URL (http or https)").inputValue(), F.receiver + "/before");
  // the stored header is not shown: its mask, which the PUT sends back to keep it, and a hint saying so
  assert.equal(await dialog.getByLabel("Authorization header (optional)").inputValue(), "*****");
  await dialog.getByText("leave ***** to keep it").waitFor();
  assert.equal(await dialog.getByLabel("Enabled").isChecked(), false);
  assert.equal(await page.evaluate(() => document.activeElement?.id), "whe-name"); // the dialog took the focus
  await checkPage(page, "project-webhooks-edit", { settle: false });

  // an address the form lets through but the server refuses (a space): the API's message, in the dialog
  await dialog.getByLabel("Endpoint URL (http or https)").fill("http://ci.example/a b");
  await dialog.getByRole("button", { name: "Save" }).click();
  await dialog.getByRole("alert").filter({ hasText: "target address must be an http:// or https:// URL" }).waitFor();
  await checkPage(page, "project-webhooks-edit-refused", { settle: false });
  await dialog.getByLabel("Endpoint URL (http or https)").fill("file:///etc/passwd");
  await dialog.getByRole("button", { name: "Save" }).click();
  await dialog.getByRole("alert").filter({ hasText: "The address must be an http:// or https:// URL." }).waitFor();

  await dialog.getByLabel("Name").fill("edited-in-browser");
  assert.equal(await dialog.getByRole("alert").count(), 0, "an edit clears the last refusal");
  await dialog.getByLabel("Description (optional)").fill("changed in the edit dialog");
  await dialog.getByLabel("Endpoint URL (http or https)").fill(F.receiver + "/edited");
  await dialog.getByLabel("Payload format").selectOption("CloudEvents");
  await dialog.getByLabel("Authorization header (optional)").fill("Bearer edited");
  await dialog.getByLabel("Skip certificate verification").check();
  await dialog.getByLabel("Enabled").check();
  await dialog.getByLabel("DELETE_ARTIFACT").check();
  await dialog.getByRole("button", { name: "Save" }).click();
  await dialog.waitFor({ state: "detached" });
  const row = page.getByRole("row").filter({ hasText: "edited-in-browser" });
  await row.getByText("Enabled").waitFor();
  await row.getByText("CloudEvents").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Edit edited-in-browser"); // back on its button, renamed
  await settled(page);
  assert.deepEqual(page.problems, []);
});

test("a maintainer sees the policies but no Edit, New or Delete button (the API refuses them too)", async () => {
  const m = await openBrowser(F.maintainer, F.maintainer_password);
  try {
    await m.page.goto(`${BASE}/projects/${F.project}/webhooks`);
    await settled(m.page);
    await m.page.getByRole("cell", { name: "ci-hook", exact: true }).waitFor();
    await m.page.getByRole("button", { name: "Deliveries of ci-hook" }).waitFor();
    for (const name of ["Edit ci-hook", "New webhook", "Delete", "Disable"])
      assert.equal(await m.page.getByRole("button", { name }).count(), 0, name);
    await checkPage(m.page, "project-webhooks-maintainer");
  } finally {
    await close(m.ctx);
  }
});
