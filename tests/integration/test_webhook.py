#!/usr/bin/env python3
"""Webhooks (issue 14): Harbor's policy API, an outbox written in the change's transaction, delivery by worker
threads with retries, signatures, both payload formats, and survival of a SIGKILL between commit and delivery.
The receiver is an http.server written here, on 127.0.0.1; it records every request and answers per path."""
import base64
import datetime
import hashlib
import hmac
import http.server
import json
import os
import re
import shutil
import signal
import ssl
import tempfile
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (OCI_MANIFEST, Berthd, BerthTestCase, eventually, main, psql)  # noqa: E402

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PW = "Webhook-Pw-12345"


class Receiver:
    """Records (path, headers, body, time); each path's behaviour is a list of answers used in turn (the last one
    repeats): an int status, ("sleep", seconds, status), or ("hang", event) which waits for the event first."""

    def __init__(self, cert=None, key=None):
        self.tls = cert is not None
        self.requests = []
        self.plans = {}
        self.lock = threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with rec.lock:
                    plan = rec.plans.get(self.path, [200])
                    n = sum(1 for r in rec.requests if r["path"] == self.path)
                    rec.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                         "body": body, "time": time.time()})
                    step = plan[min(n, len(plan) - 1)]
                status = step
                if isinstance(step, tuple) and step[0] == "sleep":
                    time.sleep(step[1])
                    status = step[2]
                elif isinstance(step, tuple) and step[0] == "hang":
                    step[1].wait(60)
                    return  # the connection is dropped without an answer
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        if cert is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return "%s://127.0.0.1:%d%s" % ("https" if self.tls else "http", self.port, path)

    def got(self, path, pred=lambda r: True):
        with self.lock:
            return [dict(r, json=json.loads(r["body"])) for r in self.requests if r["path"] == path and pred(r)]

    def wait(self, path, count=1, timeout=20, pred=lambda r: True):
        return eventually(lambda: len(self.got(path, pred)) >= count, True, timeout=timeout) and self.got(path, pred)

    def close(self):
        self.server.shutdown()


def api(b, method, path, body=None, auth=None):
    kw = {} if auth is None else {"auth": auth}
    st, h, raw = b.request(method, "/api/v2.0" + path, json.dumps(body).encode() if body is not None else None,
                           {"Content-Type": "application/json"}, **kw)
    return st, h, raw


def basic(user, pw):
    return "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode()


def policy(address, types, fmt="Default", **extra):
    body = {"name": "hook-%d" % time.time_ns(), "event_types": types, "enabled": True,
            "targets": [{"type": "http", "address": address, "payload_format": fmt, "skip_cert_verify": False}]}
    body.update(extra)
    return body


