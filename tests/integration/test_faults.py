"""Faults injected for real (issue #18): a frozen database (SIGSTOP of a private PostgreSQL), a full disk (a small
tmpfs as storage root), an idle-connection burst against the edge. What clients are told, and that nothing
acknowledged is lost. A fault that cannot be injected (no mount, no signal) fails the test with the reason."""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from harness import ACCEPT_ALL, BERTH_PG, Berthd, eventually, free_port, main, sha256

# What a 5xx body must never carry: libpq's words, server addresses, paths, library messages.
LEAKS = [b"connection to server", b"PGSQL", b"socket", b"port ", b"127.0.0.1", b"/tmp/", b"No space", b"errno",
         b"could not", b"FATAL", b"ERROR:", b"SELECT", b"INSERT"]


def full_log(b):
    """All of berthd's log (Berthd.logs() keeps only the tail, for failure reports)."""
    with open(b.log_path, "rb") as f:
        return f.read().decode(errors="replace")


class PrivateCluster:
    """A PostgreSQL cluster of this test alone (TCP on 127.0.0.1), so freezing it freezes no other test."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="berth-faults-pg-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.start()
        self.conninfo = "host=127.0.0.1 port=%d user=postgres dbname=berth" % self.port

    def start(self):
        env = dict(os.environ, BERTH_PG_LISTEN="127.0.0.1")
        subprocess.run([BERTH_PG, "start", self.dir, str(self.port)], check=True, capture_output=True, env=env)

    def stop(self):
        subprocess.run([BERTH_PG, "stop", self.dir], capture_output=True)

    def pids(self):
        """The postmaster and every process it forked (backends, checkpointer, walwriter...)."""
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            master = int(f.readline())
        pids = [master]
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/%s/stat" % p) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                            pids.append(int(p))
                except (OSError, ValueError, IndexError):
                    pass
        return pids

    def signal_all(self, sig):
        for pid in self.pids():
            os.kill(pid, sig)  # raises (and fails the test with the reason) when it cannot signal

    def cleanup(self):
        try:
            self.signal_all(signal.SIGCONT)
        except OSError:
            pass
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def timed(b, method, path, body=None, headers=None, timeout=60):
    t0 = time.monotonic()
    try:
        st, h, data = b.request(method, path, body, headers, timeout=timeout)
    except OSError as e:
        return repr(e), {}, b"", time.monotonic() - t0
    return st, h, data, time.monotonic() - t0


class FrozenDatabase(unittest.TestCase):
    # 1 s keeps CI short; BERTH_TEST_DB_DEADLINE_MS=5000 measures the default (docs/faults.md)
    DEADLINE_MS = int(os.environ.get("BERTH_TEST_DB_DEADLINE_MS", "1000"))
    FREEZE_S = max(6.0, DEADLINE_MS / 1000 * 2 + 2)
    MARGIN_S = 2.5 if os.environ.get("BERTH_SANITIZED", "0") in ("0", "FALSE", "") else 4.0

    @classmethod
    def setUpClass(cls):
        cls.pg = PrivateCluster()
        # the gate re-checks a credential against the database after auth.decision_ttl_seconds (revocation);
        # shorter than the freeze here: a token decided before the freeze must keep being served during it
        cls.b = Berthd(dbname="berth", env={"BERTH_DATABASE_URL": cls.pg.conninfo,
                                            "BERTH_DATABASE_DEADLINE_MS": str(cls.DEADLINE_MS),
                                            "BERTH_AUTH_DECISION_TTL": "2"})
        try:  # tearDownClass does not run when this fails: leave no berthd or cluster behind
            cls.b.start().project("frozen")
        except BaseException:
            cls.b.cleanup()
            cls.pg.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.b.cleanup()
        cls.pg.cleanup()

    def run(self, result=None):
        res = super().run(result)
        if result is not None and any(t is self for t, _ in result.failures + result.errors):
            print("\n--- berthd log ---\n" + self.b.logs())
        return res

    def assert_clean_5xx(self, st, h, body):
        self.assertIn(st, (503, 507), body)
        self.assertIn("retry-after", h, "a %d without Retry-After" % st)
        for leak in LEAKS + [str(self.pg.port).encode(), self.pg.dir.encode()]:
            self.assertNotIn(leak, body, "5xx body carries internal text: %r" % body)
        json.loads(body)["errors"][0]["code"]  # an OCI / Harbor error body

    def test_restart_while_idle_costs_no_request(self):
        """PostgreSQL restarted while berthd is idle: the pooled connections the server closed are replaced when they
        are next handed out, not found dead by a request (which used to answer 503 once per pooled connection)."""
        b = self.b

        def burst(n):  # concurrent requests that each need the database: a new repository's tag list is never cached
            tag = str(time.monotonic_ns())
            with ThreadPoolExecutor(16) as ex:
                return list(ex.map(lambda j: b.request("GET", "/v2/frozen/idle%s-%d/tags/list" % (tag, j))[:3:2], range(n)))

        self.assertEqual({st for st, _ in burst(64)}, {404})  # every pooled connection opened (and idle now)
        self.pg.stop()
        self.pg.start()
        # a background loop may have found the database gone meanwhile: requests then fail fast until its prober
        # reconnects (a quarter second); what this checks comes after that
        healthy = lambda: b.request("GET", "/api/v2.0/health", auth=None)[0]
        self.assertEqual(eventually(healthy, 200), 200)
        got = burst(64)
        self.assertEqual([x for x in got if x[0] != 404], [], "requests after the restart")
        self.assertIn("closed by the server while idle", full_log(b))

    def test_freeze_answers_within_deadline_and_recovers(self):
        b = self.b
        digest, _ = b.push_image("frozen/app", "v1", size=64 * 1024)
        st, _, raw = b.request("GET", "/v2/frozen/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual(st, 200, raw)
        layer = json.loads(raw)["layers"][0]
        acked, results, stop = [], [], threading.Event()
        # pullers hold a token, as docker and containerd do
        st, _, tok = b.request("GET", "/service/token?service=berth-registry&scope=repository:frozen/app:pull")
        self.assertEqual(st, 200, tok)
        bearer = "Bearer " + json.loads(tok)["token"]

        def puller(path, headers):
            while not stop.is_set():
                st, h, data, dt = timed(b, "GET", path, headers=headers)
                results.append(("pull " + path, st, dt, h, data))

        def pusher(n):  # each request timed on its own: a push is a POST and a PUT
            i = 0
            while not stop.is_set():
                data = ("push %d %d " % (n, i)).encode() + os.urandom(4096)
                i += 1
                repo = "frozen/push%d" % n
                st, h, body, dt = timed(b, "POST", "/v2/%s/blobs/uploads/" % repo)
                results.append(("push", st, dt, h, body))
                if st != 202:
                    continue
                st, h, body, dt = timed(b, "PUT", h["location"] + "?digest=" + sha256(data), data,
                                        {"Content-Type": "application/octet-stream"})
                results.append(("push", st, dt, h, body))
                if st == 201:
                    acked.append((repo, sha256(data)))

        # the lister is a project member, not an admin: after its login (argon2, on the auth workers) the gate reads
        # its rights in the project from the database, and a freeze that starts in between must give 503, not 403
        self.assertIn(b.request("POST", "/api/v2.0/users", json.dumps({"username": "lister", "password": "Lister-Pw1",
                                "email": "lister@example.org", "realname": "l"}).encode(),
                                {"Content-Type": "application/json"})[0], (201, 409))
        self.assertIn(b.request("POST", "/api/v2.0/projects/frozen/members", json.dumps({"role_id": 2,
                                "member_user": {"username": "lister"}}).encode(), {"Content-Type": "application/json"})[0], (201, 409))
        lister_auth = "Basic " + base64.b64encode(b"lister:Lister-Pw1").decode()

        def lister():  # needs the database every time: a new repository's tag list is never cached
            j = 0
            while not stop.is_set():
                j += 1
                t0 = time.monotonic()
                try:
                    st, h, data = b.request("GET", "/v2/frozen/none%d/tags/list" % j, auth=lister_auth)
                except OSError as e:
                    st, h, data = repr(e), {}, b""
                results.append(("tags", st, time.monotonic() - t0, h, data))

        threads = [threading.Thread(target=puller, args=("/v2/frozen/app/manifests/v1", {"Accept": ACCEPT_ALL,
                                                                                          "Authorization": bearer})),
                   threading.Thread(target=puller, args=("/v2/frozen/app/blobs/" + layer["digest"], {"Authorization": bearer})),
                   threading.Thread(target=pusher, args=(1,)), threading.Thread(target=pusher, args=(2,)),
                   threading.Thread(target=lister)]
        # the read cache is on only while the invalidation channel listens; after the previous test's database
        # restart it reconnects within a second or so: what the freeze must not take away has to be cached first
        cache_on = lambda: "berth_cache_enabled 1" in b.request("GET", "/metrics")[2].decode().splitlines()
        self.assertTrue(eventually(cache_on, True), "the read cache never came back on")
        for t in threads:
            t.start()
        # every client under way before the freeze: both pullers served (their answers now cached), a push acked
        warm = lambda: (sum(1 for r in results if r[0].startswith("pull /v2/frozen/app/manifests") and r[1] == 200) >= 3 and
                        sum(1 for r in results if r[0].startswith("pull /v2/frozen/app/blobs") and r[1] == 200) >= 3 and
                        len(acked) >= 1)
        self.assertTrue(eventually(warm, True), "the clients never got going")
        before = len(results)
        self.pg.signal_all(signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            time.sleep(self.FREEZE_S)
            during = results[before:]
        finally:
            self.pg.signal_all(signal.SIGCONT)
        thawed_at = time.monotonic()
        # service resumes by itself: a push succeeds within a few seconds, same berthd
        recovered = None
        while time.monotonic() - thawed_at < 15:
            if any(r[0] == "push" and r[1] == 201 for r in results[len(during) + before:]):
                recovered = time.monotonic() - thawed_at
                break
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(60)
        self.assertIsNone(b.proc.poll(), "berthd died")
        self.assertIsNotNone(recovered, "no push succeeded within 15 s of the thaw")
        bound = self.DEADLINE_MS / 1000 + self.MARGIN_S
        slow = [(r[0], r[1], round(r[2], 2)) for r in results if r[2] > bound]
        self.assertEqual(slow, [], "requests slower than deadline + margin (%.1f s)" % bound)
        kinds = {}
        for kind, st, dt, h, data in during:
            kinds.setdefault(kind.split(" ")[0] + ("-blob" if "/blobs/" in kind else ""), set()).add(st)
            if st == 503:
                self.assert_clean_5xx(st, h, data)
        # what does not need the database is still served: cached manifest and blob by digest through the edge
        self.assertEqual(kinds.get("pull"), {200}, kinds)
        self.assertEqual(kinds.get("pull-blob"), {200}, kinds)
        self.assertIn(503, kinds.get("tags", set()), kinds)
        self.assertLessEqual(kinds.get("tags", set()), {404, 503}, "an outage is not a refusal (403) " + repr(kinds))
        self.assertIn(503, kinds.get("push", set()), kinds)
        # nothing acknowledged is lost
        for repo, d in acked:
            st, _, _ = b.request("HEAD", "/v2/%s/blobs/%s" % (repo, d))
            self.assertEqual(st, 200, "acknowledged blob %s@%s lost" % (repo, d))
        m = b.request("GET", "/metrics")[2].decode()
        self.assertRegex(m, r"berth_db_deadline_exceeded_total [1-9]")
        self.assertIn("berth_db_down 0", m)
        self.assertEqual(b.request("GET", "/v2/frozen/app/manifests/v1", headers={"Accept": ACCEPT_ALL})[0], 200)
        first_503 = min((r[2] for r in during if r[1] == 503), default=None)
        slowest_503 = max((r[2] for r in during if r[1] == 503), default=-1)
        print("\nfrozen %.1f s, deadline %d ms: %d requests during the freeze, slowest %.2f s, 503s took %.3f-%.2f s, "
              "recovered %.2f s after the thaw, %d pushes acknowledged in all"
              % (thawed_at - frozen_at, self.DEADLINE_MS, len(during), max(r[2] for r in during), first_503 or -1,
                 slowest_503, recovered, len(acked)))

    def test_database_down_bodies_are_clean(self):
        b = self.b
        self.pg.stop()
        try:
            cases = [("GET", "/v2/down/x/tags/list", None), ("POST", "/v2/down/x/blobs/uploads/", None),
                     ("PUT", "/v2/down/x/manifests/v1", b"{}"), ("GET", "/api/v2.0/projects", None),
                     ("GET", "/api/v2.0/users/current", None)]
            for method, path, body in cases:
                st, h, data = b.request(method, path, body, {"Content-Type": "application/json"} if body else {})
                self.assertEqual(st, 503, (method, path, data))
                self.assert_clean_5xx(st, h, data)
            # a login that needs the database: 503 with its own fixed text
            st, h, data = b.request("GET", "/service/token?service=berth-registry&scope=repository:down/x:pull",
                                    auth="Basic " + __import__("base64").b64encode(b"nobody:pw").decode())
            self.assertEqual(st, 503, data)
            self.assert_clean_5xx(st, h, data)
            self.assertIn("database unreachable", full_log(b), "the detail belongs in the log")
            # health still answers, with its components, when the database does not
            st, h, data = b.request("GET", "/api/v2.0/health", auth=None)
            self.assertEqual(st, 503, data)
            self.assertIn("retry-after", h)
            comp = {c["name"]: c["status"] for c in json.loads(data)["components"]}
            self.assertEqual((comp["database"], comp["storage"]), ("unhealthy", "healthy"), data)
        finally:
            self.pg.start()
        deadline = time.time() + 15
        while time.time() < deadline and b.request("GET", "/v2/down/x/tags/list")[0] == 503:
            time.sleep(0.2)
        self.assertEqual(b.request("GET", "/v2/down/x/tags/list")[0], 404)


class Tmpfs:
    """A small tmpfs as a storage root: the disk fills for real. Needs root (CI runs as root); without it the
    test fails with mount's reason, it never passes silently."""

    def __init__(self, mib):
        self.path = tempfile.mkdtemp(prefix="berth-faults-tmpfs-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0750" % mib, "tmpfs", self.path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(self.path)
            raise AssertionError("cannot mount a tmpfs for the full-disk test (needs root): " + r.stderr.strip())

    def free(self):
        v = os.statvfs(self.path)
        return v.f_bavail * v.f_frsize

    def cleanup(self):
        subprocess.run(["umount", self.path], capture_output=True)
        os.rmdir(self.path)


MiB = 1 << 20


class FullDisk(unittest.TestCase):
    def setUp(self):
        self.fs = Tmpfs(48)
        self.b = None

    def tearDown(self):
        if self.b is not None:
            self.b.cleanup()
        self.fs.cleanup()

    def run(self, result=None):
        res = super().run(result)
        if result is not None and self.b is not None and any(t is self for t, _ in result.failures + result.errors):
            print("\n--- berthd log ---\n" + self.b.logs())
        return res

    def start(self, min_free):
        env = {} if min_free is None else {"BERTH_STORAGE_MIN_FREE": min_free}
        self.b = Berthd(storage=self.fs.path, env=env)  # assigned first, so tearDown stops it whatever fails next
        return self.b.start().project("full").project("res")

    def assert_full(self, st, h, body):
        self.assertEqual(st, 507, body)
        self.assertIn("retry-after", h)
        err = json.loads(body)["errors"][0]
        self.assertEqual(err["message"], "registry storage is full", body)
        for leak in LEAKS + [self.fs.path.encode()]:
            self.assertNotIn(leak, body)

    def test_enospc_answers_507_and_releases_the_space_at_once(self):
        b = self.start("0")  # no reserve: the writes themselves hit ENOSPC
        empty = self.fs.free()
        # monolithic: 64 MiB into 48
        data = os.urandom(64 * MiB)
        st, h, body = b.request("POST", "/v2/full/a/blobs/uploads/?digest=" + sha256(data), data,
                                {"Content-Type": "application/octet-stream"})
        self.assert_full(st, h, body)
        self.assertGreater(self.fs.free(), empty - MiB, "a failed monolithic upload kept its bytes")
        # chunked: the first chunk fits, the second does not; the session's bytes go at once, not after 24 h
        st, h, _ = b.request("POST", "/v2/full/a/blobs/uploads/")
        self.assertEqual(st, 202)
        loc = h["location"]
        st, h, body = b.request("PATCH", loc, data[:30 * MiB], {"Content-Range": "0-%d" % (30 * MiB - 1)})
        self.assertEqual(st, 202, body)
        self.assertLess(self.fs.free(), empty - 29 * MiB)
        st, h, body = b.request("PATCH", h["location"], data[30 * MiB:60 * MiB],
                                {"Content-Range": "%d-%d" % (30 * MiB, 60 * MiB - 1)})
        self.assert_full(st, h, body)
        self.assertGreater(self.fs.free(), empty - MiB, "the failed session still holds its partial bytes")
        self.assertEqual(b.request("GET", loc)[0], 404, "the session should be gone: the client restarts the blob")
        # everyone else can push again right away
        self.assertTrue(b.push_blob("full/b", os.urandom(MiB), chunk=256 * 1024).startswith("sha256:"))
        digest, _ = b.push_image("full/b", "v1")
        logs = full_log(b)
        self.assertIn("No space left on device (errno 28) on the tmpfs file system of " + self.fs.path, logs)
        self.assertIn("released after running out of space", logs)

    def test_reserve_refuses_new_uploads_but_not_pulls_metadata_or_cleanup(self):
        b = self.start("16M")
        digest, _ = b.push_image("res/app", "v1")
        # a session that holds 10 MiB, then a 24 MiB blob: free space drops below the 16 MiB reserve
        st, h, _ = b.request("POST", "/v2/res/app/blobs/uploads/")
        held = h["location"]
        st, h, body = b.request("PATCH", held, os.urandom(10 * MiB), {"Content-Range": "0-%d" % (10 * MiB - 1)})
        self.assertEqual(st, 202, body)
        big = os.urandom(24 * MiB)
        big_d = b.push_blob("res/app", big)
        self.assertLess(self.fs.free(), 16 * MiB)
        # new uploads: refused up front, before a body byte is read, with the same error as ENOSPC
        for _ in range(3):
            st, h, body = b.request("POST", "/v2/res/app/blobs/uploads/")
            self.assert_full(st, h, body)
        st, h, body = b.request("POST", "/v2/res/app/blobs/uploads/?digest=" + sha256(b"x" * 100), b"x" * 100)
        self.assert_full(st, h, body)
        # pulls, metadata writes and mounts go on
        st, _, m = b.request("GET", "/v2/res/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual(st, 200)
        st, _, got = b.request("GET", "/v2/res/app/blobs/" + big_d)
        self.assertEqual((st, len(got)), (200, len(big)))
        st, _, body = b.request("PUT", "/v2/res/app/manifests/v2", m, {"Content-Type": json.loads(m)["mediaType"]})
        self.assertEqual(st, 201, body)
        st, _, body = b.request("POST", "/v2/res/other/blobs/uploads/?mount=%s&from=res/app" % big_d)
        self.assertEqual(st, 201, body)
        st, _, body = b.request("DELETE", "/v2/res/app/manifests/v2")
        self.assertIn(st, (202, 405), body)
        # reported
        st, _, body = b.request("GET", "/api/v2.0/health")
        self.assertEqual(st, 200, body)
        comp = {c["name"]: c for c in json.loads(body)["components"]}
        self.assertEqual(comp["storage"]["status"], "unhealthy", body)
        self.assertEqual(comp["storage"]["min_free_bytes"], 16 * MiB)
        metrics = b.request("GET", "/metrics")[2].decode()
        self.assertIn("berth_storage_below_reserve 1", metrics)
        self.assertIn("berth_storage_reserve_bytes %d" % (16 * MiB), metrics)
        # an operator frees space through Berth itself: cancelling the held session gives back its 10 MiB
        self.assertEqual(b.request("DELETE", held)[0], 204)
        self.assertGreater(self.fs.free(), 16 * MiB)
        self.assertEqual(b.request("POST", "/v2/res/app/blobs/uploads/")[0], 202)
        comp = {c["name"]: c for c in json.loads(b.request("GET", "/api/v2.0/health")[2])["components"]}
        self.assertEqual(comp["storage"]["status"], "healthy")
        logs = full_log(b)
        self.assertEqual(logs.count("below the reserve"), 1, "the reserve warning is logged once per crossing")
        self.assertEqual(logs.count("above the reserve again"), 1)

    def test_default_reserve_is_two_percent_of_a_small_file_system(self):
        b = self.start(None)
        v = os.statvfs(self.fs.path)
        metrics = b.request("GET", "/metrics")[2].decode()
        self.assertIn("berth_storage_reserve_bytes %d\n" % (v.f_blocks * v.f_frsize // 50), metrics)
        self.assertIn("berth_storage_below_reserve 0", metrics)


def tree_rss_kib(pid, children=True):
    """VmRSS summed over a process and its descendants (berthd and its nginx master and workers)."""
    if not children:
        with open("/proc/%d/status" % pid) as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            with open("/proc/%d/status" % p) as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total


class IdleBurst(unittest.TestCase):
    """Thousands of idle connections held open on the edge: a fresh client is still served, then every one of
    them asks for a manifest at once and every one is answered (no reset, no refusal). Sized for a 2-core CI
    machine; BERTH_TEST_IDLE_CLIENTS sets the count (default 9000, beyond what the edge's old fixed
    worker_connections 8192 per worker held once each client also needs an upstream connection)."""
    CLIENTS = int(os.environ.get("BERTH_TEST_IDLE_CLIENTS", "9000"))

    def test_idle_connections_then_all_at_once(self):
        import resource
        import selectors
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = self.CLIENTS + 512
        if soft < need:
            if hard != resource.RLIM_INFINITY and hard < need:
                self.fail("the test needs %d descriptors; the hard limit is %d (raise ulimit -n)" % (need, hard))
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        b = Berthd().start()
        try:
            counts = self._run(b, selectors, self.CLIENTS)
            # nobody refused: with the limits sized from the machine every client is served
            self.assertEqual(counts, {200: self.CLIENTS}, counts)
            self.assertNotIn("worker_connections are not enough", full_log(b))
        except BaseException:
            print("\n--- berthd log ---\n" + b.logs())
            raise
        finally:
            b.cleanup()

    def test_one_account_many_nodes_is_verified_once(self):
        """2,000 clients with the same Basic credentials (a user: argon2) arrive together just after the gate's
        decision for them ran out: one verification serves them all, none is shed with 503."""
        import selectors
        b = Berthd(env={"BERTH_AUTH_DECISION_TTL": "1"}).start()
        try:
            self._run(b, selectors, 10)  # the image, and a decision that then runs out
            time.sleep(1.5)  # the point: the remembered decision (TTL 1 s) has run out when the 2,000 arrive
            counts = self._run(b, selectors, 2000, push=False)
            self.assertEqual(counts, {200: 2000}, counts)
            self.assertNotIn("login shed", full_log(b))
        except BaseException:
            print("\n--- berthd log ---\n" + b.logs())
            raise
        finally:
            b.cleanup()

    def test_past_the_descriptor_limit_clients_wait_or_get_503(self):
        """berthd started with a hard limit of 2,048 descriptors and 3,000 clients: each one is answered, 200 or a
        clean 503 with Retry-After; none is reset or dropped, and the log names the limit."""
        import resource
        import selectors

        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (2048, 2048))
        b = Berthd()
        b.start_preexec = low_limit
        b.start()
        try:
            self.assertIn("holds about", full_log(b), "no warning naming the descriptor limit")
            counts = self._run(b, selectors, 3000)
            self.assertEqual(set(counts) - {200, 503}, set(), counts)
            self.assertGreater(counts.get(200, 0), 0, counts)
        except BaseException:
            print("\n--- berthd log ---\n" + b.logs())
            raise
        finally:
            b.cleanup()

    def _run(self, b, selectors, clients, push=True):
        if push:
            b.project("burst")
            b.push_image("burst/app", "v1")
            self.assertEqual(b.request("GET", "/v2/burst/app/manifests/v1", headers={"Accept": ACCEPT_ALL})[0], 200)
        rss0 = tree_rss_kib(b.proc.pid)
        t0 = time.monotonic()
        socks, failed_connect = [], 0
        sel = selectors.DefaultSelector()
        for i in range(clients):
            s = socket.socket()
            s.setblocking(False)
            err = s.connect_ex((b.ip, b.port))
            if err not in (0, 115):  # EINPROGRESS
                failed_connect += 1
                s.close()
                continue
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE, i)
        pending = len(socks)
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(1):
                sel.unregister(key.fileobj)
                if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    failed_connect += 1
                pending -= 1
        connect_s = time.monotonic() - t0
        self.assertEqual((failed_connect, pending), (0, 0), "connections refused or never accepted")
        time.sleep(1.0)  # let the accepted connections settle before the idle RSS is read
        rss_idle = tree_rss_kib(b.proc.pid)
        # a fresh client among thousands of idle ones (anonymous: it must not refresh the idle ones' decision)
        t1 = time.monotonic()
        st, _, _ = b.request("GET", "/v2/", auth=None, timeout=30)
        fresh_s = time.monotonic() - t1
        self.assertEqual(st, 401)
        self.assertLess(fresh_s, 5.0, "a fresh client waited behind idle connections")
        # now every idle connection asks at once
        req = ("GET /v2/burst/app/manifests/v1 HTTP/1.1\r\nHost: %s\r\nAccept: %s\r\nAuthorization: %s\r\n\r\n"
               % (b.host, ACCEPT_ALL, __import__("harness").ADMIN_AUTH)).encode()
        bufs = {}
        t2 = time.monotonic()
        for s in socks:
            try:
                s.send(req)
            except OSError:
                pass
            bufs[s] = b""
            sel.register(s, selectors.EVENT_READ)
        outcome = {}
        deadline = time.monotonic() + 120
        while len(outcome) < len(socks) and time.monotonic() < deadline:
            for key, _ in sel.select(1):
                s = key.fileobj
                try:
                    chunk = s.recv(65536)
                except OSError as e:
                    outcome[s] = "reset" if isinstance(e, ConnectionResetError) else repr(e)
                    sel.unregister(s)
                    continue
                if not chunk:
                    outcome[s] = "closed before the answer"
                    sel.unregister(s)
                    continue
                bufs[s] += chunk
                head, sep, body = bufs[s].partition(b"\r\n\r\n")
                if not sep:
                    continue
                length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), 0)
                if len(body) >= length:
                    status = int(head.split(b" ")[1])
                    outcome[s] = status if status != 503 or b"retry-after" in head.lower() else "503 without Retry-After"
                    sel.unregister(s)
        burst_s = time.monotonic() - t2
        rss_peak = tree_rss_kib(b.proc.pid)
        rss_berthd = tree_rss_kib(b.proc.pid, children=False)
        for s in socks:
            s.close()
        counts = {}
        for v in outcome.values():
            counts[v] = counts.get(v, 0) + 1
        missing = len(socks) - len(outcome)
        print("\n%d idle connections: connected in %.1f s, fresh client served in %.3f s, all answered in %.1f s; "
              "RSS of berthd + edge: %d MiB before, %d MiB idle, %d MiB after the burst (berthd %d MiB); outcomes %s"
              % (len(socks), connect_s, fresh_s, burst_s, rss0 // 1024, rss_idle // 1024, rss_peak // 1024,
                 rss_berthd // 1024, counts))
        self.assertEqual(missing, 0, "clients never answered: %s" % counts)
        return counts


if __name__ == "__main__":
    main()
