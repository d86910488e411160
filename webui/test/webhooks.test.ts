import { test } from "node:test";
import assert from "node:assert/strict";
import { WEBHOOK_EVENTS, webhookAddressOk } from "../src/pages/webhooks";

test("webhook addresses: http and https with a host, nothing else (the server refuses the rest too)", () => {
  for (const a of ["http://127.0.0.1:8080/hook", "https://ci.example/x?y=1", "HTTPS://CI.EXAMPLE/"]) assert.ok(webhookAddressOk(a), a);
  for (const a of ["file:///etc/passwd", "gopher://h:70/_x", "ftp://h/", "http://", "https:// h", "javascript:alert(1)", ""]) assert.ok(!webhookAddressOk(a), a);
});

test("the event picker offers the server's eight event types", () => {
  assert.equal(WEBHOOK_EVENTS.length, 8);
  assert.ok(WEBHOOK_EVENTS.includes("ISA_SCAN_COMPLETED"));
});
