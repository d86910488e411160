"""SIGKILL during many concurrent pushes: every push that got 201 survives, and nothing partial is visible."""
import hashlib
import json
import os
import random
import signal
import threading
import time
import unittest

from harness import ACCEPT_ALL, OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, Berthd, main, psql, sha256


class CrashDuringPush(unittest.TestCase):
    def test_sigkill_under_load(self):
        b = Berthd().start().project("crash")
        acked_blobs, acked_manifests = [], []
        stop = threading.Event()
        lock = threading.Lock()
        errors = []  # why pushes failed before the kill: a load that never succeeds must say so

        def pusher(n):
            rnd = random.Random(n)
            i = 0
            while not stop.is_set():
                repo = "crash/r%d" % (n % 3)
                try:
                    data = os.urandom(rnd.randint(1000, 400000))
                    d = b.push_blob(repo, data, chunk=rnd.choice([None, 65536]))
                    with lock:
                        acked_blobs.append((repo, d))
                    cfg = json.dumps({"n": n, "i": i}).encode()
                    cd = b.push_blob(repo, cfg)
                    m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                         "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cfg)},
                         "layers": [{"mediaType": OCI_LAYER, "digest": d, "size": len(data)}]}
                    st, h, _, raw = b.push_manifest(repo, "t%d-%d" % (n, i), m)
                    if st == 201:
                        with lock:
                            acked_manifests.append((repo, "t%d-%d" % (n, i), sha256(raw)))
                except Exception as e:  # noqa: BLE001 - connections die with the server; only acks matter
                    if stop.is_set():
                        return
                    with lock:
                        errors.append(repr(e)[:200])
                    time.sleep(0.01)
                i += 1

        threads = [threading.Thread(target=pusher, args=(n,)) for n in range(8)]
        [t.start() for t in threads]
        # kill once the load has clearly started (enough acknowledged writes to mean something, and at least
        # a second of it), not after a fixed time: a slow sanitizer build on a busy machine needs longer
        start, deadline = time.monotonic(), time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                enough = len(acked_blobs) > 40 and len(acked_manifests) > 10
            if enough and time.monotonic() - start > 1:
                break
            time.sleep(0.05)
        b.stop(signal.SIGKILL)
        stop.set()
        [t.join(30) for t in threads]
        self.assertGreater(len(acked_blobs), 20, "the load was too light to mean anything; errors: %s" % errors[:5])
        self.assertGreater(len(acked_manifests), 5)

        b.start()  # same database and storage
        try:
            for repo, d in acked_blobs:
                st, h, body = b.request("GET", "/v2/%s/blobs/%s" % (repo, d))
                self.assertEqual((st, sha256(body)), (200, d), "acknowledged blob lost")
            for repo, tag, d in acked_manifests:
                st, h, body = b.request("GET", "/v2/%s/manifests/%s" % (repo, tag), headers={"Accept": ACCEPT_ALL})
                self.assertEqual((st, sha256(body)), (200, d), "acknowledged manifest lost")
            # no partial blob: every stored file is exactly the content its name promises
            root = os.path.join(b.storage, "blobs", "sha256")
            files = [os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs]
            self.assertGreater(len(files), 0)
            for path in files:
                with open(path, "rb") as f:
                    self.assertEqual(hashlib.sha256(f.read()).hexdigest(), os.path.basename(path), path)
            # the database never points at a blob that is not stored
            rows = psql("SELECT digest FROM blobs", dbname=b.dbname).split()
            for d in rows:
                self.assertTrue(os.path.exists(os.path.join(root, d[7:9], d[7:])), d)
            dangling = psql("SELECT count(*) FROM manifest_refs r JOIN manifests m ON m.id = r.manifest_id WHERE r.kind = 0 "
                            "AND NOT EXISTS (SELECT 1 FROM repository_blobs rb WHERE rb.repository_id = m.repository_id "
                            "AND rb.digest = r.digest)", dbname=b.dbname)
            self.assertEqual(dangling, "0")
        finally:
            b.cleanup()


if __name__ == "__main__":
    main()
