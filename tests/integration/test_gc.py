"""Online garbage collection (issue 13): Harbor's /system/gc API, the safe rule under concurrent pushes, dry run =
real run, delete_untagged keeping index children and referrers, deleted repositories, stop / SIGKILL and resume.

Every berthd here runs with gc.grace_seconds 0 (BERTH_GC_GRACE_SECONDS), so whatever is unreferenced is collectable
at once and only the row locks stand between a sweep and a concurrent push."""
import hashlib
import json
import os
import random
import signal
import subprocess
import threading
import time

import harness as H
from harness import ACCEPT_ALL, OCI_CONFIG, OCI_INDEX, OCI_LAYER, OCI_MANIFEST, sha256

GC_ENV = {"BERTH_GC_GRACE_SECONDS": "0", "BERTH_GC_LEASE_SECONDS": "2"}
JSON = {"Content-Type": "application/json"}


def start_gc(b, delete_untagged=False, dry_run=False, auth=H.ADMIN_AUTH, workers=1):
    body = json.dumps({"schedule": {"type": "Manual"},
                       "parameters": {"delete_untagged": delete_untagged, "dry_run": dry_run, "workers": workers}})
    return b.request("POST", "/api/v2.0/system/gc/schedule", body.encode(), JSON, auth=auth)


def run_gc(b, delete_untagged=False, dry_run=False, timeout=120, workers=1):
    """Start a run (waiting while another one is active) and wait for it; returns its JSON."""
    deadline = time.time() + timeout
    while True:
        st, h, body = start_gc(b, delete_untagged, dry_run, workers=workers)
        if st == 201:
            break
        assert st == 409, (st, body)
        assert time.time() < deadline, "a run stayed active"
        time.sleep(0.05)
    return wait_run(b, int(h["location"].rsplit("/", 1)[1]), timeout)


def get_run(b, rid):
    st, _, body = b.request("GET", "/api/v2.0/system/gc/%d" % rid)
    assert st == 200, (st, body)
    return json.loads(body)


def wait_run(b, rid, timeout=120, until=("Success", "Error", "Stopped")):
    deadline = time.time() + timeout
    while True:
        run = get_run(b, rid)
        if run["job_status"] in until:
            return run
        assert time.time() < deadline, run
        time.sleep(0.05)


def run_log(b, rid):
    st, h, body = b.request("GET", "/api/v2.0/system/gc/%d/log" % rid)
    assert st == 200 and h["content-type"].startswith("text/plain"), (st, h)
    return body.decode()


def blob_ok(b, repo, digest, data=None):
    """The blob is served and its bytes hash to its digest (and equal `data` when given)."""
    st, _, body = b.request("GET", "/v2/%s/blobs/%s" % (repo, digest))
    return st == 200 and sha256(body) == digest and (data is None or body == data)


def manifest_ok(b, repo, digest, raw):
    st, _, body = b.request("GET", "/v2/%s/manifests/%s" % (repo, digest), headers={"Accept": ACCEPT_ALL})
    return st == 200 and body == raw


def image(b, repo, ref, layers, config_extra=None):
    """Push `layers` (bytes) that are not there yet plus a config; PUT the manifest. Returns (status, digest, raw,
    {digest: bytes})."""
    blobs = {}
    descs = []
    for data in layers:
        d = sha256(data)
        blobs[d] = data
        st, _, _ = b.request("HEAD", "/v2/%s/blobs/%s" % (repo, d))
        if st != 200:
            b.push_blob(repo, data)
        descs.append({"mediaType": OCI_LAYER, "digest": d, "size": len(data)})
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                      **(config_extra or {})}).encode()
    cd = sha256(cfg)
    blobs[cd] = cfg
    st, _, _ = b.request("HEAD", "/v2/%s/blobs/%s" % (repo, cd))
    if st != 200:
        b.push_blob(repo, cfg)
    m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
         "layers": descs}
    st, h, body, raw = b.push_manifest(repo, ref, m)
    return st, h.get("docker-content-digest"), raw, blobs


