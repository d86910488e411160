"""Benchmark (not a test; docs/benchmarks.md): manifest PUT latency on an idle berthd for images of 2 and 40 references
(config + layers), one client, N PUTs each (the first 20 not counted).

    BERTHD=build/registry/berthd BERTH_TEST_PG_DIR=… BERTH_TEST_PG_PORT=… python3 tests/integration/bench_put.py
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, Berthd  # noqa: E402

N = int(os.environ.get("N", "400"))
b = Berthd(env={"BERTH_LOG_LEVEL": "warn"}).start()
try:
    assert b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": "bench"}).encode(), {"Content-Type": "application/json"})[0] == 201
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    cd = b.push_blob("bench/live", cfg)
    layers = [b.push_blob("bench/live", os.urandom(256)) for _ in range(40)]
    for L in (2, 40):
        lat = []
        for i in range(N):
            m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
                            "layers": [{"mediaType": OCI_LAYER, "digest": d, "size": 256} for d in layers[:L - 1]], "annotations": {"n": str(i)}}).encode()
            t = time.perf_counter()
            st, _, _ = b.request("PUT", "/v2/bench/live/manifests/t%d-%d" % (L, i), m, {"Content-Type": OCI_MANIFEST})
            lat.append(time.perf_counter() - t)
            assert st == 201, st
        lat = sorted(lat[20:])
        print("refs=%d PUT p50 %.2f ms p90 %.2f ms p99 %.2f ms" % (L, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * .9)] * 1e3, lat[int(len(lat) * .99)] * 1e3), flush=True)
finally:
    b.stop()
