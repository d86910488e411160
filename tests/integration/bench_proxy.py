"""Benchmark (docs/benchmarks.md): the registry-bench burst (BURST_CLIENTS clients, each manifest + config + layer,
/work/shared/bench/registry-bench --only burst) against a local project, a cold proxy-cache project (nothing held:
the burst's first requests fetch from the upstream) and the same proxy project warm. The upstream is a stock
Distribution behind test_proxy's counting forwarder, so the bytes and requests that reached it are measured.

    BURST_CLIENTS=2000 BURST_LAYER_MIB=1 python3 tests/integration/bench_proxy.py

Not a CTest suite (minutes of CPU on a shared machine); it needs the test PostgreSQL (BERTH_TEST_PG_DIR/PORT).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from harness import ADMIN_PASSWORD, OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, Berthd, free_port, sha256
from test_proxy import Upstream, add_endpoint, dist_blob, dist_request, metric, proxy_project

BENCH = os.environ.get("REGISTRY_BENCH", "/work/shared/bench/registry-bench")
CLIENTS = int(os.environ.get("BURST_CLIENTS", "2000"))
LAYER_MIB = int(os.environ.get("BURST_LAYER_MIB", "1"))


def image():
    layer = os.urandom(LAYER_MIB << 20)
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": sha256(cfg), "size": len(cfg)},
         "layers": [{"mediaType": OCI_LAYER, "digest": sha256(layer), "size": len(layer)}]}
    return layer, cfg, json.dumps(m).encode()


def state_file(tmp, raw, m):
    """The part of registry-bench's state the burst reads (it pulls regbench/burst:<tag>)."""
    s = {"burst": {"repo": "regbench/burst", "tag": "1", "manifest": {"digest": sha256(raw), "size": len(raw), "mediaType": OCI_MANIFEST},
                   "config": m["config"], "layers": m["layers"]}}
    path = os.path.join(tmp, "state.json")
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def load_bench():
    """registry-bench as a module: its burst (asyncio clients, one connection each, manifest + config + layer)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("registry_bench", BENCH)
    spec = importlib.util.spec_from_loader("registry_bench", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def burst(rb, b, state, label):
    t = rb.Target(label, "http://" + b.host, user="admin", password=ADMIN_PASSWORD)
    cpu0 = cpu_seconds(b)
    wall, p99, fails = rb.burst(t, {"BURST_CLIENTS": CLIENTS, "BURST_KEEP_GOING": 1}, state)
    return wall, p99, sum(fails.values()), dict(fails), cpu_seconds(b) - cpu0


def cpu_seconds(b):
    """berthd's and its nginx workers' CPU (utime + stime from /proc of the process tree), seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for pid in os.listdir("/proc"):
        try:
            f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
            stats[int(pid)] = (int(f[1]), (int(f[11]) + int(f[12])) / tick)  # ppid, utime + stime
        except (OSError, ValueError, IndexError):
            continue
    tree = {b.proc.pid}
    for _ in range(3):
        tree |= {p for p, (pp, _) in stats.items() if pp in tree}
    return sum(stats[p][1] for p in tree if p in stats)


def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one socket per burst client
    tmp = tempfile.mkdtemp(prefix="bench-proxy-")
    dport = free_port()
    cfg = os.path.join(tmp, "config.yml")
    with open(cfg, "w") as f:
        f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\nhttp:\n  addr: 127.0.0.1:%d\n"
                % (tmp, dport))
    dist = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    up = Upstream(dport)
    layer, cfgb, raw = image()
    m = json.loads(raw)
    dist_blob(dport, "burst", layer)
    dist_blob(dport, "burst", cfgb)
    assert dist_request(dport, "PUT", "/v2/burst/manifests/1", raw, {"Content-Type": OCI_MANIFEST})[0] == 201
    state = json.load(open(state_file(tmp, raw, m)))
    rb = load_bench()
    out = []
    local = Berthd().start()
    proxy = Berthd().start()
    try:
        local.project("regbench")
        local.push_blob("regbench/burst", layer)
        local.push_blob("regbench/burst", cfgb)
        assert local.push_manifest("regbench/burst", "1", raw)[0] == 201
        reg = add_endpoint(proxy, "dist", "http://127.0.0.1:%d" % up.port, "docker-registry")
        proxy_project(proxy, "regbench", reg)
        walls = {}
        # warm and local twice, alternating, so the ratio is taken side by side on the same (shared) machine
        for label, b in (("local project", local), ("proxy cold", proxy), ("proxy warm", proxy), ("local project", local),
                         ("proxy warm", proxy)):
            before_req, before_bytes = up.total(), metric(proxy, "berth_proxy_upstream_bytes_total")
            wall, p99, nfail, fails, cpu = burst(rb, b, state, label)
            out.append("| %s | %d | %.2f s | %.2f s | %.2f s | %d | %d | %s |" % (
                label, CLIENTS, wall, p99 or -1, cpu, up.total() - before_req,
                metric(proxy, "berth_proxy_upstream_bytes_total") - before_bytes, "%d %s" % (nfail, fails) if nfail else "0"))
            print(out[-1], flush=True)
            walls.setdefault(label, []).append(wall)
    finally:
        local.cleanup()
        proxy.cleanup()
        up.stop()
        dist.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    print("| project | clients | wall | p99 client | berthd+edge CPU | upstream requests | upstream bytes | failed |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(out))
    print("warm / local wall time: %.2f (sum of the two warm runs over the sum of the two local ones)"
          % (sum(walls["proxy warm"]) / sum(walls["local project"])))


if __name__ == "__main__":
    sys.exit(main())
