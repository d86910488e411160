import { test } from "node:test";
import assert from "node:assert/strict";
import { harborQ, listUrl, pageCount, readListState, repoInProject, repoSegment, writeListState } from "../src/query";

test("Harbor's q= syntax: exact, fuzzy, empty values left out", () => {
  assert.equal(harborQ({ name: "~web", public: true }), "name=~web,public=true");
  assert.equal(harborQ({ name: "", operation: undefined, user: null }), "");
});

test("list URLs: page and page_size clamped, q and sort encoded", () => {
  assert.equal(listUrl("/projects"), "/projects?page=1&page_size=10");
  assert.equal(listUrl("/projects", { page: 0, pageSize: 500 }), "/projects?page=1&page_size=100");
  assert.equal(listUrl("/projects", { page: 3, pageSize: 25, sort: "-update_time", q: { name: "~a b" } }),
    "/projects?page=3&page_size=25&sort=-update_time&q=name%3D%7Ea+b");
  assert.equal(listUrl("/x", { extra: { entityname: "bob", skip: undefined } }), "/x?page=1&page_size=10&entityname=bob");
});

test("repository names: project prefix dropped, slashes double-encoded", () => {
  assert.equal(repoInProject("team", "team/tools/cc"), "tools/cc");
  assert.equal(repoInProject("team", "other/x"), "other/x");
  assert.equal(repoSegment("tools/cc"), "tools%252Fcc");
});

test("list state round-trips through the URL, defaults omitted", () => {
  const d = { sort: "name", pageSize: 10 };
  assert.deepEqual(readListState("", d), { page: 1, pageSize: 10, sort: "name", q: "" });
  const s = readListState("?q=web&sort=-pull_count&page=3&size=50", d);
  assert.deepEqual(s, { page: 3, pageSize: 50, sort: "-pull_count", q: "web" });
  assert.equal(writeListState(s, d), "?q=web&sort=-pull_count&page=3&size=50");
  assert.equal(writeListState({ page: 1, pageSize: 10, sort: "name", q: "" }, d), "");
  assert.deepEqual(readListState("?page=-4&size=abc", d), { page: 1, pageSize: 10, sort: "name", q: "" });
  assert.equal(readListState("?size=1000", d).pageSize, 100);
  assert.equal(pageCount(0, 10), 1);
  assert.equal(pageCount(10001, 100), 101);
});
