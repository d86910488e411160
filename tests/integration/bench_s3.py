"""Benchmark of the s3 storage driver (not a test; docs/benchmarks.md, issue 19): in one run, side by side on the
same Ceph RADOS Gateway (CTest fixture ceph, deploy/berth-ceph) and bucket,
  A  Berth, storage.driver s3 (blob GETs streamed by its edge from presigned URLs),
  B  Distribution 2.8 (Debian docker-registry), its s3 driver, redirect disabled (bytes through the registry),
  C  direct signed GETs of the same objects from the gateway (the limit for pulls; curl --aws-sigv4).
Push MiB/s (one monolithic 256 MiB blob, curl -T), pull MiB/s with 1 and 32 clients (curl), manifest GET by tag
req/s (wrk, 64 connections), a burst of 200 clients each pulling manifest + config + a 16 MiB layer, and peak RSS
(VmHWM, process tree: berthd + its nginx edge; docker-registry). Interleaved repetitions, medians.

    (cd build && ctest -R '^(pg_start|ceph_start)$')
    BERTH_TEST_PG_DIR=/tmp/berth-test-pg-… BERTH_TEST_PG_PORT=… BERTH_TEST_CEPH_DIR=/tmp/berth-test-ceph-… \
      python3 tests/integration/bench_s3.py
    (cd build && ctest -R '^(ceph_stop|pg_stop)$')

S3_BENCH_REPS (3), S3_BENCH_PUSH_MIB (256), S3_BENCH_WRK_SECONDS (5).
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

os.environ["BERTH_TEST_STORAGE_DRIVER"] = "s3"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ADMIN_AUTH, ADMIN_CREDS, OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, Berthd, free_port  # noqa: E402

REPS = int(os.environ.get("S3_BENCH_REPS", "3"))
PUSH_MIB = int(os.environ.get("S3_BENCH_PUSH_MIB", "256"))
WRK_S = int(os.environ.get("S3_BENCH_WRK_SECONDS", "5"))
MiB = 1 << 20


def tree_hwm(pid):
    """VmHWM of a process and its descendants, MiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                total += int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(x) for x in f.read().split()]
        except (OSError, AttributeError):
            pass
    return total / 1024


def curl_time(args):
    out = subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null", "-w", "%{time_total} %{size_download} %{size_upload}", *args],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


class Target:
    def __init__(self, label, url, auth):
        self.label, self.url, self.auth = label, url, auth

    def hdr(self):
        return ["-H", "Authorization: " + self.auth] if self.auth else []

    def push_blob(self, path, digest, repo):
        req = urllib.request.Request(self.url + "/v2/%s/blobs/uploads/" % repo, method="POST", data=b"")
        if self.auth:
            req.add_header("Authorization", self.auth)
        with urllib.request.urlopen(req) as r:
            loc = r.headers["Location"]
        if loc.startswith("/"):
            loc = self.url + loc
        sep = "&" if "?" in loc else "?"
        t, _, up = curl_time([*self.hdr(), "-X", "PUT", "-H", "Content-Type: application/octet-stream", "-T", path,
                              loc + sep + "digest=" + digest])
        assert up == os.path.getsize(path), (self.label, up)
        return t

    def put(self, path, body, ctype):
        req = urllib.request.Request(self.url + path, method="PUT", data=body, headers={"Content-Type": ctype})
        if self.auth:
            req.add_header("Authorization", self.auth)
        urllib.request.urlopen(req).read()

    def blob_args(self, repo, digest):
        return [*self.hdr(), self.url + "/v2/%s/blobs/%s" % (repo, digest)]


