// Page by page as an administrator, then as role-limited members: repositories, artifacts and tags, the ISA
// variant table and resolve panel, members, robot accounts (secret used with skopeo), logs, settings.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { BASE, checkPage, close, openBrowser, settled, signIn } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser("admin", F.admin_password)));
after(async () => close(ctx));

test("project repositories: server-side search, sort and paging are deep links", async () => {
  await page.goto(BASE + "/projects/secret/repositories?size=2");
  await settled(page);
  await page.getByText("Page 1 of 2").waitFor();
  await page.getByRole("button", { name: "Next ›" }).click();
  await page.waitForURL(/page=2/);
  await page.getByRole("button", { name: "Name" }).click(); // -> descending
  await page.waitForURL(/sort=-name/);
  await settled(page);
  // the table follows the URL once the sorted page has arrived: wait for that row rather than read the old one
  await page.locator("tbody tr").first().locator("a", { hasText: "secret/many/r02" }).waitFor({ timeout: 10000 });
  const first = await page.locator("tbody tr").first().locator("a").textContent();
  assert.equal(first, "secret/many/r02");
  await page.goto(BASE + "/projects/secret/repositories?q=r01");
  await settled(page);
  assert.equal(await page.locator("tbody tr").count(), 1);
  await checkPage(page, "project-repositories");
});

test("repository -> artifacts with platforms of an index -> the artifact page", async () => {
  await page.goto(BASE + "/projects/open/repositories/hpc%2Fapp");
  await settled(page);
  await page.getByText("linux/amd64/v4").waitFor();
  await checkPage(page, "repository-artifacts");
  await page.getByRole("link", { name: F.isa_index.slice(0, 19), exact: true }).click();
  await page.getByRole("heading", { name: "CPU-ISA variants" }).waitFor();
  await settled(page);
  const rows = page.getByRole("table", { name: "ISA variants" }).locator("tbody tr");
  assert.equal(await rows.count(), 3);
  // the "v2" build holds AVX-512: failed, naming the instruction and the function
  const v2 = rows.nth(1);
  await v2.getByText("fail").waitFor();
  await v2.getByText("vpxord").waitFor();
  await v2.getByText("kernel").first().waitFor();
  await page.getByText(`docker pull ${F.host}/open/hpc/app@${F.isa_index}`).waitFor();
  await page.getByText(`enroot import 'docker://${F.host}#open/hpc/app@${F.isa_index}'`).waitFor();
  await checkPage(page, "artifact-isa");
});

test("which build does my node get: a v2 and a v4 node", async () => {
  const panel = page.locator(".resolve");
  await panel.getByLabel("Level", { exact: true }).selectOption("x86-64-v2");
  await panel.getByRole("button", { name: "Resolve" }).click();
  await panel.getByText("Node: amd64 x86-64-v2").waitFor();
  const chosenV2 = await panel.locator("tr.chosen td").first().textContent();
  await page.screenshot({ path: `${process.env.WEBUI_ARTIFACTS}/resolve-v2-1440.png`, fullPage: true });
  // a v4 node described by its cpuinfo flags gets the v4 build; nothing above it is refused for lack of flags
  await panel.getByLabel("/proc/cpuinfo flags").check();
  const v4flags = "flags : fpu cx8 cmov mmx fxsr sse sse2 pni ssse3 sse4_1 sse4_2 popcnt cx16 lahf_lm avx avx2 bmi1 bmi2 f16c fma abm movbe xsave avx512f avx512bw avx512cd avx512dq avx512vl";
  await panel.getByLabel("Paste the flags line of /proc/cpuinfo").fill(v4flags);
  await panel.getByRole("button", { name: "Resolve" }).click();
  await panel.getByText("Node: amd64 x86-64-v4").waitFor();
  await panel.getByText("Gets x86-64-v4").waitFor();
  assert.notEqual(chosenV2, await panel.locator("tr.chosen td").first().textContent());
  await checkPage(page, "artifact-resolve-v4");
});

test("tags: add and remove", async () => {
  await page.getByLabel("New tag").fill("ui-tag");
  await page.getByRole("button", { name: "Add tag" }).click();
  await page.getByRole("table", { name: "Tags" }).getByText("ui-tag").waitFor();
  page.once("dialog", (d) => d.accept());
  await page.getByRole("button", { name: "Remove tag ui-tag" }).click();
  await page.getByRole("table", { name: "Tags" }).getByText("ui-tag").waitFor({ state: "detached" });
});

