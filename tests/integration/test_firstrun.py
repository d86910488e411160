"""The first five minutes of a new operator: deploy/run.sh stops everything it started however it ends, berthd
does not serve the network as root, a busy port is named with the setting that moves it, and the token realm
follows the scheme and host the client used (a TLS client is never sent to plain HTTP with its password)."""
import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from harness import BERTHD, ROOT, Berthd, free_port, main, pg_conninfo, new_database

RUN_SH = os.path.join(ROOT, "deploy", "run.sh")


def group_procs(pgid):
    """(pid, user, command) of every process still in the process group."""
    out = subprocess.run(["ps", "-o", "pid=,user=,args=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [tuple(line.split(None, 2)) for line in out.splitlines() if line.strip()]


def pg_running(pg_dir):
    return os.path.exists(os.path.join(pg_dir, "data", "postmaster.pid"))


def status(host, port, path="/v2/", tls=False, headers=None):
    if tls:
        conn = http.client.HTTPSConnection(host, port, timeout=5, context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


class RunScript(unittest.TestCase):
    """deploy/run.sh with the berthd under test (BERTHD: no build), its own state directory, database and ports."""

    def setUp(self):
        self.var = tempfile.mkdtemp(prefix="firstrun-var-")
        os.chmod(self.var, 0o755)
        self.pg_dir = tempfile.mkdtemp(prefix="firstrun-pg-")
        os.chmod(self.pg_dir, 0o755)
        self.http, self.tls = free_port(), free_port()
        self.env = dict(os.environ, BERTHD=BERTHD, BERTH_VAR=self.var, BERTH_PG_DIR=self.pg_dir, BERTH_UI_DIR="",
                        BERTH_HTTP_ADDR="127.0.0.1:%d" % self.http, BERTH_TLS_ADDR="127.0.0.1:%d" % self.tls)
        # as an operator would run it: without the harness's permission to run the edge as root
        self.env.pop("BERTH_EDGE_ALLOW_ROOT", None)
        self.proc = None

    def tearDown(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        subprocess.run([os.path.join(ROOT, "deploy", "berth-pg"), "stop", self.pg_dir], capture_output=True)
        shutil.rmtree(self.var, ignore_errors=True)
        shutil.rmtree(self.pg_dir, ignore_errors=True)

    def start(self):
        self.log = open(os.path.join(self.var, "run.log"), "wb")
        # its own session and process group: what a terminal's Ctrl-C reaches
        self.proc = subprocess.Popen([RUN_SH], env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        with open(os.path.join(self.var, "run.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.assertIsNone(self.proc.poll(), self.output())
            try:
                if status("127.0.0.1", self.http)[0] == 401:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.fail("run.sh did not serve:\n" + self.output())

    def test_ctrl_c_stops_everything(self):
        self.start()
        self.wait_ready()
        self.assertTrue(pg_running(self.pg_dir))
        procs = group_procs(self.proc.pid)
        berthd = [p for p in procs if p[2].startswith(BERTHD)]
        nginx = [p for p in procs if "nginx" in p[2]]
        self.assertEqual(len(berthd), 1, procs)
        self.assertTrue(nginx, procs)
        if os.geteuid() == 0:  # berthd and its internet-facing nginx run as the system user run.sh created
            self.assertEqual({p[1] for p in berthd + nginx}, {"berth"}, procs)
            subprocess.run(["id", "berth"], check=True, capture_output=True)
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
        self.assertEqual(self.proc.wait(60), 130, self.output())
        self.assertEqual(group_procs(self.proc.pid), [])
        self.assertFalse(pg_running(self.pg_dir), "PostgreSQL left running:\n" + self.output())
        with self.assertRaises(OSError):
            status("127.0.0.1", self.http)

    def test_failed_start_stops_the_database_and_names_the_port(self):
        busy = socket.socket()
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", self.http))
        busy.listen(1)
        try:
            self.start()
            rc = self.proc.wait(90)
        finally:
            busy.close()
        out = self.output()
        self.assertNotEqual(rc, 0, out)
        self.assertIn("127.0.0.1:%d is already in use" % self.http, out)
        self.assertIn("BERTH_HTTP_ADDR", out)
        self.assertEqual(group_procs(self.proc.pid), [])
        self.assertFalse(pg_running(self.pg_dir), "PostgreSQL left running after a failed start:\n" + out)


class Start(unittest.TestCase):
    """berthd itself: what it refuses before serving."""

    def test_busy_ports_are_named_with_their_setting(self):
        for var, key in (("BERTH_HTTP_ADDR", "http.addr"), ("BERTH_TLS_ADDR", "http.tls_addr")):
            busy = socket.socket()
            busy.bind(("127.0.0.1", 0))
            busy.listen(1)
            port = busy.getsockname()[1]
            env = {var: "127.0.0.1:%d" % port}
            if var == "BERTH_TLS_ADDR":
                tmp = tempfile.mkdtemp(prefix="firstrun-tls-")
                subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                "-days", "2", "-subj", "/CN=127.0.0.1", "-keyout", tmp + "/k.pem", "-out", tmp + "/c.pem"],
                               check=True, capture_output=True)
                env.update(BERTH_TLS_CERT=tmp + "/c.pem", BERTH_TLS_KEY=tmp + "/k.pem")
            b = Berthd(env=env)
            try:
                b.start(wait=False)
                self.assertEqual(b.proc.wait(30), 1)
                self.assertIn("127.0.0.1:%d is already in use by another program" % port, b.logs())
                self.assertIn("%s (%s=host:port)" % (key, var), b.logs())
            finally:
                busy.close()
                b.cleanup()

    @unittest.skipUnless(os.geteuid() == 0, "the refusal concerns root; these tests do not run as root")
    def test_root_is_refused_unless_allowed(self):
        env = dict(os.environ, BERTH_DATABASE_URL=pg_conninfo(new_database()), BERTH_HTTP_ADDR="127.0.0.1:%d" % free_port(),
                   BERTH_STORAGE_ROOT=tempfile.mkdtemp(prefix="firstrun-root-"))
        env.pop("BERTH_EDGE_ALLOW_ROOT", None)
        r = subprocess.run([BERTHD], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("refusing to run as root", r.stderr)
        self.assertIn("BERTH_EDGE_ALLOW_ROOT", r.stderr)
        shutil.rmtree(env["BERTH_STORAGE_ROOT"], ignore_errors=True)


class Realm(unittest.TestCase):
    """The Bearer challenge's realm: where the client must send its password."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="firstrun-realm-")
        cls.cert, cls.key = cls.tmp + "/cert.pem", cls.tmp + "/key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", cls.key, "-out", cls.cert],
                       check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, **env):
        tls = free_port()
        b = Berthd(env=dict(env, BERTH_TLS_ADDR="127.0.0.1:%d" % tls, BERTH_TLS_CERT=self.cert, BERTH_TLS_KEY=self.key)).start()
        self.addCleanup(b.cleanup)
        return b, tls

    def realm(self, b, port, tls, path="/v2/", headers=None):
        st, h = status("127.0.0.1", port, path, tls, headers)
        self.assertEqual(st, 401)
        return h["www-authenticate"].split('"')[1]

    def test_realm_follows_the_client(self):
        b, tls = self.start()
        self.assertEqual(self.realm(b, b.port, False), "http://%s/service/token" % b.host)
        self.assertEqual(self.realm(b, tls, True), "https://127.0.0.1:%d/service/token" % tls)
        # every challenge, not only the base endpoint's: a pull and an upload (answered by the upload listener)
        self.assertEqual(self.realm(b, tls, True, "/v2/nosuch/app/manifests/latest"), "https://127.0.0.1:%d/service/token" % tls)
        conn = http.client.HTTPSConnection("127.0.0.1", tls, timeout=5, context=ssl._create_unverified_context())
        conn.request("POST", "/v2/library/app/blobs/uploads/")
        r = conn.getresponse()
        r.read()
        conn.close()
        self.assertEqual((r.status, r.getheader("www-authenticate").split('"')[1]), (401, "https://127.0.0.1:%d/service/token" % tls))
        # the name the client used (a Host that is not a host name is nginx's to refuse; berthd checks again)
        self.assertEqual(self.realm(b, tls, True, headers={"Host": "localhost:%d" % tls}), "https://localhost:%d/service/token" % tls)

    def test_external_url_stands_but_never_downgrades(self):
        b, tls = self.start(BERTH_EXTERNAL_URL="https://registry.example.org")
        self.assertEqual(self.realm(b, b.port, False), "https://registry.example.org/service/token")
        self.assertEqual(self.realm(b, tls, True), "https://registry.example.org/service/token")
        b, tls = self.start(BERTH_EXTERNAL_URL="http://registry.example.org:5000")
        self.assertEqual(self.realm(b, b.port, False), "http://registry.example.org:5000/service/token")
        self.assertEqual(self.realm(b, tls, True), "https://127.0.0.1:%d/service/token" % tls)


class Walkthrough(unittest.TestCase):
    """The README's API calls, as written there: a project for the first push, a robot account for CI."""

    def test_project_then_robot_push(self):
        import base64
        import json
        b = Berthd().start()
        self.addCleanup(b.cleanup)
        st, _, body = b.request("POST", "/api/v2.0/projects", b'{"project_name": "demo"}', {"Content-Type": "application/json"})
        self.assertEqual(st, 201, body)
        robot = {"name": "ci", "level": "project", "duration": -1, "permissions": [{"kind": "project", "namespace": "demo",
                 "access": [{"resource": "repository", "action": "push"}, {"resource": "repository", "action": "pull"}]}]}
        st, _, body = b.request("POST", "/api/v2.0/robots", json.dumps(robot).encode(), {"Content-Type": "application/json"})
        self.assertEqual(st, 201, body)
        made = json.loads(body)
        self.assertEqual(made["name"], "robot$demo+ci")
        ci = "Basic " + base64.b64encode(("%s:%s" % (made["name"], made["secret"])).encode()).decode()
        st, h, body = b.request("POST", "/v2/demo/app/blobs/uploads/", headers={"Authorization": ci})
        self.assertEqual(st, 202, (h, body, b.logs()[-3000:]))  # a 404 was seen once (not reproduced): say why
        st, _, _ = b.request("POST", "/v2/library/app/blobs/uploads/", headers={"Authorization": ci})
        self.assertEqual(st, 403)  # its grant is demo only


if __name__ == "__main__":
    main()
