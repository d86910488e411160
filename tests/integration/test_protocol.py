"""OCI distribution-spec endpoints and error codes, spoken raw over HTTP against a real berthd."""
import hashlib
import json
import os
import socket
import threading

from harness import (ACCEPT_ALL, ADMIN_AUTH, OCI_CONFIG, OCI_INDEX, OCI_LAYER, OCI_MANIFEST, BerthTestCase, error_code, main, sha256)


class Case(BerthTestCase):
    """The projects these tests push into (a push does not create one)."""
    PROJECTS = ("a", "cache", "cat", "chunk", "conc", "deep", "del", "iso", "list", "man", "mono", "mount", "obs", "own",
                "range", "ref", "scale", "sha")


class Base(Case):
    def test_base(self):
        st, h, body = self.b.request("GET", "/v2/")
        self.assertEqual(st, 200)
        self.assertEqual(h["docker-distribution-api-version"], "registry/2.0")

    def test_ping(self):
        st, _, body = self.b.request("GET", "/api/v2.0/ping")
        self.assertEqual((st, body), (200, b"Pong"))

    def test_unknown_route_is_404(self):
        st, _, body = self.b.request("GET", "/v2/a/b/nothing")
        self.assertEqual(st, 404)

    def test_surfaces_by_raw_path(self):
        """Each surface (/v2, /api/v2.0, /c, /service/token, /metrics) answers only its own raw paths, and anything
        else gets the JSON 404 of the /v2 parser. h2o picks a registered path by the normalized path (dot-segments
        resolved, percent-decoded), so these prove the raw path still decides."""
        for path in ("/nope", "/metrics/x", "/api/v2.0", "/api/v2.0/", "/service/token/x", "/c", "/v2x",
                     "/v2/../api/v2.0/ping", "/v2/../metrics", "/%76%32/", "/x/../service/token"):
            st, h, body = self.b.request("GET", path)
            self.assertEqual((st, error_code(body)), (404, "NOT_FOUND"), path)
            self.assertEqual(h["docker-distribution-api-version"], "registry/2.0", path)
        st, _, body = self.b.request("GET", "/v2")
        self.assertEqual((st, body), (200, b"{}"))
        st, _, body = self.b.request("GET", "/api/v2.0/nope")
        self.assertEqual((st, json.loads(body)["errors"][0]["message"]), (404, "no such API endpoint"))
        st, _, body = self.b.request("GET", "/api/v2.0/../v2.0/ping")  # the API's own path: the raw one is no ping
        self.assertNotEqual(body, b"Pong")
        self.assertEqual(self.b.request("POST", "/c/nope", b"", auth=None)[0], 404)


