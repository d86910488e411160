"""Bad input never gets a 5xx: arbitrary bytes into every route while the database is healthy.

Every operation of the OpenAPI document (walked from the document berthd serves) and every /v2, token and
session route gets, one position at a time, a fixed list of nasty values (cut multi-byte sequences, overlong
forms, surrogates, NUL, double-encoded bytes, very long values) and seeded random bytes in its path parameters,
query parameters, JSON bodies and Basic credentials. Bytes go on the wire as they are (a raw socket, both
percent-encoded and raw where HTTP framing allows), and the answer must be below 500, with an error body that is
valid JSON when it says it is JSON. BERTH_TEST_SEED picks the random inputs (printed on failure).
"""
import base64
import json
import os
import random
import urllib.parse

import yaml

from harness import ADMIN_AUTH, OCI_MANIFEST, BerthTestCase, main, psql, raw_exchange

NASTY = [
    b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"a\xc3", b"\xc0\xaf", b"\xe0\x80\xaf",
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\x00", b"a\x00b",
    b"%ff", b"%c3", b"%00", b"%", b"%zz", b"\xef\xbf\xbf", "é".encode(), "😀".encode(), "名前".encode(),
    b"'; SELECT pg_sleep(0); --", b"\\", b"\"", b"..", b"../../etc/passwd", b"\x7f", b"\x01\x02\x1b[0m",
    b"a" * 1023, b"a" * 1024, b"\xe2\x82\xac" * 400, b"\xff" * 3000, b"-1", b"0", b"99999999999999999999999", b"",
]
# where a valid value is needed next to the nasty one (reads target what exists, changes what does not)
EXISTING = {"project_name_or_id": "fuzz", "project_name": "fuzz", "repository_name": "app", "reference": "v1",
            "tag_name": "v1"}
MISSING = {"project_name_or_id": "nosuch", "project_name": "nosuch", "repository_name": "nosuch", "reference": "nosuch",
           "tag_name": "nosuch"}
BODY_FIELDS = ["name", "project_name", "public", "metadata", "username", "password", "email", "realname", "comment",
               "new_password", "old_password", "role_id", "member_user", "member_group", "group_name", "ldap_group_dn",
               "description", "url", "type", "credential", "access_key", "access_secret", "insecure", "level",
               "features", "node", "nodes", "filters", "dest_namespace", "src_registry", "dest_registry", "policy_id",
               "permissions", "secret", "duration", "disable", "sysadmin_flag", "reference", "digest", "tag", "value",
               "kind", "namespace", "variants", "architecture", "images", "ldap_uid_list"]
JSON_NASTY = ["\u0000", "\ud800", "\udfff\ud800", "é" * 200, "😀" * 100, "a" * 5000, "%ff", "\\", "'", "\x7f",
              -1, 2 ** 63, 1e308, None, True, [], {}, [""] * 50, {"": {"": ""}}]
V2_ROUTES = [
    ("GET", "/v2/{name}/tags/list", ["n", "last"]), ("GET", "/v2/_catalog", ["n", "last"]),
    ("GET", "/v2/{name}/manifests/{ref}", []), ("HEAD", "/v2/{name}/manifests/{ref}", []),
    ("PUT", "/v2/{name}/manifests/{ref}", []), ("DELETE", "/v2/{name}/manifests/{ref}", []),
    ("GET", "/v2/{name}/blobs/{digest}", []), ("HEAD", "/v2/{name}/blobs/{digest}", []),
    ("DELETE", "/v2/{name}/blobs/{digest}", []), ("GET", "/v2/{name}/referrers/{digest}", ["artifactType"]),
    ("POST", "/v2/{name}/blobs/uploads/", ["digest", "mount", "from"]),
    ("GET", "/v2/{name}/blobs/uploads/{uuid}", []), ("PATCH", "/v2/{name}/blobs/uploads/{uuid}", []),
    ("PUT", "/v2/{name}/blobs/uploads/{uuid}", ["digest"]), ("DELETE", "/v2/{name}/blobs/uploads/{uuid}", []),
    ("GET", "/v2/_isa/{view}/{name}/manifests/{ref}", []), ("GET", "/v2/", []),
    ("GET", "/service/token", ["service", "scope", "account", "offline_token", "client_id"]),
]
V2_VALID = {"name": "fuzz/app", "ref": "v1", "digest": "sha256:" + "0" * 64, "uuid": "00000000-0000-0000-0000-000000000000",
            "view": "x86-64-v3"}


