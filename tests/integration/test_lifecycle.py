"""Start, configuration errors, graceful drain, restarts and shared state between berthd instances."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import ADMIN_AUTH, BERTHD, Berthd, error_code, free_port, main, new_database, pg_conninfo, psql, sha256


def run_berthd(args, env, timeout=30):
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([BERTHD, *args], env=full, capture_output=True, text=True, timeout=timeout)


def hash_states(b):
    """The berth_upload_hash_states gauge: sessions whose running hash berthd holds in memory."""
    st, _, text = b.request("GET", "/metrics")
    assert st == 200, st
    return int(re.search(rb"^berth_upload_hash_states (\d+)$", text, re.M).group(1))


class Config(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cfg-")
        self.env = {"BERTH_DATABASE_URL": pg_conninfo(new_database()), "BERTH_STORAGE_ROOT": self.tmp + "/s"}

    def write(self, text):
        p = os.path.join(self.tmp, "berth.yaml")
        with open(p, "w") as f:
            f.write(text)
        return p

    def test_valid_yaml_and_check(self):
        p = self.write("http:\n  addr: 127.0.0.1:%d\nstorage:\n  root: %s/s\nlog:\n  level: warn\n" % (free_port(), self.tmp))
        r = run_berthd(["--config", p, "--check"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_example_config_is_valid(self):
        example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "deploy",
                               "berth.example.yaml")
        r = run_berthd(["--config", example, "--check"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_berthd(["--config", self.write("nosuchsection:\n")], self.env)
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_unknown_key(self):
        r = run_berthd(["--config", self.write("http:\n  adr: x\n")], self.env)
        self.assertEqual(r.returncode, 2)
        self.assertIn('unknown configuration key "http.adr"', r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_malformed_yaml(self):
        r = run_berthd(["--config", self.write("http: [unclosed\n")], self.env)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_bad_values(self):
        for env in ({"BERTH_HTTP_ADDR": "noport"}, {"BERTH_LOG_LEVEL": "loud"}, {"BERTH_DATABASE_URL": ""},
                    {"BERTH_TLS_ADDR": "127.0.0.1:1"}, {"BERTH_AUTH_WORKERS": "0"}, {"BERTH_AUTH_QUEUE": "0"},
                    {"BERTH_LDAP_MAX_CONCURRENT": "0"}, {"BERTH_LDAP_SESSION_RECHECK_SECONDS": "0"}):
            r = run_berthd([], dict(self.env, **env))
            self.assertEqual(r.returncode, 2, (env, r.stderr))
            self.assertTrue(r.stderr.startswith("berthd: bad configuration"), r.stderr)

    def test_unreachable_database_is_one_line(self):
        port = free_port()
        r = run_berthd([], dict(self.env, BERTH_DATABASE_URL="host=127.0.0.1 port=%d user=x password=hunter2 dbname=x" % port))
        self.assertEqual(r.returncode, 1)
        self.assertIn("database unreachable", r.stderr)
        self.assertNotIn("hunter2", r.stderr)
        self.assertEqual(len([line for line in r.stderr.splitlines() if line.startswith("berthd:")]), 1, r.stderr)

    def test_octal_era_versions_are_renumbered(self):
        # databases migrated before versions were decimal recorded 0010 as 8, 0040 as 32, 0050 as 40 (a clash
        # with 0040's decimal number): the file name decides, and nothing is applied twice
        db = self.env["BERTH_DATABASE_URL"].rsplit("dbname=", 1)[-1].split()[0]
        p = self.write("http:\n  addr: 127.0.0.1:%d\nstorage:\n  root: %s/s\n" % (free_port(), self.tmp))
        r = run_berthd(["--config", p, "--check"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = psql("SELECT name, version FROM schema_migrations ORDER BY name", db).splitlines()
        self.assertGreaterEqual(len(rows), 7, rows)
        decimal = [tuple(x.split("|")) for x in rows]
        self.assertTrue(all(int(n[:4]) == int(v) for n, v in decimal), decimal)
        psql("UPDATE schema_migrations SET version = -version", db)
        # what a C literal 0040 meant: octal. Only 0010..0070 lived in that era (0080 did not compile, and the
        # decimal fix came with it); later files were always decimal (0140 as octal would clash with 0096)
        for name, v in decimal:
            psql("UPDATE schema_migrations SET version = %d WHERE name = '%s'" % (
                int(name[:4], 8) if int(name[:4]) < 80 else int(v), name), db)
        octal = [tuple(x.split("|")) for x in psql("SELECT name, version FROM schema_migrations ORDER BY name", db).splitlines()]
        self.assertIn(("0050_isa.sql", "40"), octal)
        psql("CREATE TABLE canary (x int); INSERT INTO canary VALUES (1)", db)
        r = run_berthd(["--config", p, "--check"], self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        after = [tuple(x.split("|")) for x in psql("SELECT name, version FROM schema_migrations ORDER BY name", db).splitlines()]
        self.assertEqual(after, decimal)
        self.assertEqual(psql("SELECT count(*) FROM canary", db), "1", "the database was not rebuilt")

    def test_concurrent_first_start_migrates_once(self):
        db = new_database()
        a = Berthd(dbname=db).start(wait=False)
        b = Berthd(dbname=db).start(wait=False)
        try:
            a.wait_ready()
            b.wait_ready()
            a.project("mig")
            d = a.push_blob("mig/repo", b"shared")
            self.assertEqual(b.request("HEAD", "/v2/mig/repo/blobs/" + d)[0], 404, "storage is per instance here")
        finally:
            a.cleanup()
            b.cleanup()



def group_procs(pgid):
    """(pid, command) of every process still in the process group."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [tuple(line.split(None, 1)) for line in out.splitlines() if line.strip()]


