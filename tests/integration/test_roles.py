"""Harbor's roles through real clients: skopeo and podman log in as users and robots, push and pull as every
role, and pull a public project with no credentials at all. Each denial is checked to have changed nothing."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BerthTestCase, Berthd, main, podman_cmd, write_oci_layout

PW = "Passw0rd!x"
TIMEOUT = 300
ROLES = {"padmin": 1, "dev": 2, "guest": 3, "maint": 4, "lguest": 5}


def have(tool):
    return shutil.which(tool) is not None


def sh(cmd, check=True, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    if check and r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-3000:]))
    return r


@unittest.skipUnless(have("skopeo"), "skopeo not installed")
class Roles(BerthTestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = Berthd().start()
        cls.tmp = tempfile.mkdtemp(prefix="roles-")
        cls.layout = os.path.join(cls.tmp, "layout")
        write_oci_layout(cls.layout, [{"hello": b"roles test payload"}])

        def post(path, body):
            st, h, raw = cls.b.request("POST", "/api/v2.0" + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
            assert st == 201, (path, st, raw)
            return h, raw
        for p, public in (("lab", False), ("pub", True)):
            post("/projects", {"project_name": p, "public": public})
        for u, role in ROLES.items():
            post("/users", {"username": u, "password": PW})
            post("/projects/lab/members", {"role_id": role, "member_user": {"username": u}})
        post("/users", {"username": "stranger", "password": PW})
        _, raw = post("/robots", {"name": "ci", "level": "project", "duration": -1, "permissions": [
            {"kind": "project", "namespace": "lab", "access": [{"resource": "repository", "action": "pull"},
                                                               {"resource": "repository", "action": "push"}]}]})
        cls.robot = ("robot$lab+ci", json.loads(raw)["secret"])
        cls.skopeo_login_as("admin", "Harbor12345", "admin")
        cls.copy_as("admin", "oci:%s:latest" % cls.layout, "lab/base:v1")
        cls.copy_as("admin", "oci:%s:latest" % cls.layout, "pub/base:v1")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def authfile(cls, who):
        return os.path.join(cls.tmp, "auth-%s.json" % who.replace("$", "_").replace("+", "_"))

    @classmethod
    def skopeo_login_as(cls, user, pw, who):
        # the password goes through stdin, never argv
        r = subprocess.run(["skopeo", "login", "--tls-verify=false", "--authfile", cls.authfile(who), "-u", user,
                            "--password-stdin", cls.b.host], input=pw, capture_output=True, text=True, timeout=TIMEOUT)
        return r

    @classmethod
    def copy_as(cls, who, src, dst_repo, check=True):
        args = ["skopeo", "copy", "--dest-tls-verify=false", "--src-tls-verify=false"]
        if who is not None:
            args += ["--authfile", cls.authfile(who)]
        else:
            args += ["--authfile", "/nonexistent-berth-authfile.json"]
        if dst_repo.startswith("dir:"):
            return sh(args + [src, dst_repo], check=check)
        return sh(args + [src, "docker://%s/%s" % (cls.b.host, dst_repo)], check=check)

    def manifest_exists(self, repo, tag):
        return self.b.request("HEAD", "/v2/%s/manifests/%s" % (repo, tag))[0] == 200

    def test_push_and_pull_as_every_role(self):
        allowed_push = {"padmin", "maint", "dev"}
        for user in ROLES:
            r = self.skopeo_login_as(user, PW, user)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = os.path.join(self.tmp, "pull-" + user)
            self.copy_as(user, "docker://%s/lab/base:v1" % self.b.host, "dir:" + out)  # every role pulls
            self.assertTrue(os.path.exists(os.path.join(out, "manifest.json")))
            r = self.copy_as(user, "oci:%s:latest" % self.layout, "lab/by-%s:v1" % user, check=False)
            if user in allowed_push:
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(self.manifest_exists("lab/by-" + user, "v1"))
            else:
                self.assertNotEqual(r.returncode, 0, user + " pushed")
                self.assertFalse(self.manifest_exists("lab/by-" + user, "v1"))
        # delete: project admin and maintainer yes, developer no (skopeo delete asks for the delete scope)
        for user, ok in (("dev", False), ("guest", False), ("maint", True)):
            r = sh(["skopeo", "delete", "--tls-verify=false", "--authfile", self.authfile(user),
                    "docker://%s/lab/by-padmin:v1" % self.b.host], check=False)
            self.assertEqual(r.returncode == 0, ok, (user, r.stderr))
            self.assertEqual(self.manifest_exists("lab/by-padmin", "v1"), not ok, user)
            if ok:
                break

    def test_outsider_and_anonymous(self):
        self.assertEqual(self.skopeo_login_as("stranger", PW, "stranger").returncode, 0)
        self.assertNotEqual(self.skopeo_login_as("stranger", "wrong", "stranger-bad").returncode, 0)
        out = os.path.join(self.tmp, "stranger")
        self.assertNotEqual(self.copy_as("stranger", "docker://%s/lab/base:v1" % self.b.host, "dir:" + out, check=False).returncode, 0)
        # anonymous pull of a public project, no credentials anywhere
        out = os.path.join(self.tmp, "anon")
        self.copy_as(None, "docker://%s/pub/base:v1" % self.b.host, "dir:" + out)
        self.assertTrue(os.path.exists(os.path.join(out, "manifest.json")))
        r = self.copy_as(None, "docker://%s/lab/base:v1" % self.b.host, "dir:" + out + "2", check=False)
        self.assertNotEqual(r.returncode, 0)
        r = self.copy_as(None, "oci:%s:latest" % self.layout, "pub/anon:v1", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(self.manifest_exists("pub/anon", "v1"))

    def test_skopeo_robot(self):
        user, secret = self.robot
        r = self.skopeo_login_as(user, secret, "robot")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.copy_as("robot", "oci:%s:latest" % self.layout, "lab/robot-built:v1")
        self.assertTrue(self.manifest_exists("lab/robot-built", "v1"))
        r = self.copy_as("robot", "oci:%s:latest" % self.layout, "pub/robot-built:v1", check=False)
        self.assertNotEqual(r.returncode, 0)  # its grant is lab only
        self.assertNotIn(secret, self.b.logs())

    @unittest.skipUnless(have("podman"), "podman not installed")
    def test_podman_login_as_user_and_robot(self):
        root = os.path.join(self.tmp, "podman")

        def podman(*args, check=True, stdin=None):
            cmd = podman_cmd(root) + list(args)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, input=stdin)
            if check and r.returncode != 0:
                raise AssertionError("%s: %s" % (" ".join(cmd), r.stderr[-2000:]))
            return r
        af = os.path.join(self.tmp, "podman-auth.json")
        for user, pw in (("dev", PW), self.robot):
            podman("login", "--tls-verify=false", "--authfile", af, "-u", user, "--password-stdin", self.b.host, stdin=pw)
            podman("pull", "--tls-verify=false", "--authfile", af, "%s/lab/base:v1" % self.b.host)
            tag = "%s/lab/podman-%s:v1" % (self.b.host, "robot" if user.startswith("robot$") else user)
            podman("tag", "%s/lab/base:v1" % self.b.host, tag)
            podman("push", "--tls-verify=false", "--authfile", af, tag)
            self.assertTrue(self.manifest_exists(tag.split("/", 1)[1].split(":")[0], "v1"))
            podman("logout", "--authfile", af, self.b.host)
        self.assertNotEqual(podman("login", "--tls-verify=false", "--authfile", af, "-u", "dev", "--password-stdin",
                                   self.b.host, stdin="wrong", check=False).returncode, 0)


if __name__ == "__main__":
    main()