def encode(value, raw):
    """A URL component: percent-encoded, or (raw) high bytes as they are and only what breaks framing encoded."""
    if not raw:
        return urllib.parse.quote_from_bytes(value, safe="").encode()
    return b"".join(bytes([c]) if c >= 0x80 or (c > 0x20 and c not in b"/?#%& +") else b"%%%02X" % c for c in value)


class BadInput(BerthTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.seed = int(os.environ.get("BERTH_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
        cls.rnd = random.Random(cls.seed)
        st, _, body = cls.b.request("POST", "/api/v2.0/projects", json.dumps({"project_name": "fuzz"}).encode(),
                                    {"Content-Type": "application/json"})
        assert st in (201, 409), (st, body)
        cls.b.push_image("fuzz/app", "v1")
        # wrong passwords go to a user of their own: the admin's login back-off must not end the test
        st, _, body = cls.b.request("POST", "/api/v2.0/users", json.dumps({"username": "fuzzer", "password": "Fuzz12345"}).encode(),
                                    {"Content-Type": "application/json"})
        assert st == 201, (st, body)
        cls.failures = []
        cls.sent = 0

    @classmethod
    def tearDownClass(cls):
        print("\n%d requests sent (BERTH_TEST_SEED=%d)" % (cls.sent, cls.seed))
        super().tearDownClass()

    def random_values(self, n):
        out = []
        text = "名前😀é".encode()
        for _ in range(n):
            kind = self.rnd.randrange(3)
            if kind == 0:
                out.append(bytes(self.rnd.randrange(256) for _ in range(self.rnd.randrange(1, 40))))
            elif kind == 1:
                out.append(bytes(self.rnd.randrange(0x80, 0x100) for _ in range(self.rnd.randrange(1, 8))))
            else:
                out.append(text[:self.rnd.randrange(1, len(text))])  # cut anywhere, often mid-character
        return out

    def values(self):
        return NASTY + self.random_values(12)

    def send(self, method, target, body=b"", headers=None, auth=ADMIN_AUTH):
        """One request on a raw socket (http.client refuses bytes that are not ASCII); (status, headers, body)."""
        head = [b"%s %s HTTP/1.1" % (method.encode(), target), b"Host: 127.0.0.1", b"Connection: close",
                b"Content-Length: %d" % len(body)]
        if auth is not None:
            head.append(b"Authorization: " + (auth if isinstance(auth, bytes) else auth.encode()))
        for k, v in (headers or {}).items():
            head.append(k.encode() + b": " + (v if isinstance(v, bytes) else v.encode()))
        data = raw_exchange(self.b.ip, self.b.port, b"\r\n".join(head) + b"\r\n\r\n" + body)
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode("latin-1")
        return status, hdrs, rest

    def check(self, method, target, body=b"", headers=None, auth=ADMIN_AUTH):
        st, h, data = self.send(method, target, body, headers, auth)
        self.__class__.sent += 1
        what = "%s %r (body %r, auth %r)" % (method, target[:200], body[:80], auth if auth is None else auth[:60])
        if st >= 500:
            self.failures.append("%d %s: %r" % (st, what, data[:200]))
        elif st >= 400 and data and "json" in h.get("content-type", "") and method != "HEAD":
            try:
                json.loads(data.decode("utf-8"))
            except ValueError as e:
                self.failures.append("invalid JSON error body (%s) for %s: %r" % (e, what, data[:200]))
        return st

    def assert_no_failures(self, what):
        # the database was healthy all along (a 503 from a real outage would be correct, and is not this test)
        self.assertEqual(psql("SELECT 1", dbname=self.b.dbname), "1")
        self.assertIsNone(self.b.proc.poll(), "berthd died:\n" + self.b.logs())
        st, _, _ = self.b.request("GET", "/v2/fuzz/app/tags/list")
        self.assertEqual(st, 200, "berthd no longer answers after " + what)
        failures, self.__class__.failures = self.failures, []
        self.assertEqual(failures[:20], [], "%d bad answers to %s (BERTH_TEST_SEED=%d)" % (len(failures), what, self.seed))

    def operations(self):
        st, _, doc = self.b.request("GET", "/api/v2.0/openapi.yaml")
        self.assertEqual(st, 200)
        paths = yaml.safe_load(doc)["paths"]
        ops = []
        for path, item in paths.items():
            for method, op in item.items():
                if method in ("get", "head", "post", "put", "patch", "delete"):
                    query = [p["name"] for p in op.get("parameters", []) + item.get("parameters", []) if p.get("in") == "query"]
                    ops.append((method.upper(), path, query + ["q"], "requestBody" in op))
        self.assertGreater(len(ops), 40, "the OpenAPI document lost its operations")
        # reads first: the changes run against objects that do not exist, so nothing the reads need goes away
        return sorted(ops, key=lambda o: o[0] not in ("GET", "HEAD"))

    @staticmethod
    def fill(template, params, nasty_name=None, nasty=None, raw=False):
        out = template.encode()
        for name, valid in params.items():
            out = out.replace(b"{%s}" % name.encode(), encode(nasty, raw) if name == nasty_name else valid.encode())
        return out

    def test_openapi_routes(self):
        for method, path, query, has_body in self.operations():
            names = [seg[1:-1] for seg in path.split("/") if seg.startswith("{") and seg.endswith("}")]
            valid = {n: (EXISTING if method in ("GET", "HEAD") else MISSING).get(n, "424242") for n in names}
            base = b"/api/v2.0" + self.fill(path, valid)
            for v in self.values():
                for n in names:
                    for raw in (False, True):
                        self.check(method, b"/api/v2.0" + self.fill(path, valid, n, v, raw))
                for k in query:
                    self.check(method, base + b"?" + k.encode() + b"=" + encode(v, False))
                self.check(method, base + b"?" + encode(v, True) + b"=1")
            if has_body:
                for body in self.bodies(8):
                    self.check(method, base, body, {"Content-Type": "application/json"})
        self.assert_no_failures("the OpenAPI routes")

    def bodies(self, n):
        out = [b'{"name":"\xff"}', b'{"project_name":"\xc3"}', b'\xff\xfe{}', b"[]", b"null", b"{" * 10000, b'{"a":1,"a":2}']
        for _ in range(n):
            obj = {}
            for f in self.rnd.sample(BODY_FIELDS, self.rnd.randrange(1, 8)):
                obj[f] = self.rnd.choice(JSON_NASTY + [v.decode("utf-8", "surrogateescape") for v in self.random_values(3)])
            out.append(json.dumps(obj).encode())
            cut = json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
            out.append(cut[:self.rnd.randrange(1, len(cut) + 1)])
        return out

    def test_v2_routes(self):
        for method, path, query in V2_ROUTES:
            names = [n for n in V2_VALID if "{%s}" % n in path]
            base = self.fill(path, V2_VALID)
            body = b"{}" if method in ("PUT", "PATCH") else b""
            for v in self.values():
                for n in names:
                    for raw in (False, True):
                        self.check(method, self.fill(path, V2_VALID, n, v, raw), body)
                for k in query:
                    self.check(method, base + b"?" + k.encode() + b"=" + encode(v, False), body)
        # a manifest whose error message quotes client text: cut at the message's end, mid-character
        for n in range(120, 130):
            m = json.dumps({"schemaVersion": 2, "mediaType": "é" * n, "config": {}, "layers": []}).encode()
            self.check("PUT", b"/v2/fuzz/app/manifests/cut", m, {"Content-Type": OCI_MANIFEST})
        self.assert_no_failures("the /v2 and token routes")

    def test_credentials(self):
        users = self.values()[:30]
        for v in users:
            for user, secret in ((v, b"x"), (b"fuzzer", v)):
                basic = b"Basic " + base64.b64encode(user + b":" + secret)
                for target in (b"/v2/", b"/v2/fuzz/app/tags/list", b"/service/token?scope=repository:fuzz/app:pull",
                               b"/api/v2.0/users/current"):
                    self.check("GET", target, auth=basic)
            form = b"principal=" + encode(v, False) + b"&password=x"
            self.check("POST", b"/c/login", form, {"Content-Type": "application/x-www-form-urlencoded"}, auth=None)
            oauth = b"grant_type=password&service=berth&username=" + encode(v, False) + b"&password=" + encode(v, False)
            self.check("POST", b"/service/token", oauth, {"Content-Type": "application/x-www-form-urlencoded"}, auth=None)
            self.check("GET", b"/v2/", auth=b"Bearer " + encode(v, True))
            self.check("GET", b"/api/v2.0/projects", headers={"Cookie": b"sid=" + encode(v, True)}, auth=None)
        self.assert_no_failures("credentials")

    def test_basic_credentials_not_utf8_are_bad_input(self):
        """A Basic user name or password that is not UTF-8 is a malformed request (400), on every surface."""
        for user, secret in ((b"\xff", b"x"), (b"fuzzer", b"\xc3"), (b"a\xe2\x82", b"x")):
            basic = b"Basic " + base64.b64encode(user + b":" + secret)
            for target in (b"/v2/", b"/service/token?scope=repository:fuzz/app:pull", b"/api/v2.0/users/current"):
                self.assertEqual(self.check("GET", target, auth=basic), 400, (user, secret, target))
        self.assert_no_failures("credentials that are not UTF-8")

    def test_access_log_keeps_bad_paths(self):
        """A probe with bytes that are not UTF-8 is logged (scrubbed to U+FFFD), not silently left out."""
        self.assertEqual(self.check("GET", b"/v2/probe\xff\xc3/manifests/x"), 400)
        rows = self.b.access_log(lambda rows: any(r["path"].startswith("/v2/probe") for r in rows))
        self.assertIn("/v2/probe\ufffd\ufffd/manifests/x", [r["path"] for r in rows])
        self.assert_no_failures("a probe")

    def test_long_parameter_is_refused(self):
        """A value the API cannot hold is refused, not silently dropped (it used to act as if absent)."""
        st, _, body = self.b.request("GET", "/api/v2.0/projects?name=" + "a" * 1024)
        self.assertEqual(st, 400, body)
        self.assertIn("longer than", json.loads(body)["errors"][0]["message"])
        st, _, body = self.b.request("GET", "/api/v2.0/projects?name=" + "a" * 1023)
        self.assertEqual(st, 200, body)
        st, _, body = self.b.request("GET", "/v2/fuzz/app/tags/list?last=%ff")
        self.assertEqual((st, json.loads(body)["errors"][0]["code"]), (400, "UNSUPPORTED"))
        st, _, body = self.b.request("GET", "/api/v2.0/search?q=%e2%82")
        self.assertEqual((st, json.loads(body)["errors"][0]["code"]), (400, "BAD_REQUEST"))
        st, _, body = self.b.request("GET", "/v2/fuzz/app/tags/list?n=x")
        self.assertEqual(st, 400, body)

    def test_long_names_are_refused_not_cut(self):
        """A name longer than the 255 bytes a handler holds was cut there, which could split a UTF-8 character:
        PostgreSQL refused the result and the client got 500 (BERTH_TEST_SEED=149205649 found it on PUT
        /usergroups/{id}). Each such value is now refused with 400, and one that fits still works."""
        long_name, fits = "\u00e9" * 128, "\u00e9" * 127  # 256 and 254 bytes
        quote = urllib.parse.quote
        for method, path, body in (
                ("PUT", "/api/v2.0/usergroups/424242", {"group_name": long_name}),
                ("GET", "/api/v2.0/usergroups?group_name=" + quote(long_name), None),
                ("GET", "/api/v2.0/usergroups/search?groupname=" + quote(long_name), None),
                ("GET", "/api/v2.0/users?username=" + quote(long_name), None),
                ("GET", "/api/v2.0/users/search?username=" + quote(long_name), None),
                ("GET", "/api/v2.0/projects/fuzz/members?entityname=" + quote(long_name), None)):
            st, _, out = self.b.request(method, path, json.dumps(body).encode() if body else None,
                                        {"Content-Type": "application/json"})
            self.assertEqual(st, 400, (method, path, out))
            self.assertIn("longer than 255 bytes", json.loads(out)["errors"][0]["message"])
        self.assertEqual(self.b.request("PUT", "/api/v2.0/usergroups/424242", json.dumps({"group_name": fits}).encode(),
                                        {"Content-Type": "application/json"})[0], 404)
        self.assertEqual(self.b.request("GET", "/api/v2.0/users?username=" + quote(fits))[0], 200)


if __name__ == "__main__":
    main()
