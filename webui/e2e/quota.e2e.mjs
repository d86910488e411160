// Storage quotas: the admin's quota list with a usage bar per project, the limit editor (a bad value is refused in
// the form, a good one is saved through PUT /quotas/{id}), and the bar on the project page and the projects list.
// The New project dialog's other admin-only fields: a proxy cache's upstream registry and bandwidth limit.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BASE, checkPage, close, openBrowser, settled } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser("admin", F.admin_password)));
after(async () => close(ctx));

test("admin quotas: usage bars, then a limit changed in the editor", async () => {
  await page.goto(BASE + "/admin/quotas");
  await settled(page);
  const table = page.getByRole("table", { name: "Project quotas" });
  const bar = table.getByRole("meter", { name: "Storage of qfull" });
  await bar.waitFor();
  assert.ok(Number(await bar.getAttribute("aria-valuenow")) >= 85, "qfull is shown near its limit");
  assert.match(await table.locator("tr", { hasText: "qfull" }).locator(".quota").getAttribute("class"), /warn|bad/);
  await table.locator("tr", { hasText: "qroomy" }).getByText(/of 1\.00 GiB \(<1%\)/).waitFor();
  await checkPage(page, "admin-quotas");

  await table.getByRole("button", { name: "Edit the quota of qroomy" }).click();
  await page.getByLabel("Storage limit").fill("abc");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Enter a positive number.").waitFor();
  await page.getByLabel("Storage limit").fill("2");
  await page.getByLabel("Unit").selectOption("MiB");
  await checkPage(page, "admin-quota-editor", { settle: false });
  await page.getByRole("button", { name: "Save" }).click();
  await table.locator("tr", { hasText: "qroomy" }).getByText(/of 2\.00 MiB/).waitFor();
  const q = await (await page.request.get(BASE + "/api/v2.0/quotas?page_size=100")).json();
  assert.equal(q.find((x) => x.ref.name === "qroomy").hard.storage, 2 * 1024 * 1024);

  await table.getByRole("button", { name: "Edit the quota of qroomy" }).click();
  await page.getByLabel("No limit").check();
  await page.getByRole("button", { name: "Save" }).click();
  await table.locator("tr", { hasText: "qroomy" }).getByText(/\(no limit\)/).waitFor();
});

test("the project page and the projects list show usage against the limit", async () => {
  await page.goto(BASE + "/projects/qfull");
  await settled(page);
  const bar = page.getByRole("meter", { name: "Storage quota" });
  await bar.waitFor();
  assert.ok(Number(await bar.getAttribute("aria-valuenow")) >= 85);
  await checkPage(page, "project-quota");
  await page.goto(BASE + "/projects?q=qfull");
  await settled(page);
  await page.getByRole("meter", { name: "Storage of qfull" }).waitFor();
  await checkPage(page, "projects-quota");
});

test("a system admin sets the storage limit when creating a project", async () => {
  await page.goto(BASE + "/projects");
  await settled(page);
  await page.getByRole("button", { name: "New project" }).click();
  await page.getByLabel("Name").fill("qnew");
  await page.getByLabel(/^Storage limit \(/).fill("5");
  await page.getByLabel("Storage limit unit").selectOption("GiB");
  await checkPage(page, "project-create-quota", { settle: false });
  await page.getByRole("button", { name: "Create", exact: true }).click();
  await page.waitForURL(/\/projects\/qnew/);
  await page.getByRole("meter", { name: "Storage quota" }).waitFor();
  await page.getByText(/of 5\.00 GiB/).waitFor();
  const q = await (await page.request.get(BASE + "/api/v2.0/quotas?page_size=100")).json();
  assert.equal(q.find((x) => x.ref.name === "qnew").hard.storage, 5 * 1024 ** 3);
});

test("a system admin creates a proxy-cache project with its upstream and bandwidth limit, then changes the limit", async () => {
  await page.goto(BASE + "/projects");
  await settled(page);
  await page.getByRole("button", { name: "New project" }).click();
  await page.getByLabel("Name").fill("pcache");
  await page.getByRole("checkbox", { name: /Proxy cache/ }).check();
  const regs = await (await page.request.get(BASE + "/api/v2.0/registries")).json();
  const reg = regs.find((r) => r.name === F.upstream);
  await page.getByLabel("Upstream registry").selectOption({ label: `${reg.name} (${reg.url})` });
  await page.getByLabel(/^Upstream bandwidth limit/).fill("abc");
  await page.getByRole("button", { name: "Create", exact: true }).click();
  await page.getByText(/bandwidth limit must be a whole number/).waitFor();
  await page.getByLabel(/^Upstream bandwidth limit/).fill("512");
  // the refusal was about "abc": once the value is edited it is stale and goes
  assert.equal(await page.getByText(/bandwidth limit must be a whole number/).count(), 0);
  await checkPage(page, "project-create-proxy", { settle: false });
  await page.getByRole("button", { name: "Create", exact: true }).click();
  await page.waitForURL(/\/projects\/pcache/);
  await page.getByText("Proxy cache", { exact: true }).waitFor();
  let p = await (await page.request.get(BASE + "/api/v2.0/projects/pcache")).json();
  assert.equal(p.registry_id, reg.id);
  assert.equal(p.metadata.proxy_speed_kb, "512");

  await page.goto(BASE + "/projects/pcache/settings");
  await settled(page);
  await page.getByText(new RegExp("Proxy cache of " + F.upstream)).waitFor();
  const speed = page.getByLabel(/^Upstream bandwidth limit/);
  assert.equal(await speed.inputValue(), "512");
  await checkPage(page, "project-settings-proxy");
  await speed.fill("");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Saved.").waitFor();
  p = await (await page.request.get(BASE + "/api/v2.0/projects/pcache")).json();
  assert.equal(p.metadata.proxy_speed_kb, "-1");
});
