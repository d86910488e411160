"""Shared test harness: a real PostgreSQL (one cluster per CTest run), real berthd instances, an HTTP client.

Each test gets a fresh database cloned from a migrated template and its own storage directory, so tests never
see each other's data. Everything listens on 127.0.0.1 only.
"""
import atexit
import gzip
import hashlib
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BERTHD = os.environ.get("BERTHD", os.path.join(ROOT, "build", "registry", "berthd"))
BERTH_PG = os.path.join(ROOT, "deploy", "berth-pg")
PG_DIR = os.environ.get("BERTH_TEST_PG_DIR", "/tmp/berth-test-pg")
PG_PORT = os.environ.get("BERTH_TEST_PG_PORT", "25433")

# Every directory a test makes with tempfile.mkdtemp (berthd's storage and logs, clusters, client roots) goes when
# the test process exits: repeated runs used to leave tens of GB under /tmp. BERTH_TEST_KEEP_TMP=1 keeps them.
_made_dirs = []
_mkdtemp = tempfile.mkdtemp


def _mkdtemp_tracked(*args, **kwargs):
    d = _mkdtemp(*args, **kwargs)
    _made_dirs.append(d)
    return d


def _remove_made_dirs():
    if os.environ.get("BERTH_TEST_KEEP_TMP") != "1":
        for d in reversed(_made_dirs):
            shutil.rmtree(d, ignore_errors=True)


tempfile.mkdtemp = _mkdtemp_tracked
atexit.register(_remove_made_dirs)

# CI runs the tests as root, and berthd refuses to run its internet-facing edge as root unless told (every
# berthd a test starts inherits this; test_firstrun.py checks the refusal without it)
os.environ.setdefault("BERTH_EDGE_ALLOW_ROOT", "true")

ADMIN_PASSWORD = "Harbor12345"
ADMIN_AUTH = "Basic " + __import__("base64").b64encode(("admin:" + ADMIN_PASSWORD).encode()).decode()
ADMIN_CREDS = "admin:" + ADMIN_PASSWORD

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ACCEPT_ALL = ", ".join([OCI_MANIFEST, OCI_INDEX, "application/vnd.docker.distribution.manifest.v2+json",
                        "application/vnd.docker.distribution.manifest.list.v2+json"])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pg_conninfo(dbname="berth"):
    return "host=%s port=%s user=postgres dbname=%s" % (PG_DIR, PG_PORT, dbname)


def psql(sql, dbname="postgres", check=True):
    cmd = ["psql", "-h", PG_DIR, "-p", PG_PORT, "-U", "postgres", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql, dbname]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("psql failed: %s" % r.stderr)
    return r.stdout.strip()


def new_database():
    name = "t_" + uuid.uuid4().hex[:12]
    psql("CREATE DATABASE %s" % name)
    return name


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def s3_env(storage):
    """With BERTH_TEST_STORAGE_DRIVER=s3 (CTest's *_s3 runs), berthd keeps blobs in the test Ceph gateway
    (fixture ceph, deploy/berth-ceph): a key prefix per storage directory, so instances sharing a storage
    directory share blobs, as they would share a bucket."""
    if os.environ.get("BERTH_TEST_STORAGE_DRIVER") != "s3":
        return {}
    d = os.environ.get("BERTH_TEST_CEPH_DIR", "")
    path = os.path.join(d, "s3.env")
    if not os.path.exists(path):
        print("no test Ceph (%s); CTest's fixture ceph starts one" % path)
        sys.exit(77)
    with open(path) as f:
        env = dict(line.strip().split("=", 1) for line in f if "=" in line and line.startswith("BERTH_S3_"))
    env.pop("BERTH_S3_MEMSTORE_BYTES", None)
    env["BERTH_STORAGE_DRIVER"] = "s3"
    env["BERTH_S3_PREFIX"] = "h" + hashlib.sha256(os.path.realpath(storage).encode()).hexdigest()[:16]
    env.setdefault("BERTH_S3_TIMEOUT_MS", "5000")
    env["BERTH_S3_PART_SIZE_MIB"] = os.environ.get("BERTH_TEST_S3_PART_SIZE_MIB", "5")
    # with s3 berthd never makes its keys (instances share them by configuration): made once per storage, as an
    # operator makes the Secret, so instances sharing a storage directory share them
    keys = os.path.join(storage, "keys")
    if not os.path.exists(os.path.join(keys, "replication.key")):
        subprocess.run([BERTHD, "init-keys", keys], check=True, capture_output=True)
    return env