def s3_args(env, key):
    return ["--aws-sigv4", "aws:amz:%s:s3" % env["BERTH_S3_REGION"], "--user",
            "%s:%s" % (env["BERTH_S3_ACCESS_KEY"], env["BERTH_S3_SECRET_KEY"]), "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "%s/%s/%s" % (env["BERTH_S3_ENDPOINT"], env["BERTH_S3_BUCKET"], key)]


def parallel(n, fn):
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        t0 = time.time()
        res = list(ex.map(lambda i: fn(i), range(n)))
        return time.time() - t0, res


def wrk_rps(url, auth):
    args = ["wrk", "-t1", "-c64", "-d%ds" % WRK_S, "-H", "Accept: " + OCI_MANIFEST]
    if auth:
        args += ["-H", "Authorization: " + auth]
    out = subprocess.run(args + [url], capture_output=True, text=True, check=True).stdout
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert non2xx is None, out
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def start_distribution(env, work):
    port = free_port()
    cfg = os.path.join(work, "registry.yml")
    with open(cfg, "w") as f:
        f.write("""version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage:
  s3:
    region: %s
    regionendpoint: %s
    bucket: %s
    accesskey: %s
    secretkey: %s
    secure: false
    v4auth: true
    rootdirectory: /distribution-bench
  redirect: {disable: true}
  cache: {blobdescriptor: inmemory}
  delete: {enabled: true}
http: {addr: 127.0.0.1:%d}
""" % (env["BERTH_S3_REGION"], env["BERTH_S3_ENDPOINT"], env["BERTH_S3_BUCKET"], env["BERTH_S3_ACCESS_KEY"],
            env["BERTH_S3_SECRET_KEY"], port))
    denv = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}  # else its S3 session fails to start
    log = open(os.path.join(work, "registry.log"), "w")
    p = subprocess.Popen(["docker-registry", "serve", cfg], env=denv, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/v2/" % port).read()
            break
        except Exception:
            time.sleep(0.05)
    return p, "http://127.0.0.1:%d" % port


def main():
    work = tempfile.mkdtemp(prefix="bench-s3-")
    b = Berthd(env={"BERTH_LOG_LEVEL": "warn", "BERTH_PROJECTS_AUTO_CREATE": "true"})
    b.start()
    env = b.env
    dproc, durl = start_distribution(env, work)
    targets = [Target("berth (s3)", "http://%s" % b.host, ADMIN_AUTH), Target("distribution 2.8 (s3)", durl, None)]
    pids = {targets[0].label: b.proc.pid, targets[1].label: dproc.pid}
    la = open("/proc/loadavg").read().split()[:3]
    results = {t.label: {} for t in targets}
    results["direct RGW GET"] = {}

    def rec(label, metric, v):
        results[label].setdefault(metric, []).append(v)

    # content: one 16 MiB layer + config + manifest (image bench/app:v1) and a PUSH_MIB blob per repetition
    layer = os.urandom(16 * MiB)
    config = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'
    ld, cd = "sha256:" + hashlib.sha256(layer).hexdigest(), "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(config)},
                           "layers": [{"mediaType": OCI_LAYER, "digest": ld, "size": len(layer)}]}).encode()
    lpath = os.path.join(work, "layer")
    with open(lpath, "wb") as f:
        f.write(layer)
    for t in targets:
        t.push_blob(lpath, ld, "bench/app")
        cpath = os.path.join(work, "config")
        with open(cpath, "wb") as f:
            f.write(config)
        t.push_blob(cpath, cd, "bench/app")
        t.put("/v2/bench/app/manifests/v1", manifest, OCI_MANIFEST)
    big_digest = None
    for rep in range(REPS):
        big = os.path.join(work, "big")
        data = os.urandom(PUSH_MIB * MiB)
        with open(big, "wb") as f:
            f.write(data)
        big_digest = "sha256:" + hashlib.sha256(data).hexdigest()
        del data
        for t in targets:
            s = t.push_blob(big, big_digest, "bench/big")
            rec(t.label, "push MiB/s", PUSH_MIB / s)
    big_key = "%s/blobs/sha256/%s/%s" % (env["BERTH_S3_PREFIX"], big_digest[7:9], big_digest[7:])
    readers = [(t.label, lambda t=t: t.blob_args("bench/big", big_digest)) for t in targets]
    readers.append(("direct RGW GET", lambda: s3_args(env, big_key)))
    for rep in range(REPS):
        for label, args in readers:
            s, n, _ = curl_time(args())
            assert n == PUSH_MIB * MiB, (label, n)
            rec(label, "pull 1 client MiB/s", PUSH_MIB / s)
        for label, args in readers:
            wall, res = parallel(32, lambda i: curl_time(args()))
            assert all(r[1] == PUSH_MIB * MiB for r in res), label
            rec(label, "pull 32 clients MiB/s (aggregate)", 32 * PUSH_MIB / wall)
        for t in targets:
            rec(t.label, "manifest GET by tag req/s (wrk c64)", wrk_rps(t.url + "/v2/bench/app/manifests/v1", t.auth))
        for t in targets:
            def one(i, t=t):
                curl_time([*t.hdr(), "-H", "Accept: " + OCI_MANIFEST, t.url + "/v2/bench/app/manifests/v1"])
                curl_time(t.blob_args("bench/app", cd))
                return curl_time(t.blob_args("bench/app", ld))[1]
            wall, res = parallel(200, one)
            assert all(n == len(layer) for n in res), t.label
            rec(t.label, "burst 200 clients x (manifest+config+16 MiB) s", wall)
    for t in targets:
        results[t.label]["peak RSS MiB (VmHWM, tree)"] = [tree_hwm(pids[t.label])]
    la_end = open("/proc/loadavg").read().split()[:3]
    dproc.terminate()
    dproc.wait()
    b.cleanup()
    shutil.rmtree(work, ignore_errors=True)

    labels = [t.label for t in targets] + ["direct RGW GET"]
    metrics = []
    for lab in labels:
        for m in results[lab]:
            if m not in metrics:
                metrics.append(m)
    print("\nbench_s3: %d repetitions, push blob %d MiB, wrk %d s; load average at start %s, at end %s; %d CPUs"
          % (REPS, PUSH_MIB, WRK_S, " ".join(la), " ".join(la_end), os.cpu_count()))
    print("| metric | " + " | ".join(labels) + " | Berth / Distribution | Berth / direct |")
    print("|---" * (len(labels) + 3) + "|")
    for m in metrics:
        med = {lab: statistics.median(results[lab][m]) if results[lab].get(m) else None for lab in labels}
        cells = []
        for lab in labels:
            v = results[lab].get(m)
            cells.append("%.1f (%s)" % (med[lab], ", ".join("%.1f" % x for x in v)) if v else "n/a")
        r1 = "%.2f" % (med[labels[0]] / med[labels[1]]) if med[labels[1]] else "-"
        r2 = "%.2f" % (med[labels[0]] / med[labels[2]]) if med[labels[2]] else "-"
        print("| %s | %s | %s | %s |" % (m, " | ".join(cells), r1, r2))


if __name__ == "__main__":
    main()