def verify(req, secret, max_skew=300):
    """What a receiver does (docs/webhooks.md): HMAC over timestamp + "." + raw body, constant-time compare, and a
    timestamp within max_skew seconds of its clock."""
    ts = req["headers"]["x-berth-timestamp"]
    want = "sha256=" + hmac.new(secret.encode(), ts.encode() + b"." + req["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, req["headers"]["x-berth-signature"]) and abs(time.time() - int(ts)) <= max_skew


class Webhooks(BerthTestCase):
    PROJECTS = ("hooks", "quiet")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rx = Receiver()

    @classmethod
    def tearDownClass(cls):
        cls.rx.close()
        super().tearDownClass()

    def create(self, body, project="hooks"):
        st, h, raw = api(self.b, "POST", "/projects/%s/webhook/policies" % project, body)
        self.assertEqual(st, 201, raw)
        out = json.loads(raw)
        self.assertRegex(out["secret"], r"^[0-9a-f]{64}$")
        self.assertTrue(h["location"].endswith("/webhook/policies/%d" % out["id"]))
        return out["id"], out["secret"]

    def test_events_and_policy_crud(self):
        st, _, raw = api(self.b, "GET", "/projects/hooks/webhook/events")
        self.assertEqual(st, 200, raw)
        ev = json.loads(raw)
        for t in ("PUSH_ARTIFACT", "PULL_ARTIFACT", "DELETE_ARTIFACT", "QUOTA_EXCEED", "QUOTA_WARNING", "TAG_RETENTION",
                  "REPLICATION", "ISA_SCAN_COMPLETED"):
            self.assertIn(t, ev["event_type"])
        self.assertEqual(ev["payload_formats"][0]["formats"], ["Default", "CloudEvents"])

        body = policy(self.rx.url("/crud"), ["PUSH_ARTIFACT"])
        body["targets"][0]["auth_header"] = "Bearer s3cr3t-token"
        pid, secret = self.create(body)
        st, _, raw = api(self.b, "GET", "/projects/hooks/webhook/policies/%d" % pid)
        self.assertEqual(st, 200, raw)
        got = json.loads(raw)
        self.assertEqual((got["name"], got["enabled"], got["event_types"]), (body["name"], True, ["PUSH_ARTIFACT"]))
        self.assertEqual(got["targets"][0]["auth_header"], "*****")  # a credential: never answered
        self.assertNotIn(secret, raw.decode())
        self.assertNotIn("s3cr3t", raw.decode())
        # stored sealed, not in clear
        db = psql("SELECT targets::text || encode(secret, 'escape') FROM webhook_policies WHERE id = %d" % pid, self.b.dbname)
        self.assertNotIn("s3cr3t", db)
        self.assertNotIn(secret, db)

        st, h, raw = api(self.b, "GET", "/projects/hooks/webhook/policies")
        self.assertEqual(st, 200, raw)
        self.assertIn(pid, [p["id"] for p in json.loads(raw)])
        self.assertGreaterEqual(int(h["x-total-count"]), 1)
        # by project id too (Harbor's project_name_or_id)
        proj = json.loads(api(self.b, "GET", "/projects/hooks")[2])
        self.assertEqual(api(self.b, "GET", "/projects/%d/webhook/policies/%d" % (proj["project_id"], pid))[0], 200)

        # disable with PUT, the masked auth header is kept
        got["enabled"] = False
        st, _, raw = api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, got)
        self.assertEqual(st, 200, raw)
        again = json.loads(api(self.b, "GET", "/projects/hooks/webhook/policies/%d" % pid)[2])
        self.assertFalse(again["enabled"])
        self.assertEqual(again["targets"][0]["auth_header"], "*****")
        # a policy of another project is not reachable through this one
        self.assertEqual(api(self.b, "GET", "/projects/quiet/webhook/policies/%d" % pid)[0], 404)
        self.assertEqual(api(self.b, "GET", "/projects/hooks/webhook/policies/abc")[0], 404)
        # a duplicate name
        dup = policy(self.rx.url("/crud"), ["PUSH_ARTIFACT"], name=body["name"])
        self.assertEqual(api(self.b, "POST", "/projects/hooks/webhook/policies", dup)[0], 409)

        self.assertEqual(api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)[0], 200)
        self.assertEqual(api(self.b, "GET", "/projects/hooks/webhook/policies/%d" % pid)[0], 404)
        self.assertEqual(api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)[0], 404)

    def test_bad_policies_refused(self):
        for addr in ("file:///etc/passwd", "gopher://127.0.0.1:70/_x", "ftp://127.0.0.1/", "http://", "http://a b/",
                     "javascript:alert(1)", ""):
            st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies", policy(addr, ["PUSH_ARTIFACT"]))
            self.assertEqual(st, 400, (addr, raw))
            self.assertIn("errors", json.loads(raw))
        bad = [policy(self.rx.url("/x"), ["NO_SUCH_EVENT"]), policy(self.rx.url("/x"), []),
               policy(self.rx.url("/x"), ["PUSH_ARTIFACT"], fmt="XML"),
               dict(policy(self.rx.url("/x"), ["PUSH_ARTIFACT"]), targets=[]),
               dict(policy(self.rx.url("/x"), ["PUSH_ARTIFACT"]), name=""),
               dict(policy(self.rx.url("/x"), ["PUSH_ARTIFACT"]), targets=[{"type": "slack", "address": self.rx.url("/x")}])]
        bad[0]["targets"][0]["auth_header"] = "a\r\nX-Injected: 1"
        for body in bad:
            st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies", body)
            self.assertEqual(st, 400, (body, raw))
        st, _, raw = self.b.request("POST", "/api/v2.0/projects/hooks/webhook/policies", b"{not json",
                                    {"Content-Type": "application/json"})
        self.assertEqual(st, 400, raw)
        # nothing half-created
        self.assertEqual(psql("SELECT count(*) FROM webhook_policies WHERE targets::text LIKE '%%/x\"%%'", self.b.dbname), "0")

    def test_non_admin_cannot_manage(self):
        for u, role in (("hk-dev", 2), ("hk-guest", 3), ("hk-maint", 4), ("hk-padmin", 1)):
            self.assertEqual(api(self.b, "POST", "/users", {"username": u, "password": PW})[0], 201)
            self.assertEqual(api(self.b, "POST", "/projects/hooks/members",
                                 {"role_id": role, "member_user": {"username": u}})[0], 201)
        self.assertEqual(api(self.b, "POST", "/users", {"username": "hk-outsider", "password": PW})[0], 201)
        body = policy(self.rx.url("/authz"), ["PUSH_ARTIFACT"])
        for u in ("hk-dev", "hk-guest", "hk-maint"):
            st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies", body, auth=basic(u, PW))
            self.assertEqual(st, 403, (u, raw))
            self.assertEqual(json.loads(raw)["errors"][0]["code"], "DENIED")
        for u in ("hk-dev", "hk-guest"):
            self.assertEqual(api(self.b, "GET", "/projects/hooks/webhook/policies", auth=basic(u, PW))[0], 403, u)
        # maintainers may look (Harbor's role table), not change
        self.assertEqual(api(self.b, "GET", "/projects/hooks/webhook/policies", auth=basic("hk-maint", PW))[0], 200)
        # the private project does not exist for an outsider, nor for anonymous callers
        self.assertEqual(api(self.b, "GET", "/projects/hooks/webhook/policies", auth=basic("hk-outsider", PW))[0], 404)
        self.assertEqual(self.b.request("GET", "/api/v2.0/projects/hooks/webhook/policies", auth=None)[0], 401)
        # the project admin manages the project's policies
        st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies", body, auth=basic("hk-padmin", PW))
        self.assertEqual(st, 201, raw)
        pid = json.loads(raw)["id"]
        for u in ("hk-dev", "hk-maint"):
            self.assertEqual(api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid, auth=basic(u, PW))[0], 403)
            self.assertEqual(api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, {"enabled": False},
                                 auth=basic(u, PW))[0], 403)
        self.assertEqual(api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, {"enabled": False},
                             auth=basic("hk-padmin", PW))[0], 200)
        self.assertEqual(api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid, auth=basic("hk-padmin", PW))[0], 200)

    def test_hostile_policy_inputs(self):
        """An outsider's probes (h-audit): what a stored policy would leak or let a project admin do."""
        for addr in ("http://user:pa55w0rd@127.0.0.1:%d/cred" % self.rx.port, "http://127.0.0.1:99999/",
                     "http://127.0.0.1/" + "a" * 3000):
            st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies", policy(addr, ["PUSH_ARTIFACT"]))
            self.assertEqual(st, 400, (addr[:60], raw))
        # credentials in the URL would be shown to maintainers and in every task log: refused, with the way out
        st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies", policy("https://u:p@127.0.0.1/x", ["PUSH_ARTIFACT"]))
        self.assertIn("auth_header", json.loads(raw)["errors"][0]["message"])
        body = policy(self.rx.url("/ctl"), ["PUSH_ARTIFACT"])
        body["targets"][0]["auth_header"] = "Bearer a\x01b"
        self.assertEqual(api(self.b, "POST", "/projects/hooks/webhook/policies", body)[0], 400)

        self.assertEqual(api(self.b, "POST", "/users", {"username": "hk-audit-pa", "password": PW})[0], 201)
        self.assertEqual(api(self.b, "POST", "/projects/hooks/members",
                             {"role_id": 1, "member_user": {"username": "hk-audit-pa"}})[0], 201)
        pa = basic("hk-audit-pa", PW)
        # ca_file is a path on the server: a project admin may not point berthd at one
        st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies",
                         policy(self.rx.url("/ca"), ["PUSH_ARTIFACT"], ca_file="/etc/shadow"), auth=pa)
        self.assertEqual(st, 403, raw)
        # the system admin stores a receiver's credential; the project admin moves the address and sends the mask
        # back: refused, and the stored header goes nowhere new
        body = policy(self.rx.url("/owner"), ["PUSH_ARTIFACT"])
        body["targets"][0]["auth_header"] = "Bearer ADMIN-ONLY"
        pid, _ = self.create(body)
        got = json.loads(api(self.b, "GET", "/projects/hooks/webhook/policies/%d" % pid, auth=pa)[2])
        self.assertEqual(api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, dict(got, ca_file="/etc/shadow"),
                             auth=pa)[0], 403)
        # what it read, sent back unchanged (ca_file included), is fine
        self.assertEqual(api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, got, auth=pa)[0], 200)
        got["targets"][0]["address"] = self.rx.url("/thief")
        st, _, raw = api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, got, auth=pa)
        self.assertEqual(st, 400, raw)
        self.assertIn("auth_header", json.loads(raw)["errors"][0]["message"])
        # a new header with the new address is an ordinary edit
        got["targets"][0]["auth_header"] = "Bearer pa-own"
        self.assertEqual(api(self.b, "PUT", "/projects/hooks/webhook/policies/%d" % pid, got, auth=pa)[0], 200)
        self.b.push_image("hooks/audit", "v1")
        reqs = self.rx.wait("/thief", pred=lambda r: b"hooks/audit" in r["body"])
        self.assertTrue(reqs)
        self.assertEqual({r["headers"].get("authorization") for r in reqs}, {"Bearer pa-own"})
        self.assertEqual(api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)[0], 200)

    def test_push_pull_delete_default_format_signed(self):
        pid, secret = self.create(policy(self.rx.url("/default"), ["PUSH_ARTIFACT", "PULL_ARTIFACT", "DELETE_ARTIFACT"]))
        digest, _ = self.b.push_image("hooks/app", "v1")
        reqs = self.rx.wait("/default", pred=lambda r: json.loads(r["body"])["type"] == "PUSH_ARTIFACT"
                            and b'"v1"' in r["body"])
        self.assertTrue(reqs, "no PUSH_ARTIFACT delivered")
        push = reqs[0]
        p = push["json"]
        self.assertEqual(push["headers"]["content-type"], "application/json")
        self.assertEqual(p["operator"], "admin")
        self.assertIsInstance(p["occur_at"], int)
        self.assertLess(abs(p["occur_at"] - time.time()), 60)
        self.assertEqual(p["event_data"]["resources"][0]["digest"], digest)
        self.assertEqual(p["event_data"]["resources"][0]["tag"], "v1")
        self.assertEqual(p["event_data"]["resources"][0]["resource_url"], "%s/hooks/app:v1" % self.b.host)
        self.assertEqual(p["event_data"]["repository"], {"name": "app", "namespace": "hooks", "repo_full_name": "hooks/app",
                                                         "repo_type": "private"})
        self.assertRegex(push["headers"]["x-berth-event-id"], UUID)
        self.assertEqual(push["headers"]["x-berth-event-type"], "PUSH_ARTIFACT")
        self.assertTrue(verify(push, secret), "signature does not verify with the secret shown at creation")
        self.assertFalse(verify(push, "0" * 64), "a wrong secret verifies")
        tampered = dict(push, body=push["body"].replace(b"hooks/app", b"hooks/evil"))
        self.assertFalse(verify(tampered, secret), "a changed body verifies")
        self.assertFalse(verify(push, secret, max_skew=-1), "the replay window is not applied")

        # a pull (counted by the audit writer's batch, which queues the event)
        st, _, _ = self.b.request("GET", "/v2/hooks/app/manifests/v1", headers={"Accept": OCI_MANIFEST})
        self.assertEqual(st, 200)
        pulls = self.rx.wait("/default", pred=lambda r: json.loads(r["body"])["type"] == "PULL_ARTIFACT")
        self.assertTrue(pulls, "no PULL_ARTIFACT delivered")
        self.assertEqual(pulls[0]["json"]["event_data"]["resources"][0]["digest"], digest)
        self.assertEqual(pulls[0]["json"]["event_data"]["resources"][0]["tag"], "v1")

        # delete the tag through the API, then the manifest through /v2
        self.assertEqual(self.b.push_image("hooks/app", "v2")[0] is not None, True)
        st, _, raw = api(self.b, "DELETE", "/projects/hooks/repositories/app/artifacts/v2/tags/v2")
        self.assertEqual(st, 200, raw)
        st, _, _ = self.b.request("DELETE", "/v2/hooks/app/manifests/%s" % digest)
        self.assertEqual(st, 202)
        dels = self.rx.wait("/default", count=2, pred=lambda r: json.loads(r["body"])["type"] == "DELETE_ARTIFACT")
        self.assertTrue(dels, "no DELETE_ARTIFACT delivered")
        res = sorted((d["json"]["event_data"]["resources"][0].get("tag", ""), d["json"]["event_data"]["resources"][0].get("digest", ""))
                     for d in dels)
        self.assertEqual(res, [("", digest), ("v2", "")])

        # a refused push (unknown blob) rolls back: no event for it
        bad = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
               "digest": "sha256:" + "0" * 64, "size": 2}, "layers": []}
        st, _, _, _ = self.b.push_manifest("hooks/app", "refused", bad)
        self.assertEqual(st, 400)
        self.assertEqual(psql("SELECT count(*) FROM webhook_events WHERE tag = 'refused'", self.b.dbname), "0")

        # every event has one execution; its task log lists the attempt
        st, _, raw = api(self.b, "GET", "/projects/hooks/webhook/policies/%d/executions" % pid)
        self.assertEqual(st, 200, raw)
        execs = json.loads(raw)
        self.assertGreaterEqual(len(execs), 4)
        e = [x for x in execs if x["extra_attrs"]["event_id"] == push["headers"]["x-berth-event-id"]][0]
        self.assertEqual((e["status"], e["vendor_type"], e["extra_attrs"]["event_type"]), ("Success", "WEBHOOK", "PUSH_ARTIFACT"))
        st, _, raw = api(self.b, "GET", "/projects/hooks/webhook/policies/%d/executions/%d/tasks" % (pid, e["id"]))
        self.assertEqual(st, 200, raw)
        task = json.loads(raw)[0]
        self.assertEqual((task["status"], task["run_count"]), ("Success", 1))
        st, h, raw = self.b.request("GET", "/api/v2.0/projects/hooks/webhook/policies/%d/executions/%d/tasks/%d/log"
                                    % (pid, e["id"], task["id"]))
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/plain"))
        self.assertIn("attempt 1", raw.decode())
        self.assertIn("HTTP 200", raw.decode())
        self.assertNotIn(secret, self.b.logs())

        # redelivery (beyond Harbor): the same event id again
        before = len(self.rx.got("/default", lambda r: r["headers"]["x-berth-event-id"] == push["headers"]["x-berth-event-id"]))
        st, _, raw = api(self.b, "POST", "/projects/hooks/webhook/policies/%d/executions/%d/retry" % (pid, e["id"]))
        self.assertEqual(st, 200, raw)
        again = self.rx.wait("/default", count=before + 1,
                             pred=lambda r: r["headers"]["x-berth-event-id"] == push["headers"]["x-berth-event-id"])
        self.assertTrue(again, "not redelivered")
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)

    def test_cloudevents_format(self):
        pid, secret = self.create(policy(self.rx.url("/ce"), ["PUSH_ARTIFACT"], fmt="CloudEvents"))
        digest, _ = self.b.push_image("hooks/ce", "1.0")
        reqs = self.rx.wait("/ce")
        self.assertTrue(reqs, "nothing delivered")
        r = reqs[0]
        ce = r["json"]
        self.assertTrue(r["headers"]["content-type"].startswith("application/cloudevents+json"))
        # CloudEvents 1.0 required attributes: id, source (URI-reference), specversion, type; time is RFC 3339
        self.assertEqual(ce["specversion"], "1.0")
        self.assertEqual(ce["id"], r["headers"]["x-berth-event-id"])
        self.assertRegex(ce["id"], UUID)
        self.assertRegex(ce["source"], r"^/projects/\d+/webhook/policies/%d$" % pid)
        self.assertEqual(ce["type"], "harbor.artifact.pushed")
        self.assertEqual(ce["datacontenttype"], "application/json")
        t = datetime.datetime.strptime(ce["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
        self.assertLess(abs((datetime.datetime.utcnow() - t).total_seconds()), 60)
        for k in ce:  # attribute names: lower-case letters and digits only
            self.assertRegex(k, r"^[a-z0-9]{1,20}$")
        self.assertEqual(ce["data"]["resources"][0]["digest"], digest)
        self.assertEqual(ce["operator"], "admin")
        self.assertTrue(verify(r, secret))
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)

    def test_retry_after_500(self):
        self.rx.plans["/flaky"] = [500, 500, 200]
        pid, _ = self.create(policy(self.rx.url("/flaky"), ["PUSH_ARTIFACT"]))
        self.b.push_image("hooks/flaky", "x")
        reqs = self.rx.wait("/flaky", count=3, timeout=30)
        self.assertTrue(reqs, "not retried until success: %r" % self.rx.got("/flaky"))
        ids = {r["headers"]["x-berth-event-id"] for r in reqs}
        self.assertEqual(len(ids), 1, "a retry must carry the same event id")
        # exponential back-off: the second gap is longer than the first
        gaps = [reqs[1]["time"] - reqs[0]["time"], reqs[2]["time"] - reqs[1]["time"]]
        self.assertGreaterEqual(gaps[0], 0.8)
        self.assertGreater(gaps[1], gaps[0] * 1.5)
        execs = eventually(lambda: json.loads(api(self.b, "GET", "/projects/hooks/webhook/policies/%d/executions" % pid)[2])[0]["status"],
                           "Success")
        self.assertEqual(execs, "Success")
        time.sleep(1.5)
        self.assertEqual(len(self.rx.got("/flaky")), 3, "delivered again after a success")
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)

    def test_slow_receiver_does_not_delay_pushes(self):
        self.rx.plans["/slow"] = [("sleep", 5, 200)]
        pid, _ = self.create(policy(self.rx.url("/slow"), ["PUSH_ARTIFACT"]))
        self.b.push_image("hooks/slow", "warm")  # blobs and repository exist: what is timed is the manifest PUT
        blobs = self.b.push_image("hooks/slow", "base")[1]
        times = []
        for i in range(6):
            t0 = time.monotonic()
            st, _, _, _ = self.b.push_manifest("hooks/slow", "t%d" % i, blobs)
            times.append(time.monotonic() - t0)
            self.assertEqual(st, 201)
        print("\nmanifest PUT with a 5 s receiver: max %.3f s, mean %.3f s" % (max(times), sum(times) / len(times)))
        self.assertLess(max(times), 1.0, times)
        self.assertTrue(self.rx.wait("/slow", count=3, timeout=30), "slow receiver never got deliveries")
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)

    @unittest.skipUnless(shutil.which("gcc"), "gcc missing")
    def test_isa_scan_completed_carries_the_verdict(self):
        """A real scan: an index whose variant declares x86-64-v3; the scanner's verdict row and the event are
        written in one transaction, and the payload names the verdict the API shows."""
        import gzip
        import tempfile
        from harness import OCI_CONFIG, OCI_INDEX, OCI_LAYER, make_layer
        pid, _ = self.create(policy(self.rx.url("/isa"), ["ISA_SCAN_COMPLETED"]))
        tmp = tempfile.mkdtemp(prefix="hook-isa-")
        try:
            src, out = os.path.join(tmp, "p.c"), os.path.join(tmp, "p")
            with open(src, "w") as f:
                f.write("int main(void) { return 0; }\n")
            subprocess.run(["gcc", "-O2", "-march=x86-64-v3", "-o", out, src], check=True)
            with open(out, "rb") as f:
                data = make_layer({"app/bin": f.read()})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        repo = "hooks/isa"
        layer = {"mediaType": OCI_LAYER, "digest": self.b.push_blob(repo, data), "size": len(data)}
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "variant": "v3",
                          "rootfs": {"type": "layers", "diff_ids": [
                              "sha256:" + hashlib.sha256(gzip.decompress(data)).hexdigest()]}}).encode()
        man = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [layer],
               "config": {"mediaType": OCI_CONFIG, "digest": self.b.push_blob(repo, cfg), "size": len(cfg)}}
        st, h, body, mraw = self.b.push_manifest(repo, "single", man)
        self.assertEqual(st, 201, body)
        d = h["docker-content-digest"]
        idx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": d, "size": len(mraw),
             "platform": {"architecture": "amd64", "os": "linux", "variant": "v3"}}]}
        st, _, body, _ = self.b.push_manifest(repo, "1.0", idx, OCI_INDEX)
        self.assertEqual(st, 201, body)
        reqs = self.rx.wait("/isa", timeout=90)
        self.assertTrue(reqs, "no ISA_SCAN_COMPLETED delivered")
        p = reqs[0]["json"]
        self.assertEqual(p["type"], "ISA_SCAN_COMPLETED")
        scan = p["event_data"]["isa_scan"]
        self.assertEqual((scan["digest"], scan["declared_level"]), (d, "x86-64-v3"))
        st, _, raw = self.b.request("GET", "/api/v2.0/projects/hooks/repositories/isa/artifacts/1.0/isa")
        shown = [v["scan_status"] for v in json.loads(raw)["variants"] if v["digest"] == d]
        self.assertEqual([scan["verdict"]], shown)
        self.assertIn(scan["verdict"], ("pass", "warn", "fail"))
        self.assertEqual(p["event_data"]["resources"][0]["digest"], d)
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)

    def test_tag_retention_run(self):
        """A real retention run (h-retain's /retentions): its end and its TAG_RETENTION event commit together; the
        artifacts it deletes each send DELETE_ARTIFACT."""
        pid, _ = self.create(policy(self.rx.url("/ret"), ["TAG_RETENTION", "DELETE_ARTIFACT"]))
        proj = json.loads(api(self.b, "GET", "/projects/hooks")[2])["project_id"]
        keep, _ = self.b.push_image("hooks/ret", "keep")
        gone, _ = self.b.push_image("hooks/ret", "old")
        rule = {"disabled": False, "action": "retain", "template": "always", "params": {},
                "scope_selectors": {"repository": [{"kind": "doublestar", "decoration": "repoMatches", "pattern": "ret"}]},
                "tag_selectors": [{"kind": "doublestar", "decoration": "matches", "pattern": "keep"}]}
        st, h, raw = api(self.b, "POST", "/retentions", {"algorithm": "or", "rules": [rule], "scope": {"level": "project", "ref": proj},
                                                         "trigger": {"kind": "Schedule", "settings": {"cron": ""}}})
        self.assertEqual(st, 201, raw)
        rid = int(h["location"].rsplit("/", 1)[1])
        st, h, raw = api(self.b, "POST", "/retentions/%d/executions" % rid, {"dry_run": False})
        self.assertEqual(st, 201, raw)
        reqs = self.rx.wait("/ret", pred=lambda r: json.loads(r["body"])["type"] == "TAG_RETENTION", timeout=60)
        self.assertTrue(reqs, "no TAG_RETENTION delivered: %r" % self.rx.got("/ret"))
        ret = reqs[0]["json"]["event_data"]["retention"]
        self.assertEqual((ret["status"], ret["dry_run"], ret["policy_id"]), ("Success", False, rid))
        dels = self.rx.wait("/ret", pred=lambda r: json.loads(r["body"])["type"] == "DELETE_ARTIFACT")
        self.assertEqual([d["json"]["event_data"]["resources"][0]["digest"] for d in dels], [gone])
        api(self.b, "DELETE", "/retentions/%d" % rid)
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)

    def test_quota_warning_and_exceed(self):
        """h-quota's limits: a push crossing the warning line sends QUOTA_WARNING, a refused one QUOTA_EXCEED with
        Harbor's sentence in custom_attributes.Details."""
        st, _, raw = api(self.b, "POST", "/projects", {"project_name": "hq", "storage_limit": 30000})
        self.assertEqual(st, 201, raw)
        pid, _ = self.create(policy(self.rx.url("/quota"), ["QUOTA_WARNING", "QUOTA_EXCEED"]), project="hq")
        self.b.push_image("hq/app", "a", size=20000)
        self.b.push_image("hq/app", "b", size=6000)
        with self.assertRaises(AssertionError):  # refused: 403
            self.b.push_image("hq/app", "c", size=10000)
        reqs = self.rx.wait("/quota", count=2, timeout=20)
        self.assertTrue(reqs, self.rx.got("/quota"))
        by = {r["json"]["type"]: r["json"] for r in reqs}
        self.assertEqual(set(by), {"QUOTA_WARNING", "QUOTA_EXCEED"})
        self.assertIn("exceed the configured upper limit", by["QUOTA_EXCEED"]["event_data"]["custom_attributes"]["Details"])
        self.assertEqual(by["QUOTA_EXCEED"]["event_data"]["resources"][0]["tag"], "c")
        self.assertEqual(by["QUOTA_EXCEED"]["event_data"]["custom_attributes"]["hard"], 30000)
        self.assertEqual(by["QUOTA_WARNING"]["event_data"]["resources"][0]["tag"], "b")
        self.assertEqual(by["QUOTA_EXCEED"]["operator"], "admin")

    def test_quota_warning_commits_with_the_push(self):
        """QUOTA_WARNING is queued in the push's transaction: a crossing push that rolls back after the quota check
        (a fault injected when its PUSH_ARTIFACT event is written) leaves no warning, and the same push made again
        sends exactly one, written in the same transaction as its PUSH_ARTIFACT (same now(): same occur_at)."""
        from harness import OCI_CONFIG, OCI_LAYER
        st, _, raw = api(self.b, "POST", "/projects", {"project_name": "hqtx", "storage_limit": 30000})
        self.assertEqual(st, 201, raw)
        self.create(policy(self.rx.url("/qtx"), ["QUOTA_WARNING", "PUSH_ARTIFACT"]), project="hqtx")
        layer = os.urandom(27000)
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
             "config": {"mediaType": OCI_CONFIG, "digest": self.b.push_blob("hqtx/app", cfg), "size": len(cfg)},
             "layers": [{"mediaType": OCI_LAYER, "digest": self.b.push_blob("hqtx/app", layer), "size": len(layer)}]}
        psql("CREATE FUNCTION hqtx_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$; "
             "CREATE TRIGGER hqtx_fault BEFORE INSERT ON webhook_events FOR EACH ROW WHEN (NEW.type = 'PUSH_ARTIFACT' "
             "AND NEW.repo = 'hqtx/app') EXECUTE FUNCTION hqtx_fault()", self.b.dbname)
        try:
            st, _, body, _ = self.b.push_manifest("hqtx/app", "1", m)
        finally:
            psql("DROP TRIGGER hqtx_fault ON webhook_events; DROP FUNCTION hqtx_fault()", self.b.dbname)
        self.assertNotEqual(st, 201, body)
        count = "SELECT count(*) FROM webhook_events WHERE repo = 'hqtx/app' AND type = '%s'"
        self.assertEqual(psql(count % "QUOTA_WARNING", self.b.dbname), "0", "a rolled-back push left its warning")
        st, _, body, _ = self.b.push_manifest("hqtx/app", "1", m)
        self.assertEqual(st, 201, body)
        reqs = self.rx.wait("/qtx", count=2)
        self.assertEqual(sorted(r["json"]["type"] for r in reqs), ["PUSH_ARTIFACT", "QUOTA_WARNING"], reqs)
        self.assertEqual(psql(count % "QUOTA_WARNING", self.b.dbname), "1")
        self.assertEqual(psql("SELECT count(DISTINCT occur_at) FROM webhook_events WHERE repo = 'hqtx/app'", self.b.dbname),
                         "1", "QUOTA_WARNING and PUSH_ARTIFACT were written in different transactions")

    def test_other_event_types_through_the_seam(self):
        """QUOTA_*, TAG_RETENTION and REPLICATION are queued by other features through berth_webhook_enqueue,
        inside their transactions; the seam itself: what they pass arrives, merged into event_data."""
        pid, secret = self.create(policy(self.rx.url("/seam"), ["QUOTA_EXCEED", "QUOTA_WARNING", "TAG_RETENTION",
                                                               "REPLICATION", "ISA_SCAN_COMPLETED"]))
        self.b.push_image("hooks/seam", "1")
        for t in ("QUOTA_EXCEED", "QUOTA_WARNING", "TAG_RETENTION", "REPLICATION", "ISA_SCAN_COMPLETED"):
            n = psql("BEGIN; SELECT berth_webhook_enqueue('hooks', '%s', 'admin', 'hooks/seam', NULL, '1', "
                     "'{\"custom_attributes\": {\"Details\": \"%s details\"}}'); COMMIT;" % (t, t), self.b.dbname)
            self.assertEqual(n, "1")
        # rolled back: never delivered
        psql("BEGIN; SELECT berth_webhook_enqueue('hooks', 'QUOTA_EXCEED', 'admin', 'hooks/seam', NULL, 'rolledback', NULL); "
             "ROLLBACK;", self.b.dbname)
        # a project without such a policy writes nothing
        self.assertEqual(psql("SELECT berth_webhook_enqueue('quiet', 'QUOTA_EXCEED', 'admin', NULL, NULL, NULL, NULL)",
                              self.b.dbname), "0")
        reqs = self.rx.wait("/seam", count=5)
        self.assertTrue(reqs, self.rx.got("/seam"))
        got = {r["json"]["type"]: r["json"]["event_data"]["custom_attributes"]["Details"] for r in reqs}
        self.assertEqual(got, {t: t + " details" for t in ("QUOTA_EXCEED", "QUOTA_WARNING", "TAG_RETENTION", "REPLICATION",
                                                           "ISA_SCAN_COMPLETED")})
        time.sleep(1.5)
        self.assertFalse([r for r in self.rx.got("/seam") if b"rolledback" in r["body"]])
        self.assertTrue(all(verify(r, secret) for r in reqs))
        api(self.b, "DELETE", "/projects/hooks/webhook/policies/%d" % pid)


