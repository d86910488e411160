import { test } from "node:test";
import assert from "node:assert/strict";
import { WEBHOOK_EVENTS, webhookAddressOk, webhookBody } from "../src/pages/webhooks";

test("webhook addresses: http and https with a host, nothing else (the server refuses the rest too)", () => {
  for (const a of ["http://127.0.0.1:8080/hook", "https://ci.example/x?y=1", "HTTPS://CI.EXAMPLE/"]) assert.ok(webhookAddressOk(a), a);
  for (const a of ["file:///etc/passwd", "gopher://h:70/_x", "ftp://h/", "http://", "https:// h", "javascript:alert(1)", ""]) assert.ok(!webhookAddressOk(a), a);
});

test("the event picker offers the server's eight event types", () => {
  assert.equal(WEBHOOK_EVENTS.length, 8);
  assert.ok(WEBHOOK_EVENTS.includes("ISA_SCAN_COMPLETED"));
});

test("an edited policy's body: the form's target first, the other targets as the API gave them (a masked header keeps its value)", () => {
  const second = { type: "http", address: "http://b.example/", auth_header: "*****", skip_cert_verify: false, payload_format: "Default" };
  const body = webhookBody(
    { name: "n", description: "d", enabled: false, events: new Set(["REPLICATION", "PUSH_ARTIFACT"]), address: "https://a.example/h", auth: "*****", skip: true, format: "CloudEvents" },
    [second],
  );
  assert.deepEqual(body, {
    name: "n",
    description: "d",
    enabled: false,
    event_types: ["PUSH_ARTIFACT", "REPLICATION"], // the server's order, whatever order they were ticked in
    targets: [{ type: "http", address: "https://a.example/h", auth_header: "*****", skip_cert_verify: true, payload_format: "CloudEvents" }, second],
  });
  assert.equal(webhookBody({ name: "n", description: "", enabled: true, events: new Set(["PUSH_ARTIFACT"]), address: "http://x/", auth: "", skip: false, format: "Default" }).targets.length, 1);
});
