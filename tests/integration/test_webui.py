"""The browser UI in real Chromium (Debian's, driven by playwright-core) against a real berthd + PostgreSQL.

This file sets up what the pages need through the API and the registry protocol, then runs the browser steps in
webui/e2e/ (node:test). Screenshots of every page at 360 and 1440 px land in $WEBUI_ARTIFACTS. A missing browser
or an unbuilt UI fails: nothing here skips."""
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ADMIN_PASSWORD, PG_DIR, PG_PORT, ROOT, Berthd, BerthTestCase  # noqa: E402

UI_DIR = os.environ.get("BERTH_UI_DIR", os.path.join(ROOT, "webui", "dist"))
ARTIFACTS = os.environ.get("WEBUI_ARTIFACTS", os.path.join(ROOT, "build", "tests", "webui-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


class WebUI(BerthTestCase):
    START = False

    @classmethod
    def setUpClass(cls):
        for what, path in (("the built UI (webui/build.sh)", os.path.join(UI_DIR, "index.html")), ("chromium", CHROMIUM),
                           ("playwright-core (webui/build.sh runs npm ci)", os.path.join(ROOT, "webui", "node_modules", "playwright-core"))):
            if not os.path.exists(path):
                raise AssertionError("missing %s: %s" % (what, path))
        cls.b = Berthd(env={"BERTH_UI_DIR": UI_DIR}).start()

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        st, h, raw = self.b.request(method, "/api/v2.0" + path, data, {"Content-Type": "application/json"} if data else {})
        return st, h, (json.loads(raw) if raw else None)

    def run_browser(self, script, fixture):
        env = dict(os.environ, BERTH_UI_BASE="http://" + self.b.host, BERTH_UI_FIXTURE=json.dumps(fixture),
                   WEBUI_ARTIFACTS=ARTIFACTS, CHROMIUM=CHROMIUM)
        r = subprocess.run(["node", "--test", "--test-reporter=spec", os.path.join(ROOT, "webui", "e2e", script)],
                           cwd=os.path.join(ROOT, "webui"), env=env, capture_output=True, text=True, timeout=900)
        print(r.stdout[-20000:], r.stderr[-5000:])
        self.assertEqual(r.returncode, 0, "browser steps failed (see above); screenshots in " + ARTIFACTS)

    def test_browser(self):
        self.assertEqual(self.api("POST", "/projects", {"project_name": "open", "metadata": {"public": "true"}})[0], 201)
        self.assertEqual(self.api("POST", "/projects", {"project_name": "secret"})[0], 201)
        self.b.push_image("open/tools/hello", "1.0")
        self.b.push_image("secret/app", "latest")
        fixture = {
            "admin_password": ADMIN_PASSWORD,
            "public_project": "open",
            "private_project": "secret",
            "psql": ["-h", PG_DIR, "-p", PG_PORT, "-U", "postgres", "-d", self.b.dbname],
        }
        self.run_browser("ui.e2e.mjs", fixture)


if __name__ == "__main__":
    unittest.main(verbosity=2)