class Restart(unittest.TestCase):
    def test_sigkill_between_commit_and_delivery(self):
        """The first attempt is in flight (the receiver holds it) when berthd is SIGKILLed; after the restart the
        task's lease runs out and the event is delivered, with the same event id, exactly once successfully.
        BERTH_WEBHOOK_TIMEOUT_SECONDS=3: the lease is the timeout + 5 s, so 8 s to wait out instead of 15; 3 s is still
        far past the moment of the kill, which follows the attempt's arrival at once."""
        rx = Receiver()
        release = threading.Event()
        rx.plans["/crash"] = [("hang", release), 200]
        b = Berthd(env={"BERTH_WEBHOOK_TIMEOUT_SECONDS": "3"}).start()
        try:
            b.project("crash")
            st, _, raw = api(b, "POST", "/projects/crash/webhook/policies", policy(rx.url("/crash"), ["PUSH_ARTIFACT"]))
            self.assertEqual(st, 201, raw)
            digest, _ = b.push_image("crash/app", "v1")
            first = rx.wait("/crash")
            self.assertTrue(first, "the first attempt never started")
            b.stop(signal.SIGKILL)
            release.set()  # the old connection is gone; later attempts are answered
            t0 = time.time()
            b.start()
            later = rx.wait("/crash", count=2, timeout=40)
            self.assertTrue(later, "not delivered after the restart:\n" + b.logs())
            print("\ndelivered %.1f s after the restart (the lease of the killed attempt ran out)" % (time.time() - t0))
            eid = first[0]["headers"]["x-berth-event-id"]
            self.assertEqual({r["headers"]["x-berth-event-id"] for r in later}, {eid})
            self.assertEqual(later[1]["json"]["event_data"]["resources"][0]["digest"], digest)
            time.sleep(2)
            self.assertEqual(len(rx.got("/crash")), 2, "delivered more than once after it succeeded")
            self.assertEqual(psql("SELECT status || ' ' || attempts FROM webhook_tasks", b.dbname), "Success 2")
        finally:
            release.set()
            b.cleanup()
            rx.close()


