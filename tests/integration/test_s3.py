"""The s3 storage driver behind real berthd instances on the test Ceph gateway (fixture ceph, deploy/berth-ceph).

One chunked upload continued by another berthd sharing the database and the bucket; blobs pulled through the
edge from presigned URLs (Range, HEAD, digest headers) or redirected with storage.s3.redirect; the gateway paused
(a relay in front of it stops relaying, as a SIGSTOPped gateway stops answering: 503 with a clear error, no
half-visible blob, recovery once resumed); start-up refused with one line
for a missing bucket or wrong credentials; abandoned sessions' multipart uploads aborted by the janitor.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import BERTHD, Berthd, BerthTestCase, PausableRelay, error_code, free_port, main, sha256

os.environ["BERTH_TEST_STORAGE_DRIVER"] = "s3"  # this suite is about the s3 driver: every Berthd here uses it


class S3(BerthTestCase):
    PROJECTS = ("s3",)

    def test_chunked_upload_across_instances(self):
        # a second berthd on the same database and bucket (same storage directory: same key prefix)
        other = Berthd(dbname=self.b.dbname, storage=self.b.storage).start()
        try:
            data = os.urandom(13 * 2 ** 20 + 77)  # parts of 5 MiB: PATCHes end inside parts
            d = sha256(data)
            st, h, _ = self.b.request("POST", "/v2/s3/multi/blobs/uploads/")
            self.assertEqual(st, 202)
            loc = h["location"]
            cuts = [0, 3 * 2 ** 20 + 5, 9 * 2 ** 20 + 1, len(data)]
            for i in range(3):
                server = (self.b, other)[i % 2]  # alternate instances
                piece = data[cuts[i]:cuts[i + 1]]
                st, h, body = server.request("PATCH", loc, piece, {"Content-Range": "%d-%d" % (cuts[i], cuts[i + 1] - 1)})
                self.assertEqual(st, 202, body)
                self.assertEqual(h["range"], "0-%d" % (cuts[i + 1] - 1))
                loc = h["location"]
            st, h, _ = other.request("GET", loc)
            self.assertEqual((st, h["range"]), (204, "0-%d" % (len(data) - 1)), "another instance reports the offset")
            st, h, body = self.b.request("PUT", loc + "?digest=" + d)  # the running hash of the last PATCH is not here
            self.assertEqual(st, 201, body)
            for server in (self.b, other):
                st, h, got = server.request("GET", "/v2/s3/multi/blobs/" + d)
                self.assertEqual((st, h["docker-content-digest"]), (200, d))
                self.assertEqual(hashlib.sha256(got).hexdigest(), d[7:])
            self.assertEqual(self.b.upload_ids(), [], "no session bytes left in the bucket")
        finally:
            other.cleanup()

    def test_wrong_digest_after_instance_switch(self):
        other = Berthd(dbname=self.b.dbname, storage=self.b.storage).start()
        try:
            data = os.urandom(6 * 2 ** 20)
            st, h, _ = self.b.request("POST", "/v2/s3/bad/blobs/uploads/")
            st, h, _ = self.b.request("PATCH", h["location"], data, {"Content-Range": "0-%d" % (len(data) - 1)})
            self.assertEqual(st, 202)
            wrong = sha256(b"not these bytes")
            st, _, body = other.request("PUT", h["location"] + "?digest=" + wrong)
            self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"), "read back and refused")
            st, _, _ = self.b.request("HEAD", "/v2/s3/bad/blobs/" + wrong)
            self.assertEqual(st, 404)
        finally:
            other.cleanup()

    def test_range_head_and_digest_through_the_edge(self):
        data = bytes(range(256)) * 4096
        d = self.b.push_blob("s3/range", data)
        st, h, got = self.b.request("GET", "/v2/s3/range/blobs/" + d, headers={"Range": "bytes=1000-1999"})
        self.assertEqual((st, got), (206, data[1000:2000]))
        self.assertEqual(h["content-range"], "bytes 1000-1999/%d" % len(data))
        self.assertEqual(h["docker-content-digest"], d)
        st, h, got = self.b.request("HEAD", "/v2/s3/range/blobs/" + d)
        self.assertEqual((st, int(h["content-length"]), got), (200, len(data), b""))
        self.assertEqual(h["docker-content-digest"], d)
        self.assertNotIn("x-amz-request-id", h)
        # the client's credentials never reach the gateway, and its answer never leaks a presigned URL
        self.assertFalse(any("X-Amz" in v for v in h.values()), h)

    def test_redirect(self):
        b = Berthd(dbname=self.b.dbname, storage=self.b.storage, env={"BERTH_S3_REDIRECT": "true"}).start()
        try:
            data = os.urandom(4096)
            d = b.push_blob("s3/redir", data)
            st, h, _ = b.request("GET", "/v2/s3/redir/blobs/" + d)
            self.assertEqual(st, 307)
            self.assertIn("X-Amz-Signature=", h["location"])
            got = subprocess.run(["curl", "-sf", h["location"]], capture_output=True, check=True).stdout
            self.assertEqual(got, data, "the presigned URL serves the blob to a client that signs nothing")
        finally:
            b.cleanup()

    def paused_gateway(self, env=None):
        """A berthd whose gateway is behind a relay of its own (paused, the shared gateway goes on serving the
        suites that run beside this one)."""
        relay = PausableRelay(self.b.env["BERTH_S3_ENDPOINT"])
        self.addCleanup(relay.close)
        b = Berthd(dbname=self.b.dbname, storage=self.b.storage, env=dict(env or {}, BERTH_S3_ENDPOINT=relay.url)).start()
        self.addCleanup(b.cleanup)
        return relay, b

    def test_gateway_paused(self):
        relay, b = self.paused_gateway()
        data = os.urandom(100000)
        d = b.push_blob("s3/pause", data)
        relay.pause()
        try:
            t0 = time.time()
            st, h, body = b.request("GET", "/v2/s3/pause/blobs/" + d, timeout=60)
            t_get = time.time() - t0
            self.assertEqual(st, 503, body)
            self.assertEqual(error_code(body), "UNAVAILABLE")
            self.assertNotIn("X-Amz-Signature", b.logs(), "nginx's error line would name the presigned URL")
            new = os.urandom(50000)
            t0 = time.time()
            st, h, body = b.request("POST", "/v2/s3/pause/blobs/uploads/?digest=" + sha256(new), new, timeout=60)
            t_put = time.time() - t0
            self.assertEqual(st, 503, body)
            self.assertIn("object store", json.loads(body)["errors"][0]["message"] + b.logs())
            print("\ngateway paused: blob GET 503 after %.1f s, monolithic upload 503 after %.1f s (storage.s3.timeout_ms %s)"
                  % (t_get, t_put, b.env["BERTH_S3_TIMEOUT_MS"]))
        finally:
            relay.resume()
        st, _, _ = b.request("HEAD", "/v2/s3/pause/blobs/" + sha256(new))
        self.assertEqual(st, 404, "no half-visible blob")
        st, _, got = b.request("GET", "/v2/s3/pause/blobs/" + d)
        self.assertEqual((st, got), (200, data), "recovered once resumed")
        self.assertEqual(b.push_blob("s3/pause", new), sha256(new))

    def test_edge_keeps_what_it_sent(self):
        """storage.s3.edge_cache_bytes (on by default): the edge keeps the slices it proxied, so a blob it sent once is
        sent again with the gateway paused — every byte, any Range, digest headers — while berthd still decides each
        request: a caller without access, a deleted blob and a blob never pulled get no bytes."""
        relay, b = self.paused_gateway()
        slice_ = 32 * 2 ** 20
        data = os.urandom(2 * slice_ + 12345)  # three slices, the last short
        d = b.push_blob("s3/kept", data)
        never = b.push_blob("s3/kept", os.urandom(5000))
        empty = b.push_blob("s3/kept", b"")
        st, h, got = b.request("GET", "/v2/s3/kept/blobs/" + d)
        self.assertEqual((st, sha256(got)), (200, d))
        st, _, _ = b.request("POST", "/api/v2.0/users", json.dumps({
            "username": "outsider", "email": "o@example.com", "realname": "O", "password": "Outsider123"}).encode(),
            {"Content-Type": "application/json"})
        self.assertIn(st, (201, 409))
        outsider = "Basic " + __import__("base64").b64encode(b"outsider:Outsider123").decode()
        relay.pause()
        try:
            st, h, got = b.request("GET", "/v2/s3/kept/blobs/" + d, timeout=60)
            self.assertEqual((st, sha256(got), h["docker-content-digest"], h["content-type"]),
                             (200, d, d, "application/octet-stream"), "sent by the edge, the gateway paused")
            lo, hi = slice_ - 10, 2 * slice_ + 9  # across both slice boundaries
            st, h, got = b.request("GET", "/v2/s3/kept/blobs/" + d, headers={"Range": "bytes=%d-%d" % (lo, hi)}, timeout=60)
            self.assertEqual((st, h["content-range"], got == data[lo:hi + 1]), (206, "bytes %d-%d/%d" % (lo, hi, len(data)), True))
            st, h, body = b.request("GET", "/v2/s3/kept/blobs/" + d, headers={"Range": "bytes=%d-" % len(data)}, timeout=60)
            self.assertEqual((st, error_code(body)), (416, "RANGE_INVALID"), "past the end: an OCI error body, not nginx's page")
            st, h, got = b.request("GET", "/v2/s3/kept/blobs/" + empty, timeout=60)
            self.assertEqual((st, got, h["docker-content-digest"]), (200, b"", empty), "nor does a blob of no bytes")
            st, _, body = b.request("GET", "/v2/s3/kept/blobs/" + never, timeout=60)
            self.assertEqual((st, error_code(body)), (503, "UNAVAILABLE"), "a blob the edge never sent needs the gateway")
            for auth in (outsider, None):
                st, _, body = b.request("GET", "/v2/s3/kept/blobs/" + d, auth=auth, timeout=60)
                self.assertIn(st, (401, 403, 404), "berthd decides before the edge sends what it keeps")
                self.assertNotIn(data[:64], body)
            st, _, _ = b.request("DELETE", "/v2/s3/kept/blobs/" + d, timeout=60)
            self.assertEqual(st, 202)
            st, _, body = b.request("GET", "/v2/s3/kept/blobs/" + d, timeout=60)
            self.assertEqual((st, error_code(body)), (404, "BLOB_UNKNOWN"), "deleted: the kept slices are not sent")
        finally:
            relay.resume()
        kept = [f for _, _, fs in os.walk(os.path.join(b.env["BERTH_RUN_DIR"], "blobcache")) for f in fs]
        self.assertEqual(len(kept), 3, "one file per slice: %s" % kept)

    def test_collected_blobs_leave_the_edge(self):
        """A blob deleted and collected: its kept slices leave the edge's disk at the janitor's next pass (each
        instance reads the key in its cache files and asks the database), the slices of a blob still in use stay."""
        b = Berthd(dbname=self.b.dbname, storage=self.b.storage,
                   env={"BERTH_UPLOAD_PURGE_INTERVAL": "1", "BERTH_GC_GRACE_SECONDS": "0"}).start()
        self.addCleanup(b.cleanup)
        gone = b.push_blob("s3/collect", os.urandom(40 * 2 ** 20))  # two slices, no manifest: garbage
        _, raw = b.push_image("s3/collect", "v1", layers=1, size=5000)
        kept = json.loads(raw)["layers"][0]["digest"]
        for d in (gone, kept):
            self.assertEqual(b.request("GET", "/v2/s3/collect/blobs/" + d)[0], 200)

        def slices():
            out = {}
            for top, _, files in os.walk(os.path.join(b.env["BERTH_RUN_DIR"], "blobcache")):
                for f in files:
                    with open(os.path.join(top, f), "rb") as fh:
                        m = re.search(rb"\nKEY: [^\n]*/blobs/sha256/[0-9a-f]{2}/([0-9a-f]{64})bytes=", fh.read(4096))
                    if m:
                        out.setdefault("sha256:" + m.group(1).decode(), []).append(f)
            return out
        self.assertEqual((len(slices().get(gone, [])), len(slices().get(kept, []))), (2, 1))
        run = __import__("test_gc").run_gc(b)
        self.assertEqual(run["job_status"], "Success", run)
        self.assertEqual(b.request("HEAD", "/v2/s3/collect/blobs/" + gone)[0], 404)
        deadline = time.time() + 15
        while gone in slices() and time.time() < deadline:
            time.sleep(0.2)
        self.assertNotIn(gone, slices(), "collected: its slices are gone from the edge's disk")
        self.assertEqual(len(slices().get(kept, [])), 1, "a blob in use keeps its slice")
        st, _, got = b.request("GET", "/v2/s3/collect/blobs/" + kept)
        self.assertEqual((st, sha256(got)), (200, kept))
        self.assertIn("emptied 2 kept slice(s)", b.logs())
        self.assertNotIn("[crit]", b.logs())

    def test_waiters_share_a_slow_slice(self):
        """Clients asking at once for a slice the edge is still fetching wait for it, even when the gateway takes
        longer than nginx's default lock timeout (5 s) to send it: one gateway GET, not one per client."""
        relay, b = self.paused_gateway()
        data = os.urandom(6 * 2 ** 20)  # one slice
        d = b.push_blob("s3/slow", data)
        relay.rate = 800 * 1024  # the slice takes ~7.7 s
        before = relay.accepted
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            got = list(ex.map(lambda _: b.request("GET", "/v2/s3/slow/blobs/" + d, timeout=120), range(6)))
        relay.rate = None
        self.assertEqual([(st, body == data) for st, _, body in got], [(200, True)] * 6)
        self.assertEqual(relay.accepted - before, 1, "one gateway GET for six clients")

    def test_head_asks_the_gateway(self):
        """An object lost behind Berth's back (a bucket restored from backup, an operator's delete): HEAD says 404 as
        GET does, so a client that HEADs before pushing uploads it again and the blob is whole again."""
        data = os.urandom(150000)
        d = self.b.push_blob("s3/lost", data)
        st, h, _ = self.b.request("HEAD", "/v2/s3/lost/blobs/" + d)
        self.assertEqual((st, int(h["content-length"]), h["docker-content-digest"]), (200, len(data), d))
        self.b.remove_blob(d)
        st, _, _ = self.b.request("HEAD", "/v2/s3/lost/blobs/" + d)
        self.assertEqual(st, 404, "the gateway has no object")
        st, _, body = self.b.request("GET", "/v2/s3/lost/blobs/" + d)
        self.assertEqual((st, error_code(body)), (404, "BLOB_UNKNOWN"))
        self.assertEqual(self.b.push_blob("s3/lost", data), d)
        st, _, got = self.b.request("GET", "/v2/s3/lost/blobs/" + d)
        self.assertEqual((st, got), (200, data), "pushed again, whole again")

    def test_edge_cache_off(self):
        relay, b = self.paused_gateway({"BERTH_S3_EDGE_CACHE": "0"})
        data = os.urandom(100000)
        d = b.push_blob("s3/unkept", data)
        st, _, got = b.request("GET", "/v2/s3/unkept/blobs/" + d)
        self.assertEqual((st, got), (200, data))
        relay.pause()
        try:
            st, _, body = b.request("GET", "/v2/s3/unkept/blobs/" + d, timeout=60)
        finally:
            relay.resume()
        self.assertEqual((st, error_code(body)), (503, "UNAVAILABLE"), "storage.s3.edge_cache_bytes 0: every GET asks the gateway")
        with open(os.path.join(b.env["BERTH_RUN_DIR"], "nginx.conf")) as f:
            self.assertNotIn("proxy_cache", f.read())

    def test_health_asks_the_bucket(self):
        """GET /api/v2.0/health (deploy/k8s's readiness probe) reports the bucket: healthy while it answers, 503 with
        the reason while the gateway is paused, healthy again once it is back."""
        relay, b = self.paused_gateway()
        st, _, body = b.request("GET", "/api/v2.0/health", auth=None)
        comp = {c["name"]: c for c in json.loads(body)["components"]}
        self.assertEqual((st, json.loads(body)["status"], comp["storage"]["status"]), (200, "healthy", "healthy"), body)
        self.assertNotIn("free_bytes", comp["storage"], "an object store has no free-space figures")
        relay.pause()
        try:
            st, h, body = b.request("GET", "/api/v2.0/health", auth=None, timeout=60)
        finally:
            relay.resume()
        comp = {c["name"]: c for c in json.loads(body)["components"]}
        self.assertEqual((st, comp["storage"]["status"], comp["database"]["status"]), (503, "unhealthy", "healthy"), body)
        self.assertIn("retry-after", h)
        self.assertTrue(comp["storage"].get("error"), body)
        for _ in range(50):
            st, _, body = b.request("GET", "/api/v2.0/health", auth=None)
            if st == 200:
                break
            time.sleep(0.2)
        self.assertEqual((st, json.loads(body)["status"]), (200, "healthy"), "ready again once the gateway answers")

    def test_janitor_aborts_abandoned_multipart_uploads(self):
        b = Berthd(env={"BERTH_UPLOAD_MAX_AGE": "1", "BERTH_UPLOAD_PURGE_INTERVAL": "1"}).start()
        try:
            b.project("s3")
            st, h, _ = b.request("POST", "/v2/s3/gone/blobs/uploads/")
            data = os.urandom(6 * 2 ** 20)  # one full part: a multipart upload is running
            st, h, _ = b.request("PATCH", h["location"], data, {"Content-Range": "0-%d" % (len(data) - 1)})
            self.assertEqual(st, 202)
            def running():
                return len([k for k in b.multipart_uploads() if "/uploads/" in k])
            self.assertEqual(running() >= 1 or None, True, "the session's multipart upload is running")
            deadline = time.time() + 20
            while time.time() < deadline and (running() or b.upload_ids()):
                time.sleep(0.5)
            self.assertEqual((running(), b.upload_ids()), (0, []), "aborted and removed by the janitor")
        finally:
            b.cleanup()