class PausableRelay:
    """A TCP relay in front of a server (the shared test Ceph gateway) that can stop relaying as a SIGSTOPped
    server stops: connections are still taken by the kernel's backlog, bytes stay unread and unanswered until
    resume(). Outage tests pause their own relay, so suites beside them on the same gateway are not paused."""

    def __init__(self, url):
        import threading
        m = re.match(r"https?://([^:/]+):(\d+)", url)
        self.target = (m.group(1), int(m.group(2)))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.running = threading.Event()
        self.running.set()
        self.closed = False
        self.conns = []
        self.accepted = 0  # connections relayed: the edge opens one per gateway GET
        self.rate = None  # bytes per second and connection from the server, when slowed (a gateway under load)
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self):
        self.running.clear()

    def resume(self):
        self.running.set()

    def close(self):
        self.closed = True
        self.running.set()
        for c in [self.sock] + self.conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self):
        import threading
        while not self.closed:
            self.running.wait()
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target, timeout=10)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            self.conns += [c, u]
            self.accepted += 1
            for a, b, slow in ((c, u, False), (u, c, True)):
                threading.Thread(target=self._pump, args=(a, b, slow), daemon=True).start()

    def _pump(self, src, dst, slow):
        try:
            while True:
                self.running.wait()  # paused: read nothing, so nothing is answered
                rate = self.rate if slow else None
                data = src.recv(16384 if rate else 65536)
                self.running.wait()
                if not data or self.closed:
                    break
                dst.sendall(data)
                if rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        for x in (src, dst):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Berthd:
    """One berthd process with its own database, storage and ports."""

    def __init__(self, dbname=None, env=None, storage=None, args=None, ip="127.0.0.1", prefix=None):
        self.args = list(args or [])
        self.ip = ip                      # where it listens (a network namespace's address for multi-site tests)
        self.prefix = list(prefix or [])  # e.g. ["ip", "netns", "exec", "site-a"]
        self.dbname = dbname or new_database()
        self.dir = tempfile.mkdtemp(prefix="berthd-")
        self.storage = storage or os.path.join(self.dir, "storage")
        self.port = free_port()
        self.env = dict(os.environ)
        self.env.update({
            "BERTH_HTTP_ADDR": "%s:%d" % (ip, self.port),
            "BERTH_DATABASE_URL": pg_conninfo(self.dbname),
            "BERTH_STORAGE_ROOT": self.storage,
            "BERTH_RUN_DIR": os.path.join(self.dir, "run"),
            "BERTH_ACCESS_LOG": os.path.join(self.dir, "access.log"),
            "BERTH_LOG_LEVEL": "info",
            "BERTH_ADMIN_PASSWORD": ADMIN_PASSWORD,
        })
        self.env.update(s3_env(self.storage))
        self.env.update(env or {})
        self.proc = None
        self.start_preexec = None  # run in the child before exec (e.g. to lower a resource limit)
        self.log_path = os.path.join(self.dir, "berthd.log")

    def s3(self, method, path, check=True):
        """A request to the bucket signed with the gateway's key (curl's SigV4), for what berthd hides; path is
        below the bucket ("KEY" or "?QUERY"). Returns (HTTP status, body)."""
        e = self.env
        out = subprocess.run(["curl", "-s", "-X", method, "-w", "\n%{http_code}", "--aws-sigv4", "aws:amz:%s:s3" % e["BERTH_S3_REGION"],
                              "--user", "%s:%s" % (e["BERTH_S3_ACCESS_KEY"], e["BERTH_S3_SECRET_KEY"]), "-H",
                              "x-amz-content-sha256: UNSIGNED-PAYLOAD", *(["-I"] if method == "HEAD" else []),
                              "%s/%s%s%s" % (e["BERTH_S3_ENDPOINT"], e["BERTH_S3_BUCKET"], "" if path.startswith("?") else "/", path)],
                             capture_output=True, text=True).stdout
        body, st = out.rsplit("\n", 1)
        assert not check or st.startswith("2"), "%s %s answered %s: %s" % (method, path, st, body[:300])
        return int(st), body

    def blob_key(self, digest):
        return "%s/blobs/sha256/%s/%s" % (self.env["BERTH_S3_PREFIX"], digest[7:9], digest[7:])

    def upload_ids(self):
        """The upload sessions whose bytes the store holds, whichever driver (filesystem or s3)."""
        if self.env.get("BERTH_STORAGE_DRIVER") != "s3":
            return sorted(os.listdir(os.path.join(self.storage, "uploads")))
        keys = re.findall(r"<Key>([^<]*)</Key>", self.s3("GET", "?list-type=2&prefix=%s%%2Fuploads%%2F" % self.env["BERTH_S3_PREFIX"])[1])
        return sorted(k.rsplit("/", 1)[1] for k in keys if not k.endswith(".data"))

    def multipart_uploads(self):
        """s3: the keys of this prefix's multipart uploads still running at the gateway."""
        prefix = self.env["BERTH_S3_PREFIX"] + "/"
        return [k for k in re.findall(r"<Key>([^<]*)</Key>", self.s3("GET", "?uploads=")[1]) if k.startswith(prefix)]

    def remove_blob(self, digest):
        """Remove a blob's bytes behind berthd's back (to reclaim space after a large test), either driver."""
        if self.env.get("BERTH_STORAGE_DRIVER") != "s3":
            os.unlink(os.path.join(self.storage, "blobs", "sha256", digest[7:9], digest[7:]))
            return
        self.s3("DELETE", self.blob_key(digest))

    def has_blob(self, digest):
        """Whether the store holds a blob's bytes, either driver (s3: a signed HEAD of its object, 200 or 404)."""
        if self.env.get("BERTH_STORAGE_DRIVER") != "s3":
            return os.path.exists(os.path.join(self.storage, "blobs", "sha256", digest[7:9], digest[7:]))
        st = self.s3("HEAD", self.blob_key(digest), check=False)[0]
        assert st in (200, 404), "HEAD of %s answered %d" % (digest, st)
        return st == 200

    @property
    def host(self):
        return "%s:%d" % (self.ip, self.port)

    def start(self, wait=True):
        for attempt in range(3):
            self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen([*self.prefix, BERTHD, *self.args], env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                         preexec_fn=self.start_preexec)
            if not wait:
                return self
            try:
                self.wait_ready()
                return self
            except RuntimeError:
                # free_port() is check-then-use: berthd's own ephemeral internal port (the API listener's
                # backup, internal_listen.h) can take the port before its edge binds it. Only that is retried, with a new port.
                if "Address already in use" not in self.logs() or attempt == 2:
                    raise
                self.stop()
                self.port = free_port()
                self.env["BERTH_HTTP_ADDR"] = "%s:%d" % (self.ip, self.port)
        return self

    def wait_ready(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("berthd exited with %s:\n%s" % (self.proc.returncode, self.logs()))
            try:
                st, _, _ = self.request("GET", "/v2/", auth=None)
                if st == 401:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("berthd did not become ready:\n" + self.logs())

    def access_log(self, until=lambda rows: True, timeout=5):
        """Parsed access-log rows; waits (the log is written asynchronously) until `until(rows)` holds."""
        deadline = time.time() + timeout
        while True:
            try:
                rows = [json.loads(line) for line in open(self.env["BERTH_ACCESS_LOG"]) if line.strip()]
            except FileNotFoundError:
                rows = []
            if until(rows) or time.time() > deadline:
                return rows

    def logs(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-6000:]
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        self.log.close()
        # under ASan with leak detection on (tests/run.sh), a clean exit must leave nothing behind
        if sig != signal.SIGKILL and "ERROR: LeakSanitizer" in self.logs():
            log = self.logs()
            raise AssertionError("berthd leaked memory:\n" + log[log.find("ERROR: LeakSanitizer"):][:6000])
        # under ThreadSanitizer (tests/run.sh, BERTH_TSAN) any race report fails the test, even one berthd survived
        try:
            with open(self.log_path, "rb") as f:
                full = f.read().decode(errors="replace")
        except OSError:
            full = ""
        if "WARNING: ThreadSanitizer" in full:
            raise AssertionError("ThreadSanitizer reported a race in berthd:\n" + full[full.find("WARNING: ThreadSanitizer"):][:8000])
        # nginx may outlive a SIGKILLed berthd for a moment; it is ours, end it
        pid_file = os.path.join(self.env["BERTH_RUN_DIR"], "nginx.pid")
        if sig == signal.SIGKILL and os.path.exists(pid_file):
            try:
                os.kill(int(open(pid_file).read().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        return rc

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- HTTP -------------------------------------------------------------------------------------------
    def request(self, method, path, body=None, headers=None, timeout=60, auth=ADMIN_AUTH):
        """One request; as the first admin (Basic, which /v2 accepts like robots and CI do) unless
        `auth` is None (anonymous) or the headers carry their own Authorization."""
        headers = dict(headers or {})
        if auth is not None and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = auth
        conn = http.client.HTTPConnection(self.ip, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    def api(self, method, path, body=None, auth=None):
        """A REST call under /api/v2.0 with a JSON body (as the admin unless `auth`): status, headers, decoded
        JSON (or the raw bytes when the answer is not JSON)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        if auth is not None:
            headers["Authorization"] = auth
        st, h, raw = self.request(method, "/api/v2.0" + path, data, headers)
        try:
            return st, h, json.loads(raw) if raw else None
        except ValueError:
            return st, h, raw

    def project(self, name, public=False):
        """Create project `name` through the API as the admin (a push never creates one); an existing one is kept."""
        st, _, body = self.request("POST", "/api/v2.0/projects", json.dumps({"project_name": name, "metadata": {
            "public": "true" if public else "false"}}).encode(), {"Content-Type": "application/json"})
        assert st in (201, 409), (st, body)
        return self

    def push_blob(self, repo, data, chunk=None):
        """Upload through a session (optionally chunked); returns the digest."""
        d = sha256(data)
        st, h, body = self.request("POST", "/v2/%s/blobs/uploads/" % repo)
        assert st == 202, (st, body)
        loc = h["location"]
        off = 0
        if chunk:
            while off < len(data) - chunk:
                piece = data[off:off + chunk]
                st, h, body = self.request_retrying("PATCH", loc, piece, {"Content-Range": "%d-%d" % (off, off + len(piece) - 1),
                                                                          "Content-Type": "application/octet-stream"})
                assert st == 202, (st, body)
                loc = h["location"]
                off += len(piece)
        st, h, body = self.request_retrying("PUT", loc + "?digest=" + d, data[off:], {"Content-Type": "application/octet-stream"})
        assert st == 201, (st, body)
        return d

    def request_retrying(self, method, path, body=None, headers=None, attempts=20):
        """A request sent again after a 429 TOOMANYREQUESTS, as docker and containerd do: an upload body refused for
        the caller's share of concurrent streams (the s3 driver's share is half the database pool) consumed nothing."""
        for _ in range(attempts - 1):
            st, h, rbody = self.request(method, path, body, headers)
            if st != 429:
                return st, h, rbody
            assert error_code(rbody) == "TOOMANYREQUESTS" and int(h["retry-after"]) >= 1, (h, rbody)
            time.sleep(0.2)
        return self.request(method, path, body, headers)

    def push_manifest(self, repo, ref, manifest, media_type=OCI_MANIFEST):
        raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        st, h, body = self.request("PUT", "/v2/%s/manifests/%s" % (repo, ref), raw, {"Content-Type": media_type})
        return st, h, body, raw

    def push_image(self, repo, tag, layers=1, size=1024, seed=None, config=None):
        """A small image pushed by hand: config (with the keys of `config` added) + random layers + manifest.
        Returns (digest, manifest bytes)."""
        rnd = os.urandom if seed is None else (lambda n: hashlib.sha256(str(seed).encode()).digest() * (n // 32 + 1))
        layer_descs = []
        for i in range(layers):
            data = rnd(size)[:size] + os.urandom(8)
            layer_descs.append({"mediaType": OCI_LAYER, "digest": self.push_blob(repo, data), "size": len(data)})
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}, **(config or {})}).encode()
        cfg_d = self.push_blob(repo, cfg)
        m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cfg_d,
                                                                        "size": len(cfg)}, "layers": layer_descs}
        st, h, body, raw = self.push_manifest(repo, tag, m)
        assert st == 201, (st, body)
        return h["docker-content-digest"], raw


def raw_exchange(ip, port, data, timeout=60):
    """Send `data` on a fresh connection and read until the server closes it (for requests http.client would
    refuse or rewrite: raw bytes, duplicate headers); the whole answer as bytes. port None: `ip` is the path of a
    Unix socket."""
    if port is None:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        conn.connect(ip)
    else:
        conn = socket.create_connection((ip, port), timeout=timeout)
    with conn as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def error_code(body):
    return json.loads(body)["errors"][0]["code"]


def make_layer(files):
    """A gzip'd tar with the given {name: bytes}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o755
            tar.addfile(ti, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def write_oci_layout(path, images, index_platforms=None, tag="latest"):
    """Write an OCI image layout. `images`: list of [{name: bytes}] file sets, one image each.
    With index_platforms (list of (os, arch) or (os, arch, variant)), the images form one multi-arch index."""
    os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)

    def put(data):
        d = hashlib.sha256(data).hexdigest()
        with open(os.path.join(path, "blobs", "sha256", d), "wb") as f:
            f.write(data)
        return "sha256:" + d, len(data)

    manifests = []
    for i, files in enumerate(images):
        layer = make_layer(files)
        ld, ls = put(layer)
        arch = index_platforms[i][1] if index_platforms else "amd64"
        variant = index_platforms[i][2] if index_platforms and len(index_platforms[i]) > 2 else None
        cfgd = {"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": [
            "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()]}, "config": {}}
        if variant:
            cfgd["variant"] = variant
        cfg = json.dumps(cfgd).encode()
        cd, cs = put(cfg)
        m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                        "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": cs},
                        "layers": [{"mediaType": OCI_LAYER, "digest": ld, "size": ls}]}).encode()
        md, ms = put(m)
        desc = {"mediaType": OCI_MANIFEST, "digest": md, "size": ms}
        if index_platforms:
            desc["platform"] = {"os": index_platforms[i][0], "architecture": index_platforms[i][1]}
            if variant:
                desc["platform"]["variant"] = variant
        manifests.append(desc)
    if index_platforms:
        idx = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}).encode()
        xd, xs = put(idx)
        top = {"mediaType": OCI_INDEX, "digest": xd, "size": xs}
    else:
        top = manifests[0]
    top = dict(top, annotations={"org.opencontainers.image.ref.name": tag})
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [top]}, f)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    return top["digest"]


