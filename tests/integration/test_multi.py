"""Several berthd on one PostgreSQL and one bucket (the s3 driver on the test Ceph), behind a round-robin nginx.

Upload sessions live in PostgreSQL (driver state + the saved sha256 state, the row locked by the request that
writes it): a chunked upload whose PATCHes land on different instances completes with the right digest, a second
writer of one session gets 416 with the committed Range, a berthd killed with SIGKILL in the middle of a PATCH
loses nothing that was acknowledged and the client resumes on another; skopeo and podman push and pull through
the balancer's name; a tag moved on one instance is served by the others within the stated bound
(registry/storage/README.md: cache invalidation by LISTEN/NOTIFY); a replication execution runs once.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import ACCEPT_ALL, ADMIN_AUTH, ADMIN_CREDS, Berthd, error_code, free_port, main, podman_cmd, psql, sha256

os.environ["BERTH_TEST_STORAGE_DRIVER"] = "s3"
BOUND_S = 1.0  # the invalidation bound stated in registry/storage/README.md while the listener is connected


def have(tool):
    return shutil.which(tool) is not None


def run(cmd, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-3000:]))
    return r.stdout


class Balancer:
    """nginx round-robin over the instances' edges, request bodies and answers streamed (as an ingress should)."""

    def __init__(self, servers):
        self.dir = tempfile.mkdtemp(prefix="berth-lb-")
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1; daemon off; pid %(d)s/nginx.pid; error_log %(d)s/error.log warn;
events { worker_connections 256; }
http {
  log_format lb '$request $status $upstream_addr'; access_log %(d)s/access.log lb; client_body_temp_path %(d)s/body; proxy_temp_path %(d)s/proxy;
  fastcgi_temp_path %(d)s/f; uwsgi_temp_path %(d)s/u; scgi_temp_path %(d)s/s;
  client_max_body_size 0; proxy_request_buffering off; proxy_buffering off; proxy_http_version 1.1;
  upstream berth { %(servers)s keepalive 8; }
  server { listen 127.0.0.1:%(port)d;
    location / { proxy_pass http://berth; proxy_set_header Host $http_host; proxy_set_header Connection "";
                 proxy_next_upstream off; proxy_read_timeout 300s; } }
}
""" % {"d": self.dir, "port": self.port, "servers": " ".join("server %s max_fails=0;" % s for s in servers)})
        self.proc = subprocess.Popen(["nginx", "-p", self.dir, "-c", conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start: " + open(os.path.join(self.dir, "error.log")).read())

    @property
    def host(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def start_patch(b, loc, first, total, offset):
    """A PATCH whose headers and first bytes are sent, the rest held back: the request is in progress."""
    s = socket.create_connection((b.ip, b.port), 30)
    s.sendall(("PATCH %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %d\r\nContent-Range: %d-%d\r\n\r\n" % (loc, b.host, ADMIN_AUTH, total, offset,
                                                                      offset + total - 1)).encode())
    s.sendall(first)
    return s


def finish(s, rest):
    s.sendall(rest)
    s.settimeout(60)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    return int(head.split(" ", 2)[1]), {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in head.split("\r\n")[1:])}


class NodeLogsOnFailure:
    """A failed test prints the end of every node's log (self.nodes): which instance did what."""

    def run(self, result=None):
        res = super().run(result)
        if result is not None and any(t is self for t, _ in result.failures + result.errors):
            for i, n in enumerate(self.nodes):
                print("\n--- berthd %d log ---\n%s" % (i, n.logs()[-6000:]))
        return res


