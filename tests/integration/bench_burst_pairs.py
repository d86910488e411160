#!/usr/bin/env python3
"""Benchmark, not a test (docs/benchmarks.md, issue 18): the shared harness's burst client against Berth and a
reference nginx serving the same files, alternating, many pairs, and each server's CPU split by process. Quicker
and steadier than anchors-run for one question: how much CPU does Berth's tree spend on a burst next to nginx's?

    tests/integration/bench_burst_pairs.py [PAIRS [CLIENTS]]      (defaults 10 and 2000; run as root, machine quiet)

FIRST=nginx runs the reference first in each pair (default Berth, as anchors-run's first repetition does).
LARGE_BEFORE=1 first has 32 curl clients GET a 128 MiB file from the reference in each pair, as anchors-run's large
GET phase does right before its bursts; LARGE_BEFORE=berth has them GET a 128 MiB blob from Berth instead (in
anchors-run Berth serves the last large repetition right before its first burst). FAULTS=1 prints each burst's
minor page faults in the server's tree. IDLE=<s> sleeps that long before each Berth burst (the gate's decision and
the edge's links run out); WARM=1 has one client fetch the three first (both kept). DETAIL=1 prints, per burst,
how many requests reached berthd itself, the client's own CPU, client completion quantiles and the kernel's TCP
counters that moved (listen overflows, retransmission timeouts, loopback backlog drops).

berthd (build/registry/berthd, or $BIN) runs on a fresh private PostgreSQL with Basic credentials on every request,
as tests/integration/bench_anchors_burst.sh runs it; the reference is nginx with the harness's configuration. Each
client fetches a manifest by tag, its config and a 1 MiB layer (registry-bench's _burst).
"""
import asyncio
import base64
import hashlib
import importlib.machinery
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import types
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.environ.get("BENCH", os.path.join(ROOT, "..", "shared", "bench"))
BIN = os.environ.get("BIN", os.path.join(ROOT, "build", "registry", "berthd"))
D = os.environ.get("D", "/tmp/berth-burst-pairs")
PW, PORT, REF_PORT, PG_PORT = "Bench-pass-1234", 5074, 5091, 55724
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
rb = importlib.machinery.SourceFileLoader("rb", os.path.join(BENCH, "registry-bench")).load_module()


def http(method, url, data=None, headers=None):
    h = {"Authorization": "Basic " + base64.b64encode(("admin:" + PW).encode()).decode()}
    h.update(headers or {})
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=h)) as r:
        return r.status, dict(r.headers), r.read()


def push(base, repo, blob):
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    _, h, _ = http("POST", "%s/v2/%s/blobs/uploads/" % (base, repo))
    loc = {k.lower(): v for k, v in h.items()}["location"]
    loc = loc if loc.startswith("http") else base + loc
    http("PUT", loc + ("&" if "?" in loc else "?") + "digest=" + digest, blob, {"Content-Type": "application/octet-stream"})
    return digest


def tree(pid):
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [pid] + [p for k in kids for p in tree(int(k))]


def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def minflt(pid):
    return int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[7])


def hwm_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def netstat():
    """The kernel's TCP counters that tell a listen queue overflow or a retransmitted SYN"""
    want, out = ("ListenOverflows", "ListenDrops", "TCPSynRetrans", "TCPTimeouts", "TCPReqQFullDrop", "TCPBacklogDrop"), {}
    lines = open("/proc/net/netstat").read().splitlines()
    for head, vals in zip(lines[::2], lines[1::2]):
        for k, v in zip(head.split()[1:], vals.split()[1:]):
            if k in want:
                out[k] = int(v)
    out["softnet_dropped"] = sum(int(line.split()[1], 16) for line in open("/proc/net/softnet_stat"))  # backlog full
    return out


def answered(port):
    """Requests berthd answered itself (its /metrics), 0 for the reference"""
    if port != PORT:
        return 0
    _, _, body = http("GET", "http://127.0.0.1:%d/metrics" % PORT)
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in body.decode().splitlines()
               if line.startswith("berth_http_requests_total{") and 'route="metrics"' not in line)


