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