class GcApi(H.BerthTestCase):
    PROJECTS = ("gcapi",)

    def test_admins_only(self):
        st, _, _ = self.b.request("POST", "/api/v2.0/users", json.dumps({
            "username": "dev", "email": "dev@example.com", "realname": "Dev", "password": "Dev12345678"}).encode(), JSON)
        assert st in (201, 409), st
        dev = "Basic " + __import__("base64").b64encode(b"dev:Dev12345678").decode()
        for method, path, body in (("GET", "/api/v2.0/system/gc", None), ("GET", "/api/v2.0/system/gc/schedule", None),
                                   ("POST", "/api/v2.0/system/gc/schedule", b'{"schedule":{"type":"Manual"}}'),
                                   ("PUT", "/api/v2.0/system/gc/schedule", b'{"schedule":{"type":"Daily"}}'),
                                   ("GET", "/api/v2.0/system/gc/1", None), ("PUT", "/api/v2.0/system/gc/1", None),
                                   ("GET", "/api/v2.0/system/gc/1/log", None)):
            st, _, out = self.b.request(method, path, body, JSON, auth=None)
            self.assertEqual(st, 401, (method, path, out))
            st, _, out = self.b.request(method, path, body, JSON, auth=dev)
            self.assertEqual(st, 403, (method, path, out))
            self.assertEqual(H.error_code(out), "DENIED")

    def test_schedule_and_bad_input(self):
        for body in (b'{}', b'{"schedule":{"type":"Sometimes"}}', b'{"schedule":{"type":"Custom","cron":"nonsense"}}',
                     b'{"schedule":{"type":"Manual"},"parameters":{"workers":9}}',
                     b'{"schedule":{"type":"Manual"},"parameters":{"dry_run":"yes"}}', b'[1]', b'{"schedule":'):
            st, _, out = self.b.request("POST", "/api/v2.0/system/gc/schedule", body, JSON)
            self.assertEqual(st, 400, (body, out))
            self.assertIn("errors", json.loads(out))
        st, _, out = self.b.request("PUT", "/api/v2.0/system/gc/schedule", json.dumps(
            {"schedule": {"type": "Custom", "cron": "0 30 2 * * 6"}, "parameters": {"delete_untagged": True, "workers": 3}}).encode(),
            JSON)
        self.assertEqual(st, 200, out)
        st, _, out = self.b.request("GET", "/api/v2.0/system/gc/schedule")
        s = json.loads(out)
        self.assertEqual((s["schedule"]["type"], s["schedule"]["cron"]), ("Custom", "0 30 2 * * 6"))
        self.assertEqual(json.loads(s["job_parameters"]), {"delete_untagged": True, "dry_run": False, "workers": 3})
        self.assertIn("next_scheduled_time", s["schedule"])
        self.assertEqual(s["grace_seconds"], 7200)  # the default window
        st, _, _ = self.b.request("PUT", "/api/v2.0/system/gc/schedule", b'{"schedule":{"type":"None"}}', JSON)
        self.assertEqual(st, 200)
        for path in ("/api/v2.0/system/gc/999999", "/api/v2.0/system/gc/abc", "/api/v2.0/system/gc/999999/log"):
            self.assertEqual(self.b.request("GET", path)[0], 404, path)
        self.assertEqual(self.b.request("PUT", "/api/v2.0/system/gc/999999")[0], 404)

    def test_history_log_and_metrics(self):
        run = run_gc(self.b)
        self.assertEqual(run["job_status"], "Success")
        self.assertEqual(run["job_name"], "GARBAGE_COLLECTION")
        self.assertEqual(run["progress"]["percent"], 100)
        st, h, out = self.b.request("GET", "/api/v2.0/system/gc?page=1&page_size=5")
        self.assertEqual(st, 200)
        self.assertIn(run["id"], [r["id"] for r in json.loads(out)])
        self.assertIn("done: deleted", run_log(self.b, run["id"]))
        # a finished run cannot be stopped
        self.assertEqual(self.b.request("PUT", "/api/v2.0/system/gc/%d" % run["id"])[0], 400)
        metrics = self.b.request("GET", "/metrics")[2].decode().splitlines()
        self.assertIn("berth_gc_progress_percent 100", metrics)
        self.assertIn("berth_gc_run_id %d" % run["id"], metrics)
        self.assertIn("berth_gc_running 0", metrics)