def burst(port, pid, steps, n):
    """-> (wall s, {pid: CPU s}, peak RSS of the tree in MiB: the sum of each process's high-water mark, reset first)"""
    t = types.SimpleNamespace(host="127.0.0.1", port=port, hostport="127.0.0.1:%d" % port, label=str(port))
    procs = tree(pid)
    for p in procs:
        with open("/proc/%d/clear_refs" % p, "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    c0, f0 = {p: cpu(p) for p in procs}, sum(minflt(p) for p in procs)
    before = answered(port) if os.environ.get("DETAIL") == "1" else None
    net0 = netstat()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    wall, per, fails = asyncio.run(rb._burst(t, n, steps, 600, True))
    if before is not None and per:
        ru2 = resource.getrusage(resource.RUSAGE_SELF)
        q = lambda f: per[int(f * (len(per) - 1))]
        print("  port %d: %d requests reached berthd; the client's CPU %.2f s user %.2f s sys; client completion p1 %.2f "
              "p10 %.2f p50 %.2f p90 %.2f s" % (port, answered(port) - before, ru2.ru_utime - ru.ru_utime, ru2.ru_stime - ru.ru_stime,
                                                q(0.01), q(0.1), q(0.5), q(0.9)), flush=True)
        net1 = netstat()
        print("  port %d: kernel: %s" % (port, " ".join("%s %d" % (k, net1[k] - net0[k]) for k in sorted(net1) if net1[k] != net0[k])))
    if os.environ.get("FAULTS") == "1":
        print("  port %d: %d minor faults in the burst" % (port, sum(minflt(p) for p in procs) - f0), flush=True)
    if fails:
        sys.exit("port %d: failed clients %s" % (port, dict(fails)))
    return wall, {p: cpu(p) - c0[p] for p in procs}, sum(hwm_kib(p) for p in procs) / 1024


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    clients = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    shutil.rmtree(D, ignore_errors=True)
    os.makedirs(D)
    conn = subprocess.run([os.path.join(ROOT, "deploy", "berth-pg"), "start", D + "/pg", str(PG_PORT)], capture_output=True,
                          text=True, check=True).stdout.strip()
    env = dict(os.environ, BERTH_DATABASE_URL=conn, BERTH_STORAGE_ROOT=D + "/store", BERTH_HTTP_ADDR="127.0.0.1:%d" % PORT,
               BERTH_LOG_LEVEL="warn", BERTH_PROJECTS_AUTO_CREATE="true", BERTH_EDGE_ALLOW_ROOT="true", BERTH_ADMIN_PASSWORD=PW)
    berthd = subprocess.Popen([BIN], env=env, stdout=open(D + "/berthd.log", "w"), stderr=subprocess.STDOUT)
    nginx = None
    try:
        base = "http://127.0.0.1:%d" % PORT
        for _ in range(100):
            try:
                http("GET", base + "/v2/")
                break
            except OSError:
                time.sleep(0.2)
        layer = hashlib.sha256(b"burst-pairs").digest() * (1 << 15)  # 1 MiB, the same every run
        config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        repo = "bench/burst"
        cd, ld = push(base, repo, config), push(base, repo, layer)
        manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                               "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": len(config)},
                               "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": len(layer)}]
                               }).encode()
        http("PUT", "%s/v2/%s/manifests/v1" % (base, repo), manifest, {"Content-Type": OCI_MANIFEST})
        # the reference: the harness's nginx configuration over the same bytes
        static = D + "/static/v2/" + repo
        for sub, name, data in (("blobs", cd, config), ("blobs", ld, layer), ("manifests", "v1", manifest)):
            os.makedirs(os.path.join(static, sub), exist_ok=True)
            with open(os.path.join(static, sub, name), "wb") as f:
                f.write(data)
        for sub in ("nginx", "nginx/body", "nginx/proxy", "nginx/fastcgi", "nginx/uwsgi", "nginx/scgi"):
            os.makedirs(os.path.join(D, sub), exist_ok=True)
        with open(D + "/nginx.conf", "w") as f:
            f.write("""worker_processes auto; daemon off; user root; pid %(d)s/nginx/nginx.pid; error_log %(d)s/nginx/error.log warn;
events { worker_connections %(wc)d; }
http { access_log off; sendfile on; tcp_nopush on; tcp_nodelay on; keepalive_timeout 75s; keepalive_requests 100000000;
  open_file_cache max=10000 inactive=60s; open_file_cache_valid 60s; client_body_temp_path %(d)s/nginx/body;
  proxy_temp_path %(d)s/nginx/proxy; fastcgi_temp_path %(d)s/nginx/fastcgi; uwsgi_temp_path %(d)s/nginx/uwsgi;
  scgi_temp_path %(d)s/nginx/scgi; types {} default_type application/octet-stream;
  server { listen 127.0.0.1:%(p)d backlog=4096; root %(d)s/static;
    add_header Docker-Distribution-Api-Version registry/2.0 always;
    location ~ ^/v2/.+/manifests/[^/]+$ { default_type %(m)s; }
    location ~ "^/v2/.+/blobs/(sha256:[0-9a-f]{64})$" { add_header Docker-Content-Digest $1 always;
      add_header Docker-Distribution-Api-Version registry/2.0 always; } } }
""" % {"d": D, "p": REF_PORT, "m": OCI_MANIFEST, "wc": max(4096, clients + 1024)})
        nginx = subprocess.Popen(["nginx", "-c", D + "/nginx.conf"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        time.sleep(1)
        auth = {"Authorization": "Basic " + base64.b64encode(("admin:" + PW).encode()).decode()}

        def steps(hdr):
            return [("GET", "/v2/%s/manifests/v1" % repo, dict(hdr, Accept=OCI_MANIFEST), len(manifest)),
                    ("GET", "/v2/%s/blobs/%s" % (repo, cd), hdr, len(config)), ("GET", "/v2/%s/blobs/%s" % (repo, ld), hdr, len(layer))]
        print("pids: Berth %s, nginx %s" % (tree(berthd.pid), tree(nginx.pid)), flush=True)  # for perf record -a
        rows = []
        large = os.environ.get("LARGE_BEFORE")
        if large in ("1", "berth"):  # the large file only when it is used
            big = os.urandom(1 << 20) * 128
            with open(D + "/static/big", "wb") as f:
                f.write(big)
            big_url = "http://127.0.0.1:%d/big" % REF_PORT
            if large == "berth":  # from Berth, as anchors-run's last large repetition before Berth's first burst
                big_url = "%s/v2/%s/blobs/%s" % (base, repo, push(base, repo, big))
                big_auth = ["-u", "admin:" + PW]
        for i in range(pairs):
            if large in ("1", "berth"):
                curls = [subprocess.Popen(["curl", "-sf", "-o", "/dev/null"] + (big_auth if large == "berth" else []) + [big_url])
                         for _ in range(32)]
                for c in curls:
                    c.wait()
            if os.environ.get("FIRST") == "nginx":
                b, cb, mb = burst(REF_PORT, nginx.pid, steps({}), clients)
                time.sleep(1)
            if os.environ.get("IDLE"):  # the gate's decision (10 s) and the edge's links run out first
                time.sleep(float(os.environ["IDLE"]))
            if os.environ.get("WARM") == "1":  # one client first: the decision and the links are kept
                burst(PORT, berthd.pid, steps(auth), 1)
            a, ca, ma = burst(PORT, berthd.pid, steps(auth), clients)
            time.sleep(1)
            if os.environ.get("FIRST") != "nginx":
                b, cb, mb = burst(REF_PORT, nginx.pid, steps({}), clients)
                time.sleep(1)
            rows.append((a, b, sum(ca.values()), sum(cb.values()), ca.get(berthd.pid, 0), ma, mb))
            print("pair %d: wall Berth %.2f s nginx %.2f s (%.2fx) | CPU Berth %.2f s (berthd %.2f, edge %.2f) nginx %.2f s | "
                  "peak RSS Berth %.1f MiB nginx %.1f MiB" % (i + 1, a, b, a / b, rows[-1][2], rows[-1][4], rows[-1][2] - rows[-1][4],
                                                             rows[-1][3], ma, mb), flush=True)
        med = statistics.median
        print("%d pairs of %d clients: wall ratio median %.3f; CPU median Berth %.3f s (berthd %.3f) nginx %.3f s (%.2fx); "
              "peak RSS median Berth %.1f MiB nginx %.1f MiB" % (
                  pairs, clients, med([r[0] / r[1] for r in rows]), med([r[2] for r in rows]), med([r[4] for r in rows]),
                  med([r[3] for r in rows]), med([r[2] for r in rows]) / med([r[3] for r in rows]), med([r[5] for r in rows]),
                  med([r[6] for r in rows])))
    finally:
        if nginx:
            nginx.terminate()
            nginx.wait()
        berthd.terminate()
        berthd.wait()
        subprocess.run([os.path.join(ROOT, "deploy", "berth-pg"), "stop", D + "/pg"], capture_output=True)


if __name__ == "__main__":
    main()
