"""The browser UI in real Chromium (Debian's, driven by playwright-core) against a real berthd + PostgreSQL.

This file sets up what the pages need through the API and the registry protocol, then runs the browser steps in
webui/e2e/ (node:test). Screenshots of every page at 360 and 1440 px land in $WEBUI_ARTIFACTS. A missing browser
or an unbuilt UI makes the suite SKIPPED (exit 77), which tests/run.sh counts as a failure."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ADMIN_AUTH, ADMIN_PASSWORD, PG_DIR, PG_PORT, ROOT, Berthd, BerthTestCase, main, write_oci_layout  # noqa: E402

UI_DIR = os.environ.get("BERTH_UI_DIR", os.path.join(ROOT, "webui", "dist"))
ARTIFACTS = os.environ.get("WEBUI_ARTIFACTS", os.path.join(ROOT, "build", "tests", "webui-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
USER_PW = "Ui-Tester-12345"
# an ISA index: a baseline, a "v2" build that really holds AVX-512 (the scanner must fail it, naming the
# instruction and function) and an honest v4 build
PAYLOAD = r"""
#include <stdio.h>
__attribute__((noinline)) void kernel(void)
{
#if defined(USE_AVX512)
    __asm__ volatile("vpxord %%zmm1, %%zmm1, %%zmm1" ::: "xmm1");
#endif
}
int main(void) { kernel(); puts("ok"); return 0; }
"""
VARIANTS = [(None, []), ("v2", ["-DUSE_AVX512"]), ("v4", ["-DUSE_AVX512", "-march=x86-64-v4"])]
CONFIGURED = {
    "author": "Berth UI test", "created": "2026-03-04T05:06:07Z",
    "config": {"Entrypoint": ["/usr/local/bin/serve"], "Cmd": ["--port", "8080", "--greeting", "hello world"],
               "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MODE=production"],
               "Labels": {"org.opencontainers.image.source": "https://example.org/berth/configured", "team": "hpc"},
               "WorkingDir": "/srv", "User": "1000:1000", "ExposedPorts": {"8080/tcp": {}}},
    "history": [
        {"created": "2026-03-04T05:00:00Z", "created_by": "/bin/sh -c #(nop) ADD file:0f4a8e2b3c in / "},
        {"created": "2026-03-04T05:00:01Z", "created_by": "/bin/sh -c #(nop)  CMD [\"sh\"]", "empty_layer": True},
        {"created": "2026-03-04T05:06:07Z", "created_by": "/bin/sh -c apt-get update && apt-get install -y --no-install-recommends ca-certificates curl libnuma1 openmpi-bin && rm -rf /var/lib/apt/lists/*"},
        {"created": "2026-03-04T05:06:07Z", "created_by": "/bin/sh -c #(nop)  ENTRYPOINT [\"/usr/local/bin/serve\"]", "empty_layer": True},
    ],
}


class WebUI(BerthTestCase):
    START = False

    @classmethod
    def setUpClass(cls):
        for what, path in (("the built UI (webui/build.sh)", os.path.join(UI_DIR, "index.html")), ("chromium", CHROMIUM),
                           ("playwright-core (webui/build.sh runs npm ci)", os.path.join(ROOT, "webui", "node_modules", "playwright-core"))):
            if not os.path.exists(path):
                raise unittest.SkipTest("missing %s: %s" % (what, path))
        cls.b = Berthd(env={"BERTH_UI_DIR": UI_DIR}).start()

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        st, h, raw = self.b.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"} if data else {})
        return st, h, (json.loads(raw) if raw else None)

    def run_browser(self, script, fixture):
        self.run_browser_at(self.b, script, fixture)

    def run_browser_at(self, site, script, fixture):
        env = dict(os.environ, BERTH_UI_BASE="http://" + site.host, BERTH_UI_FIXTURE=json.dumps(fixture),
                   WEBUI_ARTIFACTS=ARTIFACTS, CHROMIUM=CHROMIUM)
        r = subprocess.run(["node", "--test", "--test-reporter=spec", os.path.join(ROOT, "webui", "e2e", script)],
                           cwd=os.path.join(ROOT, "webui"), env=env, capture_output=True, text=True, timeout=900)
        print(r.stdout[-20000:], r.stderr[-5000:])
        self.assertEqual(r.returncode, 0, "browser steps failed (see above); screenshots in " + ARTIFACTS)

    def push_isa_index(self, tmp, image):
        src = os.path.join(tmp, "payload.c")
        with open(src, "w") as f:
            f.write(PAYLOAD)
        images, plats = [], []
        for variant, flags in VARIANTS:
            out = os.path.join(tmp, "payload-%s" % variant)
            subprocess.run(["gcc", "-O2", "-static", *flags, "-o", out, src], check=True)
            with open(out, "rb") as f:
                images.append({"payload": f.read()})
            plats.append(("linux", "amd64", variant) if variant else ("linux", "amd64"))
        layout = os.path.join(tmp, "layout")
        digest = write_oci_layout(layout, images, plats, tag="1.0")
        r = subprocess.run(["skopeo", "copy", "--all", "--preserve-digests", "--dest-tls-verify=false", "--dest-creds",
                            "admin:" + ADMIN_PASSWORD, "oci:%s:1.0" % layout, "docker://%s/%s:1.0" % (self.b.host, image)],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the scanner works after the push: wait for its verdicts, which the page shows
        deadline = time.time() + 120
        while time.time() < deadline:
            st, _, t = self.api("GET", "/projects/open/repositories/hpc%252Fapp/artifacts/1.0/isa")
            if st == 200 and all(v["scan_status"] not in ("", "pending") for v in t["variants"]):
                return digest
            time.sleep(0.5)
        self.fail("ISA scans did not finish: %s" % t)

    def test_browser(self):
        self.assertEqual(self.api("POST", "/projects", {"project_name": "open", "metadata": {"public": "true"}})[0], 201)
        self.assertEqual(self.api("POST", "/projects", {"project_name": "secret"})[0], 201)
        for u in ("guest1", "limited1", "lockme"):
            self.assertEqual(self.api("POST", "/users", {"username": u, "password": USER_PW, "email": u + "@example.org"})[0], 201)
        self.assertEqual(self.api("POST", "/projects/secret/members", {"role_id": 5, "member_user": {"username": "limited1"}})[0], 201)
        self.b.push_image("open/tools/hello", "1.0")
        # an image whose config the artifact page shows: runtime settings, labels and a build history
        self.b.push_image("open/tools/configured", "2.1", layers=2, config=CONFIGURED)
        self.b.push_image("open/tools/big", "1.0", size=512 * 1024)  # replicated at 64 KiB/s: the execution page polls it
        self.b.push_image("secret/app", "latest")
        for i in range(3):
            self.b.push_image("secret/many/r%02d" % i, "v1", size=64)
        tmp = tempfile.mkdtemp(prefix="webui-")
        self.addCleanup(shutil.rmtree, tmp, True)
        index = self.push_isa_index(tmp, "open/hpc/app")
        # a site whose LDAP server is down: a directory user's sign-in must say so, not "wrong password"
        ldap_down = Berthd(env={"BERTH_UI_DIR": UI_DIR, "BERTH_LDAP_URL": "ldap://127.0.0.1:1", "BERTH_LDAP_BASE_DN": "dc=example,dc=org"}).start()
        self.addCleanup(ldap_down.cleanup)
        fixture = {
            "ldap_down": ldap_down.host,
            "host": self.b.host,
            "user_password": USER_PW,
            "isa_index": index,
            "admin_password": ADMIN_PASSWORD,
            "public_project": "open",
            "private_project": "secret",
            "psql": ["-h", PG_DIR, "-p", PG_PORT, "-U", "postgres", "-d", self.b.dbname],
        }
        self.run_browser("ui.e2e.mjs", fixture)
        self.run_browser("pages.e2e.mjs", fixture)
        site_b = Berthd().start()  # the replication destination
        self.addCleanup(site_b.cleanup)
        fixture["site_b"] = site_b.host
        self.run_browser("admin.e2e.mjs", fixture)
        st, _, _ = site_b.request("GET", "/v2/mirror/tools/hello/manifests/1.0", headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        self.assertEqual(st, 200)

    def test_tag_policies_in_the_browser(self):
        self.assertEqual(self.api("POST", "/projects", {"project_name": "pol"})[0], 201)
        self.assertEqual(self.api("POST", "/users", {"username": "dev1", "password": USER_PW, "email": "dev1@example.org"})[0], 201)
        self.assertEqual(self.api("POST", "/projects/pol/members", {"role_id": 2, "member_user": {"username": "dev1"}})[0], 201)
        for tag in ("v1.0", "dev1", "latest"):  # pushed in this order: latest is the newest
            self.b.push_image("pol/app", tag)
        self.run_browser("policies.e2e.mjs", {"admin_password": ADMIN_PASSWORD, "user_password": USER_PW})

    def test_quotas_in_the_browser(self):
        # qfull: one image of ~18 KB against a 20000-byte limit (over the 85 % line); qroomy: a little of 1 GiB
        self.assertEqual(self.api("POST", "/projects", {"project_name": "qfull", "storage_limit": 20000})[0], 201)
        self.assertEqual(self.api("POST", "/projects", {"project_name": "qroomy", "storage_limit": 1024 ** 3})[0], 201)
        self.b.push_image("qfull/app", "v1", size=17500)
        self.b.push_image("qroomy/app", "v1", size=2048)
        # the upstream a proxy-cache project is created with in the New project dialog (this Berth itself will do)
        st, _, body = self.api("POST", "/registries", {"name": "upstream-hub", "type": "berth", "url": "http://" + self.b.host, "insecure": True})
        self.assertEqual(st, 201, body)
        self.run_browser("quota.e2e.mjs", {"admin_password": ADMIN_PASSWORD, "upstream": "upstream-hub"})

    def test_squashfs_in_the_browser(self):
        """The HPC squashfs on the artifact page and in the project settings (issue 15)."""
        from test_sqfs import gz, push_layers, set_mode, tar_bytes, wait_status
        pub = tempfile.mkdtemp(prefix="webui-publish-")
        self.addCleanup(shutil.rmtree, pub, True)
        # xz on one thread: the on-request conversion of 24 MiB of random bytes runs long enough for the page to
        # show it running with its progress
        site = Berthd(env={"BERTH_UI_DIR": UI_DIR, "BERTH_GATEWAY_PUBLISH_DIR": pub, "BERTH_GATEWAY_COMPRESSOR": "xz",
                           "BERTH_GATEWAY_THREADS": "1"}).start()
        self.addCleanup(site.cleanup)
        for p, mode in (("hpc", "push"), ("lazy", "pull"), ("hpcset", None)):
            site.project(p)
            if mode:
                self.assertEqual(set_mode(site, p, mode)[0], 200)
        layer = gz(tar_bytes([("bin/app", "file", os.urandom(200000), 0o755), ("etc/app.conf", "file", b"x=1\n")]))
        done, _ = push_layers(site, "hpc/app", "v1", [layer])
        job = wait_status(site, "hpc/app", done)
        self.assertEqual(job["status"], "done", job)
        failed, _ = push_layers(site, "hpc/broken", "v1", [layer[: len(layer) // 2]])
        self.assertEqual(wait_status(site, "hpc/broken", failed)["status"], "failed")
        lazy, _ = push_layers(site, "lazy/app", "v1", [gz(tar_bytes([("big", "file", os.urandom(24 << 20))]))])
        self.run_browser_at(site, "sqfs.e2e.mjs", {
            "admin_password": ADMIN_PASSWORD, "done_digest": done, "published_path": job["published_path"],
            "failed_digest": failed, "lazy_digest": lazy, "lazy_published_prefix": os.path.join(pub, "lazy/app") + "/"})
        self.assertTrue(os.path.exists(os.path.join(pub, "lazy/app", lazy + ".sqsh")))

    def test_ldap_in_the_browser(self):
        from test_ldap import BASE as LDAP_BASE, Slapd, ldap_env
        slapd = Slapd()
        self.addCleanup(slapd.cleanup)
        for u in ("alice", "frank", "gina", "henry"):
            slapd.add_user(u, u + "-Pw1")
        slapd.add_group("devs", ["alice"])
        slapd.add_group("ops", ["gina"])
        site = Berthd(args=["--config", ldap_env(slapd)], env={"BERTH_UI_DIR": UI_DIR}).start()
        self.addCleanup(site.cleanup)
        post = lambda path, body: site.request("POST", "/api/v2.0" + path, json.dumps(body).encode(), {"Content-Type": "application/json"})[0]
        self.assertEqual(post("/projects", {"project_name": "ldapproj"}), 201)
        self.assertEqual(post("/users", {"username": "henry", "password": USER_PW, "email": "henry@example.org"}), 201)  # a local henry
        self.run_browser("ldap.e2e.mjs", {"admin_password": ADMIN_PASSWORD, "ldap_site": site.host, "ldap_user": "alice",
                                          "ldap_password": "alice-Pw1", "group_dn": "cn=devs,ou=groups," + LDAP_BASE,
                                          "import_users": ["frank", "gina"], "local_clash": "henry"})


class UiApi(BerthTestCase):
    """The REST pieces the pages need (issue #11): sort= on repository and project lists, an artifact's manifest,
    Harbor's /statistics and the aggregates the charts draw."""

    def api(self, method, path, body=None, auth=ADMIN_AUTH):
        data = json.dumps(body).encode() if body is not None else None
        st, h, raw = self.b.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"} if data else {}, auth=auth)
        return st, h, (json.loads(raw) if raw else None)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # counts and orders below are of these three projects: the default `library` goes
        assert cls.b.request("DELETE", "/api/v2.0/projects/library")[0] == 200
        for name, public in (("alpha", "true"), ("beta", "false"), ("gamma", "false")):
            st, _, _ = cls.b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": name, "metadata": {"public": public}}).encode(),
                                     {"Content-Type": "application/json"})
            assert st == 201
        cls.digests = {}
        for repo in ("beta/b", "beta/c", "beta/a", "gamma/x"):
            cls.digests[repo] = cls.b.push_image(repo, "1", size=2048)[0]
        cls.b.push_image("beta/c", "2", size=2048)
        for _ in range(3):  # pulls for sort=-pull_count (counted by the audit thread)
            assert cls.b.request("GET", "/v2/beta/b/manifests/1")[0] == 200

    def names(self, path):
        st, h, body = self.api("GET", path)
        self.assertEqual(st, 200, body)
        return [r["name"] for r in body], h

    def test_repository_sort(self):
        self.assertEqual(self.names("/projects/beta/repositories")[0], ["beta/a", "beta/b", "beta/c"])
        self.assertEqual(self.names("/projects/beta/repositories?sort=-name")[0], ["beta/c", "beta/b", "beta/a"])
        self.assertEqual(self.names("/projects/beta/repositories?sort=-artifact_count")[0][0], "beta/c")
        deadline = time.time() + 15
        while self.names("/projects/beta/repositories?sort=-pull_count")[0][0] != "beta/b" and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.names("/projects/beta/repositories?sort=-pull_count")[0][0], "beta/b")
        # paging keeps the order and the Link header keeps the sort
        names, h = self.names("/projects/beta/repositories?sort=-name&page=2&page_size=1")
        self.assertEqual((names, h["x-total-count"]), (["beta/b"], "3"))
        self.assertIn("sort=-name", h["link"])
        self.assertEqual(self.names("/projects/beta/repositories?sort=-name&q=name%3D~%2Fb")[0], ["beta/b"])
        for bad in ("size", "name;drop", "--name", "x" * 100):
            st, _, body = self.api("GET", "/projects/beta/repositories?sort=" + bad)
            self.assertEqual(st, 400, bad)
            self.assertEqual(body["errors"][0]["code"], "BAD_REQUEST")

    def test_project_sort(self):
        self.assertEqual(self.names("/projects")[0], ["alpha", "beta", "gamma"])
        self.assertEqual(self.names("/projects?sort=-repo_count")[0], ["beta", "gamma", "alpha"])
        self.assertEqual(self.names("/projects?sort=-creation_time")[0], ["gamma", "beta", "alpha"])
        self.assertEqual(self.api("GET", "/projects?sort=owner")[0], 400)

    def test_artifact_manifest(self):
        st, _, m = self.api("GET", "/projects/beta/repositories/a/artifacts/1/manifest")
        self.assertEqual(st, 200)
        self.assertEqual(len(m["layers"]), 1)
        self.assertEqual(m["layers"][0]["size"], 2048 + 8)
        self.assertEqual(self.api("GET", "/projects/beta/repositories/a/artifacts/%s/manifest" % self.digests["beta/a"])[2], m)
        self.assertEqual(self.api("GET", "/projects/beta/repositories/a/artifacts/nope/manifest")[0], 404)
        # a private project's manifest is no more visible than the project
        self.assertEqual(self.api("GET", "/projects/beta/repositories/a/artifacts/1/manifest", auth=None)[0], 401)

    def test_deletable(self):
        st, _, d = self.api("GET", "/projects/beta/_deletable")
        self.assertEqual((st, d), (200, {"deletable": False, "message": "the project still has 3 repositories; delete them first"}))
        self.assertEqual(self.api("GET", "/projects/alpha/_deletable")[2], {"deletable": True})
        self.assertEqual(self.api("GET", "/projects/alpha/_deletable", auth=None)[0], 401)
        self.assertEqual(self.api("GET", "/projects/nope/_deletable")[0], 404)

    def test_statistics(self):
        st, _, s = self.api("GET", "/statistics")
        self.assertEqual(st, 200)
        self.assertEqual((s["total_project_count"], s["public_project_count"], s["private_project_count"]), (3, 1, 2))
        self.assertEqual((s["total_repo_count"], s["public_repo_count"], s["private_repo_count"]), (4, 0, 4))
        self.assertGreater(s["total_storage_consumption"], 5 * 2048)
        st, _, bars = self.api("GET", "/statistics/storage?limit=2")
        self.assertEqual([b["project"] for b in bars], ["beta", "gamma"])
        self.assertGreater(bars[0]["storage"], bars[1]["storage"])
        self.assertEqual(self.api("GET", "/statistics/storage?limit=0")[0], 400)
        deadline = time.time() + 15
        while True:
            st, _, days = self.api("GET", "/statistics/activity?days=7")
            if sum(d["push"] for d in days) >= 5 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(len(days), 7)
        self.assertGreaterEqual(days[-1]["push"], 5)
        self.assertGreaterEqual(days[-1]["pull"], 1)
        self.assertEqual(self.api("GET", "/statistics/activity?days=1000")[0], 400)
        # anonymous callers have no statistics; a user sees only their projects
        self.assertEqual(self.api("GET", "/statistics", auth=None)[0], 401)
        self.assertEqual(self.api("POST", "/users", {"username": "viewer", "password": USER_PW})[0], 201)
        viewer = "Basic " + __import__("base64").b64encode(("viewer:" + USER_PW).encode()).decode()
        st, _, s = self.api("GET", "/statistics", auth=viewer)
        self.assertEqual((s["total_project_count"], s["total_repo_count"]), (1, 0))
        self.assertEqual([b["project"] for b in self.api("GET", "/statistics/storage", auth=viewer)[2]], ["alpha"])
        # replication throughput is for system admins (the replication pages are theirs)
        self.assertEqual(self.api("GET", "/statistics/replication", auth=viewer)[0], 403)
        st, _, rows = self.api("GET", "/statistics/replication")
        self.assertEqual((st, rows), (200, []))


if __name__ == "__main__":
    main()
