"""Faults injected for real (issue #18): a frozen database (SIGSTOP of a private PostgreSQL), a full disk (a small
tmpfs as storage root), an idle-connection burst against the edge. What clients are told, and that nothing
acknowledged is lost. A fault that cannot be injected (no mount, no signal) fails the test with the reason."""
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

from harness import ACCEPT_ALL, BERTH_PG, Berthd, free_port, main, sha256

# What a 5xx body must never carry: libpq's words, server addresses, paths, library messages.
LEAKS = [b"connection to server", b"PGSQL", b"socket", b"port ", b"127.0.0.1", b"/tmp/", b"No space", b"errno",
         b"could not", b"FATAL", b"ERROR:", b"SELECT", b"INSERT"]


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
    DEADLINE_MS = 1000
    FREEZE_S = 6.0
    MARGIN_S = 2.5 if os.environ.get("BERTH_SANITIZED", "0") in ("0", "FALSE", "") else 4.0

    @classmethod
    def setUpClass(cls):
        cls.pg = PrivateCluster()
        cls.b = Berthd(dbname="berth", env={"BERTH_DATABASE_URL": cls.pg.conninfo,
                                            "BERTH_DATABASE_DEADLINE_MS": str(cls.DEADLINE_MS)}).start()

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

    def test_freeze_answers_within_deadline_and_recovers(self):
        b = self.b
        digest, _ = b.push_image("frozen/app", "v1", size=64 * 1024)
        layer = json.loads(b.request("GET", "/v2/frozen/app/manifests/v1", headers={"Accept": ACCEPT_ALL})[2])["layers"][0]
        acked, results, stop = [], [], threading.Event()

        def puller(path, headers):
            while not stop.is_set():
                st, h, data, dt = timed(b, "GET", path, headers=headers)
                results.append(("pull " + path, st, dt, h, data))

        def pusher(n):
            i = 0
            while not stop.is_set():
                data = ("push %d %d " % (n, i)).encode() + os.urandom(4096)
                i += 1
                t0 = time.monotonic()
                try:
                    d = b.push_blob("frozen/push%d" % n, data)
                    acked.append(("frozen/push%d" % n, d))
                    results.append(("push", 201, time.monotonic() - t0, {}, b""))
                except AssertionError as e:
                    st = e.args[0][0] if e.args and isinstance(e.args[0], tuple) else str(e)
                    results.append(("push", st, time.monotonic() - t0, {}, e.args[0][1] if st == 503 else b""))
                except OSError as e:
                    results.append(("push", repr(e), time.monotonic() - t0, {}, b""))

        def lister():  # needs the database every time: a new repository's tag list is never cached
            j = 0
            while not stop.is_set():
                j += 1
                st, h, data, dt = timed(b, "GET", "/v2/frozen/none%d/tags/list" % j)
                results.append(("tags", st, dt, h, data))

        threads = [threading.Thread(target=puller, args=("/v2/frozen/app/manifests/v1", {"Accept": ACCEPT_ALL})),
                   threading.Thread(target=puller, args=("/v2/frozen/app/blobs/" + layer["digest"], {})),
                   threading.Thread(target=pusher, args=(1,)), threading.Thread(target=pusher, args=(2,)),
                   threading.Thread(target=lister)]
        for t in threads:
            t.start()
        time.sleep(1.0)
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
            if st == 503 and kind != "push":
                self.assert_clean_5xx(st, h, data)
        # what does not need the database is still served: cached manifest and blob by digest through the edge
        self.assertEqual(kinds.get("pull"), {200}, kinds)
        self.assertEqual(kinds.get("pull-blob"), {200}, kinds)
        self.assertIn(503, kinds.get("tags", set()), kinds)
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
        print("\nfrozen %.1f s: %d requests during the freeze, slowest %.2f s, fastest 503 %.3f s, recovered %.2f s "
              "after the thaw, %d pushes acknowledged in all" % (thawed_at - frozen_at, len(during),
                                                                max(r[2] for r in during), first_503 or -1,
                                                                recovered, len(acked)))

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
            self.assertIn("database unreachable", b.logs(), "the detail belongs in the log")
        finally:
            self.pg.start()
        deadline = time.time() + 15
        while time.time() < deadline and b.request("GET", "/v2/down/x/tags/list")[0] == 503:
            time.sleep(0.2)
        self.assertEqual(b.request("GET", "/v2/down/x/tags/list")[0], 404)


if __name__ == "__main__":
    main()