class Blobs(Case):
    def test_monolithic_post(self):
        data = os.urandom(3000)
        d = sha256(data)
        st, h, _ = self.b.request("POST", "/v2/mono/repo/blobs/uploads/?digest=" + d, data,
                                  {"Content-Type": "application/octet-stream"})
        self.assertEqual(st, 201)
        self.assertEqual(h["docker-content-digest"], d)
        self.assertEqual(h["location"], "/v2/mono/repo/blobs/" + d)
        st, h, body = self.b.request("GET", "/v2/mono/repo/blobs/" + d)
        self.assertEqual((st, body), (200, data))

    def test_monolithic_wrong_digest_stores_nothing(self):
        data = os.urandom(1000)
        wrong = sha256(b"other")
        before = self.b.upload_ids()
        st, _, body = self.b.request("POST", "/v2/mono/bad/blobs/uploads/?digest=" + wrong, data)
        self.assertEqual(st, 400)
        self.assertEqual(error_code(body), "DIGEST_INVALID")
        st, _, _ = self.b.request("HEAD", "/v2/mono/bad/blobs/" + wrong)
        self.assertEqual(st, 404)
        st, _, _ = self.b.request("HEAD", "/v2/mono/bad/blobs/" + sha256(data))
        self.assertEqual(st, 404)
        self.assertEqual(self.b.upload_ids(), before)

    def test_chunked_upload_and_status(self):
        data = os.urandom(200000)
        st, h, _ = self.b.request("POST", "/v2/chunk/repo/blobs/uploads/")
        self.assertEqual(st, 202)
        self.assertEqual(h["range"], "0-0")
        self.assertTrue(h["docker-upload-uuid"])
        loc = h["location"]
        st, h, _ = self.b.request("PATCH", loc, data[:70000], {"Content-Range": "0-69999"})
        self.assertEqual((st, h["range"]), (202, "0-69999"))
        st, h, _ = self.b.request("GET", loc)
        self.assertEqual((st, h["range"]), (204, "0-69999"))
        # out of order: must continue at 70000
        st, h, body = self.b.request("PATCH", loc, data[80000:90000], {"Content-Range": "80000-89999"})
        self.assertEqual(st, 416)
        self.assertEqual(h["range"], "0-69999")
        self.assertEqual(error_code(body), "BLOB_UPLOAD_INVALID")
        # a chunk without Content-Range (streamed PATCH as docker does)
        st, h, _ = self.b.request("PATCH", loc, data[70000:150000])
        self.assertEqual((st, h["range"]), (202, "0-149999"))
        st, h, _ = self.b.request("PUT", loc + "?digest=" + sha256(data), data[150000:],
                                  {"Content-Range": "150000-199999"})
        self.assertEqual(st, 201)
        st, _, body = self.b.request("GET", "/v2/chunk/repo/blobs/" + sha256(data))
        self.assertEqual(body, data)
        # the session is gone
        st, _, body = self.b.request("GET", loc)
        self.assertEqual((st, error_code(body)), (404, "BLOB_UPLOAD_UNKNOWN"))

    def test_put_wrong_digest_drops_session(self):
        st, h, _ = self.b.request("POST", "/v2/chunk/wrong/blobs/uploads/")
        loc = h["location"]
        st, _, body = self.b.request("PUT", loc + "?digest=" + sha256(b"x"), b"y")
        self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"))
        st, _, _ = self.b.request("GET", loc)
        self.assertEqual(st, 404)
        st, _, _ = self.b.request("HEAD", "/v2/chunk/wrong/blobs/" + sha256(b"y"))
        self.assertEqual(st, 404)

    def test_put_without_digest(self):
        st, h, _ = self.b.request("POST", "/v2/chunk/nodigest/blobs/uploads/")
        st, _, body = self.b.request("PUT", h["location"], b"abc")
        self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"))

    def test_malformed_digest(self):
        st, h, _ = self.b.request("POST", "/v2/chunk/md/blobs/uploads/")
        for bad in ["sha256:abc", "md5:" + "0" * 32, "sha256:" + "G" * 64, "sha256:" + "A" * 64]:
            st, _, body = self.b.request("PUT", h["location"] + "?digest=" + bad, b"abc")
            self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"), bad)
            st, _, body = self.b.request("GET", "/v2/chunk/md/blobs/" + bad)
            self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"), bad)

    def test_sha512(self):
        data = os.urandom(5000)
        d = "sha512:" + hashlib.sha512(data).hexdigest()
        st, h, body = self.b.request("POST", "/v2/sha/five/blobs/uploads/?digest=" + d, data)
        self.assertEqual(st, 201, body)
        st, h, body = self.b.request("GET", "/v2/sha/five/blobs/" + d)
        self.assertEqual((st, body, h["docker-content-digest"]), (200, data, d))

    def test_cancel_upload(self):
        st, h, _ = self.b.request("POST", "/v2/chunk/cancel/blobs/uploads/")
        loc = h["location"]
        self.b.request("PATCH", loc, b"abc")
        st, _, _ = self.b.request("DELETE", loc)
        self.assertEqual(st, 204)
        st, _, body = self.b.request("PATCH", loc, b"def")
        self.assertEqual((st, error_code(body)), (404, "BLOB_UPLOAD_UNKNOWN"))

    def test_upload_of_other_repo_unknown(self):
        st, h, _ = self.b.request("POST", "/v2/own/a/blobs/uploads/")
        uid = h["docker-upload-uuid"]
        st, _, body = self.b.request("PATCH", "/v2/own/b/blobs/uploads/" + uid, b"x")
        self.assertEqual((st, error_code(body)), (404, "BLOB_UPLOAD_UNKNOWN"))

    def test_size_mismatch(self):
        # a Content-Range that announces more than the body carries
        st, h, _ = self.b.request("POST", "/v2/chunk/size/blobs/uploads/")
        st, _, body = self.b.request("PATCH", h["location"], b"abcd", {"Content-Range": "0-9"})
        self.assertEqual(st, 416)

    def test_range_get_head_etag(self):
        data = os.urandom(10000)
        d = self.b.push_blob("range/repo", data)
        st, h, body = self.b.request("GET", "/v2/range/repo/blobs/" + d, headers={"Range": "bytes=100-199"})
        self.assertEqual((st, body), (206, data[100:200]))
        self.assertEqual(h["content-range"], "bytes 100-199/10000")
        st, h, body = self.b.request("HEAD", "/v2/range/repo/blobs/" + d)
        self.assertEqual((st, h["content-length"], h["docker-content-digest"], body), (200, "10000", d, b""))
        self.assertEqual(h["etag"], '"%s"' % d)
        self.assertEqual(h["accept-ranges"], "bytes")
        st, h, body = self.b.request("GET", "/v2/range/repo/blobs/" + d, headers={"Range": "bytes=20000-"})
        self.assertEqual((st, error_code(body)), (416, "RANGE_INVALID"), "an OCI error body, not nginx's page")

    def test_blob_unknown_and_not_in_repo(self):
        d = self.b.push_blob("iso/one", b"isolated")
        st, _, body = self.b.request("GET", "/v2/iso/two/blobs/" + d)
        self.assertEqual((st, error_code(body)), (404, "BLOB_UNKNOWN"))

    def test_cross_repo_mount(self):
        data = os.urandom(4000)
        d = self.b.push_blob("mount/src", data)
        st, h, _ = self.b.request("POST", "/v2/mount/dst/blobs/uploads/?mount=%s&from=mount/src" % d)
        self.assertEqual(st, 201)
        self.assertEqual(h["location"], "/v2/mount/dst/blobs/" + d)
        st, _, body = self.b.request("GET", "/v2/mount/dst/blobs/" + d)
        self.assertEqual(body, data)
        # unknown source: fall back to a new session
        st, h, _ = self.b.request("POST", "/v2/mount/dst2/blobs/uploads/?mount=%s&from=mount/none" % sha256(b"q"))
        self.assertEqual(st, 202)
        self.assertIn("/blobs/uploads/", h["location"])

    def test_blob_delete(self):
        d = self.b.push_blob("del/blob", b"to be deleted")
        st, _, _ = self.b.request("DELETE", "/v2/del/blob/blobs/" + d)
        self.assertEqual(st, 202)
        st, _, _ = self.b.request("HEAD", "/v2/del/blob/blobs/" + d)
        self.assertEqual(st, 404)
        st, _, body = self.b.request("DELETE", "/v2/del/blob/blobs/" + d)
        self.assertEqual((st, error_code(body)), (404, "BLOB_UNKNOWN"))

    def test_concurrent_same_blob(self):
        data = os.urandom(300000)
        errors = []

        def push():
            try:
                self.b.push_blob("conc/blob", data, chunk=65536)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        ts = [threading.Thread(target=push) for _ in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        self.assertEqual(errors, [])
        st, _, body = self.b.request("GET", "/v2/conc/blob/blobs/" + sha256(data))
        self.assertEqual(body, data)


class Names(Case):
    def test_invalid_names(self):
        for name in ["UPPER/case", "a//b", "a/../b", "a/%2e%2e/b", "-lead", "a/b_", "a/./b", "a..b", "a/b/"]:
            st, _, body = self.b.request("GET", "/v2/%s/tags/list" % name)
            self.assertIn(st, (400, 404), name)
            if st == 400:
                self.assertEqual(error_code(body), "NAME_INVALID", name)
            st, _, body = self.b.request("POST", "/v2/%s/blobs/uploads/" % name)
            self.assertIn(st, (400, 404), name)
        # nothing was created under any of those names
        st, _, body = self.b.request("GET", "/v2/_catalog")
        self.assertEqual(json.loads(body)["repositories"], [])

    def test_dotdot_is_400(self):
        st, _, body = self.b.request("PUT", "/v2/a/%2e%2e/b/manifests/latest", b"{}")
        self.assertEqual((st, error_code(body)), (400, "NAME_INVALID"))

    def test_nested_and_keyword_names(self):
        # repository names may contain route words; routes are matched from the right
        d, _ = self.b.push_image("deep/blobs/manifests/x", "v1")
        st, h, _ = self.b.request("GET", "/v2/deep/blobs/manifests/x/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual((st, h["docker-content-digest"]), (200, d))


class Manifests(Case):
    def test_put_get_head_by_tag_and_digest(self):
        d, raw = self.b.push_image("man/one", "v1")
        self.assertEqual(d, sha256(raw))
        for ref in ("v1", d):
            st, h, body = self.b.request("GET", "/v2/man/one/manifests/" + ref, headers={"Accept": ACCEPT_ALL})
            self.assertEqual((st, body, h["content-type"], h["docker-content-digest"]), (200, raw, OCI_MANIFEST, d))
            st, h, body = self.b.request("HEAD", "/v2/man/one/manifests/" + ref)
            self.assertEqual((st, body, int(h["content-length"])), (200, b"", len(raw)))

    def test_unknown(self):
        self.b.push_image("man/two", "v1")
        st, _, body = self.b.request("GET", "/v2/man/two/manifests/nope")
        self.assertEqual((st, error_code(body)), (404, "MANIFEST_UNKNOWN"))
        st, _, body = self.b.request("GET", "/v2/man/absent/manifests/v1")
        self.assertEqual((st, error_code(body)), (404, "NAME_UNKNOWN"))

    def test_missing_blob(self):
        m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
             "config": {"mediaType": OCI_CONFIG, "digest": sha256(b"nocfg"), "size": 5}, "layers": []}
        st, _, body, _ = self.b.push_manifest("man/missing", "v1", m)
        self.assertEqual((st, error_code(body)), (400, "MANIFEST_BLOB_UNKNOWN"))
        st, _, _ = self.b.request("GET", "/v2/man/missing/manifests/v1")
        self.assertEqual(st, 404)

    def test_invalid_manifests(self):
        cfg = self.b.push_blob("man/inv", b"{}")
        good = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": cfg, "size": 2}, "layers": []}
        cases = [
            b"not json",
            b"[]",
            json.dumps(dict(good, schemaVersion=1)).encode(),
            json.dumps(dict(good, config={"mediaType": OCI_CONFIG, "digest": "sha256:zz", "size": 2})).encode(),
            json.dumps(dict(good, config={"mediaType": OCI_CONFIG, "digest": cfg, "size": -1})).encode(),
            json.dumps(dict(good, layers="x")).encode(),
            json.dumps(dict(good, mediaType="application/vnd.example+json")).encode(),
        ]
        for raw in cases:
            st, _, body, _ = self.b.push_manifest("man/inv", "bad", raw)
            self.assertEqual((st, error_code(body)), (400, "MANIFEST_INVALID"), raw)
        # media type in the body disagreeing with Content-Type
        st, _, body, _ = self.b.push_manifest("man/inv", "bad", good, OCI_INDEX)
        self.assertEqual((st, error_code(body)), (400, "MANIFEST_INVALID"))
        st, _, _ = self.b.request("GET", "/v2/man/inv/manifests/bad")
        self.assertEqual(st, 404)

    def test_read_of_an_invalid_reference_is_unknown(self):
        """GET/HEAD of a reference that is neither a tag nor a digest names no manifest: 404 MANIFEST_UNKNOWN
        (the only error the spec lists there); PUT and DELETE of it stay 400."""
        self.b.push_image("man/badref", "v1")
        for ref in (".INVALID_MANIFEST_NAME", "-x", "a" * 129, "sha256:zz", "sha256:" + "A" * 64, "md5:abc"):
            for method in ("GET", "HEAD"):
                st, _, body = self.b.request(method, "/v2/man/badref/manifests/" + ref)
                self.assertEqual(st, 404, (method, ref))
                if method == "GET":
                    self.assertEqual(error_code(body), "MANIFEST_UNKNOWN", ref)
        st, _, body, _ = self.b.push_manifest("man/badref", ".INVALID_MANIFEST_NAME", b"{}")
        self.assertEqual((st, error_code(body)), (400, "MANIFEST_INVALID"))
        st, _, body = self.b.request("DELETE", "/v2/man/badref/manifests/.INVALID_MANIFEST_NAME")
        self.assertEqual(st, 400)
        st, _, body = self.b.request("GET", "/v2/Bad/Name/manifests/v1")
        self.assertEqual((st, error_code(body)), (400, "NAME_INVALID"))

    def test_digest_reference_must_match(self):
        cfg = self.b.push_blob("man/dig", b"{}")
        m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                        "config": {"mediaType": OCI_CONFIG, "digest": cfg, "size": 2}, "layers": []}).encode()
        st, _, body, _ = self.b.push_manifest("man/dig", sha256(b"other"), m)
        self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"))
        st, h, body, _ = self.b.push_manifest("man/dig", sha256(m), m)
        self.assertEqual(st, 201, body)

    def test_too_big(self):
        big = b"{" + b" " * (4 * 1024 * 1024 + 10) + b"}"
        st, _, body, _ = self.b.push_manifest("man/big", "v1", big)
        self.assertEqual(st, 413)
        self.assertEqual(error_code(body), "SIZE_INVALID")

    def test_refused_by_the_edge_in_json(self):
        """What the edge refuses before berthd sees it (headers or URI over its buffers, a malformed request) is an
        error in the registry's JSON, as everything else, not nginx's HTML page."""
        st, h, body = self.b.request("GET", "/v2/man/x/manifests/v1", headers={"X-Pad": "a" * 20000})
        self.assertEqual((st, error_code(body), h.get("content-type")), (400, "BAD_REQUEST", "application/json"), body)
        st, h, body = self.b.request("GET", "/v2/man/x/manifests/" + "a" * 20000)
        self.assertEqual((st, error_code(body), h.get("content-type")), (414, "BAD_REQUEST", "application/json"), body)
        # a URI nginx cannot decode (NUL): no URI to redirect with, the error page must still be JSON, not a 500
        for path in ("/v2/man/x/manifests/a%00b", "/api/v2.0/quotas/%00"):
            st, h, body = self.b.request("GET", path)
            self.assertEqual((st, error_code(body), h.get("content-type")), (400, "BAD_REQUEST", "application/json"), (path, body))
        with socket.create_connection((self.b.ip, self.b.port), timeout=10) as s:
            s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\nno colon in this header line\r\n\r\n")
            raw = b""
            while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400"), raw)
        self.assertEqual(error_code(body), "BAD_REQUEST", raw)

    def test_index_and_accept(self):
        d1, r1 = self.b.push_image("man/idx", "a")
        d2, r2 = self.b.push_image("man/idx", "b")
        idx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": d1, "size": len(r1), "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": OCI_MANIFEST, "digest": d2, "size": len(r2), "platform": {"os": "linux", "architecture": "arm64"}}]}
        st, h, body, raw = self.b.push_manifest("man/idx", "multi", idx, OCI_INDEX)
        self.assertEqual(st, 201, body)
        st, h, body = self.b.request("GET", "/v2/man/idx/manifests/multi", headers={"Accept": OCI_INDEX})
        self.assertEqual((st, body, h["content-type"]), (200, raw, OCI_INDEX))
        st, _, _ = self.b.request("GET", "/v2/man/idx/manifests/multi", headers={"Accept": OCI_MANIFEST})
        self.assertEqual(st, 404)
        # clients (skopeo, containerd) send one Accept header per media type: all of them count
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.b.port, timeout=10)
        conn.putrequest("GET", "/v2/man/idx/manifests/multi")
        conn.putheader("Accept", OCI_MANIFEST)
        conn.putheader("Accept", OCI_INDEX)
        conn.putheader("Authorization", ADMIN_AUTH)
        conn.endheaders()
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, raw))
        conn.close()
        # an index naming a manifest the repository lacks
        bad = dict(idx, manifests=[dict(idx["manifests"][0], digest=sha256(b"absent"))])
        st, _, body, _ = self.b.push_manifest("man/idx", "bad", bad, OCI_INDEX)
        self.assertEqual((st, error_code(body)), (400, "MANIFEST_BLOB_UNKNOWN"))

    def test_docker_schema2(self):
        cfg = self.b.push_blob("man/docker", b'{"architecture":"amd64"}')
        layer = self.b.push_blob("man/docker", os.urandom(100))
        m = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
             "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": cfg, "size": 24},
             "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "digest": layer, "size": 100}]}
        st, h, body, raw = self.b.push_manifest("man/docker", "v1", m, m["mediaType"])
        self.assertEqual(st, 201, body)
        st, h, body = self.b.request("GET", "/v2/man/docker/manifests/v1")
        self.assertEqual((body, h["content-type"]), (raw, m["mediaType"]))

    def test_retag_last_writer_wins(self):
        d1, _ = self.b.push_image("man/retag", "v1")
        d2, _ = self.b.push_image("man/retag", "v1")
        st, h, _ = self.b.request("HEAD", "/v2/man/retag/manifests/v1")
        self.assertEqual(h["docker-content-digest"], d2)
        st, _, _ = self.b.request("HEAD", "/v2/man/retag/manifests/" + d1)
        self.assertEqual(st, 200)

    def test_delete_tag_and_manifest(self):
        d, _ = self.b.push_image("man/del", "v1")
        self.b.push_manifest("man/del", "v2", self.b.request("GET", "/v2/man/del/manifests/v1")[2])
        st, _, _ = self.b.request("DELETE", "/v2/man/del/manifests/v1")
        self.assertEqual(st, 202)
        self.assertEqual(self.b.request("GET", "/v2/man/del/manifests/v1")[0], 404)
        self.assertEqual(self.b.request("GET", "/v2/man/del/manifests/" + d)[0], 200)
        st, _, _ = self.b.request("DELETE", "/v2/man/del/manifests/" + d)
        self.assertEqual(st, 202)
        self.assertEqual(self.b.request("GET", "/v2/man/del/manifests/v2")[0], 404)
        st, _, body = self.b.request("DELETE", "/v2/man/del/manifests/" + d)
        self.assertEqual((st, error_code(body)), (404, "MANIFEST_UNKNOWN"))

    def test_concurrent_tag_pushes(self):
        results = []

        def push(i):
            results.append(self.b.push_image("man/race", "same", seed=i)[0])
        ts = [threading.Thread(target=push, args=(i,)) for i in range(6)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        st, h, body = self.b.request("GET", "/v2/man/race/manifests/same", headers={"Accept": ACCEPT_ALL})
        self.assertEqual(st, 200)
        self.assertIn(h["docker-content-digest"], results)
        self.assertEqual(sha256(body), h["docker-content-digest"])


class ReadCache(Case):
    def metric(self, name):
        body = self.b.request("GET", "/metrics")[2].decode()
        return int([line for line in body.splitlines() if line.startswith(name + " ")][0].split()[1])

    def test_cache_serves_and_invalidates(self):
        d1, _ = self.b.push_image("cache/app", "v1")
        for _ in range(3):
            st, h, _ = self.b.request("GET", "/v2/cache/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
            self.assertEqual((st, h["docker-content-digest"]), (200, d1))
        self.assertEqual(self.metric("berth_cache_enabled"), 1)
        hits = self.metric("berth_cache_hits_total")
        # the edge answers a repeat from its kept decision (test_edge.py); a query string always reaches berthd
        self.b.request("GET", "/v2/cache/app/manifests/v1?via=berthd")
        self.assertGreater(self.metric("berth_cache_hits_total"), hits, "repeated GET did not hit the cache")
        # a re-push of the tag is visible at once
        d2, _ = self.b.push_image("cache/app", "v1")
        st, h, _ = self.b.request("GET", "/v2/cache/app/manifests/v1", headers={"Accept": ACCEPT_ALL})
        self.assertEqual(h["docker-content-digest"], d2)
        # deletes too
        self.b.request("GET", "/v2/cache/app/manifests/" + d2)
        self.assertEqual(self.b.request("DELETE", "/v2/cache/app/manifests/v1")[0], 202)
        self.assertEqual(self.b.request("GET", "/v2/cache/app/manifests/v1")[0], 404)
        self.assertEqual(self.b.request("DELETE", "/v2/cache/app/manifests/" + d2)[0], 202)
        self.assertEqual(self.b.request("GET", "/v2/cache/app/manifests/" + d2)[0], 404)
        # tag lists
        d3, raw3 = self.b.push_image("cache/tags", "a")
        for _ in range(2):
            self.assertEqual(json.loads(self.b.request("GET", "/v2/cache/tags/tags/list")[2])["tags"], ["a"])
            st, h, body = self.b.request("GET", "/v2/cache/tags/tags/list?n=1")
            self.assertEqual((json.loads(body)["tags"], h["link"]), (["a"], '</v2/cache/tags/tags/list?n=1&last=a>; rel="next"'))
        self.b.push_manifest("cache/tags", "b", raw3)
        self.assertEqual(json.loads(self.b.request("GET", "/v2/cache/tags/tags/list")[2])["tags"], ["a", "b"])
        self.b.request("DELETE", "/v2/cache/tags/manifests/a")
        self.assertEqual(json.loads(self.b.request("GET", "/v2/cache/tags/tags/list")[2])["tags"], ["b"])
        blob = self.b.push_blob("cache/app", b"cached blob")
        self.assertEqual(self.b.request("HEAD", "/v2/cache/app/blobs/" + blob)[0], 200)
        self.assertEqual(self.b.request("HEAD", "/v2/cache/app/blobs/" + blob)[0], 200)
        self.assertEqual(self.b.request("DELETE", "/v2/cache/app/blobs/" + blob)[0], 202)
        self.assertEqual(self.b.request("HEAD", "/v2/cache/app/blobs/" + blob)[0], 404)


class Lists(Case):
    def test_tags_pagination(self):
        d, raw = self.b.push_image("list/tags", "t00")
        names = ["t%02d" % i for i in range(25)] + ["A", "Z", "b"]
        for n in names:
            st, _, _, _ = self.b.push_manifest("list/tags", n, raw)
            self.assertEqual(st, 201)
        st, h, body = self.b.request("GET", "/v2/list/tags/tags/list")
        self.assertEqual(json.loads(body), {"name": "list/tags", "tags": sorted(names)})
        got, path = [], "/v2/list/tags/tags/list?n=10"
        while path:
            st, h, body = self.b.request("GET", path)
            page = json.loads(body)["tags"]
            self.assertLessEqual(len(page), 10)
            got += page
            link = h.get("link")
            path = link[1:link.index(">")] if link else None
        self.assertEqual(got, sorted(names))
        st, _, body = self.b.request("GET", "/v2/list/tags/tags/list?n=5&last=t10")
        self.assertEqual(json.loads(body)["tags"], ["t11", "t12", "t13", "t14", "t15"])
        st, _, body = self.b.request("GET", "/v2/list/tags/tags/list?n=0")
        self.assertEqual((st, json.loads(body)["tags"]), (200, []))
        st, _, body = self.b.request("GET", "/v2/list/none/tags/list")
        self.assertEqual((st, error_code(body)), (404, "NAME_UNKNOWN"))

    def test_catalog(self):
        for r in ["cat/b", "cat/a", "cat/c/d"]:
            self.b.push_blob(r, r.encode())
        st, _, body = self.b.request("GET", "/v2/_catalog")
        repos = json.loads(body)["repositories"]
        self.assertEqual([r for r in repos if r.startswith("cat/")], ["cat/a", "cat/b", "cat/c/d"])
        st, h, body = self.b.request("GET", "/v2/_catalog?n=1&last=cat/a")
        self.assertEqual(json.loads(body)["repositories"], ["cat/b"])
        self.assertIn('rel="next"', h["link"])


class ScaleTags(Case):
    def test_million_tags_page_by_index(self):
        """1M tags in one repository: a page is an index range scan, not a sort of the whole set."""
        from harness import psql
        self.b.push_image("scale/tags", "seed")
        db = self.b.dbname
        psql("INSERT INTO tags (repository_id, name, manifest_id) SELECT t.repository_id, 't' || lpad(g::text, 7, '0'), "
             "t.manifest_id FROM tags t, generate_series(1, 1000000) g WHERE t.name = 'seed'; ANALYZE tags", dbname=db)
        st, h, body = self.b.request("GET", "/v2/scale/tags/tags/list?n=3&last=t0500000")
        self.assertEqual(json.loads(body)["tags"], ["t0500001", "t0500002", "t0500003"])
        self.assertIn("last=t0500003", h["link"])
        rid = psql("SELECT id FROM repositories WHERE name = 'scale/tags'", dbname=db)
        plan = psql("EXPLAIN SELECT name FROM tags WHERE repository_id = %s AND name > 't0500000' ORDER BY name LIMIT 100"
                    % rid, dbname=db)
        self.assertIn("Index", plan)
        self.assertNotIn("Sort", plan)


class Referrers(Case):
    def test_referrers(self):
        subj, raw = self.b.push_image("ref/app", "v1")
        empty = self.b.push_blob("ref/app", b"{}")

        def artifact(atype, ann):
            m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": atype,
                 "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
                 "layers": [], "subject": {"mediaType": OCI_MANIFEST, "digest": subj, "size": len(raw)},
                 "annotations": ann}
            st, h, body, r = self.b.push_manifest("ref/app", sha256(json.dumps(m).encode()), m)
            self.assertEqual(st, 201, body)
            self.assertEqual(h["oci-subject"], subj)
            return h["docker-content-digest"]
        sig = artifact("application/vnd.example.sig", {"k": "sig"})
        sbom = artifact("application/vnd.example.sbom", {"k": "sbom"})
        st, h, body = self.b.request("GET", "/v2/ref/app/referrers/" + subj)
        self.assertEqual((st, h["content-type"]), (200, OCI_INDEX))
        idx = json.loads(body)
        self.assertEqual(sorted(m["digest"] for m in idx["manifests"]), sorted([sig, sbom]))
        self.assertEqual({m["annotations"]["k"] for m in idx["manifests"]}, {"sig", "sbom"})
        st, h, body = self.b.request("GET", "/v2/ref/app/referrers/%s?artifactType=application/vnd.example.sbom" % subj)
        self.assertEqual([m["digest"] for m in json.loads(body)["manifests"]], [sbom])
        self.assertEqual(h["oci-filters-applied"], "artifactType")
        # subject unknown: an empty index, not an error
        st, _, body = self.b.request("GET", "/v2/ref/app/referrers/" + sha256(b"none"))
        self.assertEqual((st, json.loads(body)["manifests"]), (200, []))
        st, _, body = self.b.request("GET", "/v2/ref/app/referrers/notadigest")
        self.assertEqual((st, error_code(body)), (400, "DIGEST_INVALID"))


class Observability(Case):
    def test_metrics_and_access_log(self):
        self.b.request("GET", "/v2/")
        self.b.push_blob("obs/repo", b"observed")
        st, h, body = self.b.request("GET", "/metrics")
        text = body.decode()
        self.assertEqual(st, 200)
        self.assertIn('berth_http_requests_total{route="base",method="GET",status="200"}', text)
        self.assertIn('berth_http_requests_total{route="upload",method="PUT",status="201"}', text)
        self.assertIn("berth_db_pool_size", text)
        self.assertIn("berth_upload_streams 0", text)
        def pushed(rows):
            return any(r["route"] == "upload" and r["status"] == 201 and r["bytes_in"] == 8 for r in rows)
        lines = self.b.access_log(pushed)
        self.assertTrue(pushed(lines))
        self.assertTrue(all(set(r) >= {"ts", "method", "path", "status", "ms"} for r in lines))


class NoImplicitProjects(BerthTestCase):
    """A push never creates a project (Harbor's rule) unless projects.auto_create is on; `library` exists."""

    def test_push_into_missing_project_is_name_unknown(self):
        data = b"orphan"
        for method, path, body in (("POST", "/v2/ghost/app/blobs/uploads/", None),
                                   ("POST", "/v2/ghost/app/blobs/uploads/?digest=" + sha256(data), data),
                                   ("POST", "/v2/ghost/app/blobs/uploads/?mount=%s&from=library/x" % sha256(data), None),
                                   ("PUT", "/v2/ghost/app/manifests/v1", json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                    "config": {"mediaType": OCI_CONFIG, "digest": sha256(b"{}"), "size": 2}, "layers": []}).encode())):
            st, _, out = self.b.request(method, path, body, {"Content-Type": OCI_MANIFEST if method == "PUT" else "application/octet-stream"})
            self.assertEqual((st, error_code(out)), (404, "NAME_UNKNOWN"), path)
            self.assertIn(b"ghost", out)
        st, _, _ = self.b.request("GET", "/api/v2.0/projects/ghost")
        self.assertEqual(st, 404)
        self.assertEqual([r for r in json.loads(self.b.request("GET", "/v2/_catalog")[2])["repositories"] if "ghost" in r], [])

    def test_library_is_public_and_takes_pushes(self):
        st, _, body = self.b.request("GET", "/api/v2.0/projects/library")
        self.assertEqual(st, 200)
        p = json.loads(body)
        self.assertEqual((p["metadata"]["public"], p["owner_name"]), ("true", "admin"))
        d, _ = self.b.push_image("library/app", "v1")
        st, h, _ = self.b.request("HEAD", "/v2/library/app/manifests/v1", headers={"Accept": OCI_MANIFEST}, auth=None)
        self.assertEqual((st, h["docker-content-digest"]), (200, d))  # anonymous pull: the project is public


class AutoCreateProjects(BerthTestCase):
    """projects.auto_create: true (BERTH_PROJECTS_AUTO_CREATE) restores creation on first push."""
    START = False

    @classmethod
    def setUpClass(cls):
        from harness import Berthd
        cls.b = Berthd(env={"BERTH_PROJECTS_AUTO_CREATE": "true"}).start()

    def test_push_creates_the_project(self):
        self.b.push_image("fresh/app", "v1")
        st, _, body = self.b.request("GET", "/api/v2.0/projects/fresh")
        self.assertEqual((st, json.loads(body)["metadata"]["public"]), (200, "false"))


if __name__ == "__main__":
    main()
