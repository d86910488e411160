"""Immutable tag rules (issue 13): Harbor's /projects/{p}/immutabletagrules, and a protected tag that no path can
move or delete — /v2 manifest PUT and DELETE (by tag and by digest), the REST API (tag, artifact and repository
delete), replication with override, and stock clients (skopeo, podman). Every refusal names the rule and is
checked to have changed nothing."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

from harness import ACCEPT_ALL, ADMIN_PASSWORD, BerthTestCase, Berthd, error_code, main, podman_cmd, write_oci_layout

PW = "Passw0rd!x"


def have(tool):
    return shutil.which(tool) is not None


def basic(user, pw):
    return "Basic " + __import__("base64").b64encode(("%s:%s" % (user, pw)).encode()).decode()


def rule(repo="**", tag="**", repo_dec="repoMatches", tag_dec="matches", disabled=False):
    return {"disabled": disabled, "action": "immutable", "template": "immutable_template",
            "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": repo_dec, "pattern": repo}]},
            "tag_selectors": [{"kind": "doublestar", "decoration": tag_dec, "pattern": tag}]}


class Immutable(BerthTestCase):
    PROJECTS = ("imm", "rsrc")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for u, role in (("padmin", 1), ("dev", 2)):
            cls.api("POST", "/users", {"username": u, "password": PW})
            cls.api("POST", "/projects/imm/members", {"role_id": role, "member_user": {"username": u}})

    @classmethod
    def api(cls, method, path, body=None, auth=None):
        return cls.b.api(method, path, body, auth)

    def add_rule(self, project="imm", **kw):
        st, h, body = self.api("POST", "/projects/%s/immutabletagrules" % project, rule(**kw))
        self.assertEqual(st, 201, body)
        return int(h["location"].rsplit("/", 1)[1])

    def tearDown(self):
        for p in ("imm", "rsrc"):
            for r in self.api("GET", "/projects/%s/immutabletagrules?page_size=100" % p)[2] or []:
                self.api("DELETE", "/projects/%s/immutabletagrules/%d" % (p, r["id"]))

    def digest_of(self, repo, ref):
        st, h, _ = self.b.request("HEAD", "/v2/%s/manifests/%s" % (repo, ref), headers={"Accept": ACCEPT_ALL})
        return h.get("docker-content-digest") if st == 200 else None

    # --- the API ---------------------------------------------------------------------------------------------
    def test_rules_api_shapes_limits_and_roles(self):
        rid = self.add_rule(repo="app*", tag="v*")
        st, h, rules = self.api("GET", "/projects/imm/immutabletagrules")
        self.assertEqual((st, h["x-total-count"]), (200, "1"))
        r = rules[0]
        self.assertEqual((r["id"], r["disabled"], r["action"], r["template"]), (rid, False, "immutable", "immutable_template"))
        self.assertEqual(r["scope_selectors"]["repository"][0]["pattern"], "app*")
        self.assertEqual(r["tag_selectors"][0], {"kind": "doublestar", "decoration": "matches", "pattern": "v*"})
        # the project may be named by id too
        pid = self.api("GET", "/projects/imm")[2]["project_id"]
        self.assertEqual(self.api("GET", "/projects/%d/immutabletagrules" % pid)[2][0]["id"], rid)
        # update (disable), then it reads back
        self.assertEqual(self.api("PUT", "/projects/imm/immutabletagrules/%d" % rid, rule(repo="app*", tag="v*", disabled=True))[0], 200)
        self.assertTrue(self.api("GET", "/projects/imm/immutabletagrules")[2][0]["disabled"])
        self.assertEqual(self.api("PUT", "/projects/imm/immutabletagrules/999999", rule())[0], 404)
        # bad bodies: 400 with a reason
        for bad in (rule(tag="{v1"), rule(tag="[]"), rule(repo_dec="matches"), rule(tag_dec="repoMatches"),
                    dict(rule(), tag_selectors=[]), dict(rule(), scope_selectors={}), dict(rule(), action="retain"),
                    dict(rule(), disabled="yes")):
            st, _, body = self.api("POST", "/projects/imm/immutabletagrules", bad)
            self.assertEqual(st, 400, (bad, body))
            self.assertEqual(body["errors"][0]["code"], "BAD_REQUEST")
        # at most 15 per project
        for i in range(14):
            self.add_rule(tag="t%d" % i)
        st, _, body = self.api("POST", "/projects/imm/immutabletagrules", rule(tag="sixteen"))
        self.assertEqual(st, 400, body)
        self.assertIn("15", body["errors"][0]["message"])
        self.assertEqual(self.api("GET", "/projects/imm/immutabletagrules?page_size=100")[1]["x-total-count"], "15")
        # roles: a developer reads, only project admins (and system admins) manage
        dev, padmin = basic("dev", PW), basic("padmin", PW)
        self.assertEqual(self.api("GET", "/projects/imm/immutabletagrules", auth=dev)[0], 200)
        self.assertEqual(self.api("POST", "/projects/imm/immutabletagrules", rule(), auth=dev)[0], 403)
        self.assertEqual(self.api("DELETE", "/projects/imm/immutabletagrules/%d" % rid, auth=dev)[0], 403)
        self.assertEqual(self.api("DELETE", "/projects/imm/immutabletagrules/%d" % rid, auth=padmin)[0], 200)
        self.assertEqual(self.api("DELETE", "/projects/imm/immutabletagrules/%d" % rid, auth=padmin)[0], 404)
        self.assertEqual(self.b.request("GET", "/api/v2.0/projects/imm/immutabletagrules", auth=None)[0], 401)

    # --- /v2 -------------------------------------------------------------------------------------------------
    def test_v2_push_over_and_delete_of_a_protected_tag(self):
        d1, _ = self.b.push_image("imm/web", "v1", seed=1)
        self.b.push_image("imm/web", "latest", seed=2)
        rid = self.add_rule(repo="web", tag="v*")
        # another digest over v1: 412, DENIED, the rule named; v1 unchanged
        st, h, body, _ = self.b.push_manifest("imm/web", "v1", self.b.request("GET", "/v2/imm/web/manifests/latest",
                                                                                headers={"Accept": ACCEPT_ALL})[2])
        self.assertEqual((st, error_code(body)), (412, "DENIED"), body)
        self.assertIn("rule %d" % rid, json.loads(body)["errors"][0]["message"])
        self.assertEqual(self.digest_of("imm/web", "v1"), d1)
        # the same digest again is no change and passes; a new tag the rule covers is created once
        raw1 = self.b.request("GET", "/v2/imm/web/manifests/v1", headers={"Accept": ACCEPT_ALL})[2]
        self.assertEqual(self.b.push_manifest("imm/web", "v1", raw1)[0], 201)
        self.assertEqual(self.b.push_manifest("imm/web", "v2", raw1)[0], 201)
        # a tag no rule covers moves freely
        self.assertEqual(self.b.push_manifest("imm/web", "latest", raw1)[0], 201)
        # deleting by tag or by digest: 412 DENIED, still there
        for ref in ("v1", d1):
            st, _, body = self.b.request("DELETE", "/v2/imm/web/manifests/%s" % ref)
            self.assertEqual((st, error_code(body)), (412, "DENIED"), body)
        self.assertEqual(self.digest_of("imm/web", "v1"), d1)
        # switched off, the rule protects nothing
        self.api("PUT", "/projects/imm/immutabletagrules/%d" % rid, rule(repo="web", tag="v*", disabled=True))
        self.assertEqual(self.b.request("DELETE", "/v2/imm/web/manifests/v2")[0], 202)

    def test_decorations_select_as_harbor(self):
        self.b.push_image("imm/keep", "1.0", seed=3)
        self.b.push_image("imm/other", "1.0", seed=4)
        self.b.push_image("imm/other", "dev", seed=5)
        self.add_rule(repo="keep", repo_dec="repoExcludes", tag="dev", tag_dec="excludes")
        # repoExcludes keep: only "other" is covered; excludes dev: every tag but dev
        self.assertEqual(self.b.request("DELETE", "/v2/imm/other/manifests/1.0")[0], 412)
        self.assertEqual(self.b.request("DELETE", "/v2/imm/other/manifests/dev")[0], 202)
        self.assertEqual(self.b.request("DELETE", "/v2/imm/keep/manifests/1.0")[0], 202)

    def test_concurrent_first_pushes_of_a_protected_tag(self):
        # no tag yet: of two different digests pushed at once, exactly one wins and the other is refused
        self.add_rule(repo="race", tag="v*")
        a, _ = self.b.push_image("imm/race", "a", seed=6)
        b, _ = self.b.push_image("imm/race", "b", seed=7)
        raws = [self.b.request("GET", "/v2/imm/race/manifests/%s" % t, headers={"Accept": ACCEPT_ALL})[2] for t in ("a", "b")]
        for i in range(8):
            tag = "v%d" % i
            results = [None, None]

            def put(k):
                results[k] = self.b.push_manifest("imm/race", tag, raws[k])[0]
            threads = [threading.Thread(target=put, args=(k,)) for k in (0, 1)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            self.assertEqual(sorted(results), [201, 412], (tag, results))
            self.assertEqual(self.digest_of("imm/race", tag), (a, b)[results.index(201)])

    # --- REST ------------------------------------------------------------------------------------------------
    def test_rest_deletes_are_refused_with_412(self):
        d, _ = self.b.push_image("imm/api", "1.0", seed=8)
        self.b.push_image("imm/api", "scratch", seed=9)
        rid = self.add_rule(repo="api", tag="1.*")
        base = "/projects/imm/repositories/api"
        for path in ("/artifacts/1.0/tags/1.0", "/artifacts/%s" % d, "/artifacts/1.0", ""):
            st, _, body = self.api("DELETE", base + path)
            self.assertEqual(st, 412, (path, body))
            self.assertEqual(body["errors"][0]["code"], "PRECONDITION")
            self.assertIn("rule %d" % rid, body["errors"][0]["message"])
        self.assertEqual(self.digest_of("imm/api", "1.0"), d)
        # what no rule protects still goes
        self.assertEqual(self.api("DELETE", base + "/artifacts/scratch/tags/scratch")[0], 200)
        # the refusals are in the audit log as failed operations
        logs = self.api("GET", "/projects/imm/logs?page_size=50")[2]
        self.assertTrue(any(l["operation"] == "delete" and "api" in l["resource"] for l in logs), logs)

    # --- replication with override ---------------------------------------------------------------------------
    def test_replication_with_override_cannot_move_a_protected_tag(self):
        self.b.project("rdst")
        self.b.push_image("rsrc/rep", "v1", seed=10)
        st, h, _ = self.api("POST", "/registries", {"name": "self", "type": "berth", "url": "http://" + self.b.host,
                                                    "insecure": True, "credential": {"type": "basic", "access_key": "admin",
                                                                                     "access_secret": ADMIN_PASSWORD}})
        self.assertEqual(st, 201)
        reg = int(h["location"].rsplit("/", 1)[1])
        st, h, body = self.api("POST", "/replication/policies", {
            "name": "to-rdst", "dest_registry": {"id": reg}, "dest_namespace": "rdst", "override": True,
            "trigger": {"type": "manual"}, "filters": [{"type": "name", "value": "rsrc/**"}]})
        self.assertEqual(st, 201, body)
        pid = int(h["location"].rsplit("/", 1)[1])

        def run():
            st, h, _ = self.api("POST", "/replication/executions", {"policy_id": pid})
            eid = int(h["location"].rsplit("/", 1)[1])
            deadline = time.time() + 120
            while time.time() < deadline:
                e = self.api("GET", "/replication/executions/%d" % eid)[2]
                if e["status"] != "InProgress":
                    return e
                time.sleep(0.3)
            self.fail("execution %d still running" % eid)
        self.assertEqual(run()["status"], "Succeed")
        first = self.digest_of("rdst/rep", "v1")
        self.assertIsNotNone(first)
        rid = self.add_rule(project="rdst", repo="**", tag="v1")
        self.b.push_image("rsrc/rep", "v1", seed=11)  # the source moves on
        e = run()
        self.assertEqual(e["status"], "Failed", e)
        tasks = self.api("GET", "/replication/executions/%d/tasks" % e["id"])[2]
        log = self.b.request("GET", "/api/v2.0/replication/executions/%d/tasks/%d/log" % (e["id"], tasks[0]["id"]))[2].decode()
        self.assertIn("412", log)
        self.assertIn("rule %d" % rid, log)
        self.assertEqual(self.digest_of("rdst/rep", "v1"), first)

    # --- stock clients ---------------------------------------------------------------------------------------
    @unittest.skipUnless(have("skopeo"), "skopeo not installed")
    def test_skopeo_push_of_another_digest_is_refused(self):
        tmp = tempfile.mkdtemp(prefix="imm-")
        try:
            one, two = os.path.join(tmp, "one"), os.path.join(tmp, "two")
            write_oci_layout(one, [{"f": b"first"}])
            write_oci_layout(two, [{"f": b"second"}])
            auth = os.path.join(tmp, "auth.json")
            subprocess.run(["skopeo", "login", "--tls-verify=false", "--authfile", auth, "-u", "admin", "--password-stdin",
                            self.b.host], input=ADMIN_PASSWORD, capture_output=True, text=True, check=True, timeout=120)

            def copy(src):
                return subprocess.run(["skopeo", "copy", "--dest-tls-verify=false", "--authfile", auth, "oci:%s:latest" % src,
                                       "docker://%s/imm/cli:1.0" % self.b.host], capture_output=True, text=True, timeout=300)
            self.assertEqual(copy(one).returncode, 0)
            d = self.digest_of("imm/cli", "1.0")
            rid = self.add_rule(repo="cli", tag="1.*")
            r = copy(one)  # the same image again: fine
            self.assertEqual(r.returncode, 0, r.stderr)
            r = copy(two)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("rule %d" % rid, r.stderr)
            self.assertEqual(self.digest_of("imm/cli", "1.0"), d)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @unittest.skipUnless(have("podman"), "podman not installed")
    def test_podman_push_of_another_digest_is_refused(self):
        tmp = "/tmp/immp-%s" % uuid.uuid4().hex[:12]  # runroot under 50 characters
        os.makedirs(tmp)
        try:
            def podman(*args, check=True, stdin=None):
                cmd = podman_cmd(tmp) + list(args)
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, input=stdin)
                if check and r.returncode != 0:
                    raise AssertionError("%s: %s" % (" ".join(cmd), r.stderr[-2000:]))
                return r
            ids = {}
            # podman names an image pulled from an oci: layout after its path, so the path must make a valid
            # reference: lowercase only (mkdtemp's suffix may hold capitals)
            lay = os.path.join(tmp, "lay")
            for name, payload in (("one", b"podman first"), ("two", b"podman second")):
                write_oci_layout(os.path.join(lay, name), [{"f": payload}])
                ids[name] = podman("pull", "oci:%s:latest" % os.path.join(lay, name)).stdout.strip().splitlines()[-1]
            af = os.path.join(tmp, "auth.json")
            podman("login", "--tls-verify=false", "--authfile", af, "-u", "admin", "--password-stdin", self.b.host,
                   stdin=ADMIN_PASSWORD)
            target = "%s/imm/pod:1.0" % self.b.host
            podman("tag", ids["one"], target)
            podman("push", "--tls-verify=false", "--authfile", af, target)
            d = self.digest_of("imm/pod", "1.0")
            rid = self.add_rule(repo="pod", tag="1.*")
            podman("tag", ids["two"], target)
            r = podman("push", "--tls-verify=false", "--authfile", af, target, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("rule %d" % rid, r.stderr)
            self.assertEqual(self.digest_of("imm/pod", "1.0"), d)
        finally:
            subprocess.run(podman_cmd(tmp) + ["system", "reset", "-f"], capture_output=True, timeout=120)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
