// The HPC squashfs on the artifact page (done with its published path and srun line, failed with the reason,
// converted on request in a pull-mode project while the page follows the job) and the project setting that
// turns it on, as a project admin would use them.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BASE, checkPage, close, openBrowser, settled } from "./lib.mjs";

const F = JSON.parse(process.env.BERTH_UI_FIXTURE || "{}");
let ctx, page;

before(async () => ({ ctx, page } = await openBrowser("admin", F.admin_password)));
after(async () => close(ctx));

const section = () => page.getByRole("region", { name: "HPC squashfs" });
const artifact = (project, repo, digest) => `${BASE}/projects/${project}/repositories/${encodeURIComponent(repo)}/artifacts/${digest}`;

test("a converted image: status, size, compression, published path and the srun line", async () => {
  await page.goto(artifact("hpc", "app", F.done_digest));
  await settled(page);
  const s = section();
  await s.getByRole("status").getByText("done", { exact: true }).waitFor();
  await s.getByText(F.published_path, { exact: true }).waitFor();
  await s.getByText(`srun --container-image=${F.published_path}`, { exact: true }).waitFor();
  await s.getByText("xz", { exact: true }).waitFor();
  assert.match(await s.locator("dd").nth(1).textContent(), /KiB|MiB|bytes|B/);
  await s.getByRole("button", { name: "Copy srun command" }).waitFor();
  await s.getByRole("button", { name: "Copy published path" }).waitFor();
  await page.getByRole("region", { name: /Referrers/ }).getByText("HPC squashfs").waitFor(); // the referrer, named
  await checkPage(page, "artifact-squashfs");
});

test("a corrupt image: failed, with the reason", async () => {
  await page.goto(artifact("hpc", "broken", F.failed_digest));
  await settled(page);
  const s = section();
  await s.getByRole("status").getByText("failed", { exact: true }).waitFor();
  await s.getByText(/corrupt or truncated/).waitFor();
  assert.equal(await s.getByText(/srun/).count(), 0, "no srun line for a failed conversion");
  await checkPage(page, "artifact-squashfs-failed");
});

test("pull mode: converted on request, the page follows the job to done", async () => {
  await page.goto(artifact("lazy", "app", F.lazy_digest));
  await settled(page);
  const s = section();
  await s.getByText("not converted yet (on first request)").waitFor();
  await checkPage(page, "artifact-squashfs-pull");
  const seen = [];
  const hex = F.lazy_digest.split(":")[1];
  page.on("response", (r) => {
    const u = r.url();
    if (u.includes("/api/v2.0/") && u.includes(hex) && !u.endsWith("/manifest") && r.request().method() === "GET") {
      seen.push(r.json().then((j) => j.status ?? j.squashfs?.status ?? "none", () => "unreadable"));
    }
  });
  await s.getByRole("button", { name: "Convert now" }).click();
  // the page follows the job: running with its progress (the bar and the words), then done
  await s.getByRole("status").getByText(/^running \d+ %$/).waitFor({ timeout: 30000 });
  // and moving: a later poll shows some of the bytes done, in the words and in the bar
  await s.getByRole("status").getByText(/^running [1-9]\d* %$/).waitFor({ timeout: 30000 });
  const bar = Number(await s.getByRole("progressbar", { name: "Conversion progress" }).getAttribute("value"));
  assert.ok(bar > 0 && bar <= 1, `progress bar at ${bar}`);
  await checkPage(page, "artifact-squashfs-running", { settle: false });
  await s.getByRole("status").getByText("done", { exact: true }).waitFor({ timeout: 60000 });
  await s.getByText(F.lazy_published_prefix, { exact: false }).first().waitFor();
  const statuses = await Promise.all(seen);
  assert.ok(statuses.length >= 2, `the page asked for the job and followed it: ${statuses}`);
  assert.ok(statuses.some((x) => x === "queued" || x === "running"), `saw the job before it was done: ${statuses}`);
  assert.equal(statuses.at(-1), "done", statuses.join(" "));
});

test("project settings: a project admin turns the gateway on for some tags", async () => {
  await page.goto(`${BASE}/projects/hpcset/settings`);
  await settled(page);
  const mode = page.getByLabel(/HPC squashfs/);
  assert.equal(await mode.inputValue(), "off");
  assert.ok(await page.getByLabel(/Only tags matching/).isDisabled());
  await mode.selectOption("push");
  await page.getByLabel(/Only tags matching/).fill("v{1,2}.*");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Saved.").waitFor();
  const md = await page.evaluate(async () => (await (await fetch("/api/v2.0/projects/hpcset")).json()).metadata);
  assert.equal(md.hpc_squashfs, "push");
  assert.equal(md.hpc_squashfs_tags, "v{1,2}.*");
  await page.reload();
  await settled(page);
  assert.equal(await page.getByLabel(/HPC squashfs/).inputValue(), "push");
  assert.equal(await page.getByLabel(/Only tags matching/).inputValue(), "v{1,2}.*");
  await checkPage(page, "project-settings-squashfs");
  // a pattern the server refuses: its reason is shown and nothing changes
  await page.getByLabel(/Only tags matching/).fill("v[1");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByRole("alert").getByText(/hpc_squashfs_tags: unclosed \[/).waitFor();
  const md2 = await page.evaluate(async () => (await (await fetch("/api/v2.0/projects/hpcset")).json()).metadata);
  assert.equal(md2.hpc_squashfs_tags, "v{1,2}.*");
});
