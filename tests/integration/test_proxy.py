"""Proxy-cache projects (issue #14): a project created with a registry_id pulls what it lacks from that endpoint,
stores it and serves it; later pulls are local. Upstreams are a stock Distribution (`docker-registry`) behind a
small forwarding proxy written here, which counts what reaches the upstream (its access log) and can answer 503 or
429, drop connections, or flip a byte of blob bodies; and a second Berth (token dance, its own access log)."""
import collections
import gzip
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import ACCEPT_ALL, ADMIN_AUTH, ADMIN_CREDS, ADMIN_PASSWORD, OCI_CONFIG, OCI_INDEX, OCI_LAYER, OCI_MANIFEST, BerthTestCase, Berthd, error_code, podman_cmd, \
    eventually, make_layer, free_port, main, psql, sha256

TTL = 3  # proxy.manifest_ttl for these tests, seconds
LAYER_MIB = int(os.environ.get("BERTH_TEST_PROXY_LAYER_MIB", "64"))
CLIENTS = int(os.environ.get("BERTH_TEST_PROXY_CLIENTS", "200"))


class Upstream:
    """A forwarding proxy in front of a registry: records (method, path, status) of every request it forwards and
    misbehaves on demand (mode: pass, 503, 429, close, corrupt)."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.mode = "pass"
        self.bearer = False  # require a token from /token (the Docker token dance), as Docker Hub does
        self.tokens, self.valid = [], set()
        self.log = []
        self.huge_written = 0
        self.mu = threading.Lock()
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self, method):
                with up.mu:
                    up.log.append((method, self.path))
                    mode = up.mode
                if self.path.startswith("/token"):  # the token service of "bearer" mode: one token per request
                    with up.mu:
                        up.tokens.append(self.path)
                        tok = "t%d" % len(up.tokens)
                        up.valid.add(tok)
                    body = json.dumps({"token": tok, "expires_in": 300}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if up.bearer and self.path != "/v2/" and self.headers.get("Authorization", "")[7:] not in up.valid:
                    repo = self.path[4:].split("/manifests/")[0].split("/blobs/")[0]
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Bearer realm="http://127.0.0.1:%d/token",service="up",scope="repository:%s:pull"'
                                     % (up.port, repo))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if mode == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if mode == "huge-manifest" and "/manifests/" in self.path and method == "GET":
                    # 32 MiB of "manifest": how much of it berthd reads before it hangs up is counted
                    self.send_response(200)
                    self.send_header("Content-Type", OCI_MANIFEST)
                    self.send_header("Content-Length", str(32 << 20))
                    self.end_headers()
                    try:
                        for _ in range(32):
                            self.wfile.write(b" " * (1 << 20))
                            with up.mu:
                                up.huge_written += 1 << 20
                    except OSError:
                        pass
                    return
                if mode == "slow":  # every answer a second late, so fetches from two berthd overlap
                    time.sleep(1.0)
                if mode in ("503", "429"):
                    self.send_response(int(mode))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = None
                if self.headers.get("Content-Length"):
                    body = self.rfile.read(int(self.headers["Content-Length"]))
                c = http.client.HTTPConnection("127.0.0.1", up.target_port, timeout=60)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "authorization")}
                c.request(method, self.path, body=body, headers=hdrs)
                r = c.getresponse()
                data = r.read()
                c.close()
                if mode in ("corrupt", "trickle-corrupt") and "/blobs/" in self.path and r.status == 200 and data:
                    data = data[:-1] + bytes([data[-1] ^ 0xFF])
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                # a HEAD answer has no body: its length is the upstream's
                self.send_header("Content-Length", r.getheader("Content-Length", "0") if method == "HEAD" else str(len(data)))
                self.end_headers()
                if method == "HEAD":
                    return
                if mode.startswith("trickle") and "/blobs/" in self.path:  # 16 pieces, 0.15 s apart
                    step = len(data) // 16 + 1
                    for off in range(0, len(data), step):
                        self.wfile.write(data[off:off + step])
                        self.wfile.flush()
                        time.sleep(0.15)
                    return
                self.wfile.write(data)

            def do_GET(self):
                self.forward("GET")

            def do_HEAD(self):
                self.forward("HEAD")

            def do_POST(self):
                self.forward("POST")

            def do_PUT(self):
                self.forward("PUT")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, method, fragment):
        with self.mu:
            return sum(1 for m, p in self.log if m == method and fragment in p)

    def total(self):
        with self.mu:
            return len(self.log)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def dist_request(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def dist_blob(port, repo, data):
    d = sha256(data)
    st, h, _ = dist_request(port, "POST", "/v2/%s/blobs/uploads/" % repo)
    assert st == 202, st
    loc = h["location"]
    loc = loc[loc.index("/v2/"):] if "://" in loc else loc
    st, _, body = dist_request(port, "PUT", loc + ("&" if "?" in loc else "?") + "digest=" + d, data,
                               {"Content-Type": "application/octet-stream"})
    assert st == 201, (st, body)
    return d


def dist_image(port, repo, tag, layers):
    """Push an image of the given layer bytes to a plain registry; returns (digest, manifest, layer digests)."""
    descs = [{"mediaType": OCI_LAYER, "digest": dist_blob(port, repo, l), "size": len(l)} for l in layers]
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}, "n": os.urandom(4).hex()}).encode()
    m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": dist_blob(port, repo, cfg),
                                                                    "size": len(cfg)}, "layers": descs}
    raw = json.dumps(m).encode()
    st, _, body = dist_request(port, "PUT", "/v2/%s/manifests/%s" % (repo, tag), raw, {"Content-Type": OCI_MANIFEST})
    assert st == 201, (st, body)
    return sha256(raw), m, [x["digest"] for x in descs]


def api(b, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    st, h, raw = b.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"} if data else {})
    return st, h, (json.loads(raw) if raw else None)


def add_endpoint(b, name, url, kind, user="", password=""):
    st, h, body = api(b, "POST", "/registries", {"name": name, "type": kind, "url": url, "insecure": True,
                                                 "credential": {"type": "basic", "access_key": user, "access_secret": password}})
    assert st == 201, (st, body)
    return int(h["location"].rsplit("/", 1)[1])


def proxy_project(b, name, registry_id, speed=None):
    meta = {"public": "false"}
    if speed is not None:
        meta["proxy_speed_kb"] = str(speed)
    st, _, body = api(b, "POST", "/projects", {"project_name": name, "registry_id": registry_id, "metadata": meta})
    assert st == 201, (st, body)


def pull_manifest(b, repo, ref, method="GET"):
    st, h, body = b.request(method, "/v2/%s/manifests/%s" % (repo, ref), headers={"Accept": ACCEPT_ALL})
    return st, h.get("docker-content-digest"), body


def metric(b, name):
    st, _, body = b.request("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


@unittest.skipUnless(shutil.which("docker-registry"), "docker-registry missing")
class ProxyDistribution(BerthTestCase):
    START = False

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="proxy-dist-")
        cls.dport = free_port()
        cfg = os.path.join(cls.tmp, "config.yml")
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\n  delete:\n    enabled: true\n"
                    "http:\n  addr: 127.0.0.1:%d\n" % (cls.tmp, cls.dport))
        cls.dist = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if dist_request(cls.dport, "GET", "/v2/")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        cls.up = Upstream(cls.dport)
        cls.b = Berthd(env={"BERTH_PROXY_MANIFEST_TTL": str(TTL), "BERTH_GC_GRACE_SECONDS": "0"}).start()
        cls.reg = add_endpoint(cls.b, "dist", "http://127.0.0.1:%d" % cls.up.port, "docker-registry")
        proxy_project(cls.b, "hub", cls.reg)

    @classmethod
    def tearDownClass(cls):
        cls.b.cleanup()
        cls.up.stop()
        cls.dist.terminate()
        cls.dist.wait(10)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.up.mode = "pass"
        self.up.bearer = False

    def test_token_dance_one_token_per_scope(self):
        d1, _, _ = dist_image(self.dport, "library/secure", "1", [os.urandom(300)])
        d2, _, ld = dist_image(self.dport, "library/secure", "2", [os.urandom(300)])
        self.up.bearer = True
        self.assertEqual(pull_manifest(self.b, "hub/library/secure", "1")[1], d1)
        self.assertEqual(pull_manifest(self.b, "hub/library/secure", "2")[1], d2)
        self.assertEqual(self.b.request("GET", "/v2/hub/library/secure/blobs/" + ld[0])[0], 200)
        # three fetches in one scope (repository:library/secure:pull): one token, reused until it expires
        self.assertEqual(len(self.up.tokens), 1, self.up.tokens)
        self.assertIn("scope=repository%3Alibrary%2Fsecure%3Apull", self.up.tokens[0])

    def test_project_json_and_push_refused(self):
        st, _, p = api(self.b, "GET", "/projects/hub")
        self.assertEqual(st, 200)
        self.assertEqual(p["registry_id"], self.reg)
        self.assertEqual(p["metadata"]["proxy_speed_kb"], "-1")
        # proxy_speed_kb is -1 or a positive integer (a number or its digits), nothing looser (h-audit: " 7", "+7")
        for bad in (0, -5, "abc", 1.5, "1.5", " 7", "+7", "7 ", "-0", "", True, [1], 1 << 50):
            st, _, body = api(self.b, "PUT", "/projects/hub", {"metadata": {"proxy_speed_kb": bad}})
            self.assertEqual(st, 400, (bad, body))
        self.assertEqual(api(self.b, "GET", "/projects/hub")[2]["metadata"]["proxy_speed_kb"], "-1")
        # the endpoint stays while a project proxies it
        st, _, body = api(self.b, "DELETE", "/registries/%d" % self.reg)
        self.assertEqual(st, 412, body)
        self.assertIn("proxy-cache projects", body["errors"][0]["message"])
        # a missing endpoint, a non-integer id: 400
        st, _, body = api(self.b, "POST", "/projects", {"project_name": "nohub", "registry_id": 9999})
        self.assertEqual(st, 400, body)
        st, _, body = api(self.b, "POST", "/projects", {"project_name": "nohub", "registry_id": "1"})
        self.assertEqual(st, 400, body)
        self.assertEqual(api(self.b, "GET", "/projects/nohub")[0], 404)
        # push refused: upload start and manifest PUT, in the OCI format
        st, _, body = self.b.request("POST", "/v2/hub/library/mine/blobs/uploads/")
        self.assertEqual(st, 403, body)
        self.assertEqual(error_code(body), "DENIED")
        st, _, body, _ = self.b.push_manifest("hub/library/mine", "1", {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                                                       "config": {"mediaType": OCI_CONFIG, "digest": sha256(b"{}"), "size": 2},
                                                                       "layers": []})
        self.assertEqual(st, 403, body)
        self.assertEqual(error_code(body), "DENIED")
        # an ordinary project still takes pushes
        self.b.project("plain")
        self.assertEqual(self.b.push_image("plain/app", "1")[0][:7], "sha256:")

    def test_miss_then_hit(self):
        layers = [os.urandom(3000), os.urandom(5000)]
        d, m, ld = dist_image(self.dport, "library/alpine", "3.20", layers)
        st, got, body = pull_manifest(self.b, "hub/library/alpine", "3.20")
        self.assertEqual(st, 200, body)
        self.assertEqual(got, d)
        self.assertEqual(sha256(body), d)
        for digest, data in zip(ld, layers):
            st, _, blob = self.b.request("GET", "/v2/hub/library/alpine/blobs/" + digest)
            self.assertEqual(st, 200)
            self.assertEqual(blob, data)
        # again: all local
        before = self.up.total()
        self.assertEqual(pull_manifest(self.b, "hub/library/alpine", "3.20")[1], d)
        self.assertEqual(pull_manifest(self.b, "hub/library/alpine", d)[1], d)
        for digest, data in zip(ld, layers):
            self.assertEqual(self.b.request("GET", "/v2/hub/library/alpine/blobs/" + digest)[2], data)
        self.assertEqual(self.up.total(), before)
        self.assertEqual(self.up.count("GET", "/v2/library/alpine/manifests/3.20"), 1)
        for digest in ld:
            self.assertEqual(self.up.count("GET", "/v2/library/alpine/blobs/" + digest), 1)
        # stored through the ordinary paths: the API lists the artifact, the tag and the blobs' repository
        st, _, arts = api(self.b, "GET", "/projects/hub/repositories/library%252Falpine/artifacts")
        self.assertEqual(st, 200, arts)
        self.assertEqual([a["digest"] for a in arts], [d])
        # an unknown tag upstream is MANIFEST_UNKNOWN here
        st, _, body = pull_manifest(self.b, "hub/library/alpine", "nope")
        self.assertEqual(st, 404, body)
        self.assertEqual(error_code(body), "MANIFEST_UNKNOWN")

    def test_concurrent_pulls_of_a_missing_layer_fetch_once(self):
        data = os.urandom(LAYER_MIB << 20)
        want = dist_blob(self.dport, "library/big", data)
        # each client compares what it got with the pushed bytes (whose digest is want), MiB by MiB: a memcmp,
        # where hashing 200 x 64 MiB took more CPU than anything else in the test
        chunks = [data[off:off + (1 << 20)] for off in range(0, len(data), 1 << 20)]
        del data
        results = [None] * CLIENTS
        gate = threading.Barrier(CLIENTS)

        def pull(i):
            try:
                gate.wait(60)
                c = http.client.HTTPConnection(self.b.ip, self.b.port, timeout=300)
                c.request("GET", "/v2/hub/library/big/blobs/" + want, headers={"Authorization": ADMIN_AUTH})
                r = c.getresponse()
                buf = bytearray(1 << 20)
                view = memoryview(buf)
                same, k = True, 0
                while True:
                    n = 0
                    while n < len(buf):  # a whole MiB, lined up with chunks[k]
                        got = r.readinto(view[n:])
                        if not got:
                            break
                        n += got
                    if n == 0:
                        break
                    same = same and k < len(chunks) and (buf if n == len(buf) else buf[:n]) == chunks[k]
                    k += 1
                view.release()
                c.close()
                results[i] = (r.status, want if same and k == len(chunks) else "other bytes (%d MiB pieces)" % k)
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = ("error", repr(e))

        t0 = time.time()
        threads = [threading.Thread(target=pull, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        wall = time.time() - t0
        bad = [r for r in results if r != (200, want)]
        self.assertEqual(bad, [], "%d of %d clients got something else" % (len(bad), CLIENTS))
        self.assertEqual(self.up.count("GET", "/blobs/" + want), 1)
        print("\n%d clients pulled a missing %d MiB layer in %.1f s; upstream GETs of it: %d; coalesced: %s" % (
            CLIENTS, LAYER_MIB, wall, self.up.count("GET", "/blobs/" + want), metric(self.b, "berth_proxy_coalesced_total")))

    def test_two_berthd_on_one_database_fetch_once(self):
        data = os.urandom(4 << 20)
        want = dist_blob(self.dport, "library/shared", data)
        other = Berthd(dbname=self.b.dbname, storage=self.b.storage, env={"BERTH_PROXY_MANIFEST_TTL": str(TTL)}).start()
        try:
            self.up.mode = "slow"
            results = []

            def pull(site):
                st, _, body = site.request("GET", "/v2/hub/library/shared/blobs/" + want)
                results.append((st, sha256(body)))

            threads = [threading.Thread(target=pull, args=(site,)) for site in (self.b, other) * 10]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            self.assertEqual(results, [(200, want)] * 20)
            self.assertEqual(self.up.count("GET", "/blobs/" + want), 1)
        finally:
            other.stop()
            shutil.rmtree(other.dir, ignore_errors=True)

    def test_proxy_speed_kb_caps_the_upstream_rate(self):
        proxy_project(self.b, "slowhub", self.reg, speed=1024)
        self.assertEqual(api(self.b, "GET", "/projects/slowhub")[2]["metadata"]["proxy_speed_kb"], "1024")
        st, _, body = api(self.b, "PUT", "/projects/slowhub", {"metadata": {"proxy_speed_kb": "0"}})
        self.assertEqual(st, 400, body)
        # libcurl enforces the cap between reads of up to ~1.6 MB, so a few MiB show it
        data = os.urandom(4 << 20)
        want = dist_blob(self.dport, "library/capped", data)
        t0 = time.time()
        st, _, body = self.b.request("GET", "/v2/slowhub/library/capped/blobs/" + want)
        capped = time.time() - t0
        self.assertEqual((st, sha256(body)), (200, want))
        self.assertGreater(capped, 2.0)  # 4 MiB at 1024 KiB/s: about 3 s (the first ~1.6 MB at once)
        other = dist_blob(self.dport, "library/capped2", os.urandom(6 << 20))
        t0 = time.time()
        self.assertEqual(self.b.request("GET", "/v2/hub/library/capped2/blobs/" + other)[0], 200)
        self.assertLess(time.time() - t0, 2.0)

    def test_upstream_down_serves_cached_tag_and_digests_never_ask(self):
        # a berthd of its own on the class's database with a TTL of 1 s: three outages, each waiting out the TTL
        # (3 s for the class, whose other tests need that long a window) took 10 s
        b = Berthd(dbname=self.b.dbname, storage=self.b.storage, env={"BERTH_PROXY_MANIFEST_TTL": "1"}).start()
        try:
            d, _, ld = dist_image(self.dport, "library/busy", "1", [os.urandom(2000)])
            self.assertEqual(pull_manifest(b, "hub/library/busy", "1")[1], d)
            self.assertEqual(b.request("GET", "/v2/hub/library/busy/blobs/" + ld[0])[0], 200)
            stale = metric(b, "berth_proxy_stale_served_total")
            for mode in ("503", "429", "close"):
                self.up.mode = mode

                def pull_asked():
                    asked = self.up.total()
                    st, got, body = pull_manifest(b, "hub/library/busy", "1")
                    self.assertEqual((st, got), (200, d), (mode, body))  # within the TTL and after it: the held tag
                    return self.up.total() > asked
                # pulled until the TTL ran out and the upstream was asked, which answered with the outage
                self.assertTrue(eventually(pull_asked, True, timeout=15, interval=0.1), mode)
            self.assertEqual(metric(b, "berth_proxy_stale_served_total"), stale + 3)
            self.assertIn("serving the held " + d, b.logs())
            # by digest: never the upstream
            asked = self.up.total()
            self.assertEqual(pull_manifest(b, "hub/library/busy", d)[1], d)
            self.assertEqual(b.request("GET", "/v2/hub/library/busy/blobs/" + ld[0])[0], 200)
            self.assertEqual(self.up.total(), asked)
            # nothing held and the upstream down: 503, in the OCI format
            st, _, body = pull_manifest(b, "hub/library/never", "1")
            self.assertEqual(st, 503, body)
            self.assertEqual(error_code(body), "UNAVAILABLE")
        finally:
            b.stop()
            shutil.rmtree(b.dir, ignore_errors=True)

    def test_tag_moved_upstream_is_seen_after_the_ttl(self):
        d1, _, _ = dist_image(self.dport, "library/moving", "latest", [os.urandom(100)])
        self.assertEqual(pull_manifest(self.b, "hub/library/moving", "latest")[1], d1)
        d2, _, _ = dist_image(self.dport, "library/moving", "latest", [os.urandom(100)])
        self.assertNotEqual(d1, d2)
        # within the TTL: held, answered from the read cache (as fast as a local tag) without asking the upstream.
        # The fetch's own change notification may arrive after the first answer was cached and drop it: one pull
        # and a pause first, so it has
        self.assertEqual(pull_manifest(self.b, "hub/library/moving", "latest")[1], d1)
        time.sleep(0.3)
        asked, hits = self.up.total(), metric(self.b, "berth_cache_hits_total")
        for _ in range(3):
            self.assertEqual(pull_manifest(self.b, "hub/library/moving", "latest")[1], d1)
        self.assertEqual(self.up.total(), asked)
        self.assertGreaterEqual(metric(self.b, "berth_cache_hits_total"), hits + 3)
        self.assertEqual(eventually(lambda: pull_manifest(self.b, "hub/library/moving", "latest")[1], d2, timeout=TTL + 5, interval=0.5), d2)
        self.assertGreaterEqual(self.up.count("HEAD", "/v2/library/moving/manifests/latest"), 1)
        # the older manifest stays (by digest), as after any push that moves a tag
        self.assertEqual(pull_manifest(self.b, "hub/library/moving", d1)[1], d1)

    def test_head_of_a_missing_blob_asks_the_upstream_head_and_fetches_nothing(self):
        data = os.urandom(3 << 20)
        digest = dist_blob(self.dport, "library/headonly", data)
        url = "http://%s:%d/v2/hub/library/headonly/blobs/%s" % (self.b.ip, self.b.port, digest)

        def curl_head():  # a stock client
            out = subprocess.run(["curl", "-sS", "-I", "-H", "Authorization: " + ADMIN_AUTH, url], capture_output=True, text=True,
                                 timeout=60, check=True).stdout
            lines = out.strip().splitlines()
            hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
            return int(lines[0].split()[1]), hdrs

        for _ in range(2):  # the second within the TTL: from the first one's answer
            st, h = curl_head()
            self.assertEqual(st, 200, h)
            self.assertEqual(int(h["content-length"]), len(data))
            self.assertEqual(h["docker-content-digest"], digest)
        self.assertEqual(self.up.count("HEAD", "/v2/library/headonly/blobs/" + digest), 1)
        self.assertEqual(self.up.count("GET", "/v2/library/headonly/blobs/" + digest), 0)  # the body was never fetched
        self.assertFalse(self.b.has_blob(digest))
        self.assertEqual(psql("SELECT count(*) FROM blobs WHERE digest = '%s'" % digest, dbname=self.b.dbname), "0")
        # a GET then fetches it, once
        st, _, blob = self.b.request("GET", "/v2/hub/library/headonly/blobs/" + digest)
        self.assertEqual((st, sha256(blob)), (200, digest))
        self.assertEqual(self.up.count("GET", "/v2/library/headonly/blobs/" + digest), 1)
        # unknown upstream: 404, and an upstream that fails: 503, neither a 200 with no length. The 404 is kept a
        # while: a second HEAD of the same unknown digest asks nothing upstream (random digests cost one HEAD each)
        unknown = sha256(b"nothing here")
        for _ in range(2):
            st, _, _ = self.b.request("HEAD", "/v2/hub/library/headonly/blobs/" + unknown)
            self.assertEqual(st, 404)
        self.assertEqual(self.up.count("HEAD", "/v2/library/headonly/blobs/" + unknown), 1)
        self.up.mode = "503"
        st, _, _ = self.b.request("HEAD", "/v2/hub/library/headonly/blobs/" + sha256(b"nor here"))
        self.assertEqual(st, 503)

    def test_corrupted_upstream_bytes_are_refused_and_nothing_stored(self):
        data = os.urandom(200000)
        digest = dist_blob(self.dport, "library/bad", data)
        self.up.mode = "trickle-corrupt"
        # the client that started the fetch streams it and is cut before the last byte; those that joined get 503
        # (s3: nobody reads along a fetch, every client waits for the verified blob: all get 503)
        results = []
        threads = [threading.Thread(target=lambda: results.append(self.stream_pull(digest, "hub/library/bad"))) for _ in range(3)]
        for t in threads:
            t.start()
            time.sleep(0.2)
        for t in threads:
            t.join(60)
        self.assertEqual(len(results), 3)
        for st, _, _, body, error in results:
            self.assertTrue(st >= 400 or error is not None, (st, len(body), error))
            self.assertNotEqual(sha256(body), digest)
        self.assertEqual(sorted(st for st, *_ in results), [503, 503, 503] if self.b.env.get("BERTH_STORAGE_DRIVER") == "s3" else [200, 503, 503])
        self.assertFalse(self.b.has_blob(digest))
        self.assertEqual(psql("SELECT count(*) FROM blobs WHERE digest = '%s'" % digest, dbname=self.b.dbname), "0")
        self.assertEqual([f for f in self.b.upload_ids() if f.startswith("proxy-")], [])
        if self.b.env.get("BERTH_STORAGE_DRIVER") == "s3":  # no multipart upload of a fetch left running
            self.assertEqual([k for k in self.b.multipart_uploads() if "/uploads/proxy-" in k], [])
        self.assertGreaterEqual(metric(self.b, "berth_proxy_digest_mismatch_total"), 1)
        self.up.mode = "pass"
        st, _, body = self.b.request("GET", "/v2/hub/library/bad/blobs/" + digest)
        self.assertEqual((st, sha256(body)), (200, digest))

    def stream_pull(self, digest, repo="hub/library/streamed"):
        """GET a blob as a client reading it: (status, seconds to the first body byte, seconds in all, body, error)."""
        c = http.client.HTTPConnection(self.b.ip, self.b.port, timeout=60)
        t0 = time.time()
        c.request("GET", "/v2/%s/blobs/%s" % (repo, digest), headers={"Authorization": ADMIN_AUTH})
        r = c.getresponse()
        first, body, error = None, b"", None
        try:
            while True:
                piece = r.read1(65536)
                if not piece:
                    break
                if first is None:
                    first = time.time() - t0
                body += piece
            if r.length:
                error = "short by %d" % r.length
        except (http.client.IncompleteRead, OSError) as e:
            error = repr(e)
        c.close()
        return r.status, first, time.time() - t0, body, error

    def test_oversized_upstream_manifest_is_cut_at_the_manifest_limit(self):
        # an upstream answering a 32 MiB "manifest": berthd reads no more than a manifest may be (4 MiB), not up to
        # its 64 MiB buffer per fetch (h-audit: 8 such pulls at once took berthd's RSS to 200 MiB), stores nothing
        self.up.mode = "huge-manifest"
        st, _, body = pull_manifest(self.b, "hub/library/huge", "1")
        self.assertEqual((st, error_code(body)), (503, "UNAVAILABLE"), body)
        time.sleep(0.3)
        self.assertLess(self.up.huge_written, 16 << 20)
        self.assertIn("sent a manifest over 4194304 bytes", self.b.logs())
        self.assertEqual(psql("SELECT count(*) FROM repositories WHERE name = 'hub/library/huge'", self.b.dbname), "0")

    def test_first_client_streams_while_the_blob_arrives(self):
        data = os.urandom(4 << 20)
        want = dist_blob(self.dport, "library/streamed", data)
        self.up.mode = "trickle"  # the upstream takes about 2.4 s
        late = []
        t = threading.Thread(target=lambda: (time.sleep(0.5), late.append(self.stream_pull(want))))
        t.start()
        st, first, total, body, error = self.stream_pull(want)
        t.join(60)
        self.assertEqual((st, error, sha256(body)), (200, None, want))
        self.assertGreater(total, 2.0)
        self.assertLess(first, 1.2, "the first bytes came only after %.2f s of %.2f" % (first, total))
        self.assertEqual((late[0][0], late[0][4], sha256(late[0][3])), (200, None, want))  # joined: the verified blob
        self.assertEqual(self.up.count("GET", "/blobs/" + want), 1)
        self.assertGreaterEqual(metric(self.b, "berth_proxy_streamed_total"), 1)
        print("\nstreamed: first byte after %.2f s, all %d MiB after %.2f s" % (first, len(body) >> 20, total))

    def test_streamed_corrupt_blob_is_cut_and_not_stored(self):
        data = os.urandom(2 << 20)
        want = dist_blob(self.dport, "library/streamed", data)
        self.up.mode = "trickle-corrupt"  # the last byte is wrong: known only at the end
        st, first, total, body, error = self.stream_pull(want)
        self.assertEqual(st, 200)  # the answer began before the upstream finished ...
        self.assertIsNotNone(error)  # ... and is cut: the client never gets a body that looks complete
        self.assertLess(len(body), len(data))
        self.assertFalse(self.b.has_blob(want))
        self.assertEqual(psql("SELECT count(*) FROM blobs WHERE digest = '%s'" % want, dbname=self.b.dbname), "0")
        self.up.mode = "pass"
        st, _, body = self.b.request("GET", "/v2/hub/library/streamed/blobs/" + want)
        self.assertEqual((st, sha256(body)), (200, want))

    def test_multi_arch_index_children_fetched_when_pulled(self):
        kids = []
        for arch in ("amd64", "arm64"):
            d, m, ld = dist_image(self.dport, "library/multi", "tmp-" + arch, [os.urandom(700)])
            kids.append((arch, d, len(json.dumps(m).encode()), ld))
        idx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": d, "size": n, "platform": {"architecture": a, "os": "linux"}} for a, d, n, _ in kids]}
        raw = json.dumps(idx).encode()
        self.assertEqual(dist_request(self.dport, "PUT", "/v2/library/multi/manifests/1", raw, {"Content-Type": OCI_INDEX})[0], 201)
        st, got, body = pull_manifest(self.b, "hub/library/multi", "1")
        self.assertEqual((st, got), (200, sha256(raw)))
        self.assertEqual(self.up.count("GET", "/manifests/" + kids[0][1]), 0)  # children only when pulled
        arch, d, _, ld = kids[0]
        self.assertEqual(pull_manifest(self.b, "hub/library/multi", d)[1], d)
        self.assertEqual(self.b.request("GET", "/v2/hub/library/multi/blobs/" + ld[0])[0], 200)
        self.assertEqual(self.up.count("GET", "/manifests/" + d), 1)
        self.assertEqual(self.up.count("GET", "/manifests/" + kids[1][1]), 0)

    @unittest.skipUnless(shutil.which("skopeo"), "skopeo missing")
    def test_skopeo_pulls_through_the_proxy(self):
        d, _, _ = dist_image(self.dport, "library/tool", "2", [os.urandom(4000), os.urandom(4000)])
        out = os.path.join(self.tmp, "skopeo-out")
        r = subprocess.run(["skopeo", "copy", "--src-tls-verify=false", "--src-creds", ADMIN_CREDS,
                            "docker://%s/hub/library/tool:2" % self.b.host, "oci:%s:2" % out], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", "--creds", ADMIN_CREDS,
                            "docker://%s/hub/library/tool:2" % self.b.host], capture_output=True, text=True, timeout=60)
        self.assertEqual(sha256(r.stdout.encode()), d)

    @unittest.skipUnless(shutil.which("podman") and os.geteuid() == 0, "podman (as root) missing")
    def test_podman_pulls_through_the_proxy(self):
        d, _, _ = dist_image(self.dport, "library/pod", "1", [make_layer({"hello": os.urandom(4000)})])
        root = os.path.join(self.tmp, "podman")
        base = podman_cmd(root)
        r = subprocess.run(base + ["pull", "--tls-verify=false", "--creds", ADMIN_CREDS, "%s/hub/library/pod:1" % self.b.host],
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.up.count("GET", "/v2/library/pod/manifests/1"), 1)

    @unittest.skipUnless(shutil.which("dockerd") and shutil.which("docker") and os.geteuid() == 0, "dockerd (as root) missing")
    def test_docker_pulls_through_the_proxy_and_from_a_local_project(self):
        """The docker CLI with a private dockerd (no network setup, vfs: pulls only)."""
        root = os.path.join(self.tmp, "docker")
        sock = os.path.join(root, "d.sock")
        os.makedirs(os.path.join(root, "cfg"))
        log = open(os.path.join(root, "dockerd.log"), "w")
        dockerd = subprocess.Popen(["dockerd", "--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs",
                                    "--data-root", root + "/data", "--exec-root", root + "/exec", "--pidfile", root + "/d.pid",
                                    "-H", "unix://" + sock], stdout=log, stderr=log)
        env = dict(os.environ, DOCKER_HOST="unix://" + sock, DOCKER_CONFIG=root + "/cfg")

        def daemon_log():
            with open(log.name) as f:
                return f.read()[-3000:]

        def docker(*args, stdin=None):
            return subprocess.run(["docker"] + list(args), env=env, input=stdin, capture_output=True, text=True, timeout=180)
        try:
            self.assertTrue(eventually(lambda: docker("version").returncode == 0, True, timeout=30, interval=0.2),
                            daemon_log())
            r = docker("login", "-u", "admin", "--password-stdin", self.b.host, stdin=ADMIN_PASSWORD)
            self.assertEqual(r.returncode, 0, r.stderr)
            # docker checks the config's diff_ids against the layers, so a real image
            layer = make_layer({"hello": os.urandom(4000)})
            cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                              "rootfs": {"type": "layers", "diff_ids": [sha256(gzip.decompress(layer))]}}).encode()
            m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                 "config": {"mediaType": OCI_CONFIG, "digest": dist_blob(self.dport, "library/dock", cfg), "size": len(cfg)},
                 "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": dist_blob(self.dport, "library/dock", layer),
                             "size": len(layer)}]}
            raw = json.dumps(m).encode()
            self.assertEqual(dist_request(self.dport, "PUT", "/v2/library/dock/manifests/1", raw, {"Content-Type": OCI_MANIFEST})[0], 201)
            r = docker("pull", "%s/hub/library/dock:1" % self.b.host)
            self.assertEqual(r.returncode, 0, r.stderr + daemon_log())
            self.assertIn("Digest: " + sha256(raw), r.stdout)
            self.assertEqual(self.up.count("GET", "/v2/library/dock/manifests/1"), 1)
            self.assertEqual(self.up.count("GET", "/v2/library/dock/blobs/" + m["layers"][0]["digest"]), 1)
            # and from an ordinary project of the same Berth
            self.b.project("docklocal")
            for blob in (cfg, layer):
                self.b.push_blob("docklocal/app", blob)
            self.assertEqual(self.b.push_manifest("docklocal/app", "1", raw)[0], 201)
            r = docker("pull", "%s/docklocal/app:1" % self.b.host)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("Digest: " + sha256(raw), r.stdout)
        finally:
            dockerd.terminate()
            dockerd.wait(30)
            log.close()

    def test_retention_removes_cached_tags_and_a_later_pull_fetches_again(self):
        from test_retention import rule
        proxy_project(self.b, "retained", self.reg)  # its own project: the policy must not touch hub's
        pid = api(self.b, "GET", "/projects/retained")[2]["project_id"]
        keep, _, _ = dist_image(self.dport, "library/ret", "keep", [os.urandom(500)])
        old, _, _ = dist_image(self.dport, "library/ret", "old", [os.urandom(500)])
        for tag, d in (("keep", keep), ("old", old)):
            self.assertEqual(pull_manifest(self.b, "retained/library/ret", tag)[1], d)
        st, h, body = api(self.b, "POST", "/retentions", {"algorithm": "or", "rules": [rule("always", tag="keep")],
                                                          "scope": {"level": "project", "ref": pid},
                                                          "trigger": {"kind": "Schedule", "settings": {"cron": ""}}})
        self.assertEqual(st, 201, body)
        rid = int(h["location"].rsplit("/", 1)[1])
        st, h, body = api(self.b, "POST", "/retentions/%d/executions" % rid, {"dry_run": False})
        self.assertEqual(st, 201, body)
        eid = int(h["location"].rsplit("/", 1)[1])
        status = lambda: [e for e in api(self.b, "GET", "/retentions/%d/executions" % rid)[2] if e["id"] == eid][0]["status"]
        self.assertFalse(eventually(lambda: status() in ("Pending", "Running"), False, timeout=60, interval=0.1))
        self.assertEqual(status(), "Success")
        # what is held here now: the artifact tagged keep only
        st, _, arts = api(self.b, "GET", "/projects/retained/repositories/library%252Fret/artifacts")
        self.assertEqual((st, [a["digest"] for a in arts]), (200, [keep]), arts)
        # a later pull of the removed tag fetches it from the upstream again
        self.assertEqual(self.up.count("GET", "/v2/library/ret/manifests/old"), 1)
        self.assertEqual(pull_manifest(self.b, "retained/library/ret", "old")[1], old)
        self.assertEqual(self.up.count("GET", "/v2/library/ret/manifests/old"), 2)
        self.assertEqual(sorted(a["digest"] for a in api(self.b, "GET", "/projects/retained/repositories/library%252Fret/artifacts")[2]),
                         sorted([keep, old]))

    def test_z_cached_content_counts_against_quota_and_gc_collects_it(self):
        """Named to run last in the class: its GC (grace 0) collects what the other tests pulled blob by blob."""
        from test_gc import run_gc
        pid = api(self.b, "GET", "/projects/hub")[2]["project_id"]

        def used():
            st, _, qs = api(self.b, "GET", "/quotas?reference=project&reference_id=%d" % pid)
            self.assertEqual((st, len(qs)), (200, 1), qs)
            return qs[0]["used"]["storage"]

        layer = os.urandom(700_000)
        d, m, ld = dist_image(self.dport, "library/gcme", "1", [layer])
        before = used()
        self.assertEqual(pull_manifest(self.b, "hub/library/gcme", "1")[1], d)
        self.assertEqual(self.b.request("GET", "/v2/hub/library/gcme/blobs/" + ld[0])[2], layer)
        # the pulled image is charged like a pushed one: its layer, config and manifest
        self.assertGreaterEqual(used() - before, len(layer) + m["config"]["size"])
        self.assertTrue(self.b.has_blob(ld[0]))
        # deleted here and collected: the quota drops back, the layer file goes
        st, _, body = self.b.request("DELETE", "/v2/hub/library/gcme/manifests/" + d)
        self.assertEqual(st, 202, body)
        self.assertEqual(run_gc(self.b)["job_status"], "Success")
        self.assertEqual(used(), before)
        self.assertFalse(self.b.has_blob(ld[0]))
        # the next pull fetches it again from the upstream
        self.assertEqual(pull_manifest(self.b, "hub/library/gcme", "1")[1], d)
        self.assertEqual(self.b.request("GET", "/v2/hub/library/gcme/blobs/" + ld[0])[2], layer)
        self.assertEqual(self.up.count("GET", "/v2/library/gcme/manifests/1"), 2)
        self.assertEqual(self.up.count("GET", "/v2/library/gcme/blobs/" + ld[0]), 2)
        self.assertGreaterEqual(used() - before, len(layer))


class ProxyBerth(BerthTestCase):
    """A second Berth as the upstream: the token dance with the endpoint's credentials, a token kept per scope."""
    START = False

    @classmethod
    def setUpClass(cls):
        cls.src = Berthd().start()
        cls.src.project("src")
        cls.b = Berthd(env={"BERTH_PROXY_MANIFEST_TTL": str(TTL)}).start()
        cls.reg = add_endpoint(cls.b, "site2", "http://" + cls.src.host, "berth", "admin", ADMIN_PASSWORD)
        proxy_project(cls.b, "mirror", cls.reg)

    @classmethod
    def tearDownClass(cls):
        cls.b.cleanup()
        cls.src.cleanup()

    def test_miss_then_hit_with_token(self):
        d1, _ = self.src.push_image("src/app", "1")
        d2, _ = self.src.push_image("src/app", "2")
        # the upstream requires a token: anonymous /v2 is refused there
        self.assertEqual(self.src.request("GET", "/v2/src/app/manifests/1", auth=None)[0], 401)
        self.assertEqual(pull_manifest(self.b, "mirror/src/app", "1")[1], d1)
        self.assertEqual(pull_manifest(self.b, "mirror/src/app", "1")[1], d1)
        self.assertEqual(pull_manifest(self.b, "mirror/src/app", "2")[1], d2)

        def manifest_gets(rows, tag):
            return [r for r in rows if r.get("method") == "GET" and r.get("path", "").endswith("/v2/src/app/manifests/" + tag)
                    and r.get("status") == 200]

        rows = self.src.access_log(until=lambda rows: len(manifest_gets(rows, "2")) >= 1)
        self.assertEqual(len(manifest_gets(rows, "1")), 1, rows[-10:])
        self.assertEqual(len(manifest_gets(rows, "2")), 1)
        # referrers pass through: the upstream's referrer of d1 is stored here and listed (a filter applies here)
        sbom = json.dumps({"n": 1}).encode()
        sbom_d = self.src.push_blob("src/app", sbom)
        ref = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example.sbom",
               "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sbom_d, "size": len(sbom)}, "layers": [],
               "subject": {"mediaType": OCI_MANIFEST, "digest": d1, "size": len(self.src.request("GET", "/v2/src/app/manifests/1",
                                                                                                  headers={"Accept": OCI_MANIFEST})[2])}}
        st, h, body, raw = self.src.push_manifest("src/app", sha256(json.dumps(ref).encode()), ref)
        self.assertEqual(st, 201, body)
        st, _, body = self.b.request("GET", "/v2/mirror/src/app/referrers/" + d1)
        self.assertEqual(st, 200, body)
        self.assertEqual([m["digest"] for m in json.loads(body)["manifests"]], [sha256(raw)])
        st, _, body = self.b.request("GET", "/v2/mirror/src/app/referrers/%s?artifactType=other" % d1)
        self.assertEqual(json.loads(body)["manifests"], [])
        self.assertEqual(pull_manifest(self.b, "mirror/src/app", sha256(raw))[1], sha256(raw))  # held: no fetch needed
        rows = self.src.access_log(until=lambda rows: any("/referrers/" in r.get("path", "") for r in rows))
        self.assertEqual(len([r for r in rows if "/referrers/" in r.get("path", "")]), 1)  # within the TTL: asked once
        # Berth takes the endpoint's Basic credentials on /v2 directly (the token dance is
        # test_token_dance_one_token_per_scope's): no token request at all
        self.assertEqual([r for r in rows if r.get("path", "").startswith("/service/token")], [])


if __name__ == "__main__":
    main()
