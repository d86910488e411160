"""The REST API (/api/v2.0): Harbor's paths and shapes, pagination, the role matrix on every endpoint, robot
accounts, browser sessions with CSRF, OAuth2 token grants, the audit log and the OpenAPI document."""
import base64
import json
import os
import re
import time
import urllib.parse

import yaml

from harness import ADMIN_AUTH, ADMIN_PASSWORD, BerthTestCase, Berthd, error_code, eventually, main, psql

PW = "Passw0rd!x"


def basic(user, pw=PW):
    return "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode()


class Api(BerthTestCase):
    @classmethod
    def setUpClass(cls):
        # a 1 s revocation window (auth.decision_ttl_seconds) so changes to credentials need no long waits
        cls.b = Berthd(env={"BERTH_ADMIN_PASSWORD": ADMIN_PASSWORD, "BERTH_AUTH_DECISION_TTL": "1"}).start()
        for u in ("padmin", "maint", "dev", "guest", "lguest", "outsider"):
            st, _, body = cls.api_cls("POST", "/users", {"username": u, "password": PW, "email": u + "@example.org"})
            assert st == 201, (st, body)
        st, _, _ = cls.api_cls("POST", "/projects", {"project_name": "team", "metadata": {"public": "false"}})
        assert st == 201
        for user, role in (("padmin", 1), ("dev", 2), ("guest", 3), ("maint", 4), ("lguest", 5)):
            st, _, body = cls.api_cls("POST", "/projects/team/members", {"role_id": role, "member_user": {"username": user}})
            assert st == 201, (st, body)
        cls.digest, _ = cls.b.push_image("team/app", "v1")

    @classmethod
    def api_cls(cls, method, path, body=None, auth=ADMIN_AUTH, headers=None):
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode() if not isinstance(body, (bytes, str)) else body
            h.setdefault("Content-Type", "application/json")
        st, hdrs, raw = cls.b.request(method, "/api/v2.0" + path, data, h, auth=auth)
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        return st, hdrs, parsed

    def api(self, method, path, body=None, auth=ADMIN_AUTH, headers=None):
        return self.api_cls(method, path, body, auth, headers)

    # --- projects ------------------------------------------------------------------------------------------
    def test_head_project_does_not_reveal_private_names(self):
        """HEAD ?project_name= answers an outsider as for a name nobody uses; members and admins see the truth."""
        self.assertEqual(self.api("HEAD", "/projects?project_name=team", auth=basic("outsider"))[0], 404)
        self.assertEqual(self.api("HEAD", "/projects?project_name=nosuchname", auth=basic("outsider"))[0], 404)
        for who in ("lguest", "guest", "padmin"):
            self.assertEqual(self.api("HEAD", "/projects?project_name=team", auth=basic(who))[0], 200, who)
        self.assertEqual(self.api("HEAD", "/projects?project_name=team")[0], 200)  # admin
        self.assertEqual(self.api("POST", "/projects", {"project_name": "seen", "public": True})[0], 201)
        self.assertEqual(self.api("HEAD", "/projects?project_name=seen", auth=basic("outsider"))[0], 200)  # public

    def test_project_lifecycle_and_shape(self):
        st, h, _ = self.api("POST", "/projects", {"project_name": "shape", "public": True})
        self.assertEqual(st, 201)
        self.assertRegex(h["location"], r"^/api/v2\.0/projects/\d+$")
        st, _, p = self.api("GET", "/projects/shape")
        self.assertEqual(st, 200)
        self.assertEqual((p["name"], p["metadata"]["public"], p["owner_name"], p["repo_count"]), ("shape", "true", "admin", 0))
        st, _, p2 = self.api("GET", "/projects/%d" % p["project_id"])  # by id as Harbor allows
        self.assertEqual((st, p2["name"]), (200, "shape"))
        self.assertEqual(self.api("POST", "/projects", {"project_name": "shape"})[0], 409)
        for bad in ("UPPER", "a/b", "", "-lead", "x" * 300):
            self.assertEqual(self.api("POST", "/projects", {"project_name": bad})[0], 400, bad)
        self.assertEqual(self.api("POST", "/projects", b"{not json")[0], 400)
        self.assertEqual(self.api("HEAD", "/projects?project_name=shape")[0], 200)
        self.assertEqual(self.api("HEAD", "/projects?project_name=nope")[0], 404)
        self.assertEqual(self.api("PUT", "/projects/shape", {"metadata": {"public": "false"}})[0], 200)
        self.assertEqual(self.api("GET", "/projects/shape")[2]["metadata"]["public"], "false")
        self.assertEqual(self.api("DELETE", "/projects/shape")[0], 200)
        self.assertEqual(self.api("GET", "/projects/shape")[0], 404)
        # a project with repositories stays
        st, _, body = self.api("DELETE", "/projects/team")
        self.assertEqual((st, error_code(json.dumps(body).encode())), (412, "PRECONDITION"))

    def test_creation_restricted_to_admins_by_default(self):
        st, _, body = self.api("POST", "/projects", {"project_name": "mine"}, auth=basic("dev"))
        self.assertEqual(st, 403)
        self.assertEqual(self.api("GET", "/systeminfo")[2]["project_creation_restriction"], "adminonly")
        self.assertEqual(self.api("POST", "/projects", {"project_name": "anon"}, auth=None)[0], 401)

    def test_pagination_and_filters(self):
        for i in range(23):
            self.assertEqual(self.api("POST", "/projects", {"project_name": "page%02d" % i})[0], 201)
        st, h, page1 = self.api("GET", "/projects?page=1&page_size=10&q=name%3D~page")
        self.assertEqual((st, h["x-total-count"], len(page1)), (200, "23", 10))
        self.assertIn('rel="next"', h["link"])
        self.assertNotIn('rel="prev"', h["link"])
        self.assertIn("q=name%3D~page", h["link"])
        st, h, page3 = self.api("GET", "/projects?page=3&page_size=10&q=name%3D~page")
        self.assertEqual([p["name"] for p in page3], ["page20", "page21", "page22"])
        self.assertIn('rel="prev"', h["link"])
        self.assertNotIn('rel="next"', h["link"])
        names = [p["name"] for p in page1] + [p["name"] for p in self.api("GET", "/projects?page=2&page_size=10&name=page")[2]]
        self.assertEqual(names, ["page%02d" % i for i in range(20)])
        st, h, exact = self.api("GET", "/projects?q=name%3Dpage07")
        self.assertEqual([p["name"] for p in exact], ["page07"])
        for bad in ("page=0", "page_size=101", "page_size=x", "public=maybe"):
            self.assertEqual(self.api("GET", "/projects?" + bad)[0], 400, bad)

    def test_visibility_and_existence_do_not_leak(self):
        self.api("POST", "/projects", {"project_name": "openproj", "public": True})
        anon = [p["name"] for p in self.api("GET", "/projects?page_size=100", auth=None)[2]]
        self.assertIn("openproj", anon)
        self.assertNotIn("team", anon)
        self.assertNotIn("team", [p["name"] for p in self.api("GET", "/projects?page_size=100", auth=basic("outsider"))[2]])
        mine = {p["name"]: p for p in self.api("GET", "/projects?page_size=100", auth=basic("dev"))[2]}
        self.assertEqual(mine["team"]["current_user_role_id"], 2)
        # a private project answers exactly like one that does not exist
        for auth, status in ((None, 401), (basic("outsider"), 404)):
            a = self.api("GET", "/projects/team", auth=auth)
            b = self.api("GET", "/projects/doesnotexist", auth=auth)
            self.assertEqual(a[0], status)
            self.assertEqual(a[0], b[0])
            self.assertEqual(a[2]["errors"][0]["code"], b[2]["errors"][0]["code"])
            self.assertEqual(self.api("GET", "/projects/team/repositories", auth=auth)[0], status)
        self.assertEqual(self.api("GET", "/projects/openproj", auth=None)[0], 200)

    # --- members and the role matrix ----------------------------------------------------------------------
    def test_members(self):
        st, h, members = self.api("GET", "/projects/team/members")
        roles = {m["entity_name"]: (m["role_id"], m["role_name"]) for m in members}
        self.assertEqual(roles["admin"], (1, "projectAdmin"))  # the creator
        self.assertEqual(roles["lguest"], (5, "limitedGuest"))
        self.assertEqual(roles["maint"], (4, "maintainer"))
        # guests may list members, limited guests may not (Harbor's matrix)
        self.assertEqual(self.api("GET", "/projects/team/members", auth=basic("guest"))[0], 200)
        self.assertEqual(self.api("GET", "/projects/team/members", auth=basic("lguest"))[0], 403)
        # only project admins change membership
        body = {"role_id": 3, "member_user": {"username": "outsider"}}
        for who in ("maint", "dev", "guest"):
            self.assertEqual(self.api("POST", "/projects/team/members", body, auth=basic(who))[0], 403, who)
        st, h, _ = self.api("POST", "/projects/team/members", body, auth=basic("padmin"))
        self.assertEqual(st, 201)
        mid = h["location"].rsplit("/", 1)[1]
        self.assertEqual(self.api("POST", "/projects/team/members", body, auth=basic("padmin"))[0], 409)
        self.assertEqual(self.api("POST", "/projects/team/members", {"role_id": 9, "member_user": {"username": "x"}})[0], 400)
        self.assertEqual(self.api("POST", "/projects/team/members", {"role_id": 3, "member_user": {"username": "ghost"}})[0], 404)
        self.assertEqual(self.api("PUT", "/projects/team/members/" + mid, {"role_id": 2}, auth=basic("padmin"))[0], 200)
        self.assertEqual(self.api("GET", "/projects/team/members/" + mid)[2]["role_name"], "developer")
        self.assertEqual(self.api("DELETE", "/projects/team/members/" + mid, auth=basic("padmin"))[0], 200)
        self.assertEqual(self.api("GET", "/projects/team/members/" + mid)[0], 404)
        ops = [(e["operation"], e["resource"]) for e in self.audit("/projects/team/logs?page_size=100&q=resource_type%3Dmember")]
        self.assertIn(("create", "outsider"), ops)
        self.assertIn(("delete", "outsider"), ops)

    def test_permissions_endpoint(self):
        st, _, perms = self.api("GET", "/users/current/permissions?scope=/project/team", auth=basic("dev"))
        got = {(p["resource"], p["action"]) for p in perms}
        self.assertIn(("repository", "push"), got)
        self.assertNotIn(("repository", "delete"), got)
        self.assertNotIn(("member", "create"), got)
        got = {(p["resource"], p["action"]) for p in self.api("GET", "/users/current/permissions?scope=/project/team",
                                                              auth=basic("padmin"))[2]}
        self.assertIn(("member", "create"), got)

    # --- repositories, artifacts, tags ---------------------------------------------------------------------
    def test_repositories_artifacts_tags(self):
        d, _ = self.b.push_image("team/nested/tool", "1.0")
        st, h, repos = self.api("GET", "/projects/team/repositories", auth=basic("guest"))
        self.assertEqual(st, 200)
        names = {r["name"]: r for r in repos}
        self.assertIn("team/nested/tool", names)
        self.assertEqual(names["team/nested/tool"]["artifact_count"], 1)
        enc = urllib.parse.quote(urllib.parse.quote("nested/tool", safe=""), safe="")  # Harbor's %252F
        st, _, repo = self.api("GET", "/projects/team/repositories/" + enc)
        self.assertEqual((st, repo["name"]), (200, "team/nested/tool"))
        st, _, arts = self.api("GET", "/projects/team/repositories/%s/artifacts" % enc)
        self.assertEqual((st, len(arts), arts[0]["digest"]), (200, 1, d))
        self.assertEqual([t["name"] for t in arts[0]["tags"]], ["1.0"])
        self.assertGreater(arts[0]["size"], 1024)
        self.assertEqual(self.api("GET", "/projects/team/repositories/%s/artifacts/1.0" % enc)[2]["digest"], d)
        # tagging through the API is visible to /v2 at once (the read cache is invalidated)
        self.assertEqual(self.b.request("GET", "/v2/team/nested/tool/manifests/1.0")[0], 200)
        self.assertEqual(self.b.request("GET", "/v2/team/nested/tool/manifests/stable")[0], 404)
        st, _, body = self.api("POST", "/projects/team/repositories/%s/artifacts/%s/tags" % (enc, d), {"name": "stable"},
                               auth=basic("dev"))
        self.assertEqual(st, 201, body)
        self.assertEqual(self.api("POST", "/projects/team/repositories/%s/artifacts/%s/tags" % (enc, d), {"name": "stable"})[0], 409)
        self.assertEqual(self.api("POST", "/projects/team/repositories/%s/artifacts/%s/tags" % (enc, d), {"name": "bad tag"})[0], 400)
        self.assertEqual(self.api("POST", "/projects/team/repositories/%s/artifacts/%s/tags" % (enc, d), {"name": "g"},
                                  auth=basic("guest"))[0], 403)
        st, h, body = self.b.request("GET", "/v2/team/nested/tool/manifests/stable")
        self.assertEqual((st, h["docker-content-digest"]), (200, d))
        tags = self.api("GET", "/projects/team/repositories/%s/artifacts/%s/tags" % (enc, d))[2]
        self.assertEqual(sorted(t["name"] for t in tags), ["1.0", "stable"])
        self.assertEqual(self.api("DELETE", "/projects/team/repositories/%s/artifacts/%s/tags/stable" % (enc, d))[0], 200)
        self.assertEqual(self.api("DELETE", "/projects/team/repositories/%s/artifacts/%s/tags/stable" % (enc, d))[0], 404)
        self.assertEqual(self.b.request("GET", "/v2/team/nested/tool/manifests/stable")[0], 404)
        # developers may not delete artifacts; maintainers may
        self.assertEqual(self.api("DELETE", "/projects/team/repositories/%s/artifacts/%s" % (enc, d), auth=basic("dev"))[0], 403)
        self.assertEqual(self.b.request("GET", "/v2/team/nested/tool/manifests/" + d)[0], 200)
        self.assertEqual(self.api("DELETE", "/projects/team/repositories/%s/artifacts/%s" % (enc, d), auth=basic("maint"))[0], 200)
        self.assertEqual(self.b.request("GET", "/v2/team/nested/tool/manifests/" + d)[0], 404)
        self.assertEqual(self.api("DELETE", "/projects/team/repositories/" + enc, auth=basic("maint"))[0], 200)
        self.assertEqual(self.api("GET", "/projects/team/repositories/" + enc)[0], 404)
        self.assertEqual(self.api("GET", "/projects/team/repositories/..%252Fx")[0], 400)
        # each committed change is one success row; a refused one (409 tag exists, 404 tag gone) only its failure
        # row: the change event is emitted after commit, never for a change that did not happen. The audit writer
        # keeps queue order, so once the repository delete (the last change) is there, all rows before it are too.
        rows = self.audit("/audit-logs?page_size=100&q=resource%3D~team/nested/tool", timeout=20, want=lambda rows: any(
            r["operation"] == "delete" and r["resource_type"] == "repository" for r in rows))

        def count(op, rtype, resource, result):
            return sum(1 for r in rows if (r["operation"], r["resource_type"], r["resource"], r["result"]) == (op, rtype, resource, result))
        self.assertEqual(count("create", "tag", "team/nested/tool:stable", "success"), 1, rows)
        self.assertEqual(count("create", "tag", "team/nested/tool:stable", "failure"), 1, rows)
        self.assertEqual(count("delete", "tag", "team/nested/tool:stable", "success"), 1, rows)
        self.assertEqual(count("delete", "tag", "team/nested/tool:stable", "failure"), 1, rows)
        self.assertEqual(count("delete", "artifact", "team/nested/tool@" + d, "success"), 1, rows)
        self.assertEqual(count("delete", "repository", "team/nested/tool", "success"), 1, rows)

    def test_image_config_and_build_history(self):
        """Harbor's extra_attrs (from the image config) on an artifact and its additions/build_history"""
        history = [{"created": "2026-01-02T03:04:05Z", "created_by": "/bin/sh -c #(nop) ADD file:abc in /"},
                   {"created": "2026-01-02T03:04:06Z", "created_by": "/bin/sh -c #(nop)  CMD [\"sh\"]", "empty_layer": True}]
        runtime = {"Entrypoint": ["/entry.sh"], "Cmd": ["serve", "--port", "80"], "Env": ["PATH=/usr/bin", "MODE=prod"],
                   "Labels": {"org.opencontainers.image.source": "https://example.org/app"}, "WorkingDir": "/srv"}
        d, _ = self.b.push_image("team/configured", "1", config={"author": "Ada", "created": "2026-01-02T03:04:06Z",
                                                                 "config": runtime, "history": history})
        st, _, art = self.api("GET", "/projects/team/repositories/configured/artifacts/1", auth=basic("guest"))
        self.assertEqual(st, 200)
        self.assertEqual(art["extra_attrs"], {"architecture": "amd64", "os": "linux", "author": "Ada",
                                              "created": "2026-01-02T03:04:06Z", "config": runtime})
        self.assertEqual(self.api("GET", "/projects/team/repositories/configured/artifacts/%s" % d)[2]["extra_attrs"]["config"], runtime)
        for ref in ("1", d):
            st, _, h = self.api("GET", "/projects/team/repositories/configured/artifacts/%s/additions/build_history" % ref, auth=basic("guest"))
            self.assertEqual((st, h), (200, history))
        # a config without history or runtime part: [] and {}, as Harbor answers
        self.assertEqual(self.api("GET", "/projects/team/repositories/app/artifacts/v1/additions/build_history")[2], [])
        self.assertEqual(self.api("GET", "/projects/team/repositories/app/artifacts/v1")[2]["extra_attrs"]["config"], {})
        # an index has no image config: no extra_attrs, no build history
        d2, _ = self.b.push_image("team/configured", "2")
        idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d2, "size": 0,
             "platform": {"os": "linux", "architecture": "amd64"}}]}
        idx["manifests"][0]["size"] = len(self.b.request("GET", "/v2/team/configured/manifests/2")[2])
        st, _, _, _ = self.b.push_manifest("team/configured", "multi", idx, "application/vnd.oci.image.index.v1+json")
        self.assertEqual(st, 201)
        self.assertNotIn("extra_attrs", self.api("GET", "/projects/team/repositories/configured/artifacts/multi")[2])
        st, _, err = self.api("GET", "/projects/team/repositories/configured/artifacts/multi/additions/build_history")
        self.assertEqual((st, err["errors"][0]["code"]), (404, "NOT_FOUND"))
        for path, want in (("artifacts/1/additions/readme.md", 404), ("artifacts/nope/additions/build_history", 404)):
            self.assertEqual(self.api("GET", "/projects/team/repositories/configured/" + path)[0], want, path)
        # no more visible than the project
        self.assertEqual(self.api("GET", "/projects/team/repositories/configured/artifacts/1/additions/build_history", auth=basic("outsider"))[0], 404)
        self.assertEqual(self.api("GET", "/projects/team/repositories/configured/artifacts/1/additions/build_history", auth=None)[0], 401)

    def test_index_references_and_summary(self):
        d1, m1 = self.b.push_image("team/multi", "amd64")
        d2, m2 = self.b.push_image("team/multi", "arm64")
        idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d1, "size": len(m1),
             "platform": {"architecture": "amd64", "os": "linux"}},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d2, "size": len(m2),
             "platform": {"architecture": "amd64", "os": "linux", "variant": "v3"}}]}
        st, h, _, _ = self.b.push_manifest("team/multi", "latest", idx, "application/vnd.oci.image.index.v1+json")
        self.assertEqual(st, 201)
        art = self.api("GET", "/projects/team/repositories/multi/artifacts/latest")[2]
        refs = {r["child_digest"]: r["platform"] for r in art["references"]}
        self.assertEqual(refs[d2]["variant"], "v3")  # (the children's configs say amd64: the ISA checks verify that)
        self.assertNotIn("variant", refs[d1])
        st, _, s = self.api("GET", "/projects/team/summary")
        self.assertEqual(st, 200)
        self.assertGreater(s["quota"]["used"]["storage"], 3 * 1024)
        self.assertEqual((s["project_admin_count"], s["limited_guest_count"]), (2, 1))

    # --- users -------------------------------------------------------------------------------------------
    def test_malformed_ids_are_refused_and_change_nothing(self):
        # every /{id} path shares one check: 1..18 digits; anything else is a 400 before any SQL runs
        st, _, before = self.api("GET", "/users?page_size=100")
        self.assertEqual(st, 200)
        st, _, members_before = self.api("GET", "/projects/team/members")
        self.assertEqual(st, 200)
        for bad in ("abc", "12x", "-1", "1234567890123456789"):
            for method, path in (("GET", "/users/%s"), ("DELETE", "/users/%s"), ("GET", "/robots/%s"), ("DELETE", "/robots/%s"),
                                 ("GET", "/registries/%s"), ("DELETE", "/registries/%s"), ("GET", "/replication/policies/%s"),
                                 ("DELETE", "/replication/policies/%s"), ("DELETE", "/projects/team/members/%s"),
                                 ("GET", "/usergroups/%s"), ("DELETE", "/usergroups/%s")):
                st, _, body = self.api(method, path % bad)
                self.assertEqual(st, 400, (method, path % bad, body))
                self.assertEqual(body["errors"][0]["code"], "BAD_REQUEST", (method, path % bad, body))
        st, _, after = self.api("GET", "/users?page_size=100")
        self.assertEqual(sorted(u["user_id"] for u in after), sorted(u["user_id"] for u in before))
        st, _, members_after = self.api("GET", "/projects/team/members")
        self.assertEqual(members_after, members_before)

    def test_users(self):
        self.assertEqual(self.api("GET", "/users", auth=basic("dev"))[0], 403)
        self.assertEqual(self.api("POST", "/users", {"username": "x1", "password": PW}, auth=basic("padmin"))[0], 403)
        for bad in ({"username": "weak", "password": "password"}, {"username": "robot$x", "password": PW},
                    {"username": "a:b", "password": PW}, {"password": PW}):
            self.assertEqual(self.api("POST", "/users", bad)[0], 400, bad)
        st, h, _ = self.api("POST", "/users", {"username": "carol", "password": PW, "realname": "Carol"})
        uid = h["location"].rsplit("/", 1)[1]
        self.assertEqual(self.api("POST", "/users", {"username": "carol", "password": PW})[0], 409)
        st, _, me = self.api("GET", "/users/current", auth=basic("carol"))
        self.assertEqual((st, me["username"], me["realname"], me["sysadmin_flag"]), (200, "carol", "Carol", False))
        self.assertNotIn("password", json.dumps(me))
        self.assertEqual(self.api("GET", "/users/" + uid, auth=basic("dev"))[0], 403)
        self.assertEqual(self.api("PUT", "/users/" + uid, {"email": "c@example.org"}, auth=basic("carol"))[0], 200)
        self.assertEqual(self.api("GET", "/users/" + uid)[2]["email"], "c@example.org")
        # own password: the old one is required
        new = "N3wPassword"
        self.assertEqual(self.api("PUT", "/users/%s/password" % uid, {"old_password": "nope", "new_password": new},
                                  auth=basic("carol"))[0], 403)
        self.assertEqual(self.api("PUT", "/users/%s/password" % uid, {"old_password": PW, "new_password": "short"},
                                  auth=basic("carol"))[0], 400)
        self.assertEqual(self.api("PUT", "/users/%s/password" % uid, {"old_password": PW, "new_password": new},
                                  auth=basic("carol"))[0], 200)
        # the old password stops working once the 1 s revocation window has passed
        self.assertEqual(eventually(lambda: self.api("GET", "/users/current", auth=basic("carol"))[0], 401), 401)
        self.assertEqual(self.api("GET", "/users/current", auth=basic("carol", new))[0], 200)
        found = self.api("GET", "/users/search?username=car", auth=basic("dev"))[2]
        self.assertEqual([u["username"] for u in found], ["carol"])
        self.assertEqual(self.api("PUT", "/users/%s/sysadmin" % uid, {"sysadmin_flag": True})[0], 200)
        self.assertTrue(self.api("GET", "/users/current", auth=basic("carol", new))[2]["sysadmin_flag"])
        self.assertEqual(self.api("DELETE", "/users/" + uid)[0], 200)
        self.assertEqual(self.api("GET", "/users/" + uid)[0], 404)
        admin_id = self.api("GET", "/users/current")[2]["user_id"]
        self.assertEqual(self.api("DELETE", "/users/%d" % admin_id)[0], 412)

    def test_internal_replication_user_cannot_be_deleted_or_changed(self):
        # berthd's own user: replication reaches this site through it, with a password set at every start
        users = self.api("GET", "/users?username=berth-replication")[2]
        self.assertEqual([(u["username"], u["internal"], u["sysadmin_flag"]) for u in users], [("berth-replication", True, True)])
        uid = users[0]["user_id"]
        self.assertFalse(self.api("GET", "/users/current")[2]["internal"])
        for method, path, body in (("DELETE", "", None), ("PUT", "/sysadmin", {"sysadmin_flag": False}),
                                   ("PUT", "/password", {"new_password": "An0ther-Password"}), ("PUT", "", {"email": "x@example.org"})):
            st, _, err = self.api(method, "/users/%d%s" % (uid, path), body)
            self.assertEqual(st, 403, (method, path))
            self.assertEqual(err["errors"][0]["code"], "DENIED")
            self.assertIn("internal replication user", err["errors"][0]["message"])
        self.assertEqual(self.api("GET", "/users/%d" % uid)[2], users[0])  # nothing changed
        # ... and the refusals are in the audit log, as failed changes
        rows = self.audit("/audit-logs?q=resource%3Dberth-replication&page_size=10", want=lambda rows: len(rows) >= 4)
        self.assertEqual(sorted((r["operation"], r["result"]) for r in rows),
                         [("delete", "failure")] + [("update", "failure")] * 3)

    def test_replication_policy_triggers_are_checked(self):
        """A scheduled trigger's cron is one berthd runs (an invalid one never fired: the policy silently never ran)"""
        st, h, _ = self.api("POST", "/registries", {"name": "nowhere", "type": "berth", "url": "http://127.0.0.1:9"})
        self.assertEqual(st, 201)
        reg = int(h["location"].rsplit("/", 1)[1])

        def policy(name, trigger):
            return self.api("POST", "/replication/policies", {"name": name, "dest_registry": {"id": reg}, "trigger": trigger})
        sched = lambda cron: {"type": "scheduled", "trigger_settings": {"cron": cron}}
        for bad in ({"type": "scheduled"}, sched("0 0 2 * * MON"), sched("0 60 * * * *"), sched("* * *"), sched("0 */0 * * * *"),
                    {"type": "sometimes"}, {"trigger_settings": {"cron": "0 0 * * * *"}}):
            st, _, err = policy("bad", bad)
            self.assertEqual((st, err["errors"][0]["code"]), (400, "BAD_REQUEST"), bad)
        for i, good in enumerate(({"type": "manual"}, {"type": "event_based"}, sched("0 0 2 * * 0"), sched("*/5 * * * *"))):
            st, h, body = policy("good%d" % i, good)
            self.assertEqual(st, 201, (good, body))
            pid = h["location"].rsplit("/", 1)[1]
            self.assertEqual(self.api("GET", "/replication/policies/" + pid)[2]["trigger"], good)
            # an edit is checked as a creation is, and changes nothing when refused
            self.assertEqual(self.api("PUT", "/replication/policies/" + pid, {"trigger": sched("0 0 25 * * *")})[0], 400)
            self.assertEqual(self.api("GET", "/replication/policies/" + pid)[2]["trigger"], good)
            self.assertEqual(self.api("DELETE", "/replication/policies/" + pid)[0], 200)
        self.assertEqual([p["name"] for p in self.api("GET", "/replication/policies")[2]], [])  # no bad one was stored
        self.assertEqual(self.api("DELETE", "/registries/%d" % reg)[0], 200)

    # --- robots ------------------------------------------------------------------------------------------
    def robot(self, name, access, project="team", auth=ADMIN_AUTH, duration=30):
        return self.api("POST", "/robots", {"name": name, "level": "project", "duration": duration, "permissions": [
            {"kind": "project", "namespace": project, "access": [{"resource": r, "action": a} for r, a in access]}]}, auth=auth)

    def test_robot_accounts(self):
        st, h, r = self.robot("ci", [("repository", "pull"), ("repository", "push")], auth=basic("padmin"))
        self.assertEqual(st, 201, r)
        self.assertEqual(r["name"], "robot$team+ci")
        secret, rid = r["secret"], r["id"]
        self.assertGreaterEqual(len(secret), 40)
        st, _, shown = self.api("GET", "/robots/%d" % rid, auth=basic("padmin"))
        self.assertNotIn(secret, json.dumps(shown))
        self.assertNotIn("secret", shown)
        self.assertEqual(shown["permissions"][0]["namespace"], "team")
        self.assertEqual(self.api("GET", "/robots?q=Level%3Dproject,ProjectID%3Dteam", auth=basic("guest"))[0], 200)
        self.assertEqual(self.api("GET", "/robots", auth=basic("padmin"))[0], 403)  # all robots: system admins
        rauth = basic("robot$team+ci", secret)
        st, h, body = self.b.request("POST", "/v2/team/fromrobot/blobs/uploads/", auth=rauth)
        self.assertEqual(st, 202, body)
        self.assertEqual(self.b.request("GET", "/v2/team/app/manifests/v1", auth=rauth)[0], 200)
        self.assertEqual(self.b.request("DELETE", "/v2/team/app/manifests/" + self.digest, auth=rauth)[0], 403)
        self.assertEqual(self.b.request("POST", "/v2/other/x/blobs/uploads/", auth=rauth)[0], 403)
        self.assertEqual(self.api("GET", "/projects/team/members", auth=rauth)[0], 403)  # no member:list granted
        # no escalation: a project admin cannot grant what it lacks, nor create system robots
        self.assertEqual(self.api("POST", "/projects", {"project_name": "elsewhere"})[0], 201)
        self.assertEqual(self.api("POST", "/projects/elsewhere/members", {"role_id": 3, "member_user": {"username": "padmin"}})[0], 201)
        self.assertEqual(self.robot("x", [("repository", "pull")], project="elsewhere", auth=basic("padmin"))[0], 403)
        self.assertEqual(self.robot("x", [("repository", "pull")], project="nosuchproject", auth=basic("padmin"))[0], 404)
        st, _, _ = self.api("POST", "/robots", {"name": "sys", "level": "system", "permissions": [
            {"kind": "project", "namespace": "*", "access": [{"resource": "repository", "action": "pull"}]}]}, auth=basic("padmin"))
        self.assertEqual(st, 403)
        self.assertEqual(self.robot("y", [("repository", "pull")], auth=basic("dev"))[0], 403)
        self.assertEqual(self.robot("z", [("repository", "fly")])[0], 400)
        self.assertEqual(self.robot("UPPER", [("repository", "pull")])[0], 400)
        self.assertEqual(self.robot("ci", [("repository", "pull")])[0], 409)
        # refresh: the old secret stops working, the new one works
        st, _, ref = self.api("PATCH", "/robots/%d" % rid, {"secret": ""}, auth=basic("padmin"))
        self.assertEqual(st, 200)
        self.assertEqual(eventually(lambda: self.b.request("GET", "/v2/team/app/manifests/v1", auth=rauth)[0], 401), 401)
        rauth = basic("robot$team+ci", ref["secret"])
        self.assertEqual(self.b.request("GET", "/v2/team/app/manifests/v1", auth=rauth)[0], 200)
        # disable, then expiry
        self.assertEqual(self.api("PUT", "/robots/%d" % rid, {"disable": True}, auth=basic("padmin"))[0], 200)
        self.assertEqual(eventually(lambda: self.b.request("GET", "/v2/team/app/manifests/v1", auth=rauth)[0], 401), 401)
        self.assertEqual(self.api("PUT", "/robots/%d" % rid, {"disable": False}, auth=basic("padmin"))[0], 200)
        self.assertEqual(self.b.request("GET", "/v2/team/app/manifests/v1", auth=rauth)[0], 200)
        psql("UPDATE robots SET expires_at = now() - interval '1 second' WHERE id = %d" % rid, dbname=self.b.dbname)
        self.assertEqual(eventually(lambda: self.b.request("GET", "/v2/team/app/manifests/v1", auth=rauth)[0], 401), 401)
        # robots have no browser sessions
        st, _, _ = self.b.request("POST", "/c/login", "principal=robot%24team%2Bci&password=" + urllib.parse.quote(ref["secret"]),
                                  {"Content-Type": "application/x-www-form-urlencoded"}, auth=None)
        self.assertEqual(st, 401)
        self.assertEqual(self.api("DELETE", "/robots/%d" % rid, auth=basic("padmin"))[0], 200)
        self.assertEqual(self.api("GET", "/robots/%d" % rid)[0], 404)
        want = {("create", "robot"), ("refresh_secret", "robot"), ("update", "robot"), ("delete", "robot")}
        rows = self.audit("/projects/team/logs?page_size=100&q=resource_type%3Drobot",  # written asynchronously
                          want=lambda rows: want <= {(e["operation"], e["resource_type"]) for e in rows})
        ops = [(e["operation"], e["resource_type"]) for e in rows]
        for op in ("create", "refresh_secret", "update", "delete"):
            self.assertIn((op, "robot"), ops)
        self.assertNotIn(secret, self.b.logs())
        self.assertNotIn(ref["secret"], self.b.logs())

    def test_robot_token_login(self):
        st, _, r = self.robot("puller", [("repository", "pull")])
        tok = self.b.request("GET", "/service/token?service=berth-registry&scope=repository:team/app:pull,push,delete",
                             auth=basic("robot$team+puller", r["secret"]))
        self.assertEqual(tok[0], 200)
        claims = json.loads(base64.urlsafe_b64decode(json.loads(tok[2])["token"].split(".")[1] + "=="))
        self.assertEqual(claims["sub"], "robot$team+puller")
        self.assertEqual(claims["access"][0]["actions"], ["pull"])  # asked for more, granted exactly pull

    # --- sessions, CSRF, OAuth2 ------------------------------------------------------------------------------
    def login(self, user, pw):
        return self.b.request("POST", "/c/login", "principal=%s&password=%s" % (user, urllib.parse.quote(pw)),
                              {"Content-Type": "application/x-www-form-urlencoded"}, auth=None)

    def test_browser_session_and_csrf(self):
        self.assertEqual(self.login("padmin", "wrong")[0], 401)
        st, h, body = self.login("padmin", PW)
        self.assertEqual(st, 200)
        cookie = h["set-cookie"]
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Strict", cookie)
        sid = re.match(r"sid=([^;]+)", cookie).group(1)
        csrf = h["x-harbor-csrf-token"]
        jar = {"Cookie": "sid=" + sid}
        st, h, me = self.api("GET", "/users/current", auth=None, headers=jar)
        self.assertEqual((st, me["username"]), (200, "padmin"))
        self.assertEqual(h["x-harbor-csrf-token"], csrf)
        body = {"role_id": 3, "member_user": {"username": "outsider"}}
        # a change without the CSRF header (what a cross-site form would send) is refused and changes nothing
        self.assertEqual(self.api("POST", "/projects/team/members", body, auth=None, headers=jar)[0], 403)
        self.assertEqual(self.api("POST", "/projects/team/members", body, auth=None, headers=dict(jar, **{"X-Harbor-CSRF-Token": "x" * 43}))[0], 403)
        self.assertNotIn("outsider", [m["entity_name"] for m in self.api("GET", "/projects/team/members?page_size=100")[2]])
        st, h, _ = self.api("POST", "/projects/team/members", body, auth=None, headers=dict(jar, **{"X-Harbor-CSRF-Token": csrf}))
        self.assertEqual(st, 201)
        self.api("DELETE", "/projects/team/members/" + h["location"].rsplit("/", 1)[1])
        self.assertEqual(self.b.request("POST", "/c/log_out", b"", jar, auth=None)[0], 200)
        self.assertEqual(self.api("GET", "/users/current", auth=None, headers=jar)[0], 401)
        self.assertNotIn(sid, self.b.logs())
        self.assertEqual(psql("SELECT count(*) FROM sessions WHERE id_sha256 = sha256(convert_to('%s', 'UTF8'))" % sid, dbname=self.b.dbname), "0")

    def test_login_refuses_cross_site_posts(self):
        """Login CSRF: a login a browser marks as coming from another site gets 403 and no session; the same
        origin, a directly typed request and clients that send neither header (curl, CI) log in."""
        form = "principal=padmin&password=" + urllib.parse.quote(PW)
        def login(headers):
            return self.b.request("POST", "/c/login", form, dict({"Content-Type": "application/x-www-form-urlencoded"}, **headers),
                                  auth=None)
        own = "http://" + self.b.host
        for hdrs in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": own + ".evil.example"},
                     {"Origin": "https://" + self.b.host}, {"Sec-Fetch-Site": "cross-site"},
                     {"Sec-Fetch-Site": "same-site", "Origin": own}, {"Sec-Fetch-Site": "cross-site", "Origin": own}):
            st, h, body = login(hdrs)
            self.assertEqual((st, json.loads(body)["errors"][0]["code"]), (403, "DENIED"), hdrs)
            self.assertNotIn("set-cookie", h, hdrs)
        for hdrs in ({}, {"Origin": own}, {"Origin": own.upper().replace("HTTP://", "http://")},
                     {"Sec-Fetch-Site": "same-origin", "Origin": own}, {"Sec-Fetch-Site": "none"}):
            st, h, _ = login(hdrs)
            self.assertEqual(st, 200, hdrs)
            self.assertIn("sid=", h["set-cookie"])

    def test_oauth2_token_grants(self):
        def post(form):
            st, h, body = self.b.request("POST", "/service/token", urllib.parse.urlencode(form),
                                         {"Content-Type": "application/x-www-form-urlencoded"}, auth=None)
            return st, json.loads(body)
        st, r = post({"grant_type": "password", "username": "dev", "password": PW, "service": "berth-registry",
                      "client_id": "docker", "access_type": "offline", "scope": "repository:team/app:pull,push,delete"})
        self.assertEqual(st, 200, r)
        self.assertEqual(r["scope"], "repository:team/app:pull,push")  # delete is not the developer's
        refresh = r["refresh_token"]
        st, r2 = post({"grant_type": "refresh_token", "refresh_token": refresh, "service": "berth-registry", "client_id": "docker",
                       "scope": "repository:team/app:pull"})
        self.assertEqual((st, r2["scope"]), (200, "repository:team/app:pull"))
        self.assertNotIn("refresh_token", r2)
        bearer = {"Authorization": "Bearer " + r2["access_token"]}
        self.assertEqual(self.b.request("GET", "/v2/team/app/manifests/v1", headers=bearer)[0], 200)
        self.assertEqual(post({"grant_type": "refresh_token", "refresh_token": "x" * 43, "service": "berth-registry"})[0], 401)
        self.assertEqual(post({"grant_type": "password", "username": "dev", "password": "bad", "service": "berth-registry"})[0], 401)
        self.assertEqual(post({"grant_type": "client_credentials"})[0], 400)
        # GET with offline_token=true also hands out a refresh token
        st, h, body = self.b.request("GET", "/service/token?service=berth-registry&offline_token=true", auth=basic("dev"))
        self.assertIn("refresh_token", json.loads(body))
        self.assertNotIn(refresh, self.b.logs())
        # a disabled user's refresh token dies with the account
        psql("UPDATE users SET disabled = true WHERE username = 'lguest'", dbname=self.b.dbname)
        try:
            st, r = post({"grant_type": "password", "username": "lguest", "password": PW, "access_type": "offline"})
            self.assertEqual(st, 401)
        finally:
            psql("UPDATE users SET disabled = false WHERE username = 'lguest'", dbname=self.b.dbname)

    # --- audit log ---------------------------------------------------------------------------------------
    def audit(self, path, auth=ADMIN_AUTH, want=None, timeout=5):
        deadline = time.time() + timeout
        while True:  # the audit writer is asynchronous
            st, _, rows = self.api("GET", path, auth=auth)
            assert st == 200, (st, rows)
            if want is None or want(rows) or time.time() > deadline:
                return rows
            time.sleep(0.1)

    def test_audit_log(self):
        d, _ = self.b.push_image("team/audited", "t1", seed=7)
        self.assertEqual(self.b.request("GET", "/v2/team/audited/manifests/t1", auth=basic("guest"))[0], 200)
        self.assertEqual(self.b.request("GET", "/v2/team/audited/manifests/t1", auth=basic("guest"))[0], 200)  # cached path
        self.assertEqual(self.b.request("PUT", "/v2/team/audited/manifests/t2", b"{}", {"Content-Type": "application/json"},
                                        auth=basic("guest"))[0], 403)
        self.assertEqual(self.b.request("DELETE", "/v2/team/audited/manifests/t1", auth=basic("maint"))[0], 202)
        self.b.request("GET", "/service/token?service=berth-registry", auth=basic("dev", "wrongpass"))

        def has(rows, **kv):
            return any(all(r.get(k) == v for k, v in kv.items()) for r in rows)
        # the second pull (same caller, address and manifest within 10 s) is counted on one row, written when its
        # window closes
        want = lambda rows: has(rows, operation="delete", username="maint") and sum(
            r["count"] for r in rows if r["operation"] == "pull" and r["username"] == "guest") >= 2
        rows = self.audit("/audit-logs?page_size=100&q=resource%3D~team/audited", want=want, timeout=20)
        self.assertTrue(has(rows, operation="push", username="admin", resource="team/audited:t1", result="success"), rows)
        pulls = [r for r in rows if r["operation"] == "pull" and r["username"] == "guest"]
        self.assertEqual(sum(r["count"] for r in pulls), 2)
        self.assertEqual(sorted(r["count"] for r in pulls), [1, 1])  # the first at once, the repeat when the window closed
        self.assertTrue(has(rows, operation="push", username="guest", result="failure"))
        self.assertTrue(has(rows, operation="delete", username="maint", resource="team/audited:t1", resource_type="tag"))
        self.assertTrue(all(r["remote"] == "127.0.0.1" for r in rows if r["operation"] == "pull"))
        logins = self.audit("/audit-logs?q=operation%3Dlogin,username%3Ddev", want=lambda rows: has(rows, result="failure"))
        self.assertTrue(has(logins, result="failure"))
        # pulls are counted on the repository
        self.assertGreaterEqual(self.api("GET", "/projects/team/repositories/audited")[2]["pull_count"], 2)
        # project admins read their project's log, developers do not, anonymous never
        self.assertEqual(self.api("GET", "/projects/team/logs", auth=basic("padmin"))[0], 200)
        self.assertEqual(self.api("GET", "/projects/team/logs", auth=basic("dev"))[0], 403)
        self.assertEqual(self.api("GET", "/audit-logs", auth=None)[0], 401)
        self.assertTrue(len(self.audit("/audit-logs?page_size=5", auth=basic("padmin"))) > 0)
        self.assertEqual(self.audit("/audit-logs", auth=basic("outsider")), [])

    def test_login_time_does_not_reveal_which_users_exist(self):
        """Unknown names are verified against a dummy argon2 hash: a wrong password for a real user and any password
        for a name that does not exist cost the same (without the dummy, unknown names answer ~50x faster)."""
        for i in range(2):
            self.api("POST", "/users", {"username": "timing%d" % i, "password": PW})

        def cost(user):
            t0 = time.monotonic()
            st = self.b.request("GET", "/service/token?service=berth-registry", auth=basic(user, "Wrong-pass1"))[0]
            self.assertEqual(st, 401)
            return time.monotonic() - t0
        known = sorted(cost("timing%d" % (i % 2)) for i in range(8))  # 4 failures per name: under the back-off
        unknown = sorted(cost("ghost%d" % i) for i in range(8))
        ratio = unknown[4] / known[4]  # medians
        self.assertTrue(0.5 < ratio < 2.0, "unknown %.4fs vs known %.4fs" % (unknown[4], known[4]))
        for i in range(2):  # reset their failure counters
            self.assertEqual(self.b.request("GET", "/service/token?service=berth-registry", auth=basic("timing%d" % i))[0], 200)

    # --- search, health, OpenAPI --------------------------------------------------------------------------
    def test_search_respects_visibility(self):
        self.b.push_image("team/searchable", "s")
        hits = self.api("GET", "/search?q=searchable", auth=basic("dev"))[2]
        self.assertEqual([r["repository_name"] for r in hits["repository"]], ["team/searchable"])
        self.assertEqual(self.api("GET", "/search?q=searchable", auth=basic("outsider"))[2]["repository"], [])
        self.assertEqual(self.api("GET", "/search?q=searchable", auth=None)[2]["repository"], [])

    def test_health_and_systeminfo(self):
        st, _, h = self.api("GET", "/health", auth=None)
        self.assertEqual((st, h["status"]), (200, "healthy"))
        self.assertEqual({c["name"] for c in h["components"]}, {"core", "database", "storage"})
        self.assertEqual(self.api("GET", "/ping", auth=None)[0], 200)
        self.assertEqual(self.api("GET", "/systeminfo", auth=None)[2]["auth_mode"], "db_auth")  # no LDAP here (test_ldap: ldap_auth)

    def test_openapi_document_matches_the_routes(self):
        st, h, raw = self.b.request("GET", "/api/v2.0/openapi.yaml", auth=None)
        self.assertEqual(st, 200)
        doc = yaml.safe_load(raw)
        self.assertEqual(doc["openapi"][:2], "3.")
        subst = {"project_name_or_id": "team", "project_name": "team", "repository_name": "app", "reference": "v1",
                 "tag_name": "v1", "user_id": "999999", "mid": "999999", "robot_id": "999999", "group_id": "999999",
                 "registry_id": "999999", "policy_id": "999999", "webhook_policy_id": "999999", "execution_id": "999999",
                 "task_id": "999999", "addition": "build_history", "immutable_rule_id": "999999", "gc_id": "999999", "id": "999999",
                 "eid": "999999", "tid": "999999", "quota_id": "999999"}
        checked = 0
        for path, ops in doc["paths"].items():
            for method in ops:
                url = re.sub(r"\{(\w+)\}", lambda m: subst[m.group(1)], path)
                if method == "delete" and path.endswith(("{reference}", "{repository_name}", "{tag_name}", "{project_name_or_id}")):
                    continue  # not run: would delete the fixtures; these routes are exercised in the tests above
                body = "{}" if method in ("put", "patch", "post") else None
                query = "?q=x&scope=/project/team&username=a&project_name=team" if method in ("get", "head") else ""
                st, _, resp = self.api(method.upper(), url + query, body)
                text = json.dumps(resp) if resp is not None and not isinstance(resp, bytes) else ""
                self.assertNotIn("no such API endpoint", text, "%s %s" % (method, path))
                self.assertLess(st, 500, "%s %s -> %s" % (method, path, st))
                checked += 1
        self.assertGreater(checked, 35)
        # and an undocumented path is a 404 with the error shape
        st, _, body = self.api("GET", "/nothing/here")
        self.assertEqual((st, body["errors"][0]["code"]), (404, "NOT_FOUND"))


class OpenCreation(BerthTestCase):
    """projects.creation: everyone — any user may create, and becomes its project admin."""

    @classmethod
    def setUpClass(cls):
        cls.b = Berthd(env={"BERTH_ADMIN_PASSWORD": ADMIN_PASSWORD, "BERTH_PROJECT_CREATION": "everyone"}).start()

    def test_user_creates_and_administers(self):
        st, _, _ = self.b.request("POST", "/api/v2.0/users", json.dumps({"username": "eve", "password": PW}).encode(),
                                  {"Content-Type": "application/json"})
        self.assertEqual(st, 201)
        st, _, body = self.b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": "evesown"}).encode(),
                                     {"Content-Type": "application/json"}, auth=basic("eve"))
        self.assertEqual(st, 201, body)
        members = json.loads(self.b.request("GET", "/api/v2.0/projects/evesown/members", auth=basic("eve"))[2])
        self.assertEqual([(m["entity_name"], m["role_name"]) for m in members], [("eve", "projectAdmin")])
        # and may push there, where before the project existed nobody but an admin could
        st, _, _ = self.b.request("POST", "/v2/evesown/app/blobs/uploads/", auth=basic("eve"))
        self.assertEqual(st, 202)


if __name__ == "__main__":
    main()