class FailedStart(unittest.TestCase):
    """A start step that fails part-way: berthd stops what it had started (threads, listeners, the edge), names
    the step, exits 1 at once and leaves no process behind (its own process group stays empty)."""

    def fail_start(self, env, expected, edge_started=False):
        b = Berthd(env=env)
        b.start_preexec = os.setsid  # a group of its own: nginx would stay in it if berthd left it behind
        try:
            t0 = time.time()
            b.start(wait=False)
            rc = b.proc.wait(30)
            elapsed = time.time() - t0
            pgid = b.proc.pid
            logs = b.logs()
            self.assertEqual(rc, 1, logs)
            self.assertLess(elapsed, 15, logs)
            for text in expected:
                self.assertIn(text, logs)
            if not edge_started:
                self.assertNotIn("listening on", logs)
            self.assertEqual(group_procs(pgid), [], logs)
            self.assertNotIn("Sanitizer", logs)
        finally:
            b.cleanup()  # under ASan: fails if the unwinding leaked

    def blocker(self):
        """A plain file where a directory is needed: unwritable even for root."""
        path = os.path.join(tempfile.mkdtemp(prefix="failstart-"), "file")
        open(path, "w").close()
        return path

    def test_replication_key_unwritable(self):
        # fails half-way: the audit writer, invalidation listener, ISA scanner and workers already run
        self.fail_start({"BERTH_REPLICATION_KEY_FILE": self.blocker() + "/replication.key"},
                        ["cannot read or create the replication key", "cannot start replication; stopping what was started"])

    def test_run_dir_unwritable(self):
        # the internal listeners' sockets live in the run directory: every thread but the listeners runs
        blocker = self.blocker()
        self.fail_start({"BERTH_RUN_DIR": blocker + "/run"}, ["cannot create the run directory %s/run: Not a directory" % blocker,
                                                              "cannot start the internal listeners; stopping what was started"])

    def test_run_dir_of_another_user(self):
        run = os.path.join(tempfile.mkdtemp(prefix="failstart-"), "run")
        os.makedirs(run)
        os.chown(run, 65534, 65534)  # nobody's: berthd would bind where someone else can swap its sockets
        self.fail_start({"BERTH_RUN_DIR": run}, ["the run directory %s belongs to uid 65534" % run,
                                                 "cannot start the internal listeners; stopping what was started"])

    def test_edge_conf_unwritable(self):
        # fails last, at the edge: every thread and both internal listeners already run
        run = os.path.join(tempfile.mkdtemp(prefix="failstart-"), "run")
        os.makedirs(os.path.join(run, "nginx.conf"))  # a directory where the edge's configuration goes
        self.fail_start({"BERTH_RUN_DIR": run}, ["cannot write %s/nginx.conf" % run,
                                                 "cannot start the edge (nginx); stopping what was started"])
        for sock in ("api.sock", "upload.sock"):
            self.assertFalse(os.path.exists(os.path.join(run, sock)), "%s is removed at stop" % sock)

    def test_edge_that_dies_at_start(self):
        # nginx itself starts and then refuses its configuration (an unreadable certificate): berthd notices,
        # drains what it started and exits 1 with nginx's own error above its own
        bad = self.blocker()
        with open(bad, "w") as f:
            f.write("not a certificate\n")
        self.fail_start({"BERTH_TLS_ADDR": "127.0.0.1:%d" % free_port(), "BERTH_TLS_CERT": bad, "BERTH_TLS_KEY": bad},
                        ["cannot load certificate", "the edge (nginx, pid", "exited with status 1", "stopped"], edge_started=True)