class QuotaExceedSurvives(unittest.TestCase):
    def test_sigkill_right_after_the_refusal(self):
        """A refused push rolled back, so its QUOTA_EXCEED rides in no transaction: it is written to the outbox before
        the 403 is sent. The only delivery thread is held by another event and berthd is SIGKILLed as soon as the
        client has its 403: after the restart the receiver still gets QUOTA_EXCEED (an event waiting in memory for
        a delivery thread would be gone)."""
        rx = Receiver()
        release = threading.Event()
        rx.plans["/busy"] = [("hang", release), 200]
        b = Berthd(env={"BERTH_WEBHOOK_WORKERS": "1"}).start()
        try:
            st, _, raw = api(b, "POST", "/projects", {"project_name": "hqk", "storage_limit": 30000})
            self.assertEqual(st, 201, raw)
            for path, types in (("/busy", ["PUSH_ARTIFACT"]), ("/quota", ["QUOTA_EXCEED"])):
                st, _, raw = api(b, "POST", "/projects/hqk/webhook/policies", policy(rx.url(path), types))
                self.assertEqual(st, 201, raw)
            b.push_image("hqk/app", "a", size=20000)
            self.assertTrue(rx.wait("/busy"), "the delivery thread was never taken")
            with self.assertRaises(AssertionError):  # refused: 403
                b.push_image("hqk/app", "c", size=20000)
            b.stop(signal.SIGKILL)
            release.set()
            b.start()
            reqs = rx.wait("/quota", timeout=40)
            self.assertTrue(reqs, "QUOTA_EXCEED lost with the process:\n" + b.logs())
            self.assertEqual(reqs[0]["json"]["type"], "QUOTA_EXCEED")
            self.assertEqual(reqs[0]["json"]["event_data"]["resources"][0]["tag"], "c")
        finally:
            release.set()
            b.cleanup()
            rx.close()


