"""Harbor's API shapes that clients rely on: artifact types, sort= on every list, X-Is-Resource-Name, registry
descriptions, /usergroups/search and what /systeminfo tells whom."""
import json
import re
import time

from harness import ADMIN_AUTH, OCI_INDEX, OCI_MANIFEST, BerthTestCase, error_code, main

# every list endpoint with one key it sorts by (the fixtures below make each list non-empty where it matters)
LISTS = {
    "/projects": "name",
    "/projects/shapes/repositories": "name",
    "/projects/shapes/repositories/one/artifacts": "push_time",
    "/projects/shapes/members": "entity_name",
    "/projects/shapes/logs": "op_time",
    "/projects/shapes/robots": "name",
    "/users": "username",
    "/users/search?username=a": "username",
    "/robots": "name",
    "/audit-logs": "op_time",
    "/usergroups": "group_name",
    "/registries": "name",
    "/replication/policies": "name",
    "/replication/executions": "start_time",
}


class HarborShapes(BerthTestCase):
    PROJECTS = ("shapes",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.single, _ = cls.b.push_image("shapes/one", "v1")
        cls.b.push_image("shapes/one", "v2")
        stored = cls.b.request("GET", "/v2/shapes/one/manifests/v1", headers={"Accept": OCI_MANIFEST})[2]
        idx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": cls.single, "size": len(stored), "platform": {"os": "linux", "architecture": "amd64"}}]}
        st, h, body, _ = cls.b.push_manifest("shapes/one", "multi", idx, OCI_INDEX)
        assert st == 201, body
        cls.index = h["docker-content-digest"]
        # an artifact that is not an image: its own config media type
        cfg = b'{"kind":"thing"}'
        cd = cls.b.push_blob("shapes/one", cfg)
        m = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"mediaType": "application/vnd.example.thing.config.v1+json",
                                                                        "digest": cd, "size": len(cfg)}, "layers": []}
        st, h, body, _ = cls.b.push_manifest("shapes/one", "thing", m)
        assert st == 201, body
        cls.thing = h["docker-content-digest"]
        for name in ("zeta", "alpha", "mid"):
            st, _, body = cls.api("POST", "/registries", {"name": name, "type": "berth", "url": "http://127.0.0.1:1",
                                                          "description": "the %s site" % name})
            assert st == 201, body

    @classmethod
    def api(cls, method, path, body=None, auth=ADMIN_AUTH, headers=None):
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        st, hdrs, raw = cls.b.request(method, "/api/v2.0" + path, data, h, auth=auth)
        try:
            return st, hdrs, json.loads(raw) if raw else None
        except ValueError:
            return st, hdrs, raw

    def test_artifact_type_is_image_for_single_arch_and_index(self):
        st, _, arts = self.api("GET", "/projects/shapes/repositories/one/artifacts?page_size=50")
        self.assertEqual(st, 200)
        kinds = {a["digest"]: a["type"] for a in arts}
        self.assertEqual((kinds[self.single], kinds[self.index], kinds[self.thing]), ("IMAGE", "IMAGE", "UNKNOWN"))
        st, _, one = self.api("GET", "/projects/shapes/repositories/one/artifacts/v1")
        self.assertEqual(one["type"], "IMAGE")
        st, h, imgs = self.api("GET", "/projects/shapes/repositories/one/artifacts?q=type%3DIMAGE&page_size=50")
        self.assertEqual(st, 200)
        self.assertNotIn(self.thing, [a["digest"] for a in imgs])
        self.assertIn(self.index, [a["digest"] for a in imgs])
        self.assertTrue(all(a["type"] == "IMAGE" for a in imgs))
        self.assertEqual(int(h["x-total-count"]), len(imgs))
        st, _, other = self.api("GET", "/projects/shapes/repositories/one/artifacts?q=type%3DUNKNOWN")
        self.assertEqual([a["digest"] for a in other], [self.thing])

    def test_sort_is_honoured_and_unknown_keys_refused(self):
        for path, key in LISTS.items():
            sep = "&" if "?" in path else "?"
            st, _, body = self.api("GET", path + sep + "sort=" + key)
            self.assertEqual(st, 200, (path, body))
            st, _, body = self.api("GET", path + sep + "sort=-" + key)
            self.assertEqual(st, 200, (path, body))
            for bad in ("no_such_column", "name;drop", "--name", "-"):
                st, _, body = self.api("GET", path + sep + "sort=" + bad)
                self.assertEqual(st, 400, (path, bad, body))
                self.assertEqual(error_code(json.dumps(body).encode()), "BAD_REQUEST")
        names = lambda rows, k="name": [r[k] for r in rows]
        regs = self.api("GET", "/registries?sort=-name")[2]
        self.assertEqual(names(regs), ["zeta", "mid", "alpha"])
        self.assertEqual(names(self.api("GET", "/registries?sort=name")[2]), ["alpha", "mid", "zeta"])
        self.assertEqual(names(self.api("GET", "/registries")[2]), ["zeta", "alpha", "mid"])  # default: by id
        arts = self.api("GET", "/projects/shapes/repositories/one/artifacts?sort=push_time")[2]
        self.assertEqual(arts[0]["digest"], self.single)  # oldest first when asked
        arts = self.api("GET", "/projects/shapes/repositories/one/artifacts?sort=-push_time")[2]
        self.assertEqual(arts[-1]["digest"], self.single)
        tags = self.api("GET", "/projects/shapes/repositories/one/artifacts/%s/tags?sort=-name" % self.single)[2]
        self.assertEqual(names(tags), sorted(names(tags), reverse=True))
        users = self.api("GET", "/users?sort=-username")[2]
        self.assertEqual(names(users, "username"), sorted(names(users, "username"), reverse=True))
        # sorting applies before paging: page 1 of a descending sort starts at the last name
        self.assertEqual(names(self.api("GET", "/registries?sort=-name&page_size=1")[2]), ["zeta"])
        self.assertEqual(names(self.api("GET", "/registries?sort=-name&page_size=1&page=3")[2]), ["alpha"])

    def test_x_is_resource_name(self):
        st, _, p = self.api("GET", "/projects/shapes")
        pid = str(p["project_id"])
        self.assertEqual(self.api("GET", "/projects/" + pid)[2]["name"], "shapes")  # an id by default
        st, _, body = self.api("GET", "/projects/" + pid, headers={"X-Is-Resource-Name": "true"})
        self.assertEqual(st, 404, body)  # a name only: no project is called that
        self.assertEqual(self.api("GET", "/projects/shapes", headers={"X-Is-Resource-Name": "true"})[0], 200)
        self.assertEqual(self.api("GET", "/projects/" + pid + "/repositories", headers={"X-Is-Resource-Name": "true"})[0], 404)

    def test_registry_description_is_kept(self):
        regs = {r["name"]: r for r in self.api("GET", "/registries")[2]}
        self.assertEqual(regs["mid"]["description"], "the mid site")
        rid = regs["mid"]["id"]
        self.assertEqual(self.api("PUT", "/registries/%d" % rid, {"description": "moved"})[0], 200)
        self.assertEqual(self.api("GET", "/registries/%d" % rid)[2]["description"], "moved")
        self.assertEqual(self.api("PUT", "/registries/%d" % rid, {"name": "mid"})[0], 200)
        self.assertEqual(self.api("GET", "/registries/%d" % rid)[2]["description"], "moved")  # absent keeps it

    def test_usergroups_search_is_a_search(self):
        for name in ("hpc-users", "hpc-admins", "web"):
            st, _, body = self.api("POST", "/usergroups", {"group_name": name, "group_type": 1,
                                                           "ldap_group_dn": "cn=%s,ou=groups,dc=example,dc=org" % name})
            self.assertEqual(st, 201, body)
        st, _, found = self.api("GET", "/usergroups/search?groupname=hpc")
        self.assertEqual(st, 200, found)
        self.assertEqual(sorted(g["group_name"] for g in found), ["hpc-admins", "hpc-users"])
        self.assertTrue(all(isinstance(g["id"], int) and g["group_type"] == 1 for g in found))
        self.assertEqual(self.api("GET", "/usergroups/search")[0], 400)

    def test_systeminfo_tells_visitors_little(self):
        st, _, anon = self.api("GET", "/systeminfo", auth=None)
        self.assertEqual(st, 200)
        for k in ("external_url", "registry_url", "harbor_version", "has_ca_root", "read_only", "project_creation_restriction"):
            self.assertNotIn(k, anon)
        self.assertEqual((anon["auth_mode"], anon["primary_auth_mode"], anon["self_registration"], anon["banner_message"]),
                         ("db_auth", False, False, ""))
        self.assertRegex(anon["current_time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        t = time.mktime(time.strptime(anon["current_time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        self.assertLess(abs(t - time.time()), 60)
        st, _, info = self.api("GET", "/systeminfo")
        self.assertEqual((info["has_ca_root"], info["read_only"], info["project_creation_restriction"]), (False, False, "adminonly"))
        self.assertEqual(info["external_url"], "http://" + self.b.host)
        self.assertEqual(info["registry_url"], self.b.host)
        self.assertTrue(re.match(r"^\d+\.\d+", info["harbor_version"]), info)


if __name__ == "__main__":
    main()
