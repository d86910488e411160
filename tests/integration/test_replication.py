"""Replication between real sites: each site a berthd with its own PostgreSQL cluster and storage. Push- and
pull-based policies, event triggers, deletion, filters and flattening, a stock Distribution registry at either end,
a site cut off mid-transfer (its veth in a network namespace taken down) that resumes the partial blob instead of
restarting it, and a berthd killed mid-execution that finishes after its restart."""
import base64
import gzip
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from harness import ACCEPT_ALL, ADMIN_AUTH, ADMIN_PASSWORD, BERTHD, BERTH_PG, OCI_INDEX, OCI_MANIFEST, BerthTestCase, Berthd, eventually, free_port, main, sha256, \
    write_oci_layout

ADMIN = "admin:" + ADMIN_PASSWORD


def api(b, method, path, body=None, host=None):
    data = json.dumps(body).encode() if body is not None else None
    st, h, raw = b.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"} if data else {})
    try:
        return st, h, json.loads(raw) if raw else None
    except ValueError:
        return st, h, raw


def wait_execution(b, eid, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, _, e = api(b, "GET", "/replication/executions/%d" % eid)
        if e["status"] != "InProgress":
            return e
        time.sleep(0.3)
    raise AssertionError("execution %d still running: %s" % (eid, e))


def add_registry(b, name, url, kind="berth", user="admin", password=ADMIN_PASSWORD):
    st, h, body = api(b, "POST", "/registries", {"name": name, "type": kind, "url": url, "insecure": True,
                                                  "credential": {"type": "basic", "access_key": user, "access_secret": password}})
    assert st == 201, (st, body)
    return int(h["location"].rsplit("/", 1)[1])


def add_policy(b, body):
    st, h, out = api(b, "POST", "/replication/policies", body)
    assert st == 201, (st, out)
    return int(h["location"].rsplit("/", 1)[1])


def run_policy(b, pid):
    st, h, out = api(b, "POST", "/replication/executions", {"policy_id": pid})
    assert st == 201, (st, out)
    return int(h["location"].rsplit("/", 1)[1])


def manifest(b, repo, ref):
    st, h, body = b.request("GET", "/v2/%s/manifests/%s" % (repo, ref), headers={
        "Accept": "application/vnd.oci.image.manifest.v1+json, " + OCI_INDEX})
    return st, h.get("docker-content-digest"), body


class PgCluster:
    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="berth-site-pg-")
        # a site's cluster lives for one test class and is thrown away: no fsync (its shutdown checkpoint took
        # seconds of every class's teardown)
        subprocess.run([BERTH_PG, "start", self.dir, str(self.port)], check=True, capture_output=True,
                       env=dict(os.environ, BERTH_PG_FSYNC="off"))

    def conninfo(self, db="berth"):
        return "host=%s port=%d user=postgres dbname=%s" % (self.dir, self.port, db)

    def create_db(self, name):
        subprocess.run(["psql", "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-Atqc", "CREATE DATABASE " + name, "postgres"],
                       check=True, capture_output=True)

    def stop(self):
        subprocess.run([BERTH_PG, "stop", self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Site(Berthd):
    """A berthd with its own PostgreSQL cluster (reached over its Unix socket, which crosses network namespaces);
    inside a network namespace when `netns` is given."""

    def __init__(self, env=None, netns=None, ip="127.0.0.1"):
        self.pg = PgCluster()
        self.pg.create_db("site")
        super().__init__(dbname="site", env=dict(env or {}, BERTH_DATABASE_URL=self.pg.conninfo("site")), ip=ip,
                         prefix=["ip", "netns", "exec", netns] if netns else None)

    def wait_ready(self, timeout=60):
        # sites start side by side (start_sites), each migrating its fresh database: more than one berthd's 20 s
        # under the sanitizers on two cores
        super().wait_ready(timeout)

    def cleanup(self):
        super().cleanup()
        self.pg.stop()


def start_sites(specs):
    """Sites by name from Site's keyword arguments, started side by side (each its own initdb, cluster and berthd:
    seconds apiece, mostly waiting); if one fails, those that started are cleaned up and the error raised."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {name: pool.submit(lambda kw: Site(**kw).start(), kw) for name, kw in specs.items()}
    done, errors = {}, []
    for name, f in futures.items():
        try:
            done[name] = f.result()
        except Exception as e:  # noqa: BLE001 (re-raised below, once the others are cleaned up)
            errors.append(e)
    if errors:
        cleanup_sites(done.values())
        raise errors[0]
    return done


def cleanup_sites(sites):
    """Stop sites side by side (berthd, then its cluster): every one is stopped even when one's checks fail,
    and the first failure (a leak or race report in a berthd log) is raised."""
    from concurrent.futures import ThreadPoolExecutor
    sites = list(sites)
    if not sites:
        return
    with ThreadPoolExecutor(len(sites)) as pool:
        futures = [pool.submit(s.cleanup) for s in sites]
    for f in futures:
        f.result()


class TwoSites(BerthTestCase):
    START = False

    @classmethod
    def setUpClass(cls):
        # in the s3 run (integration_replication_s3) site A keeps its blobs in the test Ceph and B on its file
        # system: pushes go s3 -> filesystem, pulls filesystem -> s3, with the bytes checked at the other end
        sites = start_sites({"a": {}, "b": {"env": {"BERTH_STORAGE_DRIVER": "filesystem"}}})
        cls.a, cls.b = sites["a"], sites["b"]
        cls.tmp = tempfile.mkdtemp(prefix="repl-")
        cls.reg_b = add_registry(cls.a, "site-b", "http://" + cls.b.host)
        cls.reg_a_on_b = add_registry(cls.b, "site-a", "http://" + cls.a.host)
        # test_scheduled_trigger's policy fires at the next whole minute: made here, so that wait passes while
        # the tests before it run (it checks the run later; nothing else here names sched/**)
        cls.a.project("sched")
        cls.sched_digest = cls.a.push_image("sched/app", "1", seed=b"scheduled")[0]
        cls.sched_policy = add_policy(cls.a, {"name": "every-minute", "dest_registry": {"id": cls.reg_b},
                                              "trigger": {"type": "scheduled", "trigger_settings": {"cron": "0 * * * * *"}},
                                              "filters": [{"type": "name", "value": "sched/**"}]})
        cls.sched_made = time.time()

    @classmethod
    def tearDownClass(cls):
        cleanup_sites([cls.a, cls.b])
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_replication_webhook_event(self):
        """A real execution's end sends REPLICATION to the source project's webhook policies, with Harbor's
        event_data.replication (status, execution, the artifacts copied), written in the execution's last statement."""
        from test_webhook import Receiver, policy  # the receiver written for the webhook tests
        rx = Receiver()
        try:
            self.a.project("hookrepl")
            self.a.push_image("hookrepl/app", "1")
            st, _, out = api(self.a, "POST", "/projects/hookrepl/webhook/policies", policy(rx.url("/repl"), ["REPLICATION"]))
            self.assertEqual(st, 201, out)
            pid = add_policy(self.a, {"name": "push-hooked", "dest_registry": {"id": self.reg_b}, "trigger": {"type": "manual"},
                                      "filters": [{"type": "name", "value": "hookrepl/**"}]})
            eid = run_policy(self.a, pid)
            e = wait_execution(self.a, eid)
            self.assertEqual((e["status"], e["succeed"]), ("Succeed", 1), e)
            reqs = rx.wait("/repl", timeout=30)
            self.assertTrue(reqs, "no REPLICATION delivered")
            ev = reqs[0]["json"]
            self.assertEqual(ev["type"], "REPLICATION")
            r = ev["event_data"]["replication"]
            self.assertEqual((r["job_status"], r["execution_id"], r["policy_id"]), ("Succeed", eid, pid), r)
            self.assertEqual([a["name_tag"] for a in r["successful_artifact"]], ["hookrepl/app:1"], r)
            self.assertEqual((r["failed_artifact"], r["dest_resource"]["registry_name"]), ([], "site-b"), r)
            time.sleep(1.0)  # deliberate: a second delivery of the same execution would have arrived by now
            self.assertEqual(len(rx.got("/repl")), 1, "one event per execution and project")
        finally:
            rx.close()

    def push(self, site, repo, tag, files, plats=None):
        layout = os.path.join(self.tmp, "l-%s-%s" % (repo.replace("/", "_"), tag))
        shutil.rmtree(layout, ignore_errors=True)
        digest = write_oci_layout(layout, files, plats, tag=tag)
        site.project(repo.split("/")[0])  # the source's project; destinations get theirs from the engine
        r = subprocess.run(["skopeo", "copy", "--all", "--preserve-digests", "--dest-tls-verify=false", "--dest-creds", ADMIN,
                            "oci:%s:%s" % (layout, tag), "docker://%s/%s:%s" % (site.host, repo, tag)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        return digest

    def test_manual_push_with_filters_and_flattening(self):
        d1 = self.push(self.a, "team/app", "1.0", [{"f": os.urandom(3000)}])
        self.push(self.a, "team/app", "dev", [{"f": b"dev build"}])
        self.push(self.a, "team/tools/lint", "1.0", [{"f": b"lint"}])
        idx = self.push(self.a, "team/multi", "1.0", [{"a": b"amd64"}, {"b": b"arm64"}], [("linux", "amd64"), ("linux", "arm64")])
        pid = add_policy(self.a, {"name": "push-team", "dest_registry": {"id": self.reg_b}, "dest_namespace": "mirror",
                                  "dest_namespace_replace_count": 1, "trigger": {"type": "manual"},
                                  "filters": [{"type": "name", "value": "team/**"}, {"type": "tag", "value": "dev",
                                                                                      "decoration": "excludes"}]})
        e = wait_execution(self.a, run_policy(self.a, pid))
        self.assertEqual((e["status"], e["failed"], e["succeed"]), ("Succeed", 0, 3), e)
        st, d, _ = manifest(self.b, "mirror/app", "1.0")
        self.assertEqual((st, d), (200, d1))
        self.assertEqual(manifest(self.b, "mirror/app", "dev")[0], 404)  # excluded by the tag filter
        self.assertEqual(manifest(self.b, "mirror/tools/lint", "1.0")[0], 200)  # one level replaced
        st, d, body = manifest(self.b, "mirror/multi", "1.0")
        self.assertEqual((st, d), (200, idx))  # the index and both children, digests identical
        for child in json.loads(body)["manifests"]:
            self.assertEqual(manifest(self.b, "mirror/multi", child["digest"])[0], 200)
        st, _, tasks = api(self.a, "GET", "/replication/executions/%d/tasks" % e["id"])
        self.assertEqual(len(tasks), 3)
        self.assertTrue(all(t["status"] == "Succeed" for t in tasks))
        # a second run finds everything there: nothing re-sent
        e2 = wait_execution(self.a, run_policy(self.a, pid))
        st, _, tasks = api(self.a, "GET", "/replication/executions/%d/tasks" % e2["id"])
        self.assertEqual(sum(t["bytes_sent"] for t in tasks), 0)

    def test_refused_destination_is_failed_not_succeed(self):
        # a credential the destination refuses: the execution ends Failed with the reason in the task log, at
        # once (a 401 is not retried), and the destination holds nothing of the image
        self.push(self.a, "deny/app", "1.0", [{"f": os.urandom(2000)}])
        reg = add_registry(self.a, "b-wrong-password", "http://" + self.b.host, password="not-the-password")
        pid = add_policy(self.a, {"name": "push-denied", "dest_registry": {"id": reg}, "trigger": {"type": "manual"},
                                  "filters": [{"type": "name", "value": "deny/**"}]})
        e = wait_execution(self.a, run_policy(self.a, pid), timeout=60)
        self.assertEqual((e["status"], e["succeed"], e["failed"]), ("Failed", 0, 1), e)
        st, _, tasks = api(self.a, "GET", "/replication/executions/%d/tasks" % e["id"])
        self.assertEqual([t["status"] for t in tasks], ["Failed"])
        st, _, log = api(self.a, "GET", "/replication/executions/%d/tasks/%d/log" % (e["id"], tasks[0]["id"]))
        self.assertEqual(st, 200)
        text = log.decode() if isinstance(log, bytes) else log if isinstance(log, str) else json.dumps(log)
        self.assertIn("401", text)
        self.assertEqual(manifest(self.b, "deny/app", "1.0")[0], 404)

    def test_event_trigger_and_deletion(self):
        pid = add_policy(self.a, {"name": "events", "dest_registry": {"id": self.reg_b}, "trigger": {"type": "event_based"},
                                  "replicate_deletion": True, "filters": [{"type": "name", "value": "live/**"}]})
        d = self.push(self.a, "live/svc", "v1", [{"x": b"live"}])
        deadline = time.time() + 60
        while time.time() < deadline and manifest(self.b, "live/svc", "v1")[0] != 200:
            time.sleep(0.3)
        self.assertEqual(manifest(self.b, "live/svc", "v1")[1], d)
        # a tag added and removed through the REST API is an event like a /v2 push or delete
        st, _, _ = api(self.a, "POST", "/projects/live/repositories/svc/artifacts/v1/tags", {"name": "rest"})
        self.assertEqual(st, 201)
        deadline = time.time() + 60
        while time.time() < deadline and manifest(self.b, "live/svc", "rest")[0] != 200:
            time.sleep(0.3)
        self.assertEqual(manifest(self.b, "live/svc", "rest")[1], d, "a tag created through the API was not replicated")
        # refused (the tag exists): nothing committed, so no event and no execution (counted below)
        st, _, _ = api(self.a, "POST", "/projects/live/repositories/svc/artifacts/v1/tags", {"name": "rest"})
        self.assertEqual(st, 409)
        st, _, _ = api(self.a, "DELETE", "/projects/live/repositories/svc/artifacts/v1/tags/rest")
        self.assertEqual(st, 200)
        deadline = time.time() + 60
        while time.time() < deadline and manifest(self.b, "live/svc", "rest")[0] != 404:
            time.sleep(0.3)
        self.assertEqual(manifest(self.b, "live/svc", "rest")[0], 404, "a tag deleted through the API stayed replicated")
        # deleting one tag deletes that tag at the destination, not the manifest with its other tags
        self.assertEqual(manifest(self.b, "live/svc", "v1")[1], d, "deleting tag rest took v1 with it at the destination")
        st, _, _ = self.a.request("DELETE", "/v2/live/svc/manifests/v1")
        self.assertEqual(st, 202)
        deadline = time.time() + 60
        while time.time() < deadline and manifest(self.b, "live/svc", "v1")[0] != 404:
            time.sleep(0.3)
        self.assertEqual(manifest(self.b, "live/svc", "v1")[0], 404)
        st, _, execs = api(self.a, "GET", "/replication/executions?policy_id=%d" % pid)
        self.assertTrue(all(x["trigger"] == "event_based" for x in execs))
        # one per committed change (push v1, create rest, delete rest, delete v1), none for the refused create;
        # events are handled in order, so the last one's run being done means the others were handled before it
        self.assertEqual(len(execs), 4, execs)

    def test_pull_based(self):
        d = self.push(self.b, "upstream/base", "2.0", [{"u": b"upstream"}])
        pid = add_policy(self.a, {"name": "pull-base", "src_registry": {"id": self.reg_b}, "trigger": {"type": "manual"},
                                  "filters": [{"type": "name", "value": "upstream/base"}]})
        e = wait_execution(self.a, run_policy(self.a, pid))
        self.assertEqual(e["status"], "Succeed", e)
        st, got, body = manifest(self.a, "upstream/base", "2.0")
        self.assertEqual(got, d)
        m = json.loads(body)
        for desc in [m["config"]] + m["layers"]:  # every blob arrived whole, read back from A's store
            st, _, blob = self.a.request("GET", "/v2/upstream/base/blobs/" + desc["digest"])
            self.assertEqual((st, sha256(blob), len(blob)), (200, desc["digest"], desc["size"]))
        self.assertTrue(all(self.a.has_blob(x["digest"]) for x in [m["config"]] + m["layers"]))  # the bucket, in the s3 run

    def test_zstd_between_berth_sites(self):
        """An uncompressed tar layer of text: as type berth the chunks travel zstd-compressed and are verified on the
        original digest; as a generic OCI endpoint (type docker-registry) the same bytes travel as they are."""
        from harness import OCI_CONFIG, OCI_MANIFEST
        text = b"".join(b"%08d the quick brown fox jumps over the lazy dog, again and again\n" % i for i in range(200000))
        plain_reg = add_registry(self.a, "site-b-plain", "http://" + self.b.host, kind="docker-registry")
        results = {}
        self.a.project("zs")
        self.b.project("zs-p").project("zs")  # B is a Berth registered as a plain registry: nothing creates projects there
        for label, reg, ns in (("zstd", self.reg_b, "zs-z"), ("plain", plain_reg, "zs-p")):
            # its own bytes per run: the second would otherwise be mounted from the first at B
            layer = text[: 12 << 20] + label.encode()
            ld = self.a.push_blob("zs/" + label, layer)
            cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [ld]}}).encode()
            cd = self.a.push_blob("zs/" + label, cfg)
            m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
                 "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": len(layer)}]}
            st, h, _, _ = self.a.push_manifest("zs/" + label, "1", m)
            self.assertEqual(st, 201)
            pid = add_policy(self.a, {"name": "zs-" + label, "dest_registry": {"id": reg}, "dest_namespace": ns,
                                      "filters": [{"type": "name", "value": "zs/" + label}]})
            t0 = time.time()
            e = wait_execution(self.a, run_policy(self.a, pid))
            secs = time.time() - t0
            self.assertEqual(e["status"], "Succeed", e)
            t = api(self.a, "GET", "/replication/executions/%d/tasks" % e["id"])[2][0]
            self.assertEqual(manifest(self.b, "%s/%s" % (ns, label), "1")[1], h["docker-content-digest"])
            st, _, body = self.b.request("GET", "/v2/%s/%s/blobs/%s" % (ns, label, ld))
            self.assertEqual(sha256(body), ld)
            results[label] = (t["bytes_sent"], secs)
        self.assertLess(results["zstd"][0] * 4, results["plain"][0], results)
        print("\n# BENCH replication of a %d MiB text layer: zstd %d bytes on the wire (%.2f s), plain %d bytes (%.2f s)" % (
            len(layer) >> 20, results["zstd"][0], results["zstd"][1], results["plain"][0], results["plain"][1]))
        # a client that claims zstd and sends something else gets a clear error and nothing is kept
        st, h, _ = self.b.request("POST", "/v2/zs/bad/blobs/uploads/")
        st, h2, body = self.b.request("PATCH", h["location"], b"not a zstd frame at all",
                                      {"Content-Encoding": "zstd", "Content-Range": "0-99", "Content-Type": "application/octet-stream"})
        self.assertEqual(st, 400, body)
        st, h3, _ = self.b.request("GET", h["location"])
        self.assertEqual(h3.get("range", "0-0"), "0-0")
        # an encoding Berth does not decode (gzip) is refused before a byte is written, in the OCI error format
        st, _, body = self.b.request("PATCH", h["location"], gzip.compress(b"x" * 1000),
                                     {"Content-Encoding": "gzip", "Content-Type": "application/octet-stream"})
        self.assertEqual(st, 415, body)
        self.assertEqual(json.loads(body)["errors"][0]["code"], "UNSUPPORTED")
        self.assertIn(b"gzip", body)
        st, h3, _ = self.b.request("GET", h["location"])
        self.assertEqual((st, h3.get("range", "0-0")), (204, "0-0"))

    def test_referrers_mount_override_stop_and_delegation(self):
        from harness import OCI_CONFIG, OCI_MANIFEST
        layer = os.urandom(20000)
        self.a.project("ref")
        ld = self.a.push_blob("ref/app", layer)
        cfg = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
        cd = self.a.push_blob("ref/app", cfg)
        m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
             "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": len(layer)}]}
        st, h, _, raw = self.a.push_manifest("ref/app", "1", m)
        subject = h["docker-content-digest"]
        # a signature-like referrer of it
        sig = self.a.push_blob("ref/app", b"signature")
        empty = self.a.push_blob("ref/app", b"{}")
        ref = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example.sig",
               "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
               "layers": [{"mediaType": "application/vnd.example.sig", "digest": sig, "size": 9}],
               "subject": {"mediaType": OCI_MANIFEST, "digest": subject, "size": len(raw)}}
        st, h, _, _ = self.a.push_manifest("ref/app", sha256(json.dumps(ref).encode()), ref)
        self.assertEqual(st, 201)
        # the same layer in another repository: copied second, it is mounted at the destination, not sent again
        for blob in (layer, cfg):
            self.a.push_blob("ref/other", blob)
        st, _, _, _ = self.a.push_manifest("ref/other", "1", m)
        self.assertEqual(st, 201)
        pid = add_policy(self.a, {"name": "refs", "dest_registry": {"id": self.reg_b}, "filters": [{"type": "name", "value": "ref/app"}]})
        e = wait_execution(self.a, run_policy(self.a, pid))
        self.assertEqual(e["status"], "Succeed", e)
        st, _, body = self.b.request("GET", "/v2/ref/app/referrers/" + subject)
        self.assertEqual([r["artifactType"] for r in json.loads(body)["manifests"]], ["application/vnd.example.sig"])
        other = add_policy(self.a, {"name": "refs-other", "dest_registry": {"id": self.reg_b},
                                    "filters": [{"type": "name", "value": "ref/other"}]})
        e = wait_execution(self.a, run_policy(self.a, other))
        self.assertEqual(e["status"], "Succeed", e)
        tasks = api(self.a, "GET", "/replication/executions/%d/tasks" % e["id"])[2]
        self.assertLess(tasks[0]["bytes_sent"], len(layer))  # the layer was mounted, not sent
        logs = [api(self.a, "GET", "/replication/executions/%d/tasks/%d/log" % (e["id"], t["id"]))[2] for t in tasks]
        self.assertTrue(any(b"mounted" in (l if isinstance(l, bytes) else l.encode()) for l in logs), logs)
        # override off: the destination's tag stays
        m2 = dict(m, annotations={"changed": "yes"})
        st, h2, _, _ = self.a.push_manifest("ref/app", "1", m2)
        keep = add_policy(self.a, {"name": "keep", "dest_registry": {"id": self.reg_b}, "override": False,
                                   "filters": [{"type": "name", "value": "ref/app"}]})
        self.assertEqual(wait_execution(self.a, run_policy(self.a, keep))["status"], "Succeed")
        self.assertEqual(manifest(self.b, "ref/app", "1")[1], subject)
        # stop: a slow run is stopped, its task too. 24 MiB in three 8 MiB chunks (the default) at 2 MiB/s: its
        # progress shows after the first chunk (4 s), the stop takes effect after the chunk in flight, 8 s before
        # the end (at 1 MiB/s the test waited 16 s for that, and the drain at teardown up to 8 more)
        big = self.a.push_blob("ref/slow", os.urandom(24 << 20))
        cfg2 = self.a.push_blob("ref/slow", cfg)
        m3 = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cfg2, "size": len(cfg)},
              "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": big, "size": 24 << 20}]}
        self.assertEqual(self.a.push_manifest("ref/slow", "1", m3)[0], 201)
        slow = add_policy(self.a, {"name": "slow", "dest_registry": {"id": self.reg_b}, "speed": 2048,
                                   "filters": [{"type": "name", "value": "ref/slow"}]})
        # the stop is announced like an end: REPLICATION to the source project, queued with the Stopped status
        from test_webhook import Receiver, policy
        rx = Receiver()
        self.addCleanup(rx.close)
        st, _, out = api(self.a, "POST", "/projects/ref/webhook/policies", policy(rx.url("/stop"), ["REPLICATION"]))
        self.assertEqual(st, 201, out)
        eid = run_policy(self.a, slow)
        self.assertEqual(api(self.a, "POST", "/replication/executions", {"policy_id": slow})[0], 409)  # still running: skipped
        tasks = lambda: api(self.a, "GET", "/replication/executions/%d/tasks" % eid)[2]
        # stop it mid-transfer: once its task has started sending
        self.assertTrue(eventually(lambda: any(t.get("bytes_sent", 0) > 0 for t in tasks()), True, timeout=90), tasks())
        self.assertEqual(api(self.a, "PUT", "/replication/executions/%d" % eid, {"status": "Stopped"})[0], 200)
        e = wait_execution(self.a, eid)
        self.assertEqual(e["status"], "Stopped")
        self.assertEqual(eventually(lambda: tasks()[0]["status"], "Stopped", timeout=60), "Stopped")
        self.assertEqual(manifest(self.b, "ref/slow", "1")[0], 404)
        mine = lambda r: json.loads(r["body"])["event_data"]["replication"]["execution_id"] == eid
        reqs = rx.wait("/stop", pred=mine, timeout=30)
        self.assertTrue(reqs, "no REPLICATION for the stopped execution: %r" % rx.got("/stop"))
        r = reqs[0]["json"]["event_data"]["replication"]
        self.assertEqual((r["job_status"], r["policy_id"], r["successful_artifact"]), ("Stopped", slow, []), r)
        time.sleep(1.0)  # deliberate: a second event (the task in flight ending after the stop) would have arrived
        self.assertEqual(len(rx.got("/stop", mine)), 1, rx.got("/stop"))
        # delegation (beyond Harbor): a project admin manages policies confined to the project
        for u in ("pa", "dev"):
            api(self.a, "POST", "/users", {"username": u, "password": "Passw0rd!x"})
        api(self.a, "POST", "/projects/ref/members", {"role_id": 1, "member_user": {"username": "pa"}})
        api(self.a, "POST", "/projects/ref/members", {"role_id": 2, "member_user": {"username": "dev"}})

        def as_user(user, method, path, body=None):
            auth = "Basic " + base64.b64encode(("%s:Passw0rd!x" % user).encode()).decode()
            data = json.dumps(body).encode() if body is not None else None
            return self.a.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"}, auth=auth)[0]
        scoped = {"name": "pa-own", "project_scope": "ref", "dest_registry": {"id": self.reg_b},
                  "filters": [{"type": "name", "value": "ref/app"}]}
        self.assertEqual(as_user("pa", "POST", "/replication/policies", dict(scoped, filters=[])), 400)  # must stay in ref/
        self.assertEqual(as_user("pa", "POST", "/replication/policies", dict(scoped, project_scope=None, name="x")), 403)
        self.assertEqual(as_user("dev", "POST", "/replication/policies", scoped), 403)
        self.assertEqual(as_user("pa", "POST", "/replication/policies", scoped), 201)
        mine = [p for p in api(self.a, "GET", "/replication/policies?project_scope=ref")[2] if p["name"] == "pa-own"][0]
        self.assertEqual(as_user("pa", "POST", "/replication/executions", {"policy_id": mine["id"]}), 201)
        self.assertEqual(as_user("pa", "POST", "/replication/executions", {"policy_id": pid}), 403)  # not theirs
        self.assertEqual(as_user("pa", "GET", "/registries"), 403)

    def test_delegated_policy_writes_only_where_its_owner_may_push(self):
        """A project admin's policy (project_scope) may name a destination namespace only in a project where that
        admin may push — at creation, at update and again at every run — for push and pull policies alike."""
        for p in ("dlg", "vict", "mine2"):
            self.assertEqual(api(self.a, "POST", "/projects", {"project_name": p})[0], 201)
        self.a.push_image("dlg/app", "1")
        api(self.a, "POST", "/users", {"username": "pa2", "password": "Passw0rd!x"})
        api(self.a, "POST", "/projects/dlg/members", {"role_id": 1, "member_user": {"username": "pa2"}})
        st, h, _ = api(self.a, "POST", "/projects/mine2/members", {"role_id": 2, "member_user": {"username": "pa2"}})
        mid = h["location"].rsplit("/", 1)[1]

        def as_pa2(method, path, body=None):
            auth = "Basic " + base64.b64encode(b"pa2:Passw0rd!x").decode()
            data = json.dumps(body).encode() if body is not None else None
            st, _, raw = self.a.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"}, auth=auth)
            return st, json.loads(raw) if raw else None
        push = {"name": "dlg-push", "project_scope": "dlg", "dest_registry": {"id": self.reg_b},
                "filters": [{"type": "name", "value": "dlg/**"}]}
        pull = {"name": "dlg-pull", "project_scope": "dlg", "src_registry": {"id": self.reg_b},
                "filters": [{"type": "name", "value": "dlg/**"}]}
        for body in (push, pull):
            for ns in ("vict", "vict/sub", "nosuchproject"):
                st, out = as_pa2("POST", "/replication/policies", dict(body, dest_namespace=ns))
                self.assertEqual((st, out["errors"][0]["code"]), (403, "DENIED"), (body["name"], ns))
                self.assertIn("may not push to project", out["errors"][0]["message"])
        self.assertEqual(as_pa2("POST", "/replication/policies", dict(push, name="dlg-own"))[0], 201)
        self.assertEqual(as_pa2("POST", "/replication/policies", dict(pull, name="dlg-pull-own"))[0], 201)
        st, _ = as_pa2("POST", "/replication/policies", dict(push, dest_namespace="mine2"))  # a developer there: may push
        self.assertEqual(st, 201)
        pid = [p for p in api(self.a, "GET", "/replication/policies?project_scope=dlg")[2] if p["name"] == "dlg-push"][0]["id"]
        self.assertEqual(as_pa2("PUT", "/replication/policies/%d" % pid, dict(push, dest_namespace="vict"))[0], 403)
        st, _, out = api(self.a, "PUT", "/replication/policies/%d" % pid, dict(push, dest_namespace="vict"))
        self.assertEqual(st, 403, out)  # the owner's rights count, not the editor's
        self.assertEqual(api(self.a, "GET", "/replication/policies/%d" % pid)[2]["dest_namespace"], "mine2")
        # the owner loses push on mine2: the next run is refused before anything is written, and the refusal is
        # announced to the source project (no task: the project comes from the policy) in the Failed statement
        from test_webhook import Receiver, policy
        rx = Receiver()
        self.addCleanup(rx.close)
        st, _, out = api(self.a, "POST", "/projects/dlg/webhook/policies", policy(rx.url("/refused"), ["REPLICATION"]))
        self.assertEqual(st, 201, out)
        self.assertEqual(api(self.a, "DELETE", "/projects/mine2/members/" + mid)[0], 200)
        st, h, _ = api(self.a, "POST", "/replication/executions", {"policy_id": pid})
        self.assertEqual(st, 201)
        e = wait_execution(self.a, int(h["location"].rsplit("/", 1)[1]))
        self.assertEqual(e["status"], "Failed", e)
        self.assertIn("may not push to project mine2", e["status_text"])
        reqs = rx.wait("/refused", timeout=30)
        self.assertTrue(reqs, "no REPLICATION for the refused execution")
        r = reqs[0]["json"]["event_data"]["replication"]
        self.assertEqual((r["job_status"], r["execution_id"], r["policy_id"]), ("Failed", e["id"], pid), r)
        self.assertEqual((r["successful_artifact"], r["failed_artifact"]), ([], []), r)
        self.assertEqual(e["total"], 0)
        self.assertEqual(manifest(self.b, "mine2/app", "1")[0], 404)

    def test_scheduled_trigger(self):
        # the policy and its image were made in setUpClass
        pid, d = self.sched_policy, self.sched_digest
        deadline = self.sched_made + 75  # the scheduler looks once a minute
        execs = []
        while time.time() < deadline and not execs:
            execs = api(self.a, "GET", "/replication/executions?policy_id=%d" % pid)[2]
            if not execs:
                time.sleep(1)
        self.assertTrue(execs, "no scheduled execution within 75 s of the policy's creation")
        first = min(execs, key=lambda x: x["id"])
        self.assertEqual(first["trigger"], "scheduled")
        e = wait_execution(self.a, first["id"])
        self.assertEqual(e["status"], "Succeed", e)
        self.assertEqual(manifest(self.b, "sched/app", "1")[1], d)

    def test_api_rules(self):
        st, _, _ = api(self.a, "POST", "/registries", {"name": "x", "type": "quay", "url": "http://h"})
        self.assertEqual(st, 400)
        st, _, reg = api(self.a, "GET", "/registries/%d" % self.reg_b)
        self.assertEqual(reg["credential"]["access_secret"], "*****")  # stored sealed, never shown
        self.assertEqual(api(self.a, "POST", "/registries/ping", {"type": "berth", "url": "http://" + self.b.host,
                                                                  "credential": {"access_key": "admin", "access_secret": ADMIN_PASSWORD}})[0], 200)
        self.assertEqual(api(self.a, "POST", "/registries/ping", {"type": "berth", "url": "http://" + self.b.host,
                                                                  "credential": {"access_key": "admin", "access_secret": "nope"}})[0], 401)
        self.assertEqual(api(self.a, "POST", "/replication/policies", {"name": "both", "src_registry": {"id": self.reg_b},
                                                                       "dest_registry": {"id": self.reg_b}})[0], 400)
        self.assertNotIn(ADMIN_PASSWORD.encode(), open(self.a.log_path, "rb").read())


