import { test } from "node:test";
import assert from "node:assert/strict";
import { importOutcome, sameDn } from "../src/pages/admin";

test("a directory group is recognised whatever the case and spacing of its DN", () => {
  assert.ok(sameDn("cn=devs,ou=groups,dc=berth,dc=test", "CN=devs, OU=Groups, DC=berth, DC=test"));
  assert.ok(sameDn("cn = devs,dc=x", "cn=devs,dc=x"));
  assert.ok(!sameDn("cn=devs,ou=groups,dc=berth,dc=test", "cn=ops,ou=groups,dc=berth,dc=test"));
  assert.ok(!sameDn("cn=devs,dc=x", "cn=devs,dc=x,dc=y"));
});

test("an import names what was imported and why the rest was not", () => {
  assert.deepEqual(importOutcome(["frank", "gina"], []), { imported: ["frank", "gina"], failed: [] });
  const failed = [{ uid: "henry", error: "a local user has this name" }];
  assert.deepEqual(importOutcome(["frank", "henry", "gina"], failed), { imported: ["frank", "gina"], failed });
});

test("the sign-in page says which accounts sign in, from systeminfo's auth_mode", async () => {
  const { accountsText } = await import("../src/pages/login");
  assert.match(accountsText("ldap_auth"), /directory \(LDAP\) account/);
  assert.equal(accountsText("db_auth"), "Your Berth account.");
  assert.equal(accountsText(undefined), "Local or LDAP account."); // not known yet (or an old server)
});
