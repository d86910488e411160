import { test } from "node:test";
import assert from "node:assert/strict";
import { formatAgo, formatBytes, formatRate, formatTime, robotExpiry, roleName, shortDigest } from "../src/format";

test("sizes use binary units with sensible precision", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(1023), "1023 B");
  assert.equal(formatBytes(1536), "1.50 KiB");
  assert.equal(formatBytes(50 * 1024 * 1024), "50.0 MiB");
  assert.equal(formatBytes(300 * 1024 ** 3), "300 GiB");
  assert.equal(formatBytes(-1), "—");
  assert.equal(formatBytes(null), "—");
  assert.equal(formatBytes(NaN), "—");
});

test("digests shorten to algorithm + 12 hex digits", () => {
  assert.equal(shortDigest("sha256:" + "0123456789abcdef".repeat(4)), "sha256:0123456789ab");
  assert.equal(shortDigest(""), "");
  assert.equal(shortDigest("abcdef0123456789"), "abcdef012345");
});

test("times are UTC and stable; missing or epoch-zero times read as none", () => {
  assert.equal(formatTime("2026-01-02T03:04:05.678Z"), "2026-01-02 03:04:05 UTC");
  assert.equal(formatTime(1767322800), "2026-01-02 03:00:00 UTC");
  assert.equal(formatTime(null), "—");
  assert.equal(formatTime("0001-01-01T00:00:00Z"), "—");
  assert.equal(formatTime("garbage"), "—");
});

test("relative times", () => {
  const now = Date.parse("2026-01-02T00:00:00Z");
  assert.equal(formatAgo("2026-01-01T23:59:58Z", now), "just now");
  assert.equal(formatAgo("2026-01-01T23:58:00Z", now), "2 min ago");
  assert.equal(formatAgo("2026-01-01T21:00:00Z", now), "3 h ago");
  assert.equal(formatAgo("2025-12-30T00:00:00Z", now), "3 d ago");
  assert.equal(formatAgo("2026-01-04T00:00:00Z", now), "in 2 d");
  assert.equal(formatAgo(null, now), "never");
});

test("rates and roles", () => {
  assert.equal(formatRate(10 * 1024 * 1024, 2), "5.00 MiB/s");
  assert.equal(formatRate(5, 0), "—");
  assert.equal(roleName(1), "Project admin");
  assert.equal(roleName(5), "Limited guest");
  assert.equal(roleName(9), "—");
});

test("a robot's expiry counts its duration from its creation, as the server does", () => {
  const created = "2026-01-10T08:00:00Z";
  const now = Date.parse("2026-01-20T00:00:00Z");
  assert.deepEqual(robotExpiry(created, -1, now), { text: "never", past: false });
  assert.deepEqual(robotExpiry(created, 30, now), { text: "2026-02-09 08:00:00 UTC", past: false });
  // shortening below the robot's age: the new expiry is already behind us
  assert.deepEqual(robotExpiry(created, 7, now), { text: "2026-01-17 08:00:00 UTC", past: true });
  for (const bad of [0, -2, 1.5, Number.NaN]) assert.deepEqual(robotExpiry(created, bad, now), { text: "—", past: false });
  assert.deepEqual(robotExpiry("garbage", 3, now), { text: "—", past: false });
});
