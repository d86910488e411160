// The project's tag policy tabs: an immutable tag rule added through its dialog, a retention rule that creates the
// policy, a dry run whose result lists what would go (and not the immutable tag), then a developer's read-only view.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BASE, checkPage, close, openBrowser, settled } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser("admin", F.admin_password)));
after(async () => close(ctx));

test("immutability tab: add a rule, see it, switch it off and on", async () => {
  await page.goto(BASE + "/projects/pol/immutability");
  await settled(page);
  await page.getByText("No immutable tag rules").waitFor();
  await page.getByRole("button", { name: "Add rule" }).click();
  await page.getByLabel("Tags pattern").fill("v*");
  await page.getByRole("button", { name: "Add", exact: true }).click();
  const table = page.getByRole("table", { name: "Immutable tag rules" });
  await table.getByText("tags matching v*").waitFor();
  await table.getByRole("button", { name: "Disable" }).click();
  await table.getByText("Disabled").waitFor();
  await table.getByRole("button", { name: "Enable" }).click();
  await table.getByText("Enabled").waitFor();
  await checkPage(page, "project-immutability");
});

test("retention tab: a rule, a dry run and what it would delete", async () => {
  await page.goto(BASE + "/projects/pol/retention");
  await settled(page);
  await page.getByText("No retention rules").waitFor();
  await page.getByRole("button", { name: "Add rule" }).click();
  await page.getByLabel("Keep").selectOption("latestPushedK");
  await page.getByLabel("Number of artifacts").fill("1");
  await page.getByRole("button", { name: "Add", exact: true }).click();
  await page.getByText("retain the most recently pushed 1 artifacts").waitFor();
  await page.getByRole("button", { name: "Dry run" }).click();
  const runs = page.getByRole("table", { name: "Retention runs" });
  for (let i = 0; i < 100 && !(await runs.getByText("Success").count()); i++) {
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.waitForTimeout(200);
  }
  await runs.getByText("Success").waitFor();
  await runs.getByRole("button", { name: "What would go" }).click();
  const tasks = page.locator(".tasks");
  await tasks.getByText("pol/app: 3 artifacts, 2 retained, 1 would go").waitFor();
  const gone = await tasks.locator(".gone").textContent();
  assert.match(gone, /dev1/);
  assert.doesNotMatch(gone, /v1\.0|latest/); // immutable v1.0 and the newest stay
  await checkPage(page, "project-retention");
  await tasks.getByRole("button", { name: "Log of pol/app" }).click();
  await page.getByText(/immutable tag rule \d+/).waitFor();
  await page.screenshot({ path: `${process.env.WEBUI_ARTIFACTS}/project-retention-log-1440.png`, fullPage: true });
  await page.getByRole("button", { name: "Close" }).click();
});

test("a developer reads the policies but cannot change them", async () => {
  const other = await openBrowser("dev1", F.user_password);
  try {
    await other.page.goto(BASE + "/projects/pol/retention");
    await settled(other.page);
    await other.page.getByText("retain the most recently pushed 1 artifacts").waitFor();
    assert.equal(await other.page.getByRole("button", { name: "Add rule" }).count(), 0);
    assert.equal(await other.page.getByRole("button", { name: "Dry run" }).count(), 0);
    await other.page.goto(BASE + "/projects/pol/immutability");
    await settled(other.page);
    await other.page.getByText("tags matching v*").waitFor();
    assert.equal(await other.page.getByRole("button", { name: "Add rule" }).count(), 0);
    await checkPage(other.page, "project-immutability-developer");
  } finally {
    await close(other.ctx);
  }
});
