import { test } from "node:test";
import assert from "node:assert/strict";
import { Perms, ROBOT_PERMISSIONS } from "../src/perms";
import { safeNext } from "../src/pages/login";

const guest = [
  { resource: "repository", action: "pull" },
  { resource: "repository", action: "list" },
  { resource: "artifact", action: "read" },
  { resource: "member", action: "list" },
];

test("a guest may pull and list, not push or delete", () => {
  const p = new Perms(guest);
  assert.ok(p.can("repository", "pull"));
  assert.ok(!p.can("repository", "push"));
  assert.ok(!p.can("repository", "delete"));
  assert.ok(!p.can("member", "create"));
});

test("system admins may do everything; nobody may do anything from an empty list", () => {
  assert.ok(new Perms([], true).can("project", "delete"));
  assert.ok(!new Perms([]).can("repository", "pull"));
});

test("a robot can be granted only what its creator holds", () => {
  const g = new Perms(guest).grantable(ROBOT_PERMISSIONS).map((x) => `${x.resource}:${x.action}`);
  assert.deepEqual(g, ["repository:pull", "repository:list", "artifact:read"]);
  assert.equal(new Perms([], true).grantable(ROBOT_PERMISSIONS).length, ROBOT_PERMISSIONS.length);
});

test("sign-in returns only to same-site paths", () => {
  assert.equal(safeNext("/projects/x/members"), "/projects/x/members");
  assert.equal(safeNext("//evil.example/"), "/projects");
  assert.equal(safeNext("https://evil.example/"), "/projects");
  assert.equal(safeNext("/login?next=/x"), "/projects");
  assert.equal(safeNext(null), "/projects");
});