test("artifact page: the image config and its build history", async () => {
  await page.goto(BASE + "/projects/open/repositories/tools%2Fconfigured/artifacts/2.1");
  await settled(page);
  const cfg = page.getByRole("definition").filter({ hasText: "/usr/local/bin/serve" });
  await cfg.first().waitFor();
  await page.getByText('--port 8080 --greeting "hello world"').waitFor();
  await page.getByText("Berth UI test").waitFor();
  await page.getByText("1000:1000").waitFor();
  await page.getByText("8080/tcp").waitFor();
  await page.getByRole("list", { name: "Environment" }).getByText("MODE=production").waitFor();
  await page.getByRole("definition").filter({ hasText: "https://example.org/berth/configured" }).waitFor();
  // four steps; the two that made layers are matched with the manifest's two layers, in order
  const rows = page.getByRole("table", { name: "Build history" }).locator("tbody tr");
  assert.equal(await rows.count(), 4);
  assert.match(await rows.nth(0).textContent(), /ADD file:0f4a8e2b3c in \/.*#1 · /);
  assert.match(await rows.nth(1).textContent(), /CMD \["sh"\].*none/);
  assert.match(await rows.nth(2).textContent(), /RUN apt-get update .*#2 · /);
  await checkPage(page, "artifact-config");
  // an index has no image config of its own: neither section
  await page.goto(BASE + `/projects/open/repositories/hpc%2Fapp/artifacts/${F.isa_index}`);
  await page.getByRole("heading", { name: "CPU-ISA variants" }).waitFor();
  await settled(page);
  assert.equal(await page.getByRole("heading", { name: "Build history" }).count(), 0);
  assert.equal(await page.getByRole("heading", { name: "Image config" }).count(), 0);
});

test("members: add a guest, change a role", async () => {
  await page.goto(BASE + "/projects/secret/members");
  await settled(page);
  await page.getByRole("button", { name: "Add member" }).click();
  await page.getByLabel("Username").fill("guest1");
  await page.getByLabel("Role", { exact: true }).selectOption("3");
  await page.getByRole("dialog").getByRole("button", { name: "Add", exact: true }).click();
  await page.getByRole("cell", { name: "guest1", exact: true }).waitFor();
  await checkPage(page, "project-members");
  // a role change and a removal, on a member added for it
  await page.getByRole("button", { name: "Add member" }).click();
  await page.getByLabel("Username").fill("lockme");
  await page.getByRole("dialog").getByRole("button", { name: "Add", exact: true }).click();
  await page.getByRole("cell", { name: "lockme", exact: true }).waitFor();
  // wait for the PUT itself: networkidle may already hold when the change's request has not been sent yet
  const put = page.waitForResponse((r) => r.request().method() === "PUT" && r.url().includes("/members/"));
  await page.getByLabel("Role of lockme").selectOption("2");
  assert.equal((await put).status(), 200);
  await settled(page);
  const ms = await (await page.request.get(BASE + "/api/v2.0/projects/secret/members?entityname=lockme")).json();
  assert.equal(ms[0].role_id, 2);
  page.once("dialog", (d) => d.accept());
  await page.getByRole("button", { name: "Remove lockme" }).click();
  await page.getByRole("cell", { name: "lockme", exact: true }).waitFor({ state: "detached" });
});

test("robot account: permission picker, secret shown once, used with skopeo", async () => {
  await page.goto(BASE + "/projects/secret/robots");
  await settled(page);
  await page.getByRole("button", { name: "New robot account" }).click();
  await page.getByLabel("Name").fill("ci");
  await checkPage(page, "robot-create");
  await page.getByRole("dialog").getByRole("button", { name: "Create", exact: true }).click();
  const secret = await page.getByLabel("Secret", { exact: true }).inputValue();
  assert.ok(secret.length >= 16);
  await checkPage(page, "robot-secret");
  await page.getByRole("button", { name: "Done" }).click();
  const out = execFileSync("skopeo", ["inspect", "--tls-verify=false", "--creds", `robot$secret+ci:${secret}`, `docker://${F.host}/secret/app:latest`], {
    encoding: "utf8",
  });
  assert.match(out, /"Digest"/);
  await page.getByRole("cell", { name: "robot$secret+ci", exact: true }).waitFor();
  await checkPage(page, "project-robots");
  // disable: skopeo is refused; refresh the secret: the new one is shown once again
  await page.getByRole("button", { name: "Disable" }).click();
  await page.getByText("Disabled").waitFor();
  assert.throws(() => execFileSync("skopeo", ["inspect", "--tls-verify=false", "--creds", `robot$secret+ci:${secret}`, `docker://${F.host}/secret/app:latest`], { stdio: "pipe" }));
  await page.getByRole("button", { name: "Enable" }).click();
  await page.getByText("Enabled").waitFor();
  await page.getByRole("button", { name: "Refresh secret" }).click();
  const fresh = await page.getByLabel("Secret", { exact: true }).inputValue();
  assert.notEqual(fresh, secret);
  await page.getByRole("button", { name: "Done" }).click();
});

test("robot account: change its expiry", async () => {
  const robotApi = async () => (await (await page.request.get(BASE + "/api/v2.0/projects/secret/robots")).json()).find((r) => r.name === "robot$secret+ci");
  const before = await robotApi();
  assert.equal(before.duration, 30); // the create dialog's default
  const row = page.locator("tbody tr", { hasText: "robot$secret+ci" });
  await page.getByRole("button", { name: "Change the expiry of robot$secret+ci" }).click();
  const d = page.getByRole("dialog");
  assert.equal(await d.getByLabel("Expires after (days from creation)").inputValue(), "30");
  await d.getByLabel("Expires after (days from creation)").fill("7");
  const want = new Date(Date.parse(before.creation_time) + 7 * 86400 * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  await d.getByRole("status").getByText(want).waitFor(); // the preview is what the server will store
  await checkPage(page, "robot-expiry");
  await d.getByRole("button", { name: "Save" }).click();
  await row.getByText(want).waitFor();
  const after = await robotApi();
  assert.equal(after.duration, 7);
  assert.equal(after.expires_at, Math.floor(Date.parse(before.creation_time) / 1000) + 7 * 86400);
  // never: the field is off and the table says so
  await page.getByRole("button", { name: "Change the expiry of robot$secret+ci" }).click();
  await d.getByLabel("Never expires").check();
  assert.ok(await d.getByLabel("Expires after (days from creation)").isDisabled());
  await d.getByRole("button", { name: "Save" }).click();
  await row.getByText("never").waitFor();
  assert.equal((await robotApi()).expires_at, -1);
});

test("logs and settings", async () => {
  await page.goto(BASE + "/projects/secret/logs");
  await settled(page);
  await page.getByRole("cell", { name: "create" }).first().waitFor();
  await checkPage(page, "project-logs");
  await page.goto(BASE + "/projects/secret/settings");
  await settled(page);
  await page.locator(".head-quota").getByText(/\(no limit\)/).waitFor(); // the project header shows usage against the limit
  await checkPage(page, "project-settings");
});

test("a guest sees no push or delete controls; a limited guest sees no members", async () => {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login/);
  await signIn(page, "guest1", F.user_password);
  await page.goto(BASE + "/projects/secret");
  await settled(page);
  await page.getByRole("link", { name: "secret/app" }).waitFor();
  assert.equal(await page.getByRole("button", { name: /Delete/ }).count(), 0);
  await page.getByRole("link", { name: "Settings" }).click(); // read-only for a guest
  await page.locator(".head-quota").getByText(/\(no limit\)/).waitFor(); // the project header shows usage against the limit
  assert.equal(await page.getByRole("button", { name: "Save" }).count(), 0);
  assert.ok(await page.getByLabel("ISA policy for pushed indexes").isDisabled());
  await page.getByRole("link", { name: "Members" }).click();
  await settled(page);
  assert.equal(await page.getByRole("button", { name: "Add member" }).count(), 0);
  assert.equal(await page.getByRole("combobox", { name: /Role of/ }).count(), 0);
  await checkPage(page, "guest-members");
  await page.goto(BASE + "/projects/secret/repositories/app");
  await settled(page);
  assert.equal(await page.getByRole("button", { name: /Delete artifact/ }).count(), 0);
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login/);
  await signIn(page, "limited1", F.user_password);
  await page.goto(BASE + "/projects/secret");
  await settled(page);
  assert.equal(await page.getByRole("link", { name: "Members" }).count(), 0);
  await checkPage(page, "limited-guest-project");
});