class OnlyHttp(BerthTestCase):
    """Endpoints and everything libcurl reaches through them speak http or https only: other schemes in an
    endpoint URL are refused with 400, and a remote registry whose token realm names gopher:// or dict:// gets
    no connection from berthd (SSRF into internal services)."""

    def test_other_schemes_refused(self):
        reg = add_registry(self.b, "ok", "http://127.0.0.1:1")
        for url in ("gopher://127.0.0.1:70/_x", "file:///etc/passwd", "dict://127.0.0.1:2628/show:db", "ftp://127.0.0.1/",
                    "ldap://127.0.0.1/", "http:/x", "HTTPX://h"):
            body = {"name": "bad", "type": "berth", "url": url, "credential": {"access_key": "a", "access_secret": "b"}}
            for method, path in (("POST", "/registries/ping"), ("POST", "/registries"), ("PUT", "/registries/%d" % reg)):
                st, _, out = api(self.b, method, path, body)
                self.assertEqual(st, 400, (method, path, url, out))
        self.assertEqual(api(self.b, "GET", "/registries/%d" % reg)[2]["url"], "http://127.0.0.1:1")

    def test_token_realm_with_another_scheme_is_not_followed(self):
        import socket
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer
        trap = socket.socket()
        trap.bind(("127.0.0.1", 0))
        trap.listen(8)
        trap.settimeout(0.2)
        hits = []

        def accept():
            while not stop.is_set():
                try:
                    conn, _ = trap.accept()
                    hits.append(conn.recv(200))
                    conn.close()
                except OSError:
                    pass
        realms = ["dict://127.0.0.1:%d/show:db" % trap.getsockname()[1], "gopher://127.0.0.1:%d/_GET" % trap.getsockname()[1]]

        class Remote(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Bearer realm="%s",service="x"' % realms[0])
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass
        remote = HTTPServer(("127.0.0.1", 0), Remote)
        stop = threading.Event()
        threads = [threading.Thread(target=remote.serve_forever, daemon=True), threading.Thread(target=accept, daemon=True)]
        for t in threads:
            t.start()
        try:
            while realms:
                st, _, _ = api(self.b, "POST", "/registries/ping", {"type": "docker-registry", "url": "http://127.0.0.1:%d" %
                                                                    remote.server_address[1],
                                                                    "credential": {"access_key": "u", "access_secret": "p"}})
                self.assertEqual(st, 401, realms[0])  # the remote's 401 stands
                realms.pop(0)
            time.sleep(0.3)
            self.assertEqual(hits, [], "berthd followed a non-http realm")
        finally:
            stop.set()
            remote.shutdown()
            trap.close()


@unittest.skipUnless(shutil.which("docker-registry") and shutil.which("skopeo"), "docker-registry/skopeo missing")
class WithDistribution(BerthTestCase):
    """Push-based to a stock Distribution registry and pull-based from one."""
    START = False

    @classmethod
    def setUpClass(cls):
        cls.a = Site().start()
        cls.tmp = tempfile.mkdtemp(prefix="repl-dist-")
        cls.port = free_port()
        cfg = os.path.join(cls.tmp, "config.yml")
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\n  delete:\n    enabled: true\n"
                    "http:\n  addr: 127.0.0.1:%d\n" % (cls.tmp, cls.port))
        cls.dist = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        cls.reg = add_registry(cls.a, "dist", "http://127.0.0.1:%d" % cls.port, kind="docker-registry", user="", password="")

    @classmethod
    def tearDownClass(cls):
        cls.dist.terminate()
        cls.dist.wait(10)
        cls.a.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_push_to_and_pull_from_distribution(self):
        layout = os.path.join(self.tmp, "l")
        d = write_oci_layout(layout, [{"f": os.urandom(5000)}], tag="1")
        self.a.project("out")
        r = subprocess.run(["skopeo", "copy", "--preserve-digests", "--dest-tls-verify=false", "--dest-creds", ADMIN, "oci:%s:1" % layout,
                            "docker://%s/out/app:1" % self.a.host], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = add_policy(self.a, {"name": "to-dist", "dest_registry": {"id": self.reg}, "filters": [{"type": "name", "value": "out/**"}]})
        e = wait_execution(self.a, run_policy(self.a, pid))
        self.assertEqual(e["status"], "Succeed", e)
        r = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", "docker://127.0.0.1:%d/out/app:1" % self.port],
                           capture_output=True, text=True)
        self.assertEqual(sha256(r.stdout.encode()), d)
        # and back: pull-based from Distribution into another project
        r = subprocess.run(["skopeo", "copy", "--preserve-digests", "--dest-tls-verify=false", "oci:%s:1" % layout,
                            "docker://127.0.0.1:%d/src/app:7" % self.port], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = add_policy(self.a, {"name": "from-dist", "src_registry": {"id": self.reg}, "filters": [{"type": "name", "value": "src/**"}]})
        e = wait_execution(self.a, run_policy(self.a, pid))
        self.assertEqual(e["status"], "Succeed", e)
        self.assertEqual(manifest(self.a, "src/app", "7")[1], d)

    def test_tag_deletion_to_distribution(self):
        """Distribution 2.x deletes by digest only: a deleted tag whose manifest another live tag still names there
        is kept (deleting the digest would take that tag too); the last one deletes the manifest."""
        self.a.project("deltags")
        d, raw = self.a.push_image("deltags/app", "x", seed=b"deltags")
        st, _, _ = self.a.request("PUT", "/v2/deltags/app/manifests/y", body=raw, headers={"Content-Type": OCI_MANIFEST})
        self.assertEqual(st, 201)
        pid = add_policy(self.a, {"name": "del-dist", "dest_registry": {"id": self.reg}, "trigger": {"type": "event_based"},
                                  "replicate_deletion": True, "filters": [{"type": "name", "value": "deltags/**"}]})
        # the pushes' events may still be on their way to the new event-based policy (seen under ASan): a run they
        # start makes the manual run 409 until it ends, so the manual run is asked again then; and a run they start
        # just after the manual one pushes the same manifest to Distribution beside it (the fresh-clone ASan run saw
        # the manual run end Failed, 1 of 2 tasks): then, once no run is active, the manual run is asked once more
        def manual_run():
            deadline = time.time() + 60
            while True:
                st, h, out = api(self.a, "POST", "/replication/executions", {"policy_id": pid})
                if st != 409 or time.time() > deadline:
                    break
                time.sleep(0.3)
            self.assertEqual(st, 201, out)
            return wait_execution(self.a, int(h["location"].rsplit("/", 1)[1]))

        e = manual_run()
        if e["status"] != "Succeed":
            st, _, tasks = api(self.a, "GET", "/replication/executions/%d/tasks" % e["id"])
            print("manual run %s, tasks: %s; asked again" % (e["status"], tasks))
            deadline = time.time() + 60
            while time.time() < deadline:
                st, _, runs = api(self.a, "GET", "/replication/executions?policy_id=%d" % pid)
                if all(r["status"] != "InProgress" for r in runs):
                    break
                time.sleep(0.3)
            e = manual_run()
        self.assertEqual(e["status"], "Succeed", e)
        dist = "http://127.0.0.1:%d" % self.port

        def at_dist(tag):
            req = urllib.request.Request("%s/v2/deltags/app/manifests/%s" % (dist, tag), method="HEAD",
                                         headers={"Accept": ACCEPT_ALL})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, r.headers.get("Docker-Content-Digest")
            except urllib.error.HTTPError as err:
                return err.code, None
        self.assertEqual(at_dist("y"), (200, d))
        runs = len(api(self.a, "GET", "/replication/executions?policy_id=%d" % pid)[2])

        def settled():  # the deletion's run exists and is over
            execs = api(self.a, "GET", "/replication/executions?policy_id=%d" % pid)[2]
            return len(execs) > runs and all(x["status"] != "InProgress" for x in execs)
        self.assertEqual(self.a.request("DELETE", "/v2/deltags/app/manifests/x")[0], 202)
        self.assertTrue(eventually(settled, True, timeout=60))
        self.assertEqual(at_dist("y"), (200, d), "deleting tag x deleted the manifest tag y still names")
        self.assertEqual(self.a.request("DELETE", "/v2/deltags/app/manifests/y")[0], 202)
        eventually(lambda: at_dist("y")[0], 404, timeout=60)


def sh(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(cmd), r.stderr))
    return r


