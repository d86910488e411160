"""Benchmark of garbage collection (not a test; docs/benchmarks.md, issue 13): 1,000,000 blob rows and 100,000
manifests seeded straight into PostgreSQL (synthetic rows; small files for the blobs that become garbage), then
one full run with delete_untagged, timed, while a client pushes and pulls manifests; the p99 of those requests
during the run is compared with the same load while idle.

    cmake --build build && (cd build && ctest -R pg_start)
    BERTH_TEST_PG_DIR=… BERTH_TEST_PG_PORT=… python3 tests/integration/bench_gc.py

Sizes: GC_BENCH_BLOBS (1000000), GC_BENCH_MANIFESTS (100000), GC_BENCH_GARBAGE (percent of manifests untagged, 20),
GC_BENCH_LOAD_SECONDS (idle load phase, 20), GC_BENCH_WORKERS (the run's `workers`: connections sweeping and threads unlinking, 1).
GC_BENCH_STATEMENTS=1 prints the statements that took the run's database time (pg_stat_statements; the cluster must
have it in shared_preload_libraries: `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'` and a restart).
"""
import calendar
import hashlib
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, ACCEPT_ALL, Berthd, psql  # noqa: E402

BLOBS = int(os.environ.get("GC_BENCH_BLOBS", "1000000"))
MANIFESTS = int(os.environ.get("GC_BENCH_MANIFESTS", "100000"))
GARBAGE_PCT = int(os.environ.get("GC_BENCH_GARBAGE", "20"))
LOAD_S = float(os.environ.get("GC_BENCH_LOAD_SECONDS", "20"))
WORKERS = int(os.environ.get("GC_BENCH_WORKERS", "1"))
STATEMENTS = os.environ.get("GC_BENCH_STATEMENTS") == "1"
# A registry whose rows accumulated over months has had them vacuumed: without this, autovacuum's first pass over
# the freshly seeded million-row tables (hint bits, visibility map: every page written, WAL full of page images)
# runs during the idle baseline and the GC run and is measured as theirs. Its time is printed apart.
SETTLE = os.environ.get("GC_BENCH_SETTLE", "1") == "1"
REPOS = 1000
PER_MANIFEST = BLOBS // MANIFESTS  # blobs each manifest lists (10)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] * 1000 if xs else float("nan")


def seed(b):
    """repositories bench/r0000..; manifest i lists blobs i*10..i*10+9 (each blob once); every manifest is tagged except
    GARBAGE_PCT percent of them, whose blobs become garbage (and get a small file each)."""
    t = time.time()
    psql("""
INSERT INTO repositories (project_id, name) SELECT p.id, 'bench/r' || lpad(i::text, 4, '0') FROM projects p,
  generate_series(0, %(repos)d - 1) i WHERE p.name = 'bench';
INSERT INTO blobs (digest, size, created_at) SELECT 'sha256:' || encode(sha256(('blob-' || i)::bytea), 'hex'), 16 + i %% 100,
  now() - interval '1 day' FROM generate_series(0, %(blobs)d - 1) i;
INSERT INTO manifests (repository_id, digest, media_type, size, content, created_at)
  SELECT r.id, 'sha256:' || encode(sha256(('manifest-' || i)::bytea), 'hex'), '%(mt)s', 100, '{}'::bytea, now() - interval '1 day'
  FROM generate_series(0, %(mans)d - 1) i JOIN repositories r ON r.name = 'bench/r' || lpad((i %% %(repos)d)::text, 4, '0');
INSERT INTO manifest_refs (manifest_id, digest, kind, size)
  SELECT m.id, 'sha256:' || encode(sha256(('blob-' || (m.n * %(per)d + k))::bytea), 'hex'), 0, 16
  FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM manifests WHERE media_type = '%(mt)s' AND content = '{}'::bytea) m,
  generate_series(0, %(per)d - 1) k;
INSERT INTO repository_blobs (repository_id, digest, created_at)
  SELECT DISTINCT m.repository_id, x.digest, now() - interval '1 day' FROM manifest_refs x JOIN manifests m ON m.id = x.manifest_id
  WHERE m.content = '{}'::bytea;
INSERT INTO tags (repository_id, name, manifest_id)
  SELECT m.repository_id, 't' || m.id, m.id FROM manifests m WHERE m.content = '{}'::bytea AND m.id %% 100 >= %(garbage)d;
ANALYZE;
""" % {"repos": REPOS, "blobs": BLOBS, "mans": MANIFESTS, "per": PER_MANIFEST, "mt": OCI_MANIFEST, "garbage": GARBAGE_PCT},
         dbname=b.dbname)
    garbage = psql("SELECT string_agg(x.digest, ' ') FROM manifest_refs x JOIN manifests m ON m.id = x.manifest_id "
                   "WHERE m.content = '{}'::bytea AND NOT EXISTS (SELECT 1 FROM tags t WHERE t.manifest_id = m.id)",
                   dbname=b.dbname).split()
    for d in garbage:
        path = os.path.join(b.storage, "blobs", "sha256", d[7:9], d[7:])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"x" * 16)
    print("seeded %d blob rows, %d manifests (%d%% untagged), %d garbage files in %.1f s" %
          (BLOBS, MANIFESTS, GARBAGE_PCT, len(garbage), time.time() - t), flush=True)
    if SETTLE:
        t = time.time()
        psql("VACUUM (ANALYZE)", dbname=b.dbname)
        psql("CHECKPOINT")
        os.sync()  # the seed's files and pages on disk before the idle baseline, not written back during it
        print("settled (VACUUM (ANALYZE), CHECKPOINT, sync) in %.1f s" % (time.time() - t), flush=True)
    return len(garbage)


