"""Benchmark, not a test (docs/benchmarks.md, issue 13): what busy CPUs alone do to the manifest PUT/GET latency that
bench_gc.py measures during a GC run. The same one-client load (a manifest PUT by tag, then its GET) for 10 s with
nothing else running, then beside N busy loops (`sh -c 'while :; do :; done'`) at a scheduling class or nice level:
no garbage collection, no database work besides the load's own.

    BERTH_TEST_PG_DIR=… BERTH_TEST_PG_PORT=… python3 tests/integration/bench_cpu_tail.py
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, ACCEPT_ALL, Berthd  # noqa: E402

SECONDS = float(os.environ.get("CPU_TAIL_SECONDS", "10"))
# (busy loops, how they run): "idle" is SCHED_IDLE (chrt -i 0), a number is a nice level
CASES = ((0, None), (1, "idle"), (1, 0), (2, "idle"), (5, 19), (5, 0))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] * 1000


def load(b, seconds, prefix):
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layer = os.urandom(512)
    ld, cd = b.push_blob("bench/live", layer), b.push_blob("bench/live", cfg)
    puts, gets = [], []
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        i += 1
        m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
                        "layers": [{"mediaType": OCI_LAYER, "digest": ld, "size": len(layer)}]}).encode() + b" " * i
        t = time.perf_counter()
        st, _, _ = b.request("PUT", "/v2/bench/live/manifests/%s%d" % (prefix, i), m, {"Content-Type": OCI_MANIFEST})
        puts.append(time.perf_counter() - t)
        assert st == 201, st
        t = time.perf_counter()
        st, _, _ = b.request("GET", "/v2/bench/live/manifests/%s%d" % (prefix, i), headers={"Accept": ACCEPT_ALL})
        gets.append(time.perf_counter() - t)
        assert st == 200, st
    return puts, gets


b = Berthd(env={"BERTH_LOG_LEVEL": "warn"}).start()
try:
    st = b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": "bench"}).encode(), {"Content-Type": "application/json"})[0]
    assert st == 201, st
    print("CPUs: %d; sched_autogroup_enabled: %s" % (os.cpu_count(), open("/proc/sys/kernel/sched_autogroup_enabled").read().strip()))
    for n, how in CASES:
        loops = [subprocess.Popen((["chrt", "-i", "0"] if how == "idle" else ["nice", "-n", str(how)]) + ["sh", "-c", "while :; do :; done"])
                 for _ in range(n)]
        time.sleep(0.5)
        try:
            p, g = load(b, SECONDS, "c%d%s-" % (n, how))
        finally:
            for x in loops:
                x.kill()
                x.wait()
        what = "nothing else" if n == 0 else "%d busy loop(s), %s" % (n, "SCHED_IDLE" if how == "idle" else "nice %d" % how)
        print("%-32s PUT p50/p99 %5.1f/%5.1f ms   GET p50/p99 %4.1f/%5.1f ms   (n=%d)" %
              (what, pct(p, 50), pct(p, 99), pct(g, 50), pct(g, 99), len(p)), flush=True)
finally:
    b.cleanup()
