import { test } from "node:test";
import assert from "node:assert/strict";
import { type SquashfsJob, squashfsState, srunLine } from "../src/pages/squashfs";

const D = "sha256:" + "b".repeat(64);
const job = (over: Partial<SquashfsJob>): SquashfsJob => ({
  status: "done", progress: 1, reason: null, attempts: 1, digest: D, size: 1 << 20, uncompressed_size: 3 << 20, compression: "zstd",
  isa_level: null, published_path: null, seconds: 1.5, update_time: null, ...over,
});

test("srun uses the published file when there is one, else the image by digest through pyxis", () => {
  assert.equal(srunLine(job({ published_path: `/lustre/c/hpc/app/${D}.sqsh` }), "reg:5000", "hpc/app", D), `srun --container-image=/lustre/c/hpc/app/${D}.sqsh`);
  assert.equal(srunLine(job({}), "reg:5000", "hpc/app", D), `srun --container-image=reg:5000#hpc/app@${D}`);
  // a path the shell would split is quoted; a job not done yet never names a file that is not there
  assert.equal(srunLine(job({ published_path: "/gpfs/my dir/x.sqsh" }), "r", "p/a", D), "srun --container-image='/gpfs/my dir/x.sqsh'");
  assert.equal(srunLine(job({ status: "running", published_path: "/x.sqsh" }), "r", "p/a", D), `srun --container-image=r#p/a@${D}`);
  assert.equal(srunLine(null, "r", "p/a", D), `srun --container-image=r#p/a@${D}`);
});

test("status words: queued, running with its progress, done, failed, none", () => {
  assert.deepEqual(squashfsState(job({ status: "running", progress: 0.4271 }), "push"), { cls: "warn", text: "running 42 %" });
  assert.deepEqual(squashfsState(job({ status: "queued", attempts: 0 }), "push"), { cls: "warn", text: "queued" });
  assert.deepEqual(squashfsState(job({ status: "queued", attempts: 2 }), "push"), { cls: "warn", text: "queued (attempt 3)" });
  assert.deepEqual(squashfsState(job({ status: "failed" }), "push"), { cls: "bad", text: "failed" });
  assert.deepEqual(squashfsState(job({}), "push"), { cls: "ok", text: "done" });
  assert.equal(squashfsState(null, "pull").text, "not converted yet (on first request)");
});
