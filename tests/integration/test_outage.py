"""PostgreSQL stops under load: requests fail with 503, then succeed again once it is back, same berthd."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from harness import ACCEPT_ALL, BERTH_PG, Berthd, eventually, free_port, main


class DatabaseOutage(unittest.TestCase):
    def test_503_then_recovery(self):
        pgdir = tempfile.mkdtemp(prefix="berth-outage-pg-")
        os.chmod(pgdir, 0o755)
        port = str(free_port())
        conninfo = subprocess.run([BERTH_PG, "start", pgdir, port], check=True, capture_output=True, text=True).stdout.strip()
        # The load is a cached manifest GET under Basic: berthd and its edge answer it without the database until the
        # gate's decision runs out (auth.decision_ttl_seconds, 2 s here; the edge's link up to 1 s more), then
        # Basic cannot be checked and it is 503. With the default 10 s the first 503 raced the wait below.
        b = Berthd(dbname="berth", env={"BERTH_DATABASE_URL": conninfo, "BERTH_AUTH_DECISION_TTL": "2"}).start().project("outage")
        try:
            digest, _ = b.push_image("outage/app", "v1")
            statuses = []
            stop = threading.Event()

            def load():
                while not stop.is_set():
                    try:
                        st, _, _ = b.request("GET", "/v2/outage/app/manifests/v1", headers={"Accept": ACCEPT_ALL}, timeout=20)
                    except OSError as e:
                        st = repr(e)
                    statuses.append(st)
                    time.sleep(0.01)
            t = threading.Thread(target=load)
            t.start()
            time.sleep(0.5)
            subprocess.run([BERTH_PG, "stop", pgdir], check=True)
            eventually(lambda: 503 in statuses, True, timeout=15)  # the outage is seen
            down = list(statuses)
            # what needs the database now is refused at once, in the spec's format, with a hint to retry
            st, h, body = b.request("PUT", "/v2/outage/app/manifests/v2", b"{}", {"Content-Type": "application/json"})
            self.assertEqual(st, 503, body)
            self.assertIn("retry-after", h)
            self.assertIn(b'"errors"', body)
            self.assertNotIn(port.encode(), body, "the database's port reached a client")
            subprocess.run([BERTH_PG, "start", pgdir, port], check=True, capture_output=True)
            eventually(lambda: statuses[-1] == 200, True, timeout=30)  # recovered (asserted below)
            stop.set()
            t.join()
            self.assertIn(503, down, "no 503 while the database was down")
            self.assertTrue(all(s in (200, 503) for s in statuses), set(map(str, statuses)))
            self.assertEqual(statuses[-1], 200, "did not recover")
            self.assertIsNone(b.proc.poll(), "berthd died")
            st2, h, _ = b.request("GET", "/v2/outage/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
            self.assertEqual((st2, h["docker-content-digest"]), (200, digest))
            # uploads recover too
            self.assertTrue(b.push_blob("outage/app", b"after the outage").startswith("sha256:"))
        finally:
            b.cleanup()
            subprocess.run([BERTH_PG, "stop", pgdir])
            shutil.rmtree(pgdir, ignore_errors=True)


if __name__ == "__main__":
    main()