class StartUp(unittest.TestCase):
    def refused(self, env):
        b = Berthd(env=env)
        try:
            b.start(wait=False)
            b.proc.wait(timeout=30)
            return b.proc.returncode, b.logs()
        finally:
            b.cleanup()

    def test_missing_bucket(self):
        rc, log = self.refused({"BERTH_S3_BUCKET": "no-such-bucket"})
        self.assertNotEqual(rc, 0)
        self.assertRegex(log, r"berthd: storage: bucket no-such-bucket does not exist at http://127\.0\.0\.1:\d+ \(create it first\)\n")

    def test_wrong_credentials(self):
        rc, log = self.refused({"BERTH_S3_SECRET_KEY": "wrong" * 8})
        self.assertNotEqual(rc, 0)
        self.assertIn("refuses the credentials for bucket", log)
        self.assertNotIn("wrong" * 8, log, "the secret is not logged")

    def test_no_secret(self):
        rc, log = self.refused({"BERTH_S3_SECRET_KEY": "", "BERTH_S3_SECRET_KEY_FILE": "/nonexistent"})
        self.assertNotEqual(rc, 0)
        self.assertIn("storage.s3.secret_key_file /nonexistent cannot be read", log)

    def test_no_shared_keys(self):
        """Instances share the token and replication keys from a Secret: with s3 a missing one stops the start with
        one line naming the key that provides it, and nothing is generated in its place."""
        empty = tempfile.mkdtemp(prefix="berth-nokeys-")
        try:
            rc, log = self.refused({"BERTH_KEYS_DIR": empty})
            self.assertNotEqual(rc, 0)
            self.assertRegex(log, r"berthd: storage.driver s3 needs the shared token signing key: %s/token.key is missing; "
                             r"set auth.keys_dir \(BERTH_KEYS_DIR\) to the directory of the Secret" % re.escape(empty))
            self.assertEqual(os.listdir(empty), [], "no key generated")
            subprocess.run([BERTHD, "init-keys", empty], check=True, capture_output=True)
            os.unlink(os.path.join(empty, "replication.key"))
            rc, log = self.refused({"BERTH_KEYS_DIR": empty})
            self.assertNotEqual(rc, 0)
            self.assertIn("berthd: storage.driver s3 needs the shared replication key: %s/replication.key is missing; set "
                          "replication.key_file (BERTH_REPLICATION_KEY_FILE)" % empty, log)
            self.assertEqual(sorted(os.listdir(empty)), ["token.crt", "token.key"], "no replication key generated")
            self.assertEqual(log.count("\n"), 1, "one line: " + log)
        finally:
            shutil.rmtree(empty, ignore_errors=True)

    def test_keys_from_a_secret_are_shared(self):
        """Two instances given the same keys directory (as a Secret mount) accept each other's tokens."""
        keys = tempfile.mkdtemp(prefix="berth-keys-")
        a = b = None
        try:
            subprocess.run([BERTHD, "init-keys", keys], check=True, capture_output=True)
            a = Berthd(env={"BERTH_KEYS_DIR": keys}).start()
            b = Berthd(dbname=a.dbname, storage=a.storage, env={"BERTH_KEYS_DIR": keys}).start()
            st, _, body = a.request("GET", "/service/token?scope=registry:catalog:*")
            self.assertEqual(st, 200)
            token = json.loads(body)["token"]
            st, _, _ = b.request("GET", "/v2/_catalog", headers={"Authorization": "Bearer " + token})
            self.assertEqual(st, 200, "a token from one instance is good on the other")
        finally:
            for x in (a, b):
                if x is not None:
                    x.cleanup()
            shutil.rmtree(keys, ignore_errors=True)