def can_netns():
    if os.geteuid() != 0 or not shutil.which("ip"):
        return False
    probe = "berth-probe-%d" % os.getpid()
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return r.returncode == 0


@unittest.skipUnless(can_netns(), "needs root and ip netns")
class NetworkSites(BerthTestCase):
    """Three sites in their own network namespaces on one bridge: A (10.78.N.1), B (.2), C (.3). The host reaches
    them through the bridge; cutting a site's link is taking its host-side veth down."""
    START = False
    # names and subnet are the build tree's (from its PostgreSQL port): the release, ASan and TSan suites may run
    # this class at the same time
    TAG = int(os.environ.get("BERTH_TEST_PG_PORT", "25433")) % 10000
    NET = "10.78.%d." % (TAG % 250)
    BRIDGE = "brb%d" % TAG
    SITES = {"a": NET + "1", "b": NET + "2", "c": NET + "3"}

    @classmethod
    def ns(cls, name):
        return "berth-%s-%d" % (name, cls.TAG)

    @classmethod
    def veth(cls, name):
        return "vb%d%s" % (cls.TAG, name)

    @classmethod
    def setUpClass(cls):
        cls.cleanup_net()
        sh("ip", "link", "add", cls.BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", cls.NET + "254/24", "dev", cls.BRIDGE)
        sh("ip", "link", "set", cls.BRIDGE, "up")
        cls.sites = {}
        for name, ip in cls.SITES.items():
            ns, host_if, ns_if = cls.ns(name), cls.veth(name), cls.veth(name) + "-ns"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
            sh("ip", "link", "set", ns_if, "netns", ns)
            sh("ip", "link", "set", host_if, "master", cls.BRIDGE)
            sh("ip", "link", "set", host_if, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", ip + "/24", "dev", ns_if)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        # a WAN-ish link to B: tbf shapes its bandwidth (netem, for delay and loss, is not in this kernel)
        sh("tc", "qdisc", "add", "dev", cls.veth("b"), "root", "tbf", "rate", "80mbit", "burst", "256kbit", "latency", "100ms", check=False)
        chunk = "1024"  # KiB: 1 MiB chunks so an interruption lands mid-blob
        cls.sites = start_sites({name: dict(netns=cls.ns(name), ip=ip, env={"BERTH_REPLICATION_CHUNK_KIB": chunk})
                                 for name, ip in cls.SITES.items()})
        cls.a, cls.b, cls.c = cls.sites["a"], cls.sites["b"], cls.sites["c"]
        cls.tmp = tempfile.mkdtemp(prefix="repl-net-")

    @classmethod
    def cleanup_net(cls):
        for name in cls.SITES:
            subprocess.run(["ip", "netns", "del", cls.ns(name)], capture_output=True)
            subprocess.run(["ip", "link", "del", cls.veth(name)], capture_output=True)
        subprocess.run(["ip", "link", "del", cls.BRIDGE], capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cleanup_sites(getattr(cls, "sites", {}).values())
        cls.cleanup_net()
        shutil.rmtree(getattr(cls, "tmp", "/nonexistent"), ignore_errors=True)

    def push_big(self, site, repo, tag, mib):
        layout = os.path.join(self.tmp, "big-%s" % tag)
        shutil.rmtree(layout, ignore_errors=True)
        d = write_oci_layout(layout, [{"blob": os.urandom(mib << 20)}], tag=tag)
        site.project(repo.split("/")[0])
        r = subprocess.run(["skopeo", "copy", "--preserve-digests", "--dest-tls-verify=false", "--dest-creds", ADMIN,
                            "oci:%s:%s" % (layout, tag), "docker://%s/%s:%s" % (site.host, repo, tag)], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = json.load(open(os.path.join(layout, "blobs", "sha256", d.split(":")[1])))
        return d, m["layers"][0]["size"]

    def task(self, site, eid):
        return api(site, "GET", "/replication/executions/%d/tasks" % eid)[2][0]

    def task_log(self, site, eid, tid):
        log = api(site, "GET", "/replication/executions/%d/tasks/%d/log" % (eid, tid))[2]
        return (log if isinstance(log, bytes) else (log or "").encode()).decode(errors="replace")

    def test_partition_mid_transfer_resumes_the_blob(self):
        # 16 MiB in 1 MiB chunks, cut at half: a restart would put at least 24 MiB on the wire, a resumption at
        # most 16 MiB and the chunks in flight (the bound below)
        d, size = self.push_big(self.a, "net/big", "1", 16)
        reg = add_registry(self.a, "net-b", "http://" + self.b.host)
        # a per-task bandwidth cap (4 MiB/s: about 2 s for the second half) keeps the transfer going long enough
        # to cut it in the middle
        pid = add_policy(self.a, {"name": "to-b", "dest_registry": {"id": reg}, "speed": 4096,
                                  "filters": [{"type": "name", "value": "net/big"}]})
        eid = run_policy(self.a, pid)
        deadline = time.time() + 60
        while time.time() < deadline and self.task(self.a, eid)["bytes_sent"] < size // 2:
            time.sleep(0.1)
        t = self.task(self.a, eid)
        self.assertGreater(t["bytes_sent"], 0)
        sh("ip", "link", "set", self.veth("b"), "down")  # B is cut off mid-blob
        try:
            # the link stays down until the attempt in flight has failed on it (curl's low-speed limit: about
            # 10 s), as the task's log says; a link back too soon would let that attempt carry on (one attempt)
            deadline = time.time() + 120
            while time.time() < deadline and "attempt 1: transfer failed" not in self.task_log(self.a, eid, t["id"]):
                time.sleep(0.3)
            self.assertIn("attempt 1: transfer failed, will retry", self.task_log(self.a, eid, t["id"]), self.task(self.a, eid))
            self.assertEqual(api(self.a, "GET", "/replication/executions/%d" % eid)[2]["status"], "InProgress")
        finally:
            sh("ip", "link", "set", self.veth("b"), "up")
        e = wait_execution(self.a, eid, timeout=300)
        t = self.task(self.a, eid)
        log = api(self.a, "GET", "/replication/executions/%d/tasks/%d/log" % (eid, t["id"]))[2]
        self.assertEqual(e["status"], "Succeed", (e, t, log))
        self.assertEqual(manifest(self.b, "net/big", "1")[1], d)
        self.assertGreaterEqual(t["attempts"], 2)
        # resumed, not restarted: what went on the wire is the blob once plus at most the chunks in flight
        self.assertLess(t["bytes_sent"], size + 4 * (1 << 20), t)
        self.assertIn(b"resumed", log if isinstance(log, bytes) else log.encode())
        print("\n# BENCH replication A->B over the shaped link: %d MiB blob, %d bytes sent, %d attempts" % (
            size >> 20, t["bytes_sent"], t["attempts"]))

    def test_killed_berthd_resumes_after_restart(self):
        # 16 MiB killed past half: a restart would send at least 24 MiB, a resumption under the bound below
        d, size = self.push_big(self.c, "kill/big", "1", 16)
        reg = add_registry(self.c, "kill-a", "http://" + self.a.host)
        pid = add_policy(self.c, {"name": "c-to-a", "dest_registry": {"id": reg}, "speed": 4096,
                                  "filters": [{"type": "name", "value": "kill/big"}]})
        eid = run_policy(self.c, pid)
        deadline = time.time() + 60
        while time.time() < deadline and self.task(self.c, eid)["bytes_sent"] < size // 2:
            time.sleep(0.1)
        self.assertLess(self.task(self.c, eid)["bytes_sent"], size, "the transfer ended before the kill")
        self.c.stop(signal.SIGKILL)
        self.c.start()
        e = wait_execution(self.c, eid, timeout=240)
        t = self.task(self.c, eid)
        self.assertEqual(e["status"], "Succeed", (e, t))
        self.assertEqual(manifest(self.a, "kill/big", "1")[1], d)
        self.assertLess(t["bytes_sent"], size + 4 * (1 << 20), t)

    def test_throughput_with_and_without_zstd(self):
        """Site to site over B's shaped link (tbf 80 mbit): a compressible 8 MiB layer and a random one, each to B
        as a Berth (zstd chunks) and as a generic OCI endpoint (plain chunks)."""
        from harness import OCI_CONFIG, OCI_MANIFEST
        mib = 8  # 8 chunks each: what the assertions compare is bytes on the wire, which scale with the layer
        text = b"".join(b"%08d GROMACS step %d energy -1.2345e+05 pressure 1.01325 temperature 300.0\n" % (i, i) for i in range(130000))
        layers = {"text": text[: mib << 20], "random": os.urandom(mib << 20)}
        reg_z = add_registry(self.a, "tp-b-berth", "http://" + self.b.host)
        reg_p = add_registry(self.a, "tp-b-plain", "http://" + self.b.host, kind="docker-registry")
        rows = []
        self.a.project("tp")
        self.b.project("tp-plain")  # registered as a plain registry: nothing creates projects there
        for kind, base in layers.items():
            for label, reg in (("zstd", reg_z), ("plain", reg_p)):
                # its own bytes per run, or the second run would simply mount the blob the first one sent
                layer = base[: -16] + ("%-16s" % label).encode()
                repo = "tp/%s-%s" % (kind, label)
                ld = self.a.push_blob(repo, layer)
                cfg = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
                cd = self.a.push_blob(repo, cfg)
                m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
                     "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": len(layer)}]}
                self.assertEqual(self.a.push_manifest(repo, "1", m)[0], 201)
                pid = add_policy(self.a, {"name": "tp-%s-%s" % (kind, label), "dest_registry": {"id": reg}, "dest_namespace": "tp-" + label,
                                          "filters": [{"type": "name", "value": repo}]})
                t0 = time.time()
                e = wait_execution(self.a, run_policy(self.a, pid), timeout=300)
                secs = time.time() - t0
                self.assertEqual(e["status"], "Succeed", e)
                t = api(self.a, "GET", "/replication/executions/%d/tasks" % e["id"])[2][0]
                st, _, body = self.b.request("GET", "/v2/tp-%s/%s-%s/blobs/%s" % (label, kind, label, ld))
                self.assertEqual(sha256(body), ld)
                rows.append((kind, label, t["bytes_sent"], secs, len(layer) / secs / (1 << 20)))
        by = {(k, l): (b, s, r) for k, l, b, s, r in rows}
        self.assertLess(by[("text", "zstd")][0] * 4, by[("text", "plain")][0])
        self.assertLess(by[("random", "zstd")][0], by[("random", "plain")][0] * 1.02)  # incompressible: sent as is
        for k, l, b, s_, r in rows:
            print("\n# BENCH replication A->B (tbf 80 mbit), %s layer %d MiB, %s: %d bytes on the wire, %.2f s, %.1f MiB/s" % (k, mib, l, b, s_, r))

    def test_three_sites_chain(self):
        # A -> B by event, B -> C by schedule-free manual run: the same digest everywhere
        reg_b = add_registry(self.a, "chain-b", "http://" + self.b.host)
        reg_c = add_registry(self.b, "chain-c", "http://" + self.c.host)
        add_policy(self.a, {"name": "chain-ab", "dest_registry": {"id": reg_b}, "trigger": {"type": "event_based"},
                            "filters": [{"type": "name", "value": "chain/**"}]})
        pbc = add_policy(self.b, {"name": "chain-bc", "dest_registry": {"id": reg_c}, "filters": [{"type": "name", "value": "chain/**"}]})
        layout = os.path.join(self.tmp, "chain")
        d = write_oci_layout(layout, [{"f": os.urandom(100000)}], tag="1")
        self.a.project("chain")
        r = subprocess.run(["skopeo", "copy", "--preserve-digests", "--dest-tls-verify=false", "--dest-creds", ADMIN, "oci:%s:1" % layout,
                            "docker://%s/chain/app:1" % self.a.host], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.time() + 60
        while time.time() < deadline and manifest(self.b, "chain/app", "1")[0] != 200:
            time.sleep(0.3)
        self.assertEqual(manifest(self.b, "chain/app", "1")[1], d)
        e = wait_execution(self.b, run_policy(self.b, pbc))
        self.assertEqual(e["status"], "Succeed", e)
        self.assertEqual(manifest(self.c, "chain/app", "1")[1], d)


if __name__ == "__main__":
    main()