def read_until_status(s, status=None):
    """Read from a raw socket until a final response head arrives (skipping 100 Continue) or EOF."""
    data = b""
    while True:
        if b"\r\n\r\n" in data:
            head = data.split(b"\r\n\r\n", 1)[0]
            if not head.startswith(b"HTTP/1.1 100") and (status is None or head.startswith(b"HTTP/1.1 " + status)):
                return data
            if head.startswith(b"HTTP/1.1 100"):
                data = data.split(b"\r\n\r\n", 1)[1]
                continue
        more = s.recv(65536)
        if not more:
            return data
        data += more


def slow_patch(port, path, chunks, delay, result):
    """PATCH with a chunked body sent slowly over a raw socket; stores (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(("PATCH %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nAuthorization: %s\r\n"
               "Content-Type: application/octet-stream\r\n\r\n" % (path, ADMIN_AUTH)).encode())
    for c in chunks:
        s.sendall(b"%x\r\n%s\r\n" % (len(c), c))
        time.sleep(delay)
    s.sendall(b"0\r\n\r\n")
    data = read_until_status(s)
    s.close()
    result.append(int(data.split(b" ")[1]) if data else 0)


class Lifecycle(unittest.TestCase):
    def test_sigterm_drains_inflight_upload(self):
        b = Berthd().start().project("drain")
        try:
            st, h, _ = b.request("POST", "/v2/drain/repo/blobs/uploads/")
            chunks = [os.urandom(50000) for _ in range(10)]
            result = []
            t = threading.Thread(target=slow_patch, args=(b.port, h["location"], chunks, 0.2, result))
            t.start()
            time.sleep(0.5)
            b.proc.send_signal(signal.SIGTERM)
            t.join(30)
            rc = b.proc.wait(30)
            self.assertEqual(result, [202], "in-flight request was not drained")
            self.assertEqual(rc, 0, b.logs())
            # what was drained is really there: a restart continues the session at the right offset
            b.proc = None
            b.log.close()
            b.start()
            st, h2, _ = b.request("GET", h["location"])
            self.assertEqual((st, h2["range"]), (204, "0-%d" % (len(b"".join(chunks)) - 1)))
            data = b"".join(chunks)
            st, _, body = b.request("PUT", h["location"] + "?digest=" + sha256(data))
            self.assertEqual(st, 201, body)
        finally:
            b.cleanup()

    def test_session_continues_on_another_berthd(self):
        """Two berthd share the database and storage: a session begun on one finishes on the other."""
        a = Berthd().start().project("shared")
        b = Berthd(dbname=a.dbname, storage=a.storage).start()
        try:
            data = os.urandom(300000)
            st, h, _ = a.request("POST", "/v2/shared/repo/blobs/uploads/")
            loc = h["location"]
            st, h, _ = a.request("PATCH", loc, data[:100000], {"Content-Range": "0-99999"})
            self.assertEqual(st, 202)
            st, h, _ = b.request("PATCH", loc, data[100000:200000], {"Content-Range": "100000-199999"})
            self.assertEqual((st, h["range"]), (202, "0-199999"))
            st, h, body = b.request("PUT", loc + "?digest=" + sha256(data), data[200000:])
            self.assertEqual(st, 201, body)
            st, _, body = a.request("GET", "/v2/shared/repo/blobs/" + sha256(data))
            self.assertEqual(body, data)
        finally:
            b.cleanup()
            a.cleanup()

    def test_cache_invalidated_across_instances(self):
        """A tag moved on one berthd is seen by another that had the old answer cached."""
        a = Berthd().start().project("xinst")
        b = Berthd(dbname=a.dbname, storage=a.storage).start()
        try:
            d1, _ = a.push_image("xinst/app", "v1")
            for _ in range(3):
                self.assertEqual(b.request("HEAD", "/v2/xinst/app/manifests/v1")[1]["docker-content-digest"], d1)
            d2, _ = a.push_image("xinst/app", "v1")
            deadline = time.time() + 5
            seen = None
            while time.time() < deadline:
                seen = b.request("HEAD", "/v2/xinst/app/manifests/v1")[1]["docker-content-digest"]
                if seen == d2:
                    break
                time.sleep(0.02)
            self.assertEqual(seen, d2, "the other instance kept serving the old tag")
            self.assertEqual(a.request("DELETE", "/v2/xinst/app/manifests/v1")[0], 202)
            deadline = time.time() + 5
            while time.time() < deadline and b.request("HEAD", "/v2/xinst/app/manifests/v1")[0] != 404:
                time.sleep(0.02)
            self.assertEqual(b.request("HEAD", "/v2/xinst/app/manifests/v1")[0], 404)
        finally:
            b.cleanup()
            a.cleanup()

    def test_abandoned_uploads_are_purged(self):
        b = Berthd(env={"BERTH_UPLOAD_MAX_AGE": "2", "BERTH_UPLOAD_PURGE_INTERVAL": "1"}).start().project("purge")
        try:
            st, h, _ = b.request("POST", "/v2/purge/repo/blobs/uploads/")
            loc, uid = h["location"], h["docker-upload-uuid"]
            self.assertEqual(b.request("PATCH", loc, b"partial")[0], 202)
            self.assertEqual(hash_states(b), 1, "the PATCH left no running hash to continue from")
            debris = os.path.join(b.storage, "uploads", "debris-from-a-crash")
            with open(debris, "wb") as f:
                f.write(b"x")
            os.utime(debris, (time.time() - 3600, time.time() - 3600))
            self.assertEqual(b.request("GET", loc)[0], 204)
            deadline = time.time() + 10
            while time.time() < deadline and (os.path.exists(debris) or b.request("GET", loc)[0] != 404):
                time.sleep(0.2)
            self.assertEqual(b.request("GET", loc)[0], 404)
            self.assertFalse(os.path.exists(debris))
            self.assertFalse(os.path.exists(os.path.join(b.storage, "uploads", uid)))
            # a status GET of this loop that read the row just before the purge can hold the state again for a moment:
            # the janitor's next pass drops states whose session is gone (janitor.c forget_gone). The fresh-clone run
            # of e67ac33 under ASan saw 1 here right after the 404.
            deadline = time.time() + 5
            while time.time() < deadline and hash_states(b) != 0:
                time.sleep(0.2)
            self.assertEqual(hash_states(b), 0, "the purged session's hash state stayed in memory")
        finally:
            b.cleanup()

    def test_client_abort_keeps_server_and_bytes(self):
        b = Berthd().start().project("abort")
        try:
            st, h, _ = b.request("POST", "/v2/abort/repo/blobs/uploads/")
            loc = h["location"]
            data = os.urandom(2_000_000)
            for _ in range(3):
                s = socket.create_connection(("127.0.0.1", b.port))
                s.sendall(("PATCH %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Length: %d\r\n\r\n"
                           % (loc, ADMIN_AUTH, len(data))).encode())
                s.sendall(data[:700000])
                s.close()  # abort mid-body
                time.sleep(0.3)
                st, h, _ = b.request("GET", loc)
                self.assertEqual(st, 204)
                off = int(h["range"].split("-")[1]) + 1 if h["range"] != "0-0" else 0
                self.assertIsNone(b.proc.poll(), "berthd died on a client abort")
            # resume from whatever the server kept, then finish: the digest must be of exactly these bytes
            st, h, _ = b.request("GET", loc)
            off = int(h["range"].split("-")[1]) + 1 if h["range"] != "0-0" else 0
            kept = open(os.path.join(b.storage, "uploads", h["docker-upload-uuid"]), "rb").read()
            self.assertEqual(len(kept), off)
            whole = kept + os.urandom(1000)
            st, _, body = b.request("PUT", loc + "?digest=" + sha256(whole), whole[off:])
            self.assertEqual(st, 201, body)
        finally:
            b.cleanup()

    def test_truncated_monolithic_leaves_nothing(self):
        b = Berthd().start().project("trunc")
        try:
            uploads = os.path.join(b.storage, "uploads")
            before = sorted(os.listdir(uploads))
            data = os.urandom(100000)
            s = socket.create_connection(("127.0.0.1", b.port))
            s.sendall(("POST /v2/trunc/repo/blobs/uploads/?digest=%s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                       "Content-Length: %d\r\n\r\n" % (sha256(data), ADMIN_AUTH, len(data))).encode())
            s.sendall(data[:40000])
            s.close()
            deadline = time.time() + 10
            while time.time() < deadline and sorted(os.listdir(uploads)) != before:
                time.sleep(0.1)
            self.assertEqual(sorted(os.listdir(uploads)), before, "a truncated monolithic upload left a file")
            self.assertEqual(b.request("HEAD", "/v2/trunc/repo/blobs/" + sha256(data))[0], 404)
        finally:
            b.cleanup()

    def test_denied_before_body(self):
        """A PATCH to an unknown session is refused before its body is read (no bandwidth spent)."""
        b = Berthd().start()
        try:
            s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
            s.sendall(b"PATCH /v2/x/y/blobs/uploads/00000000-0000-4000-8000-000000000000 HTTP/1.1\r\nHost: x\r\n"
                      b"Authorization: " + ADMIN_AUTH.encode() + b"\r\n"
                      b"Content-Length: 1000000000\r\nExpect: 100-continue\r\n\r\n")
            # the edge may say 100 Continue; the final answer must come without a single body byte sent
            resp = read_until_status(s, b"404")
            s.close()
            self.assertIn(b"HTTP/1.1 404", resp)
            self.assertIn(b"BLOB_UPLOAD_UNKNOWN", resp)
        finally:
            b.cleanup()


if __name__ == "__main__":
    main()