class GatewayTls(unittest.TestCase):
    """An https gateway (nginx terminating TLS in front of the test RGW): berthd's S3 client and its edge both verify
    it with storage.s3.ca_file. Once the gateway shows a certificate the CA does not vouch for, the edge refuses to
    stream from it (503), as berthd's client refuses it (nginx's default would verify nothing)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-s3tls-")
        self.nginx = None
        self.b = None

    def tearDown(self):
        if self.b is not None:
            self.b.cleanup()
        if self.nginx is not None:
            self.nginx.terminate()
            self.nginx.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cert(self, name):
        crt, key = os.path.join(self.tmp, name + ".crt"), os.path.join(self.tmp, name + ".key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=DNS:127.0.0.1,IP:127.0.0.1", "-keyout", key, "-out", crt],
                       check=True, capture_output=True)
        return crt, key

    def terminate_tls(self, port, crt, key, upstream):
        """nginx on 127.0.0.1:port with this certificate, proxying to the gateway; a running one reloads."""
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write("%sdaemon off; pid %s/nginx.pid; error_log stderr error; events {}\n"
                    "http { access_log off; client_body_temp_path %s; proxy_temp_path %s;\n"
                    "  server { listen 127.0.0.1:%d ssl; ssl_certificate %s; ssl_certificate_key %s;\n"
                    "    client_max_body_size 0; proxy_request_buffering off; proxy_buffering off;\n"
                    "    location / { proxy_pass %s; proxy_http_version 1.1; proxy_set_header Host $http_host; } } }\n"
                    % ("user root;\n" if os.geteuid() == 0 else "", self.tmp, self.tmp, self.tmp, port, crt, key, upstream))
        if self.nginx is None:
            self.nginx = subprocess.Popen(["nginx", "-p", self.tmp, "-c", conf])
        else:
            subprocess.run(["nginx", "-p", self.tmp, "-c", conf, "-s", "reload"], check=True)
            time.sleep(1.0)  # the old workers finish
        for _ in range(100):
            if subprocess.run(["curl", "-sk", "-o", "/dev/null", "https://127.0.0.1:%d/" % port]).returncode == 0:
                return
            time.sleep(0.05)
        self.fail("the TLS terminator does not answer")

    def test_edge_verifies_an_https_gateway(self):
        if shutil.which("nginx") is None or shutil.which("openssl") is None:
            self.skipTest("nginx or openssl missing")
        port = free_port()
        crt, key = self.cert("good")
        probe = Berthd()  # the test gateway's settings
        upstream = probe.env["BERTH_S3_ENDPOINT"]
        probe.cleanup()
        self.terminate_tls(port, crt, key, upstream)
        self.b = Berthd(env={"BERTH_S3_ENDPOINT": "https://127.0.0.1:%d" % port, "BERTH_S3_CA_FILE": crt}).start()
        self.b.project("s3")
        data = os.urandom(1 << 20)
        d = self.b.push_blob("s3/tls", data)
        unpulled = self.b.push_blob("s3/tls", os.urandom(1 << 20))
        st, _, body = self.b.request("GET", "/v2/s3/tls/blobs/" + d)
        self.assertEqual((st, sha256(body)), (200, d), "pulled through the edge from the https gateway")
        # the gateway's name now answers with a certificate the configured CA did not sign (a blob the edge has not
        # kept: it asks the gateway)
        self.terminate_tls(port, *self.cert("other"), upstream)
        st, h, body = self.b.request("GET", "/v2/s3/tls/blobs/" + unpulled)
        self.assertEqual(st, 503, body[:200])
        self.assertIn(b"the object store does not answer", body, "the edge refused the gateway (not berthd)")
        self.assertNotEqual(sha256(body), unpulled)
        # storage.s3.tls_verify false turns it off for the edge too
        lax = Berthd(dbname=self.b.dbname, storage=self.b.storage, env={"BERTH_S3_ENDPOINT": self.b.env["BERTH_S3_ENDPOINT"],
                                                                       "BERTH_S3_TLS_VERIFY": "false"})
        try:
            lax.start()
            st, _, body = lax.request("GET", "/v2/s3/tls/blobs/" + d)
            self.assertEqual((st, sha256(body)), (200, d))
        finally:
            lax.cleanup()


class TestGateway(unittest.TestCase):
    """The test gateway itself (deploy/berth-ceph): a deleted object's data is reclaimed within seconds. RGW's default
    keeps it for 2 h (rgw gc obj min wait), so repeated 1 GiB runs filled the in-memory OSD and then every s3 request
    hung."""

    def test_deleted_object_data_is_reclaimed_in_seconds(self):
        d = os.environ.get("BERTH_TEST_CEPH_DIR", "")
        conf = os.path.join(d, "ceph.conf")
        if not os.path.exists(conf):
            self.skipTest("no test Ceph (%s); CTest's fixture ceph starts one" % conf)
        with open(os.path.join(d, "s3.env")) as f:
            e = dict(line.strip().split("=", 1) for line in f if "=" in line)
        key = "gc-check/" + os.urandom(8).hex()
        url = "%s/%s/%s" % (e["BERTH_S3_ENDPOINT"], e["BERTH_S3_BUCKET"], key)
        auth = ["--aws-sigv4", "aws:amz:%s:s3" % e["BERTH_S3_REGION"], "--user", "%s:%s" % (e["BERTH_S3_ACCESS_KEY"], e["BERTH_S3_SECRET_KEY"]),
                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
        # 12 MiB: a 4 MiB head object and two 4 MiB tail objects in RADOS; a delete removes the head at once and
        # leaves the tail to RGW's garbage collection
        with tempfile.NamedTemporaryFile() as f:  # a file: RGW refuses a chunked body (411)
            f.write(os.urandom(12 << 20))
            f.flush()
            subprocess.run(["curl", "-sf", "--max-time", "60", "-T", f.name, *auth, url], check=True)
        stat = subprocess.run(["timeout", "20", "radosgw-admin", "-c", conf, "object", "stat", "--bucket", e["BERTH_S3_BUCKET"], "--object", key],
                              capture_output=True, check=True).stdout
        # the dump carries some attributes' raw bytes (not always UTF-8); the manifest's prefix is ASCII
        tail = "__shadow_" + json.loads(stat.decode("utf-8", "replace"))["manifest"]["prefix"]

        def tails():
            out = subprocess.run(["timeout", "20", "rados", "-c", conf, "-p", "default.rgw.buckets.data", "ls"], capture_output=True,
                                 text=True, check=True).stdout
            return [o for o in out.split() if tail in o]
        self.assertEqual(len(tails()), 2)
        subprocess.run(["curl", "-sf", "--max-time", "20", "-X", "DELETE", *auth, url], check=True)
        t0 = time.time()
        while tails() and time.time() - t0 < 40:
            time.sleep(0.5)
        self.assertEqual(tails(), [], "the deleted object's tail is still in RADOS %.0f s after the delete" % (time.time() - t0))
        print("\ntail of a deleted 12 MiB object reclaimed %.1f s after the delete" % (time.time() - t0))


if __name__ == "__main__":
    main()