class DeliverySettings(unittest.TestCase):
    def test_attempts_backoff_cap_and_timeout_from_the_environment(self):
        """BERTH_WEBHOOK_MAX_ATTEMPTS=4 with back-off 1 s capped at 1 s: a receiver that always answers 500 gets
        exactly four attempts, the last gap under 3 s (uncapped it is 4 s; the delivery threads poll every second,
        so a gap is its wait + up to 1 s); the defaults would make it ten attempts; with
        BERTH_WEBHOOK_TIMEOUT_SECONDS=1 a receiver that sleeps 4 s fails by timeout."""
        rx = Receiver()
        rx.plans["/down"] = [500]
        rx.plans["/slow"] = [("sleep", 4, 200)]
        b = Berthd(env={"BERTH_WEBHOOK_MAX_ATTEMPTS": "4", "BERTH_WEBHOOK_BACKOFF_SECONDS": "1",
                        "BERTH_WEBHOOK_BACKOFF_CAP_SECONDS": "1", "BERTH_WEBHOOK_TIMEOUT_SECONDS": "1",
                        "BERTH_WEBHOOK_WORKERS": "3"}).start()
        try:
            b.project("conf")
            for path in ("/down", "/slow"):
                st, _, raw = api(b, "POST", "/projects/conf/webhook/policies",
                                 policy(rx.url(path), ["PUSH_ARTIFACT"]))
                self.assertEqual(st, 201, raw)
            b.push_image("conf/app", "v1")
            reqs = rx.wait("/down", count=4, timeout=20)
            self.assertTrue(reqs, "not retried: %r" % rx.got("/down"))
            gaps = [reqs[i + 1]["time"] - reqs[i]["time"] for i in range(3)]
            self.assertLess(gaps[2], 3.0, "the back-off cap of 1 s was not applied: gaps %r" % gaps)
            q = ("SELECT t.status || ' ' || t.attempts FROM webhook_tasks t JOIN webhook_executions x ON x.id = "
                 "t.execution_id JOIN webhook_policies w ON w.id = x.policy_id WHERE w.targets->0->>'address' = '%s'")
            self.assertEqual(eventually(lambda: psql(q % rx.url("/down"), b.dbname), "Error 4"), "Error 4")
            time.sleep(2.5)
            self.assertEqual(len(rx.got("/down")), 4, "attempted more than webhook.max_attempts")
            log = eventually(lambda: "imed out" in psql("SELECT log FROM webhook_tasks t JOIN webhook_executions x ON "
                                                        "x.id = t.execution_id JOIN webhook_policies w ON w.id = "
                                                        "x.policy_id WHERE w.targets->0->>'address' = '%s'"
                                                        % rx.url("/slow"), b.dbname), True, timeout=15)
            self.assertTrue(log, "a 4 s receiver did not time out after 1 s:\n" + b.logs())
        finally:
            b.cleanup()
            rx.close()


