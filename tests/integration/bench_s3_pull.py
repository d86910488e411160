"""Pull profile of the s3 driver (not a test; docs/benchmarks.md, issue 19): one blob (PULL_MIB, 256) read with curl
through Berth's edge (auth by berthd, bytes proxied from a presigned URL) and straight from the gateway (curl
--aws-sigv4), 1 and 8 clients, interleaved PULL_REPS (5) times; medians, and the CPU time berthd + its edge spend
per GiB pulled (1 client). BENV="K=V ..." adds berthd environment. Needs the CTest fixtures pg and ceph:

    BERTH_TEST_PG_DIR=… BERTH_TEST_PG_PORT=… BERTH_TEST_CEPH_DIR=… BERTHD=build/registry/berthd \
      flock /work/wt/bench.lock python3 tests/integration/bench_s3_pull.py
"""
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["BERTH_TEST_STORAGE_DRIVER"] = "s3"
from harness import Berthd, ADMIN_AUTH
MIB = 1 << 20
SIZE = int(os.environ.get("PULL_MIB", "256")) * MIB
REPS = int(os.environ.get("PULL_REPS", "5"))
b = Berthd(env=dict(x.split("=", 1) for x in os.environ.get("BENV", "").split() if x)).start().project("p")
try:
    data = os.urandom(MIB) * (SIZE // MIB)
    d = b.push_blob("p/big", data)
    del data
    e = b.env
    direct = "%s/%s/%s/blobs/sha256/%s/%s" % (e["BERTH_S3_ENDPOINT"], e["BERTH_S3_BUCKET"], e["BERTH_S3_PREFIX"], d[7:9], d[7:])
    dargs = ["--aws-sigv4", "aws:amz:%s:s3" % e["BERTH_S3_REGION"], "--user", "%s:%s" % (e["BERTH_S3_ACCESS_KEY"], e["BERTH_S3_SECRET_KEY"]),
             "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", direct]
    eargs = ["-L", "-H", "Authorization: " + ADMIN_AUTH, "http://%s/v2/p/big/blobs/%s" % (b.host, d)]
    def one(args):
        out = subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", *args], capture_output=True, text=True, check=True).stdout.split()
        assert int(out[1]) == SIZE, out
        return float(out[0])
    def many(args, n):
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            list(ex.map(lambda _: one(args), range(n)))
        return n * SIZE / MIB / (time.time() - t0)
    def tree_cpu(pid):
        tot, todo = 0, [pid]
        while todo:
            q = todo.pop()
            try:
                f = open("/proc/%d/stat" % q).read().rsplit(")", 1)[1].split()
                tot += int(f[11]) + int(f[12])
                todo += [int(x) for x in open("/proc/%d/task/%d/children" % (q, q)).read().split()]
            except OSError:
                pass
        return tot / os.sysconf("SC_CLK_TCK")
    res = {"edge1": [], "direct1": [], "edge8": [], "direct8": []}
    cpu, gib = 0.0, 0.0
    one(eargs); one(dargs)
    for _ in range(REPS):
        res["direct1"].append(SIZE / MIB / one(dargs))
        c0 = tree_cpu(b.proc.pid)
        res["edge1"].append(SIZE / MIB / one(eargs))
        cpu += tree_cpu(b.proc.pid) - c0
        gib += SIZE / (1 << 30)
        res["direct8"].append(many(dargs, 8))
        res["edge8"].append(many(eargs, 8))
    m = {k: statistics.median(v) for k, v in res.items()}
    print("RESULT %s 1c edge %.0f direct %.0f ratio %.2f | 8c edge %.0f direct %.0f ratio %.2f | load %s" % (
        os.environ.get("LABEL", ""), m["edge1"], m["direct1"], m["edge1"] / m["direct1"], m["edge8"], m["direct8"], m["edge8"] / m["direct8"],
        open("/proc/loadavg").read().split()[0]))
    print("CPU berthd+edge per GiB pulled (1 client): %.3f s" % (cpu / gib))
    print({k: [round(x) for x in v] for k, v in res.items()})
finally:
    b.cleanup()
