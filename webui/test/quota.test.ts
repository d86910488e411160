import { test } from "node:test";
import assert from "node:assert/strict";
import { parseLimit, quotaLevel, quotaPercent, quotaText, splitLimit } from "../src/quota";

test("usage against the limit", () => {
  assert.equal(quotaPercent(50, 200), 25);
  assert.equal(quotaPercent(5, -1), null);
  assert.equal(quotaPercent(0, 0), 0);
  assert.equal(quotaText(12 * 1024 ** 2, 100 * 1024 ** 2), "12.0 MiB of 100 MiB (12%)");
  assert.equal(quotaText(1, 1024 ** 3), "1 B of 1.00 GiB (<1%)");
  assert.equal(quotaText(2048, -1), "2.00 KiB (no limit)");
  assert.equal(quotaText(150, 100), "150 B of 100 B (150%)");
});

test("levels: ok, warn from 85 %, bad at the limit", () => {
  assert.equal(quotaLevel(84, 100), "ok");
  assert.equal(quotaLevel(85, 100), "warn");
  assert.equal(quotaLevel(100, 100), "bad");
  assert.equal(quotaLevel(1e12, -1), "ok");
  assert.equal(quotaLevel(60, 100, 50), "warn");
});

test("a typed limit becomes bytes or a reason", () => {
  assert.deepEqual(parseLimit("10", "GiB"), { bytes: 10 * 1024 ** 3 });
  assert.deepEqual(parseLimit("1.5", "MiB"), { bytes: 1572864 });
  assert.deepEqual(parseLimit("1024", "TiB"), { bytes: 1024 ** 5 });
  for (const bad of ["", "-1", "abc", "1e3", "0", "1,5"]) assert.ok("error" in parseLimit(bad, "GiB"), bad);
  assert.ok("error" in parseLimit("1025", "TiB"));
  assert.ok("error" in parseLimit("0.0000001", "MiB"));
});

test("a limit in bytes is shown in a readable unit and round-trips", () => {
  assert.deepEqual(splitLimit(10 * 1024 ** 3), { value: "10", unit: "GiB" });
  assert.deepEqual(splitLimit(2 * 1024 ** 4), { value: "2", unit: "TiB" });
  assert.deepEqual(splitLimit(3 * 1024 ** 2), { value: "3", unit: "MiB" });
  assert.deepEqual(splitLimit(-1), { value: "", unit: "GiB" });
  const s = splitLimit(1536 * 1024 ** 2);
  assert.deepEqual(parseLimit(s.value, s.unit), { bytes: 1536 * 1024 ** 2 });
});
