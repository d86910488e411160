import { test } from "node:test";
import assert from "node:assert/strict";
import { type GcRun, active, gcSummary } from "../src/pages/gc";

const run = (job_status: string, dry: boolean, counts: Partial<GcRun["progress"]> = {}): GcRun =>
  ({
    id: 1,
    job_kind: "MANUAL",
    job_parameters: JSON.stringify({ dry_run: dry, delete_untagged: false }),
    job_status,
    creation_time: "2026-12-04T10:00:00Z",
    start_time: null,
    end_time: null,
    resumed_from: null,
    progress: {
      manifests_marked: 0, manifests_deleted: 0, links_marked: 0, links_deleted: 0, blobs_marked: 0, blobs_deleted: 0,
      bytes_marked: 0, bytes_freed: 0, orphan_files: 0, orphan_bytes: 0, percent: 0, stopping: false, ...counts,
    },
  }) as GcRun;

test("a pending or running run shows no result: a dry run's partial counts are not its answer", () => {
  // the e2e waited for /would free/ and then clicked Run while the dry run was still running: 409, no second run
  assert.equal(gcSummary(run("Pending", true)), "waiting to start");
  assert.equal(gcSummary(run("Running", true, { blobs_marked: 3 })), "dry run in progress");
  assert.equal(gcSummary(run("Running", false)), "in progress");
  assert.doesNotMatch(gcSummary(run("Running", true)), /would free/);
  assert.doesNotMatch(gcSummary(run("Running", false)), /^freed /);
  assert.ok(active(run("Pending", false)) && active(run("Running", true)));
});

test("an ended run says what it freed or, dry, would free", () => {
  assert.match(gcSummary(run("Success", true, { blobs_marked: 2, bytes_marked: 2048 })), /^would free 2\.00 KiB: .* 2 blobs/);
  assert.match(gcSummary(run("Success", false, { blobs_deleted: 2, bytes_freed: 1024 })), /^freed 1\.00 KiB: .* 2 blobs/);
  assert.ok(!active(run("Success", false)) && !active(run("Error", true)) && !active(run("Stopped", false)));
});
