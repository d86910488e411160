"""Real clients from Debian against berthd: skopeo, podman, buildah, curl over TLS."""
import hashlib
import json
import time
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import ACCEPT_ALL, ADMIN_CREDS, BerthTestCase, Berthd, eventually, main, podman_cmd, write_oci_layout

TIMEOUT = 300


def have(tool):
    return shutil.which(tool) is not None


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-3000:]))
    return r.stdout


@unittest.skipUnless(have("skopeo"), "skopeo not installed")
class Skopeo(BerthTestCase):
    PROJECTS = ("sk",)
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="skopeo-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def copy(self, src, dst, *extra, arch=None):
        glob = ["--override-arch", arch] if arch else []
        creds = []
        if src.startswith("docker://"):
            creds += ["--src-creds", ADMIN_CREDS]
        if dst.startswith("docker://"):
            creds += ["--dest-creds", ADMIN_CREDS]
        return run(["skopeo", *glob, "copy", "--src-tls-verify=false", "--dest-tls-verify=false", *creds, *extra, src, dst])

    def test_layout_push_mount_and_pull(self):
        layout = os.path.join(self.tmp, "layout")
        big = os.urandom(3 * 1024 * 1024)
        digest = write_oci_layout(layout, [{"bin/app": big, "etc/x": b"x"}])
        self.copy("oci:%s:latest" % layout, "docker://%s/sk/app:v1" % self.b.host)
        st, h, body = self.b.request("GET", "/v2/sk/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual((st, h["docker-content-digest"]), (200, digest))
        # Berth -> Berth across repositories: skopeo mounts the layer instead of uploading it. skopeo only tries a
        # mount for locations its blob-info cache has recorded, which it does not always do in time for the first
        # copy (seen once in CI), so a second destination gets a second chance; one of them must mount.
        mounted = None
        for dest in ("sk/other", "sk/other2"):
            self.copy("docker://%s/sk/app:v1" % self.b.host, "docker://%s/%s:v1" % (self.b.host, dest))

            def is_mount(r, dest=dest):
                return r["path"] == "/v2/%s/blobs/uploads/" % dest and r["method"] == "POST" and r["status"] == 201
            log = self.b.access_log(lambda rows: any(is_mount(r) for r in rows), timeout=2)
            if any(is_mount(r) for r in log):
                mounted = dest
                break
        self.assertIsNotNone(mounted, "no blob was mounted:\n" + "\n".join(
            "%s %s %s %s" % (r["method"], r["path"], r["status"], r["bytes_in"]) for r in log if "sk/other" in r["path"]))
        self.assertFalse(any(r["path"].startswith("/v2/%s/" % mounted) and r["bytes_in"] >= len(big) // 2 for r in log),
                         "the big layer was uploaded again")
        # Berth -> dir: every byte arrives and verifies
        out = os.path.join(self.tmp, "dir")
        self.copy("docker://%s/%s:v1" % (self.b.host, mounted), "dir:" + out)
        m = json.load(open(os.path.join(out, "manifest.json")))
        for layer in m["layers"]:
            data = open(os.path.join(out, layer["digest"].split(":")[1]), "rb").read()
            self.assertEqual("sha256:" + hashlib.sha256(data).hexdigest(), layer["digest"])

    def test_multi_arch_all(self):
        layout = os.path.join(self.tmp, "multi")
        digest = write_oci_layout(layout, [{"a": b"amd64 build"}, {"b": b"arm64 build"}],
                                  [("linux", "amd64"), ("linux", "arm64")])
        self.copy("oci:%s:latest" % layout, "docker://%s/sk/multi:v1" % self.b.host, "--all")
        st, h, body = self.b.request("GET", "/v2/sk/multi/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual((st, h["docker-content-digest"]), (200, digest))
        idx = json.loads(body)
        self.assertEqual(len(idx["manifests"]), 2)
        for child in idx["manifests"]:
            st, _, _ = self.b.request("HEAD", "/v2/sk/multi/manifests/" + child["digest"])
            self.assertEqual(st, 200)
        out = os.path.join(self.tmp, "arm")
        self.copy("docker://%s/sk/multi:v1" % self.b.host, "dir:" + out, arch="arm64")
        arm = [c["digest"] for c in idx["manifests"] if c["platform"]["architecture"] == "arm64"][0]
        got = open(os.path.join(out, "manifest.json"), "rb").read()
        self.assertEqual("sha256:" + hashlib.sha256(got).hexdigest(), arm)


class ContainerTools(BerthTestCase):
    PROJECTS = ("pm", "bh")
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ctools-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def podman(self, *args):
        return run(podman_cmd(self.tmp) + list(args))

    def buildah(self, *args):
        return run(["buildah", "--root", self.tmp + "/broot", "--runroot", self.tmp + "/brun", "--storage-driver", "vfs", *args])

    @unittest.skipUnless(have("podman") and have("skopeo"), "podman/skopeo not installed")
    def test_podman_push_pull(self):
        layout = os.path.join(self.tmp, "layout")
        write_oci_layout(layout, [{"hello": b"from podman"}])
        run(["skopeo", "copy", "--dest-tls-verify=false", "--dest-creds", ADMIN_CREDS, "oci:%s:latest" % layout,
             "docker://%s/pm/base:v1" % self.b.host])
        self.podman("login", "--tls-verify=false", "-u", "admin", "-p", ADMIN_CREDS.split(":", 1)[1], self.b.host)
        self.podman("pull", "--tls-verify=false", "%s/pm/base:v1" % self.b.host)
        self.podman("tag", "%s/pm/base:v1" % self.b.host, "%s/pm/copy:v2" % self.b.host)
        self.podman("push", "--tls-verify=false", "%s/pm/copy:v2" % self.b.host)
        st, _, body = self.b.request("GET", "/v2/pm/copy/tags/list")
        self.assertEqual(json.loads(body)["tags"], ["v2"])
        self.podman("rmi", "-a", "-f")
        self.podman("pull", "--tls-verify=false", "%s/pm/copy:v2" % self.b.host)
        self.assertIn("pm/copy", self.podman("images", "--format", "{{.Repository}}"))

    @unittest.skipUnless(have("buildah"), "buildah not installed")
    def test_buildah_push(self):
        ctr = self.buildah("from", "scratch").strip().splitlines()[-1]
        f = os.path.join(self.tmp, "payload.txt")
        with open(f, "w") as fh:
            fh.write("built by buildah\n")
        self.buildah("copy", ctr, f, "/payload.txt")
        self.buildah("commit", ctr, "bh/img:v1")
        self.buildah("push", "--tls-verify=false", "--creds", ADMIN_CREDS, "bh/img:v1", "docker://%s/bh/img:v1" % self.b.host)
        st, h, body = self.b.request("GET", "/v2/bh/img/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual(st, 200)
        m = json.loads(body)
        for d in [m["config"]] + m["layers"]:
            st, _, blob = self.b.request("GET", "/v2/bh/img/blobs/" + d["digest"])
            self.assertEqual("sha256:" + hashlib.sha256(blob).hexdigest(), d["digest"])


class TLSAndLargeUploads(unittest.TestCase):
    """The edge serves TLS with HTTP/2; a body past 2 GiB over TLS HTTP/1.1 streams (h2o 2.2.5 drops those)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tls-")
        cls.cert, cls.key = os.path.join(cls.tmp, "cert.pem"), os.path.join(cls.tmp, "key.pem")
        run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", cls.key, "-out", cls.cert])
        from harness import free_port
        cls.tls_port = free_port()
        cls.b = Berthd(env={"BERTH_TLS_ADDR": "127.0.0.1:%d" % cls.tls_port, "BERTH_TLS_CERT": cls.cert,
                            "BERTH_TLS_KEY": cls.key}).start().project("abort").project("large")
        cls.url = "https://127.0.0.1:%d" % cls.tls_port

    @classmethod
    def tearDownClass(cls):
        cls.b.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def curl(self, *args):
        return run(["curl", "-sS", "--cacert", self.cert, "-u", ADMIN_CREDS, *args])

    def test_http2_over_tls(self):
        out = self.curl("--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", self.url + "/v2/")
        self.assertEqual(out, "2 200")

    def test_http2_upload_abort(self):
        """An HTTP/2 client that resets mid-upload: the server survives and holds no stream afterwards."""
        loc = self.curl("--http2", "-X", "POST", "-o", "/dev/null", "-w", "%header{location}",
                        self.url + "/v2/abort/h2/blobs/uploads/")
        src = subprocess.Popen(["head", "-c", str(4 * 1024 ** 3), "/dev/zero"], stdout=subprocess.PIPE)
        up = subprocess.Popen(["curl", "-sS", "--http2", "--cacert", self.cert, "-u", ADMIN_CREDS, "-X", "PATCH", "-T", "-", "-o", "/dev/null",
                               self.url + loc], stdin=src.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        def streams():
            body = self.b.request("GET", "/metrics")[2].decode()
            return int([x for x in body.splitlines() if x.startswith("berth_upload_streams ")][0].split()[1])
        self.assertEqual(eventually(lambda: streams() >= 1, True), True, "the upload stream never started")
        up.kill()
        src.kill()
        up.wait()
        src.wait()
        self.assertEqual(eventually(streams, 0), 0, "an aborted upload stream was never released")
        self.assertIsNone(self.b.proc.poll(), "berthd died")
        st, h, _ = self.b.request("GET", loc)
        self.assertEqual(st, 204)  # the session and whatever bytes arrived are still there to resume

    def test_large_blob_over_tls_http1(self):
        size = int(os.environ.get("BERTH_TEST_LARGE_BYTES", str(2 * 1024 ** 3 + 100 * 1024 ** 2)))
        h = hashlib.sha256()
        chunk = b"\0" * (1 << 20)
        left = size
        while left:
            n = min(left, len(chunk))
            h.update(chunk[:n])
            left -= n
        digest = "sha256:" + h.hexdigest()
        loc = self.curl("--http1.1", "-X", "POST", "-o", "/dev/null", "-w", "%{redirect_url}%header{location}",
                        self.url + "/v2/large/blob/blobs/uploads/")
        loc = loc[loc.index("/v2/"):]
        t0 = time.time()
        src = subprocess.Popen(["head", "-c", str(size), "/dev/zero"], stdout=subprocess.PIPE)
        out = subprocess.run(["curl", "-sS", "--http1.1", "--cacert", self.cert, "-u", ADMIN_CREDS, "-T", "-", "-o", "/dev/null", "-w",
                              "%{http_code}", self.url + loc + "?digest=" + digest], stdin=src.stdout, capture_output=True,
                             text=True, timeout=TIMEOUT)
        src.wait()
        self.assertEqual(out.stdout, "201", out.stderr)
        elapsed = time.time() - t0
        st, h, _ = self.b.request("HEAD", "/v2/large/blob/blobs/" + digest)
        self.assertEqual((st, int(h["content-length"])), (200, size))
        # streamed, not buffered: berthd's peak memory stays far below the body size
        with open("/proc/%d/status" % self.b.proc.pid) as f:
            status = f.read()
        hwm_kib = int([line for line in status.splitlines() if line.startswith("VmHWM")][0].split()[1])
        print("\nlarge upload over TLS HTTP/1.1: %d bytes in %.1f s (%.0f MiB/s), berthd VmHWM %.1f MiB"
              % (size, elapsed, size / elapsed / 2 ** 20, hwm_kib / 1024))
        self.assertLess(hwm_kib, 256 * 1024, "berthd peak RSS %d KiB" % hwm_kib)
        # and pulled back through the edge (s3: proxied from the gateway; filesystem: sendfile), hashed as it
        # streams, while the resident memory of berthd and of its edge processes is sampled
        sampler = RssSampler(self.b.proc.pid)
        t0 = time.time()
        pull = subprocess.Popen(["curl", "-sS", "--http1.1", "--cacert", self.cert, "-u", ADMIN_CREDS, "-L", "--fail",
                                 self.url + "/v2/large/blob/blobs/" + digest], stdout=subprocess.PIPE)
        got, n = hashlib.sha256(), 0
        while True:
            block = pull.stdout.read(1 << 20)
            if not block:
                break
            got.update(block)
            n += len(block)
        pull.stdout.close()
        self.assertEqual(pull.wait(TIMEOUT), 0)
        elapsed = time.time() - t0
        peak = sampler.stop()
        self.assertEqual((n, "sha256:" + got.hexdigest()), (size, digest))
        print("large pull: %d bytes in %.1f s (%.0f MiB/s), peak RSS berthd %.1f MiB, edge %.1f MiB (%d samples)"
              % (size, elapsed, size / elapsed / 2 ** 20, peak["berthd"] / 1024, peak["edge"] / 1024, peak["samples"]))
        self.assertGreater(peak["samples"], 3, "the transfer was sampled")
        self.assertLess(peak["berthd"], 256 * 1024, "berthd peak RSS during the pull (KiB)")
        self.assertLess(peak["edge"], 128 * 1024, "edge (nginx) peak RSS during the pull, all its processes (KiB)")
        self.b.remove_blob(digest)  # reclaim the disk now; the test is over


def _rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return int([line for line in f if line.startswith("VmRSS")][0].split()[1])
    except (OSError, IndexError):
        return 0


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class RssSampler:
    """Peak resident memory of a berthd and, apart, of its descendants (the edge nginx), every 50 ms in a thread."""

    def __init__(self, pid):
        import threading
        self.pid, self.peak, self.done = pid, {"berthd": 0, "edge": 0, "samples": 0}, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(0.05):
            todo, edge = _children(self.pid), 0
            while todo:
                c = todo.pop()
                edge += _rss_kib(c)
                todo.extend(_children(c))
            self.peak["berthd"] = max(self.peak["berthd"], _rss_kib(self.pid))
            self.peak["edge"] = max(self.peak["edge"], edge)
            self.peak["samples"] += 1

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak


if __name__ == "__main__":
    main()
