"""Benchmark of the web UI (not a test; docs/benchmarks.md): seeds a project with 10,000 repositories and an
artifact with 1,000 tags straight into PostgreSQL, then runs webui/e2e/bench.mjs in Debian's chromium.

    cmake --build build && webui/build.sh && (cd build && ctest -R pg_start)
    BERTH_TEST_PG_DIR=… BERTH_TEST_PG_PORT=… python3 tests/integration/bench_webui.py
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ADMIN_PASSWORD, ROOT, Berthd, psql  # noqa: E402

b = Berthd(env={"BERTH_UI_DIR": os.path.join(ROOT, "webui", "dist"), "BERTH_LOG_LEVEL": "warn"}).start()
try:
    assert b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": "big", "metadata": {"public": "true"}}).encode(),
                     {"Content-Type": "application/json"})[0] == 201
    digest, _ = b.push_image("big/tagged", "t0000")
    psql("INSERT INTO repositories (project_id, name, pull_count, updated_at) SELECT p.id, 'big/r' || lpad(i::text, 5, '0'), "
         "(i * 7919) % 1000, now() - make_interval(secs => i) FROM projects p, generate_series(1, 9999) i WHERE p.name = 'big'",
         dbname=b.dbname)
    psql("INSERT INTO tags (repository_id, name, manifest_id) SELECT m.repository_id, 't' || lpad(i::text, 4, '0'), m.id "
         "FROM manifests m, generate_series(1, 999) i WHERE m.digest = '%s'" % digest, dbname=b.dbname)
    psql("ANALYZE", dbname=b.dbname)
    env = dict(os.environ, BERTH_UI_BASE="http://" + b.host, WEBUI_ARTIFACTS="/tmp/berth-webui-bench",
               BERTH_UI_FIXTURE=json.dumps({"admin_password": ADMIN_PASSWORD, "big_project": "big", "tagged_digest": digest}))
    # the API alone, for comparison: median of 20 requests for the heaviest list queries
    import time
    for path in ("/api/v2.0/projects/big/repositories?page=1&page_size=10", "/api/v2.0/projects/big/repositories?page=1&page_size=10&sort=-pull_count",
                 "/api/v2.0/projects/big/repositories?page=100&page_size=100&sort=-update_time",
                 "/api/v2.0/projects/big/repositories/tagged/artifacts/%s/tags?page=10&page_size=100" % digest):
        ts = []
        for _ in range(20):
            t0 = time.perf_counter()
            assert b.request("GET", path)[0] == 200
            ts.append((time.perf_counter() - t0) * 1000)
        print("api %s: median %.1f ms" % (path, sorted(ts)[10]))
    r = subprocess.run(["node", os.path.join(ROOT, "webui", "e2e", "bench.mjs")], cwd=os.path.join(ROOT, "webui"), env=env)
    sys.exit(r.returncode)
finally:
    b.cleanup()