class HttpsTargets(unittest.TestCase):
    def test_self_signed_receiver(self):
        """A receiver with a self-signed certificate (made here with openssl): refused and retried with the TLS
        error in the task log when skip_cert_verify is false and no CA is given; delivered with skip_cert_verify;
        delivered with verification when the policy's ca_file names that certificate."""
        if shutil.which("openssl") is None:
            sys.exit(77)
        d = tempfile.mkdtemp(prefix="berth-wh-tls-")
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        os.chmod(d, 0o755)
        os.chmod(cert, 0o644)
        rx = Receiver(cert, key)
        b = Berthd().start()
        try:
            b.project("tls")
            for path, extra in (("/strict", {}), ("/skip", None), ("/ca", {"ca_file": cert})):
                body = policy(rx.url(path), ["PUSH_ARTIFACT"], **(extra or {}))
                if extra is None:
                    body["targets"][0]["skip_cert_verify"] = True
                st, _, raw = api(b, "POST", "/projects/tls/webhook/policies", body)
                self.assertEqual(st, 201, raw)
            b.push_image("tls/app", "v1")
            self.assertTrue(rx.wait("/skip"), "skip_cert_verify: not delivered:\n" + b.logs())
            self.assertTrue(rx.wait("/ca"), "ca_file: not delivered:\n" + b.logs())
            q = ("SELECT t.status || ' ' || t.attempts || ' ' || t.log FROM webhook_tasks t JOIN webhook_executions x "
                 "ON x.id = t.execution_id JOIN webhook_policies w ON w.id = x.policy_id WHERE "
                 "w.targets->0->>'address' = '%s'")
            strict = eventually(lambda: psql(q % rx.url("/strict"), b.dbname).count(" attempt ") >= 2, True,
                                timeout=15)
            row = psql(q % rx.url("/strict"), b.dbname)
            self.assertTrue(strict, "the refused target was not retried: %s" % row)
            self.assertTrue(row.startswith("Pending") or row.startswith("Running"), row)
            self.assertRegex(row.lower(), r"certificate|ssl|tls", "the log does not say why: %s" % row)
            self.assertEqual(rx.got("/strict"), [], "a self-signed receiver got the event without verification")
        finally:
            b.cleanup()
            rx.close()
            shutil.rmtree(d, ignore_errors=True)


