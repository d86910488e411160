import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSpeed } from "../src/proxy";

test("proxy_speed_kb from the form: empty is no limit, else a positive whole number of KiB/s", () => {
  assert.deepEqual(parseSpeed(""), { value: "-1" });
  assert.deepEqual(parseSpeed("  "), { value: "-1" });
  assert.deepEqual(parseSpeed("512"), { value: "512" });
  assert.deepEqual(parseSpeed(" 0100 "), { value: "100" });
  for (const bad of ["0", "-1", "1.5", "1e3", "fast", "99999999999"]) assert.ok("error" in parseSpeed(bad), bad);
});