put_at = []  # wall-clock end of each PUT of the load during the run (per-phase p99)


def load(b, seconds, stop=None, prefix="i"):
    """One client alternating a manifest PUT (new tag on a real image) and a GET; returns (put, get) latencies."""
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layer = os.urandom(512)
    ld, cd = b.push_blob("bench/live", layer), b.push_blob("bench/live", cfg)
    puts, gets, errors = [], [], []
    end = time.time() + seconds
    i = 0
    while (stop is None and time.time() < end) or (stop is not None and not stop.is_set()):
        i += 1
        m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
                        "layers": [{"mediaType": OCI_LAYER, "digest": ld, "size": len(layer)}], "annotations": {"n": str(i)}}).encode()
        t = time.perf_counter()
        st, h, body = b.request("PUT", "/v2/bench/live/manifests/%s%d" % (prefix, i), m, {"Content-Type": OCI_MANIFEST})
        puts.append(time.perf_counter() - t)
        put_at.append(time.time())
        if st != 201:
            errors.append(st)
            continue
        t = time.perf_counter()
        st, _, _ = b.request("GET", "/v2/bench/live/manifests/%s%d" % (prefix, i), headers={"Accept": ACCEPT_ALL})
        gets.append(time.perf_counter() - t)
        if st != 200:
            errors.append(st)
    return puts, gets, errors


b = Berthd(env={"BERTH_LOG_LEVEL": "warn", "BERTH_GC_GRACE_SECONDS": "0"}).start()
try:
    assert b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": "bench"}).encode(),
                     {"Content-Type": "application/json"})[0] == 201
    files = seed(b)
    idle_put, idle_get, idle_err = load(b, LOAD_S)
    stop = threading.Event()
    res = {}
    th = threading.Thread(target=lambda: res.update(zip(("put", "get", "err"), load(b, 0, stop, "g"))))
    th.start()
    time.sleep(1)
    if STATEMENTS:
        psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()", dbname=b.dbname)
    t0 = time.time()
    st, h, _ = b.request("POST", "/api/v2.0/system/gc/schedule", json.dumps(
        {"schedule": {"type": "Manual"}, "parameters": {"delete_untagged": True, "workers": WORKERS}}).encode(), {"Content-Type": "application/json"})
    assert st == 201, st
    rid = h["location"].rsplit("/", 1)[1]
    while True:
        st, _, body = b.request("GET", "/api/v2.0/system/gc/" + rid)
        run = json.loads(body) if st == 200 else {}
        if run.get("job_status") in ("Success", "Error", "Stopped"):
            break
        time.sleep(0.2)
    wall = time.time() - t0
    stop.set()
    th.join()
    log = b.request("GET", "/api/v2.0/system/gc/%s/log" % rid)[2].decode()
    p = run["progress"]
    print("run %s: %s in %.1f s (start %s, end %s)" % (rid, run["job_status"], wall, run["start_time"], run["end_time"]))
    print("  manifests deleted %d, links deleted %d, blobs deleted %d (%d bytes), orphan files %d; garbage files seeded %d" %
          (p["manifests_deleted"], p["links_deleted"], p["blobs_deleted"], p["bytes_freed"], p["orphan_files"], files))
    for line in log.splitlines():
        if "marked" in line or "deleted" in line and "blob sha256" not in line and "manifest " not in line or "done" in line:
            print("  " + line)
    print("manifest PUT p50/p99 ms: idle %.1f/%.1f (n=%d), during GC %.1f/%.1f (n=%d)" %
          (pct(idle_put, 50), pct(idle_put, 99), len(idle_put), pct(res["put"], 50), pct(res["put"], 99), len(res["put"])))
    print("manifest GET p50/p99 ms: idle %.1f/%.1f (n=%d), during GC %.1f/%.1f (n=%d)" %
          (pct(idle_get, 50), pct(idle_get, 99), len(idle_get), pct(res["get"], 50), pct(res["get"], 99), len(res["get"])))
    print("errors (non-2xx): idle %s, during GC %s" % (idle_err, res["err"]))
    # PUT p99 per phase of the run: between consecutive log lines (second resolution)
    marks = [(t0, "start")]
    for line in log.splitlines():
        if ("marked" in line or "deleted" in line and "blob sha256" not in line and "manifest " not in line) and line[:1] == "2":
            marks.append((calendar.timegm(time.strptime(line[:20], "%Y-%m-%dT%H:%M:%SZ")), line[21:60]))
    during = list(zip(put_at[-len(res["put"]):], res["put"]))
    for (a, _), (z, what) in zip(marks, marks[1:]):
        xs = [d for at, d in during if a <= at < z]
        print("  PUT p99 until '%s': %.1f ms (n=%d)" % (what, pct(xs, 99), len(xs)))
    if STATEMENTS:
        print("database time by statement (total ms, calls, mean ms, rows, statement):")
        print(psql("SELECT format('%%10s %%7s %%8s %%9s  %%s', round(total_exec_time)::bigint, calls, "
                   "round((total_exec_time / calls)::numeric, 2), rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 110)) "
                   "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() "
                   "ORDER BY total_exec_time DESC LIMIT 15", dbname=b.dbname))
finally:
    b.cleanup()
