"""Does the test gateway give deleted objects' space back? (not a test; docs/benchmarks.md, issue 19) An object of
MIB MiB (argument 2, 1024) is PUT and DELETEd CYCLES times (argument 3, 5) on a deploy/berth-ceph gateway (argument 1:
its directory), waiting WAIT s (argument 4, 12) after each delete; printed: the OSD's stat_bytes_used (memstore, from
its admin socket: `ceph df` needs a ceph-mgr, which berth-ceph does not run) after the PUT, after the DELETE and after
the wait. A PUT that does not finish within 60 s ends the run (the OSD is full).

    deploy/berth-ceph start /tmp/g 55678 && python3 tests/integration/bench_ceph_gc.py /tmp/g 1024 5 12
"""
import json
import os
import subprocess
import sys
import tempfile
import time

d = sys.argv[1]
mib, cycles, wait = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024), (int(sys.argv[3]) if len(sys.argv) > 3 else 5), \
    (float(sys.argv[4]) if len(sys.argv) > 4 else 12)
with open(os.path.join(d, "s3.env")) as f:
    env = dict(line.strip().split("=", 1) for line in f if "=" in line)
url = "%s/%s/gc-check" % (env["BERTH_S3_ENDPOINT"], env["BERTH_S3_BUCKET"])
auth = ["--aws-sigv4", "aws:amz:%s:s3" % env["BERTH_S3_REGION"], "--user", "%s:%s" % (env["BERTH_S3_ACCESS_KEY"], env["BERTH_S3_SECRET_KEY"]),
        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]


def used():
    out = subprocess.run(["timeout", "10", "ceph", "--admin-daemon", os.path.join(d, "run", "osd.0.asok"), "perf", "dump"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["osd"]["stat_bytes_used"] / 2**20


def curl(*args):
    return subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "60", *auth, *args],
                          capture_output=True, text=True).stdout


with tempfile.NamedTemporaryFile(prefix="gc-check-") as blob:
    subprocess.run(["head", "-c", str(mib << 20), "/dev/urandom"], stdout=blob, check=True)
    print("%d MiB objects, memstore %s MiB; start: %.0f MiB used" % (mib, int(env.get("BERTH_S3_MEMSTORE_BYTES", 0)) >> 20, used()), flush=True)
    t00 = time.time()
    for i in range(cycles):
        t0 = time.time()
        put = curl("-T", blob.name, url)
        t1 = time.time()
        a = used()
        gone = curl("-X", "DELETE", url)
        b = used()
        time.sleep(wait)
        print("cycle %d: PUT %s in %.1f s, %.0f MiB used; DELETE %s, %.0f MiB; %.0f s later %.0f MiB" % (
            i + 1, put, t1 - t0, a, gone, b, wait, used()), flush=True)
        if put != "200":
            break
    print("%.0f s in all" % (time.time() - t00))