class GcRules(H.BerthTestCase):
    """One berthd for the class (a berthd and its database per test cost more than most tests); every test starts
    from a collected store, so what a run counts is the test's own garbage. Each test uses repositories of its own."""
    START = False

    @classmethod
    def setUpClass(cls):
        cls.b = H.Berthd(env=GC_ENV).start()
        cls.b.project("p")

    def setUp(self):
        self.assertEqual(run_gc(self.b, delete_untagged=True)["job_status"], "Success")

    def test_dry_run_reports_exactly_what_a_real_run_frees(self):
        b = self.b
        keep = [image(b, "p/keep", "v%d" % i, [os.urandom(300 + i) for _ in range(2)]) for i in range(3)]
        for i in range(4):  # deleted manifests: their unique layers become garbage
            st, d, _, _ = image(b, "p/gone", "g%d" % i, [os.urandom(500), keep[0][3][list(keep[0][3])[0]]])
            self.assertEqual(b.request("DELETE", "/v2/p/gone/manifests/%s" % d)[0], 202)
        for i in range(3):  # untagged: tags moved away
            image(b, "p/moved", "latest", [os.urandom(700)], {"n": i})
        b.push_blob("p/loose", os.urandom(900))  # uploaded, never used
        # workers 3: sweeps in windows on three connections; what the dry run counts is still what the real one frees
        dry = run_gc(b, delete_untagged=True, dry_run=True, workers=3)
        real = run_gc(b, delete_untagged=True, workers=3)
        dp, rp = dry["progress"], real["progress"]
        self.assertEqual(dp["manifests_marked"], 2)
        self.assertGreater(dp["blobs_marked"], 0)
        self.assertEqual((dp["manifests_marked"], dp["links_marked"], dp["blobs_marked"], dp["bytes_marked"]),
                         (rp["manifests_deleted"], rp["links_deleted"], rp["blobs_deleted"], rp["bytes_freed"]))
        would = {l.split()[4] for l in run_log(b, dry["id"]).splitlines() if " would delete blob " in l}
        did = {l.split()[3] for l in run_log(b, real["id"]).splitlines() if " deleted blob " in l}
        self.assertEqual(would, did)
        self.assertEqual(len(did), dp["blobs_marked"])
        for st, d, raw, blobs in keep:
            self.assertTrue(manifest_ok(b, "p/keep", d, raw))
            for bd, data in blobs.items():
                self.assertTrue(blob_ok(b, "p/keep", bd, data))
        for bd in did:  # really gone: no repository serves them, no file holds them
            self.assertFalse(os.path.exists(os.path.join(b.storage, "blobs", "sha256", bd[7:9], bd[7:])))
        # nothing left: a second run finds nothing
        again = run_gc(b, delete_untagged=True)
        self.assertEqual((again["progress"]["blobs_deleted"], again["progress"]["manifests_deleted"]), (0, 0))

    def test_index_children_of_a_tagged_index_kept(self):
        """Distribution #3004: delete_untagged must not take the untagged children of a tagged index."""
        b = self.b
        # the children end up untagged (pushed by tag, the tag deleted)
        kids = []
        for i in range(2):
            st, d, raw, blobs = image(b, "p/multi", "tmp%d" % i, [os.urandom(400)], {"arch": i})
            self.assertEqual(b.request("DELETE", "/api/v2.0/projects/p/repositories/multi/artifacts/%s/tags/tmp%d" % (d, i))[0],
                             200)
            kids.append((d, raw, blobs))
        idx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": d, "size": len(raw), "platform": {"os": "linux", "architecture": "amd64"}}
            for d, raw, _ in kids]}
        st, h, body, idx_raw = b.push_manifest("p/multi", "v1", idx, OCI_INDEX)
        self.assertEqual(st, 201, body)
        # an untagged index with untagged children: all of it goes
        orphan_kid = image(b, "p/multi", "tmpx", [os.urandom(400)], {"arch": "x"})
        b.request("DELETE", "/api/v2.0/projects/p/repositories/multi/artifacts/%s/tags/tmpx" % orphan_kid[1])
        oidx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": orphan_kid[1], "size": len(orphan_kid[2])}]}
        st, h2, _, oidx_raw = b.push_manifest("p/multi", "tmpidx", oidx, OCI_INDEX)
        self.assertEqual(st, 201)
        b.request("DELETE", "/api/v2.0/projects/p/repositories/multi/artifacts/%s/tags/tmpidx" % h2["docker-content-digest"])
        run = run_gc(b, delete_untagged=True)
        self.assertEqual(run["progress"]["manifests_deleted"], 2, run_log(b, run["id"]))
        self.assertTrue(manifest_ok(b, "p/multi", h["docker-content-digest"], idx_raw))
        for d, raw, blobs in kids:
            self.assertTrue(manifest_ok(b, "p/multi", d, raw))
            for bd, data in blobs.items():
                self.assertTrue(blob_ok(b, "p/multi", bd, data))
        self.assertEqual(b.request("GET", "/v2/p/multi/manifests/%s" % h2["docker-content-digest"],
                                   headers={"Accept": ACCEPT_ALL})[0], 404)
        self.assertEqual(b.request("GET", "/v2/p/multi/manifests/%s" % orphan_kid[1], headers={"Accept": ACCEPT_ALL})[0], 404)

    def test_referrers(self):
        """A subject with a kept referrer stays, and the referrers of a kept subject stay; an untagged pair goes."""
        b = self.b

        def referrer(repo, subject_digest, subject_raw, tag=None):
            blob = os.urandom(64)
            bd = b.push_blob(repo, blob)
            empty = b"{}"
            ed = b.push_blob(repo, empty)
            m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example.sig",
                 "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": ed, "size": 2},
                 "layers": [{"mediaType": "application/octet-stream", "digest": bd, "size": len(blob)}],
                 "subject": {"mediaType": OCI_MANIFEST, "digest": subject_digest, "size": len(subject_raw)}}
            raw = json.dumps(m).encode()
            st, h, body, _ = b.push_manifest(repo, tag or sha256(raw), raw)
            self.assertEqual(st, 201, body)
            return h["docker-content-digest"], raw, {bd: blob}

        def untag(repo, d, tag):
            self.assertEqual(b.request("DELETE", "/api/v2.0/projects/p/repositories/%s/artifacts/%s/tags/%s" %
                                       (repo.split("/", 1)[1], d, tag))[0], 200)

        # 1. tagged subject, untagged signature: both stay
        _, s1, s1raw, _ = image(b, "p/sig", "v1", [os.urandom(100)])
        r1 = referrer("p/sig", s1, s1raw)
        # 2. untagged subject, tagged referrer: the subject stays (the kept referrer needs it)
        _, s2, s2raw, _ = image(b, "p/sig", "tmp2", [os.urandom(100)])
        untag("p/sig", s2, "tmp2")
        r2 = referrer("p/sig", s2, s2raw, tag="sbom")
        # 3. untagged subject, untagged referrer: both go
        _, s3, s3raw, _ = image(b, "p/sig", "tmp3", [os.urandom(100)])
        untag("p/sig", s3, "tmp3")
        r3 = referrer("p/sig", s3, s3raw)
        run = run_gc(b, delete_untagged=True)
        self.assertEqual(run["progress"]["manifests_deleted"], 2, run_log(b, run["id"]))
        for d, raw in ((s1, s1raw), (r1[0], r1[1]), (s2, s2raw), (r2[0], r2[1])):
            self.assertTrue(manifest_ok(b, "p/sig", d, raw), d)
        for bd, data in list(r1[2].items()) + list(r2[2].items()):
            self.assertTrue(blob_ok(b, "p/sig", bd, data))
        for d in (s3, r3[0]):
            self.assertEqual(b.request("GET", "/v2/p/sig/manifests/%s" % d, headers={"Accept": ACCEPT_ALL})[0], 404)
        st, _, out = b.request("GET", "/v2/p/sig/referrers/%s" % s1)
        self.assertEqual([m["digest"] for m in json.loads(out)["manifests"]], [r1[0]])

    def test_deleted_repository_frees_only_unshared_blobs(self):
        b = self.b
        shared = os.urandom(1000)
        st, da, ra, ba = image(b, "p/a", "v1", [shared, os.urandom(800)])
        st, db_, rb, bb = image(b, "p/b", "v1", [shared])
        self.assertEqual(b.request("DELETE", "/api/v2.0/projects/p/repositories/a")[0], 200)
        run = run_gc(b)
        unique = [d for d in ba if d not in bb]
        self.assertEqual(run["progress"]["blobs_deleted"], len(unique), run_log(b, run["id"]))
        self.assertTrue(manifest_ok(b, "p/b", db_, rb))
        for d, data in bb.items():
            self.assertTrue(blob_ok(b, "p/b", d, data))
        for d in unique:
            self.assertFalse(os.path.exists(os.path.join(b.storage, "blobs", "sha256", d[7:9], d[7:])))

    def test_quota_usage_follows_gc(self):
        """Harbor counts a project's manifests and the blobs they list: GC's deletions of untagged manifests lower the
        usage in their transaction, and it stays equal to a recount; unreferenced uploads never counted."""
        b = self.b
        used = lambda: int(H.psql("SELECT berth_quota_used(id) FROM projects WHERE name = 'p'", dbname=b.dbname))
        recount = lambda: int(H.psql("SELECT berth_quota_recount(id) FROM projects WHERE name = 'p'", dbname=b.dbname))
        image(b, "p/q", "keep", [os.urandom(3000)])
        for i in range(3):
            image(b, "p/q", "moving", [os.urandom(5000)], {"i": i})  # two of these end untagged
        b.push_blob("p/q", os.urandom(7000))  # never referenced: never charged
        before = used()
        self.assertEqual(before, recount())
        run = run_gc(b, delete_untagged=True)
        self.assertEqual(run["progress"]["manifests_deleted"], 2)
        self.assertEqual(used(), recount())
        self.assertLess(used(), before - 2 * 5000)
        # the sweep's releases went through the ledger, folded into the quota row at the end of the manifest sweep
        self.assertEqual(H.psql("SELECT count(*) FROM quota_releases", dbname=b.dbname), "0")
        self.assertEqual(int(H.psql("SELECT q.used_storage FROM quotas q JOIN projects p ON p.id = q.project_id "
                                    "WHERE p.name = 'p'", dbname=b.dbname)), recount())

    def test_a_sweep_neither_holds_nor_waits_for_the_quota_row(self):
        """Every PUT in a project takes its quota row; a GC manifest batch used to hold it across its deletions (the
        PUT waited for the whole batch). Now a batch takes no quota row: with the row held by another transaction, a
        delete_untagged run still deletes, usage (the row minus the release ledger) equals a recount throughout,
        and the next PUT folds the ledger into the row."""
        b = self.b
        sql = lambda s: H.psql(s, dbname=b.dbname)
        recount = lambda: int(sql("SELECT berth_quota_recount(id) FROM projects WHERE name = 'p'"))
        used = lambda: int(sql("SELECT berth_quota_used(id) FROM projects WHERE name = 'p'"))
        ledger = lambda: int(sql("SELECT count(*) FROM quota_releases r JOIN projects p ON p.id = r.project_id "
                                 "WHERE p.name = 'p'"))
        image(b, "p/h", "keep", [os.urandom(2000)])
        for i in range(2):
            image(b, "p/h", "moving", [os.urandom(4000)], {"i": i})  # the first ends untagged
        before = used()
        holder = subprocess.Popen(
            ["psql", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", "BEGIN; SELECT 1 FROM quotas q JOIN projects p ON p.id = "
             "q.project_id WHERE p.name = 'p' FOR UPDATE; SELECT pg_sleep(60); COMMIT", H.pg_conninfo(b.dbname)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 10
            while sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()") != "1":
                self.assertLess(time.time(), deadline, "the holder never got the quota row")
                time.sleep(0.05)
            run = run_gc(b, delete_untagged=True, timeout=20)  # before: the manifest sweep waited for the row
            self.assertEqual((run["job_status"], run["progress"]["manifests_deleted"]), ("Success", 1), run_log(b, run["id"]))
            self.assertEqual(used(), recount())
            self.assertLess(used(), before - 4000)
            self.assertGreater(ledger(), 0, "the settle at the end of the sweep skipped the held row")
        finally:
            sql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND "
                "datname = current_database()")
            holder.wait(10)
        self.assertEqual(image(b, "p/h", "next", [os.urandom(1000)])[0], 201)
        self.assertEqual((ledger(), used()), (0, recount()))
        self.assertEqual(int(sql("SELECT q.used_storage FROM quotas q JOIN projects p ON p.id = q.project_id "
                                 "WHERE p.name = 'p'")), recount())

    def test_files_an_upload_is_placing_are_skipped(self):
        # an upload holds its digest's file lock (shared) from placing the file until its blob row commits; a sweep
        # or the orphan walk that meets it neither waits for it nor removes what it places: the blob's row and file
        # stay, and so does a file that has no row yet; the run ends. A psql session holds the two locks as such
        # uploads would while a run (grace 0) collects a loose blob and an orphaned file
        b = self.b
        data, orphan = os.urandom(321), os.urandom(123)
        d, od = b.push_blob("p/placing", data), sha256(orphan)
        path, opath = [os.path.join(b.storage, "blobs", "sha256", x[7:9], x[7:]) for x in (d, od)]
        os.makedirs(os.path.dirname(opath), exist_ok=True)
        with open(opath, "wb") as f:
            f.write(orphan)
        holder = subprocess.Popen(["psql", "-h", H.PG_DIR, "-p", H.PG_PORT, "-U", "postgres", "-Atq", "-v", "ON_ERROR_STOP=1",
                                   b.dbname], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            holder.stdin.write("BEGIN; SELECT count(pg_advisory_xact_lock_shared(1650815604, hashtext(x))) FROM "
                               "unnest(ARRAY['%s', '%s']) x;\n" % (d, od))
            holder.stdin.flush()
            self.assertEqual(holder.stdout.readline().strip(), "2")
            run = run_gc(b, timeout=60)
            log = run_log(b, run["id"])
            self.assertEqual(run["job_status"], "Success", log)
            self.assertEqual((run["progress"]["blobs_deleted"], run["progress"]["orphan_files"]), (0, 0), log)
            self.assertEqual(H.psql("SELECT count(*) FROM blobs WHERE digest = '%s'" % d, dbname=b.dbname), "1")
            self.assertTrue(os.path.exists(path) and os.path.exists(opath))
        finally:
            holder.stdin.write("COMMIT;\n")
            holder.stdin.close()
            holder.wait(timeout=30)
        # the "uploads" ended without a row or a link: the next run takes the blob, its file and the orphan
        run = run_gc(b)
        self.assertEqual((run["progress"]["blobs_deleted"], run["progress"]["orphan_files"]), (1, 1), run_log(b, run["id"]))
        self.assertFalse(os.path.exists(path) or os.path.exists(opath))

    def test_orphan_files_removed(self):
        b = self.b
        data = os.urandom(123)
        d = sha256(data)
        path = os.path.join(b.storage, "blobs", "sha256", d[7:9], d[7:])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        _, kd, kraw, kblobs = image(b, "p/k", "v1", [os.urandom(50)])
        run = run_gc(b)
        self.assertEqual((run["progress"]["orphan_files"], run["progress"]["orphan_bytes"]), (1, 123))
        self.assertFalse(os.path.exists(path))
        for bd, bdata in kblobs.items():
            self.assertTrue(blob_ok(b, "p/k", bd, bdata))


class GcRace(H.BerthTestCase):
    """Pushes that reuse exactly the blobs a concurrent GC (grace 0) is sweeping: afterwards every manifest that got
    201 (and was not deleted by the test) is pullable with every blob intact."""
    START = False

    def test_race(self):
        b = H.Berthd(env=dict(GC_ENV, BERTH_GC_BATCH="3")).start()
        self.b = b
        try:
            b.project("r")
            pool = [os.urandom(2000 + i) for i in range(6)]  # the blobs every push reuses
            stop = threading.Event()
            live, lock, errors = {}, threading.Lock(), []
            stats = {"runs": 0, "links": 0, "blobs": 0, "pushes": 0, "retries": 0, "starved": 0}

            def pusher(n):
                rnd = random.Random(n)
                repos = ["r/race%d" % (n * 2 + k) for k in range(2)]
                for i in range(int(os.environ.get("GC_RACE_ITER", "40"))):
                    repo = rnd.choice(repos)
                    layers = rnd.sample(pool, 3)
                    for attempt in range(8):
                        try:
                            st, d, raw, blobs = image(b, repo, "t%d-%d" % (n, i), layers, {"n": n, "i": i})
                        except AssertionError as e:  # an upload refused mid-race would be a bug too
                            errors.append("push: %s" % e)
                            return
                        if st == 201:
                            break
                        stats["retries"] += 1  # MANIFEST_BLOB_UNKNOWN: the sweep won; HEAD again and re-upload
                    else:  # grace 0 makes an uploaded, not yet referenced blob garbage at once: a push can
                        stats["starved"] += 1  # lose every round (liveness); the safety checks below must hold
                        continue
                    stats["pushes"] += 1
                    if rnd.random() < 0.6:  # delete it again: its layers become garbage in this repository
                        st2 = b.request("DELETE", "/v2/%s/manifests/%s" % (repo, d))[0]
                        if st2 != 202:
                            errors.append("delete %s" % st2)
                    else:
                        with lock:
                            live[(repo, d)] = (raw, blobs)

            def collector():
                while not stop.is_set():
                    # workers 1, 2, 3 in turn: the files of the batches are unlinked on that many threads of their own
                    run = run_gc(b, delete_untagged=False, workers=1 + stats["runs"] % 3)
                    if run["job_status"] != "Success":
                        errors.append("run %s" % run)
                        return
                    stats["runs"] += 1
                    stats["links"] += run["progress"]["links_deleted"]
                    stats["blobs"] += run["progress"]["blobs_deleted"]
                    # a breath between runs: back to back, a loaded machine (the ThreadSanitizer suite beside other
                    # tests) ran 11 a second, and pushes, slower there, lost most rounds; runs still overlap pushes
                    stop.wait(0.1)

            threads = [threading.Thread(target=pusher, args=(n,)) for n in range(3)]
            gct = threading.Thread(target=collector)
            gct.start()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop.set()
            gct.join()
            self.assertEqual(errors, [])
            final = run_gc(b)  # and once more with nothing pushing
            print("race: %s; final run swept %d link(s), %d blob(s)" % (stats, final["progress"]["links_deleted"],
                                                                       final["progress"]["blobs_deleted"]))
            self.assertGreater(stats["runs"], 3)
            self.assertLessEqual(stats["starved"], stats["pushes"] // 4, "most pushes must get through: %s" % stats)
            self.assertGreater(stats["links"] + stats["blobs"], 0, "the collector swept nothing: no race happened")
            self.assertGreater(len(live), 10)
            for (repo, d), (raw, blobs) in live.items():
                self.assertTrue(manifest_ok(b, repo, d, raw), (repo, d))
                for bd, data in blobs.items():
                    self.assertTrue(blob_ok(b, repo, bd, data), (repo, d, bd))
        finally:
            b.cleanup()


class GcResume(H.BerthTestCase):
    """A run SIGKILLed in the middle is taken over after its lease and finishes where it stopped; a stopped run is
    resumed by the next run with the same parameters. Nothing referenced is lost either way."""
    START = False
    N = 3000

    def garbage(self, b, n):
        """n blob rows with files, linked into a repository and referenced by nothing (a day old). The contents
        are "garbage-<salt>-<i>", so PostgreSQL computes the same digests the files are named by."""
        salt = os.urandom(4).hex()
        for i in range(n):
            data = ("garbage-%s-%d" % (salt, i)).encode()
            d = sha256(data)
            path = os.path.join(b.storage, "blobs", "sha256", d[7:9], d[7:])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        H.psql("WITH g AS (SELECT 'sha256:' || encode(sha256(convert_to('garbage-%s-' || i, 'UTF8')), 'hex') AS d, "
               "length('garbage-%s-' || i) AS s FROM generate_series(0, %d) i), b AS (INSERT INTO blobs (digest, size, created_at) "
               "SELECT d, s, now() - interval '1 day' FROM g) INSERT INTO repository_blobs (repository_id, digest, created_at) "
               "SELECT (SELECT id FROM repositories WHERE name = 'q/keep'), d, now() - interval '1 day' FROM g"
               % (salt, salt, n - 1), dbname=b.dbname)

    @classmethod
    def setUpClass(cls):
        # looks every 3 s instead of 20: test_an_error_waits_for_the_next_look checks that the interval is the next look
        cls.b = H.Berthd(env=dict(GC_ENV, BERTH_GC_BATCH="20", BERTH_GC_INTERVAL_SECONDS="3")).start()
        cls.b.project("q")
        cls.keep = [image(cls.b, "q/keep", "v%d" % i, [os.urandom(600)]) for i in range(3)]

    def setUp(self):
        self.assertEqual(run_gc(self.b)["job_status"], "Success")  # nothing left of the other test's runs
        self.garbage(self.b, self.N)

    def intact(self):
        for st, d, raw, blobs in self.keep:
            self.assertTrue(manifest_ok(self.b, "q/keep", d, raw))
            for bd, data in blobs.items():
                self.assertTrue(blob_ok(self.b, "q/keep", bd, data))

    def files_left(self):
        n = 0
        for root, _, files in os.walk(os.path.join(self.b.storage, "blobs")):
            n += len(files)
        return n

    def test_sigkill_then_resume(self):
        # workers 3: three connections sweep windows at once when the kill comes; the cursor the run kept must not
        # pass a window whose batch had not committed (the resumed run would skip its blobs: blobs_deleted < N)
        b = self.b
        before = self.files_left()
        st, h, _ = start_gc(b, workers=3)
        rid = int(h["location"].rsplit("/", 1)[1])
        # kill it in the blob sweep, after some rows went and before all did
        deadline = time.time() + 60
        while True:
            p = get_run(b, rid)["progress"]
            if p["phase"] == 6 and p["blobs_deleted"] > 0 or p["phase"] > 6:
                break
            self.assertLess(time.time(), deadline)
            time.sleep(0.01)
        b.stop(signal.SIGKILL)
        killed = json.loads(H.psql("SELECT row_to_json(r) FROM gc_runs r WHERE id = %d" % rid, dbname=b.dbname))
        self.assertEqual(killed["status"], "Running")
        self.assertLess(killed["blobs_deleted"], self.N, "the run ended before the kill: raise N")
        # restarted once the lease ran out, the collector takes the run over when it starts; restarted within the
        # lease, it did so at its next look, 20 s later
        self.assertEqual(H.eventually(lambda: H.psql("SELECT lease_until < now() FROM gc_runs WHERE id = %d" % rid, dbname=b.dbname),
                                      "t", timeout=30, interval=0.1), "t")
        b.start()
        run = wait_run(b, rid, timeout=120)
        self.assertEqual(run["job_status"], "Success", run_log(b, rid))
        log = run_log(b, rid)
        self.assertEqual(log.count("started:"), 1, log)  # continued, not started over
        self.assertEqual(run["progress"]["blobs_deleted"], self.N, log)
        # rows whose batch was committed but not yet unlinked had their files left behind: the orphan sweep took them.
        # A sweeper unlinks its batch's files right after its commit: at most one batch of 20 per sweeper
        self.assertLessEqual(run["progress"]["orphan_files"], 3 * 20, log)
        self.assertEqual(before - self.files_left(), self.N)
        self.intact()

    def test_an_error_waits_for_the_next_look(self):
        # a sweep statement that fails every time: the run is left where it was and taken up again at the collector's
        # next look (its interval, or a wake), not claimed again at once (that repeated the error eight times back to
        # back, each with its log line); once the cause is gone a wake resumes it and it finishes
        b = self.b
        H.psql("CREATE FUNCTION t_gc_boom() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'injected'; END$$; "
               "CREATE TRIGGER t_gc_boom BEFORE DELETE ON blobs FOR EACH ROW EXECUTE FUNCTION t_gc_boom()", dbname=b.dbname)

        def interruptions():
            with open(b.log_path, "rb") as f:
                return f.read().decode(errors="replace").count("gc run %d: phase 6 interrupted" % rid)
        try:
            st, h, _ = start_gc(b)
            self.assertEqual(st, 201)
            rid = int(h["location"].rsplit("/", 1)[1])
            self.assertEqual(H.eventually(lambda: interruptions() > 0, True, timeout=60), True, b.logs())
            first = interruptions()
            time.sleep(7)
            # the next looks are the interval's (BERTH_GC_INTERVAL_SECONDS=3): two or three in these 7 s — not eight
            # back to back, and not at most one, as with the default 20 s
            self.assertIn(interruptions() - first, (2, 3), b.logs())
            self.assertEqual(get_run(b, rid)["job_status"], "Running")
        finally:
            H.psql("DROP TRIGGER t_gc_boom ON blobs; DROP FUNCTION t_gc_boom()", dbname=b.dbname)
        self.assertEqual(start_gc(b)[0], 409)  # a run is active; the request wakes the collector
        run = wait_run(b, rid, timeout=30)
        self.assertEqual(run["job_status"], "Success", run_log(b, rid))
        self.assertEqual(run["progress"]["blobs_deleted"], self.N)
        self.intact()

    def test_stop_then_resume(self):
        # workers 3: the sweeps' windows go to three connections at once; the cursor the stopped run kept must not
        # pass a window that did not commit
        b = self.b
        st, h, _ = start_gc(b, workers=3)
        rid = int(h["location"].rsplit("/", 1)[1])
        wait_run(b, rid, until=("Running",))
        deadline = time.time() + 60
        while get_run(b, rid)["progress"]["links_deleted"] == 0:
            self.assertLess(time.time(), deadline)
            time.sleep(0.01)
        self.assertEqual(b.request("PUT", "/api/v2.0/system/gc/%d" % rid)[0], 200)
        stopped = wait_run(b, rid)
        self.assertEqual(stopped["job_status"], "Stopped")
        self.assertLess(stopped["progress"]["blobs_deleted"], self.N)
        run = run_gc(b, workers=3)
        self.assertEqual(run["resumed_from"], rid)
        self.assertEqual(run["progress"]["blobs_deleted"], self.N, run_log(b, run["id"]))
        self.assertEqual(run["progress"]["links_marked"], stopped["progress"]["links_marked"])
        self.intact()


if __name__ == "__main__":
    H.main()