class Many(NodeLogsOnFailure, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        first = Berthd()
        cls.lb_port = None
        cls.nodes = [first]
        first.start().project("multi").project("rsrc").project("rdst")
        for _ in range(2):  # the same database and bucket (and so the same signing keys, under the storage root)
            cls.nodes.append(Berthd(dbname=first.dbname, storage=first.storage).start())
        cls.lb = Balancer([n.host for n in cls.nodes])

    @classmethod
    def tearDownClass(cls):
        cls.lb.stop()
        for n in cls.nodes:
            n.cleanup()


    def row(self, loc):
        return psql("SELECT coalesce(state, '') || '|' || coalesce(hash_state, '') FROM upload_sessions WHERE id = '%s'"
                    % loc.rstrip("/").rsplit("/", 1)[1], self.nodes[0].dbname)

    def test_chunked_upload_on_three_instances(self):
        a, b, c = self.nodes
        data = os.urandom(13 * 2 ** 20 + 77)  # parts of 5 MiB: PATCHes end inside parts
        d = sha256(data)
        st, h, _ = a.request("POST", "/v2/multi/chunked/blobs/uploads/")
        self.assertEqual(st, 202)
        loc = h["location"]
        cuts = [0, 3 * 2 ** 20 + 5, 9 * 2 ** 20 + 1, len(data)]
        for i, server in enumerate((b, c, a)):
            st, h, body = server.request("PATCH", loc, data[cuts[i]:cuts[i + 1]],
                                         {"Content-Range": "%d-%d" % (cuts[i], cuts[i + 1] - 1)})
            self.assertEqual((st, h.get("range")), (202, "0-%d" % (cuts[i + 1] - 1)), body)
        state = self.row(loc)
        self.assertIn("offset %d\n" % len(data), state, "the session's state is in its row")
        self.assertRegex(state, r"\|s1:[0-9a-f]{210}$", "with the running sha256 state")
        wrong = sha256(b"other bytes")
        st, _, body = b.request("PUT", loc + "?digest=" + wrong)
        self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"), "the resumed hash refuses a wrong digest")
        st, h, _ = a.request("POST", "/v2/multi/chunked/blobs/uploads/")
        loc = h["location"]
        for i, server in enumerate((b, c, a)):
            st, h, body = server.request("PATCH", loc, data[cuts[i]:cuts[i + 1]],
                                         {"Content-Range": "%d-%d" % (cuts[i], cuts[i + 1] - 1)})
            self.assertEqual(st, 202, body)
        st, h, body = b.request("PUT", loc + "?digest=" + d)
        self.assertEqual((st, h.get("docker-content-digest")), (201, d), body)
        for server in self.nodes:
            st, h, got = server.request("GET", "/v2/multi/chunked/blobs/" + d)
            self.assertEqual((st, hashlib.sha256(got).hexdigest()), (200, d[7:]))
        self.assertEqual(a.upload_ids(), [], "no session objects left in the bucket")

    def test_second_writer_gets_416(self):
        a, b, _ = self.nodes
        data = os.urandom(7 * 2 ** 20)
        st, h, _ = a.request("POST", "/v2/multi/race/blobs/uploads/")
        loc = h["location"]
        st, h, _ = a.request("PATCH", loc, data[:2 ** 20], {"Content-Range": "0-%d" % (2 ** 20 - 1)})
        self.assertEqual(st, 202)
        rest = data[2 ** 20:]
        s = start_patch(a, loc, rest[:2 ** 20], len(rest), 2 ** 20)
        time.sleep(1.0)  # a has the row
        st, h, body = b.request("PATCH", loc, rest, {"Content-Range": "%d-%d" % (2 ** 20, len(data) - 1)})
        self.assertEqual((st, h.get("range")), (416, "0-%d" % (2 ** 20 - 1)), body)
        st, _, body = b.request("DELETE", loc)
        self.assertEqual(st, 416, "nor is it deleted under the writer")
        st, h = finish(s, rest[2 ** 20:])
        self.assertEqual((st, h.get("range")), (202, "0-%d" % (len(data) - 1)), "the first writer is unharmed")
        st, h, body = b.request("PUT", loc + "?digest=" + sha256(data))
        self.assertEqual(st, 201, body)

    def test_kill_9_during_a_patch_loses_nothing_acknowledged(self):
        a, b, c = self.nodes
        victim = Berthd(dbname=a.dbname, storage=a.storage).start()
        try:
            data = os.urandom(12 * 2 ** 20 + 1234)
            st, h, _ = a.request("POST", "/v2/multi/killed/blobs/uploads/")
            loc = h["location"]
            ack = 6 * 2 ** 20 + 99  # acknowledged: more than a part, and a tail
            st, h, _ = victim.request("PATCH", loc, data[:ack], {"Content-Range": "0-%d" % (ack - 1)})
            self.assertEqual(st, 202)
            # the next PATCH streams 5 MiB + more into the victim (a part goes to the gateway) and it dies
            s = start_patch(victim, loc, data[ack:ack + 5 * 2 ** 20 + 500], len(data) - ack, ack)
            time.sleep(1.5)
            victim.stop(signal.SIGKILL)
            s.close()
            # the client asks where the session is, on another instance, and resumes from there
            deadline, st = time.time() + 10, None
            while time.time() < deadline:
                st, h, _ = b.request("GET", loc)
                if st == 204:
                    break
                time.sleep(0.2)
            self.assertEqual((st, h.get("range")), (204, "0-%d" % (ack - 1)), "the acknowledged offset")
            st, h, body = c.request("PATCH", loc, data[ack:], {"Content-Range": "%d-%d" % (ack, len(data) - 1)})
            self.assertEqual(st, 202, body)
            st, h, body = a.request("PUT", loc + "?digest=" + sha256(data))
            self.assertEqual(st, 201, body)
            st, _, got = b.request("GET", "/v2/multi/killed/blobs/" + sha256(data))
            self.assertEqual((st, got == data), (200, True))
        finally:
            victim.cleanup()

    def test_tag_change_seen_everywhere_within_the_bound(self):
        a, b, c = self.nodes
        d1, _ = a.push_image("multi/tagged", "t", seed=1)
        for n in self.nodes:  # every instance has the tag cached
            for _ in range(2):
                st, h, _ = n.request("GET", "/v2/multi/tagged/manifests/t", headers={"Accept": ACCEPT_ALL})
                self.assertEqual((st, h["docker-content-digest"]), (200, d1))
        d2, _ = b.push_image("multi/tagged", "t", seed=2)
        t0 = time.time()
        seen = {}
        while len(seen) < 2 and time.time() - t0 < 10:
            for i, n in ((0, a), (2, c)):
                if i not in seen:
                    st, h, _ = n.request("GET", "/v2/multi/tagged/manifests/t", headers={"Accept": ACCEPT_ALL})
                    if h.get("docker-content-digest") == d2:
                        seen[i] = time.time() - t0
            time.sleep(0.01)
        print("\ntag change seen by the other instances after %s s" % {k: round(v, 3) for k, v in seen.items()})
        self.assertEqual(len(seen), 2, "both other instances serve the new digest")
        self.assertLess(max(seen.values()), BOUND_S)

    def api(self, node, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        st, h, raw = node.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"} if data else {})
        return st, h, json.loads(raw) if raw else None

    def test_scheduled_replication_runs_once(self):
        a, b, c = self.nodes
        d, _ = a.push_image("rsrc/app", "1", seed=3)
        st, h, out = self.api(b, "POST", "/registries", {"name": "self", "type": "berth", "url": "http://" + self.lb.host,
                                                          "insecure": True, "credential": {
                                                              "type": "basic", "access_key": "admin",
                                                              "access_secret": ADMIN_CREDS.split(":", 1)[1]}})
        self.assertEqual(st, 201, out)
        reg = int(h["location"].rsplit("/", 1)[1])
        now = time.localtime()
        fire = (now.tm_min + (1 if now.tm_sec < 50 else 2)) % 60  # one minute only, every instance checks it
        st, h, out = self.api(c, "POST", "/replication/policies", {
            "name": "once", "dest_registry": {"id": reg}, "dest_namespace": "rdst", "dest_namespace_replace_count": 1,
            "trigger": {"type": "scheduled", "trigger_settings": {"cron": "0 %d * * * *" % fire}},
            "filters": [{"type": "name", "value": "rsrc/**"}]})
        self.assertEqual(st, 201, out)
        pid = int(h["location"].rsplit("/", 1)[1])
        deadline = time.time() + 140
        while time.time() < deadline and not (time.localtime().tm_min == fire and time.localtime().tm_sec >= 16):
            time.sleep(0.5)
        # each instance's scheduler (a 5 s loop) has looked at minute `fire` three times by now: one run in all
        execs = self.api(a, "GET", "/replication/executions?policy_id=%d" % pid)[2]
        self.assertEqual(len(execs), 1, execs)
        deadline = time.time() + 60
        while time.time() < deadline and execs[0]["status"] == "InProgress":
            time.sleep(0.5)
            execs = self.api(b, "GET", "/replication/executions?policy_id=%d" % pid)[2]
        self.assertEqual((execs[0]["status"], execs[0]["succeed"], execs[0]["trigger"]), ("Succeed", 1, "scheduled"), execs)
        tasks = self.api(c, "GET", "/replication/executions/%d/tasks" % execs[0]["id"])[2]
        self.assertEqual([t["status"] for t in tasks], ["Succeed"], tasks)
        st, h, _ = c.request("GET", "/v2/rdst/app/manifests/1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual((st, h.get("docker-content-digest")), (200, d))

    def test_revocation_on_one_instance_applies_on_the_others_at_once(self):
        """Gate decisions (the remembered "this credential may do that") are forgotten everywhere when a
        membership, a role, a robot, a password or an account changes on any instance: requests on the other
        instances are decided afresh once the NOTIFY arrives (milliseconds; the bound is BOUND_S). Without it
        each check below stays allowed for auth.decision_ttl_seconds (10 s here)."""
        a, b, c = self.nodes
        a.push_image("multi/rev", "t", seed=11)
        pw = "Revoke12345"
        users = {}
        for u in ("rmem", "rrole", "rpw", "rdel"):
            st, h, out = self.api(a, "POST", "/users", {"username": u, "password": pw, "email": u + "@x.test"})
            self.assertEqual(st, 201, out)
            users[u] = int(h["location"].rsplit("/", 1)[1])
            st, h, out = self.api(a, "POST", "/projects/multi/members", {"role_id": 2, "member_user": {"username": u}})
            self.assertEqual(st, 201, out)
            users[u + ".member"] = int(h["location"].rsplit("/", 1)[1])
        st, _, r = self.api(a, "POST", "/robots", {"name": "rev", "level": "project", "duration": -1, "permissions": [
            {"kind": "project", "namespace": "multi", "access": [{"resource": "repository", "action": "pull"}]}]})
        self.assertEqual(st, 201, r)
        robot, rid, rsecret = r["name"], r["id"], r["secret"]

        def basic(user, secret=pw):
            import base64
            return "Basic " + base64.b64encode((user + ":" + secret).encode()).decode()

        def token(node, auth, scope="repository:multi/rev:pull"):
            st, _, body = node.request("GET", "/service/token?service=berth-registry&scope=" + scope, auth=auth)
            self.assertEqual(st, 200, body)
            return "Bearer " + json.loads(body)["token"]

        def pull(node, auth):
            return node.request("GET", "/v2/multi/rev/manifests/t", headers={"Accept": ACCEPT_ALL}, auth=auth)[0]

        def push(node, auth):  # the push scope: a session POST (202) is all it takes to ask
            return node.request("POST", "/v2/multi/rev/blobs/uploads/", auth=auth)[0]

        def me(node, auth):
            return node.request("GET", "/api/v2.0/users/current", auth=auth)[0]

        def warm(checks):  # every check allowed twice on b and c: each instance remembers the decision
            for _ in range(2):
                for n in (b, c):
                    for name, fn, auth, want in checks:
                        self.assertEqual(fn(n, auth), want, "%s before the change" % name)

        lag = []

        def revoked(checks):  # asked at once and again until refused: the NOTIFY's delivery is the only delay
            t0 = time.time()
            for n in (b, c):
                for name, fn, auth, want in checks:
                    st, tries = fn(n, auth), 1
                    while st not in want and time.time() - t0 < BOUND_S:
                        time.sleep(0.005)
                        st, tries = fn(n, auth), tries + 1
                    self.assertIn(st, want, "%s on another instance %.1f s after the change" % (name, BOUND_S))
                    lag.append(tries)

        # a removed membership: Basic and an earlier token, /v2 (the project is private)
        t = token(b, basic("rmem"))
        warm([("member pull (Basic)", pull, basic("rmem"), 200), ("member pull (token)", pull, t, 200)])
        self.assertEqual(self.api(a, "DELETE", "/projects/multi/members/%d" % users["rmem.member"])[0], 200)
        revoked([("member pull (Basic)", pull, basic("rmem"), (403,)), ("member pull (token)", pull, t, (401,))])
        # a role lowered to guest: no more push
        t = token(c, basic("rrole"), "repository:multi/rev:pull,push")
        warm([("developer push (Basic)", push, basic("rrole"), 202), ("developer push (token)", push, t, 202)])
        st, _, out = self.api(a, "PUT", "/projects/multi/members/%d" % users["rrole.member"], {"role_id": 3})
        self.assertEqual(st, 200, out)
        revoked([("guest push (Basic)", push, basic("rrole"), (403,)), ("guest push (token)", push, t, (401,))])
        # a changed password: the old one neither on /v2 nor on /api/v2.0
        warm([("old password pull", pull, basic("rpw"), 200), ("old password API", me, basic("rpw"), 200)])
        self.assertEqual(self.api(a, "PUT", "/users/%d/password" % users["rpw"], {"new_password": "Changed12345"})[0], 200)
        revoked([("old password pull", pull, basic("rpw"), (401,)), ("old password API", me, basic("rpw"), (401,))])
        # a deleted account: Basic, its token, the API
        t = token(b, basic("rdel"))
        warm([("deleted pull (Basic)", pull, basic("rdel"), 200), ("deleted pull (token)", pull, t, 200),
              ("deleted API", me, basic("rdel"), 200)])
        self.assertEqual(self.api(a, "DELETE", "/users/%d" % users["rdel"])[0], 200)
        revoked([("deleted pull (Basic)", pull, basic("rdel"), (401,)), ("deleted pull (token)", pull, t, (401,)),
                 ("deleted API", me, basic("rdel"), (401,))])
        # a robot's secret refreshed, then the robot disabled
        t = token(c, basic(robot, rsecret))
        warm([("robot pull (old secret)", pull, basic(robot, rsecret), 200)])
        st, _, out = self.api(a, "PATCH", "/robots/%d" % rid, {})
        self.assertEqual(st, 200, out)
        fresh = out["secret"]
        revoked([("robot pull (old secret)", pull, basic(robot, rsecret), (401,))])
        warm([("robot pull (new secret)", pull, basic(robot, fresh), 200), ("robot pull (token)", pull, t, 200)])
        self.assertEqual(self.api(a, "PUT", "/robots/%d" % rid, {"disable": True})[0], 200)
        revoked([("disabled robot pull (Basic)", pull, basic(robot, fresh), (401,)),
                 ("disabled robot pull (token)", pull, t, (401,))])
        print("\nrevoked checks refused at the first ask on another instance: %d of %d (asks: %s)"
              % (lag.count(1), len(lag), lag))

    @unittest.skipUnless(have("skopeo"), "skopeo not installed")
    def test_skopeo_and_podman_through_the_balancer(self):
        from harness import write_oci_layout
        tmp = tempfile.mkdtemp(prefix="multi-clients-")
        try:
            layout = os.path.join(tmp, "layout")
            big = os.urandom(20 * 2 ** 20)  # several parts: POST, PATCH and PUT each on another instance
            digest = write_oci_layout(layout, [{"bin/app": big, "etc/x": b"x"}])
            run(["skopeo", "copy", "--dest-tls-verify=false", "--dest-creds", ADMIN_CREDS, "oci:%s:latest" % layout,
                 "docker://%s/multi/app:v1" % self.lb.host])
            for n in self.nodes:
                st, h, _ = n.request("GET", "/v2/multi/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
                self.assertEqual((st, h["docker-content-digest"]), (200, digest))
            out = os.path.join(tmp, "dir")
            run(["skopeo", "copy", "--src-tls-verify=false", "--src-creds", ADMIN_CREDS,
                 "docker://%s/multi/app:v1" % self.lb.host, "dir:" + out])
            with open(os.path.join(out, "manifest.json")) as f:
                layers = json.load(f)["layers"]
            for layer in layers:
                with open(os.path.join(out, layer["digest"].split(":")[1]), "rb") as f:
                    self.assertEqual(sha256(f.read()), layer["digest"])
            with open(os.path.join(self.lb.dir, "access.log")) as f:
                log = [line.split() for line in f]
            # skopeo's session (POST, PATCH, PUT) went to more than one instance
            upstreams = {row[-1] for row in log if row[1].startswith("/v2/multi/app/blobs/uploads/")}
            self.assertGreaterEqual(len(upstreams), 2, log)
            if have("podman"):
                pm = podman_cmd(tmp)
                run(pm + ["login", "--tls-verify=false", "-u", "admin", "-p", ADMIN_CREDS.split(":", 1)[1], self.lb.host])
                run(pm + ["pull", "--tls-verify=false", "%s/multi/app:v1" % self.lb.host])
                run(pm + ["tag", "%s/multi/app:v1" % self.lb.host, "%s/multi/copy:v2" % self.lb.host])
                run(pm + ["push", "--tls-verify=false", "%s/multi/copy:v2" % self.lb.host])
                for n in self.nodes:
                    st, _, _ = n.request("HEAD", "/v2/multi/copy/manifests/v2", headers={"Accept": ACCEPT_ALL})
                    self.assertEqual(st, 200)
        finally:
            subprocess.run(["chmod", "-R", "u+rwX", tmp], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)


class ManyGc(NodeLogsOnFailure, unittest.TestCase):
    """GC on the s3 driver with two berthd on one database and bucket: the instance running it is killed with
    SIGKILL in the blob sweep, the other takes the run over when its lease runs out and finishes it where it
    stopped; nothing referenced is lost (every blob byte-verified), the garbage objects are gone from the bucket."""
    N = 1500  # garbage rows (no objects) besides the real garbage: a sweep long enough to be killed in the middle
    ENV = {"BERTH_GC_GRACE_SECONDS": "0", "BERTH_GC_LEASE_SECONDS": "2", "BERTH_GC_BATCH": "20"}

    def setUp(self):
        a = Berthd(env=self.ENV).start().project("gc")
        self.nodes = [a, Berthd(dbname=a.dbname, storage=a.storage, env=self.ENV).start()]

    def tearDown(self):
        for n in self.nodes:
            n.cleanup()


    def gc_run(self, node, rid):
        st, _, body = node.request("GET", "/api/v2.0/system/gc/%d" % rid)
        self.assertEqual(st, 200, body)
        return json.loads(body)

    def test_kill_9_during_gc_another_instance_finishes_it(self):
        a, b = self.nodes
        keep = []
        for i in range(3):  # referenced: three images of two 300 KiB layers each (their config shared)
            keep.append(a.push_image("gc/keep", "v%d" % i, layers=2, size=300 * 1024, seed=100 + i))
        garbage = [a.push_blob("gc/keep", os.urandom(4096 + i)) for i in range(30)]  # unreferenced, real objects
        salt = os.urandom(4).hex()
        psql("WITH g AS (SELECT 'sha256:' || encode(sha256(convert_to('garbage-%s-' || i, 'UTF8')), 'hex') AS d, "
             "length('garbage-%s-' || i) AS s FROM generate_series(0, %d) i), b AS (INSERT INTO blobs (digest, size, created_at) "
             "SELECT d, s, now() - interval '1 day' FROM g) INSERT INTO repository_blobs (repository_id, digest, created_at) "
             "SELECT (SELECT id FROM repositories WHERE name = 'gc/keep'), d, now() - interval '1 day' FROM g"
             % (salt, salt, self.N - 1), a.dbname)
        for d in garbage[:3]:
            self.assertTrue(a.has_blob(d), d)
        referenced = {}
        for n in range(3):
            st, _, body = a.request("GET", "/v2/gc/keep/manifests/v%d" % n, headers={"Accept": ACCEPT_ALL})
            m = json.loads(body)
            for l in m["layers"] + [m["config"]]:
                referenced[l["digest"]] = None
        st, h, body = a.request("POST", "/api/v2.0/system/gc/schedule", json.dumps(
            {"schedule": {"type": "Manual"}, "parameters": {"delete_untagged": False, "dry_run": False}}).encode(),
                                {"Content-Type": "application/json"})
        self.assertEqual(st, 201, body)
        rid = int(h["location"].rsplit("/", 1)[1])
        deadline = time.time() + 60
        while True:  # in the blob sweep, after some rows went and before all did
            p = self.gc_run(a, rid)["progress"]
            if p["phase"] == 6 and p["blobs_deleted"] > 0 or p["phase"] > 6:
                break
            self.assertLess(time.time(), deadline)
            time.sleep(0.01)
        a.stop(signal.SIGKILL)
        t_kill = time.time()
        killed = json.loads(psql("SELECT row_to_json(r) FROM gc_runs r WHERE id = %d" % rid, a.dbname))
        self.assertEqual(killed["status"], "Running")
        self.assertLess(killed["blobs_deleted"], self.N, "the run ended before the kill: raise N")
        time.sleep(2.2)  # the lease; then a run asked for on b (409: one is active) makes b's collector look now
        st, _, body = b.request("POST", "/api/v2.0/system/gc/schedule", json.dumps(
            {"schedule": {"type": "Manual"}, "parameters": {"delete_untagged": False, "dry_run": False}}).encode(),
                                {"Content-Type": "application/json"})
        self.assertEqual(st, 409, body)
        deadline = time.time() + 30
        while True:
            r = self.gc_run(b, rid)
            if r["job_status"] in ("Success", "Error", "Stopped"):
                break
            self.assertLess(time.time(), deadline, r)
            time.sleep(0.1)
        st, _, log = b.request("GET", "/api/v2.0/system/gc/%d/log" % rid)
        log = log.decode()
        print("\ngc run killed with %d of %d blob rows deleted; finished by the other instance %.1f s after the kill"
              % (killed["blobs_deleted"], self.N + len(garbage), time.time() - t_kill))
        self.assertEqual(r["job_status"], "Success", log)
        self.assertEqual(log.count("started:"), 1, log)  # continued, not started over
        self.assertEqual(r["progress"]["blobs_deleted"], self.N + len(garbage), log)
        for d in garbage:  # gone from the bucket, rows deleted before the kill included (the orphan sweep)
            self.assertFalse(b.has_blob(d), d)
        for n in range(3):
            st, h, body = b.request("GET", "/v2/gc/keep/manifests/v%d" % n, headers={"Accept": ACCEPT_ALL})
            self.assertEqual((st, h["docker-content-digest"], body), (200, keep[n][0], keep[n][1]))
        for d in referenced:  # every referenced blob whole
            st, _, body = b.request("GET", "/v2/gc/keep/blobs/" + d)
            self.assertEqual((st, sha256(body)), (200, d))
        a.start()  # the killed instance comes back to a finished run
        self.assertEqual(self.gc_run(a, rid)["job_status"], "Success")

if __name__ == "__main__":
    main()