class Browser(unittest.TestCase):
    def test_webhooks_tab(self):
        """webui/e2e/webhook.e2e.mjs in Chromium: the tab lists policies and deliveries; its Redeliver button sends
        the same event again, which the receiver here sees."""
        from test_webui import ARTIFACTS, CHROMIUM, UI_DIR
        for what, path in (("the built UI (webui/build.sh)", os.path.join(UI_DIR, "index.html")), ("chromium", CHROMIUM),
                           ("playwright-core (webui/build.sh runs npm ci)",
                            os.path.join(os.path.dirname(UI_DIR), "node_modules", "playwright-core"))):
            if not os.path.exists(path):
                self.skipTest("missing %s: %s" % (what, path))
        rx = Receiver()
        b = Berthd(env={"BERTH_UI_DIR": UI_DIR}).start()
        try:
            b.project("hooks")
            body = policy(rx.url("/ci"), ["PUSH_ARTIFACT"], name="ci-hook")
            st, _, raw = api(b, "POST", "/projects/hooks/webhook/policies", body)
            self.assertEqual(st, 201, raw)
            pid = json.loads(raw)["id"]
            # edited in the browser: disabled, two targets with auth headers (the dialog edits the first, keeps the second)
            edit = policy(rx.url("/before"), ["PUSH_ARTIFACT"], name="edit-me", enabled=False)
            edit["targets"][0]["auth_header"] = "Bearer old"
            edit["targets"].append({"type": "http", "address": rx.url("/second"), "auth_header": "Bearer two"})
            st, _, raw = api(b, "POST", "/projects/hooks/webhook/policies", edit)
            self.assertEqual(st, 201, raw)
            eid = json.loads(raw)["id"]
            st, _, raw = api(b, "POST", "/users", {"username": "maint1", "password": PW, "email": "maint1@example.org"})
            self.assertEqual(st, 201, raw)
            st, _, raw = api(b, "POST", "/projects/hooks/members", {"role_id": 4, "member_user": {"username": "maint1"}})
            self.assertEqual(st, 201, raw)
            b.push_image("hooks/app", "1")
            self.assertTrue(rx.wait("/ci"))
            self.assertEqual(eventually(lambda: json.loads(api(b, "GET", "/projects/hooks/webhook/policies/%d/executions" % pid)[2])[0]["status"],
                                        "Success"), "Success")
            os.makedirs(ARTIFACTS, exist_ok=True)
            env = dict(os.environ, BERTH_UI_BASE="http://" + b.host, WEBUI_ARTIFACTS=ARTIFACTS, CHROMIUM=CHROMIUM,
                       BERTH_UI_FIXTURE=json.dumps({"admin_password": "Harbor12345", "project": "hooks",
                                                    "receiver": "http://127.0.0.1:%d" % rx.port,
                                                    "maintainer": "maint1", "maintainer_password": PW}))
            webui = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "webui")
            r = subprocess.run(["node", "--test", "--test-reporter=spec", os.path.join(webui, "e2e", "webhook.e2e.mjs")],
                               cwd=webui, env=env, capture_output=True, text=True, timeout=600)
            print(r.stdout[-8000:], r.stderr[-3000:])
            self.assertEqual(r.returncode, 0, "browser steps failed; screenshots in " + ARTIFACTS)
            again = rx.wait("/ci", count=2)
            self.assertTrue(again, "the Redeliver button did not deliver again")
            self.assertEqual(len({x["headers"]["x-berth-event-id"] for x in again}), 1)
            st, _, raw = api(b, "GET", "/projects/hooks/webhook/policies")
            made = [p for p in json.loads(raw) if p["name"] == "from-the-browser"]
            self.assertEqual(len(made), 1, raw)
            self.assertEqual((made[0]["enabled"], made[0]["targets"][0]["payload_format"]), (False, "CloudEvents"))
            self.assertIn("PULL_ARTIFACT", made[0]["event_types"])
            # the edit dialog's PUT, read back through the API
            st, _, raw = api(b, "GET", "/projects/hooks/webhook/policies/%d" % eid)
            got = json.loads(raw)
            self.assertEqual((got["name"], got["description"], got["enabled"]), ("edited-in-browser", "changed in the edit dialog", True))
            self.assertEqual(got["event_types"], ["PUSH_ARTIFACT", "DELETE_ARTIFACT"])
            t = got["targets"][0]
            self.assertEqual((t["address"], t["payload_format"], t["skip_cert_verify"], t["auth_header"]),
                             (rx.url("/edited"), "CloudEvents", True, "*****"), got)
            self.assertEqual((got["targets"][1]["address"], got["targets"][1]["auth_header"]), (rx.url("/second"), "*****"), got)
            self.assertEqual(len(got["targets"]), 2, got)
            # a maintainer may read policies, not change them: the API refuses what the page does not offer
            st, _, raw = api(b, "PUT", "/projects/hooks/webhook/policies/%d" % eid, {"enabled": False}, auth=basic("maint1", PW))
            self.assertEqual(st, 403, raw)
            # delivered with the new header to the new address; the second target kept its stored header
            b.push_image("hooks/app", "2")
            for path, header in (("/edited", "Bearer edited"), ("/second", "Bearer two")):
                reqs = rx.wait(path)
                self.assertTrue(reqs, path)
                self.assertEqual(reqs[0]["headers"].get("authorization"), header, path)
            self.assertEqual(rx.got("/before"), [])
        finally:
            b.cleanup()
            rx.close()


if __name__ == "__main__":
    main()