class BerthTestCase(unittest.TestCase):
    """Starts one berthd per test class unless the class sets START = False, with the projects in PROJECTS
    (pushes do not create projects)."""
    START = True
    PROJECTS = ()

    @classmethod
    def setUpClass(cls):
        cls.b = Berthd().start() if cls.START else None
        for name in cls.PROJECTS if cls.b is not None else ():
            cls.b.project(name)

    @classmethod
    def tearDownClass(cls):
        if cls.b is not None:
            cls.b.cleanup()

    def run(self, result=None):
        # on failure, show the server's log: the first thing anyone debugging needs
        res = super().run(result)
        if result is not None and (result.failures or result.errors) and getattr(self, "b", None) is not None:
            failed = [t for t, _ in result.failures + result.errors if t is self]
            if failed:
                print("\n--- berthd log ---\n" + self.b.logs())
        return res


def podman_cmd(base):
    """podman (root, vfs, no systemd) with all of its state under base, its tmp dir too: tests never share
    /run/libpod, where concurrent first runs on a fresh machine failed ("creating runtime status file")."""
    return ["podman", "--root", base + "/root", "--runroot", base + "/run", "--tmpdir", base + "/tmp", "--storage-driver",
            "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file"]


def eventually(fn, want, timeout=10.0, interval=0.05):
    """Call fn() until it returns want or timeout seconds pass; returns the last value (assert it equals want).
    For waits on something asynchronous (a revocation window, a background writer) instead of a fixed sleep."""
    deadline = time.time() + timeout
    while True:
        got = fn()
        if got == want or time.time() > deadline:
            return got
        time.sleep(interval)


# Exit status of a suite that did not really run (CTest: SKIP_RETURN_CODE 77, shown as "Skipped", never "Passed").
SKIPPED = 77
# A skip whose reason starts with this is part of the design (e.g. no qemu-user under an ASan build): it does not
# make the suite SKIPPED. Every other skip is a missing dependency or host capability.
NOT_APPLICABLE = "not applicable: "


def exit_status(result):
    """0 when every test ran and passed; 1 on any failure; SKIPPED when nothing ran or a dependency was missing,
    so a machine without slapd or skopeo cannot make a suite look passed."""
    if not result.wasSuccessful():
        return 1
    missing = [reason for _, reason in result.skipped if not reason.startswith(NOT_APPLICABLE)]
    if result.testsRun == len(result.skipped) or missing:
        print("\nSKIPPED: %d of %d tests did not run: %s" % (len(result.skipped), result.testsRun,
                                                          "; ".join(sorted(set(missing))) or "nothing ran"))
        return SKIPPED
    return 0


def main():
    prog = unittest.main(verbosity=2, exit=False)
    raise SystemExit(exit_status(prog.result))
