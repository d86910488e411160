"""HPC image gateway (issue 15): layers flattened into one squashfs.

The converter's output is read back with squashfs-tools-ng (sqfs2tar) and squashfs-tools (unsquashfs -lln) — two
readers independent of Berth — and compared with a flattening written here in Python from the OCI layer rules
(whiteouts, opaque directories, hard links, implied parents): paths, types, permission bits, owners, link targets,
xattrs and file contents by hash. The same comparison runs on what berthd converts after a push.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import unittest

import harness

BERTH_SQFS = os.environ.get("BERTH_SQFS", os.path.join(harness.ROOT, "build", "registry", "berth-sqfs"))
BERTH_ISA = os.path.join(os.path.dirname(harness.BERTHD), "berth-isa")
MTIME = 1700000000


# ---- layers built here ---------------------------------------------------------------------------------------

def tar_bytes(entries):
    """entries: (name, kind, data/target, mode, uid, gid, xattrs) tuples → an uncompressed PAX tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            name, kind = e[0], e[1]
            data = e[2] if len(e) > 2 else None
            ti = tarfile.TarInfo(name)
            ti.mode = e[3] if len(e) > 3 else (0o755 if kind == "dir" else 0o644)
            ti.uid = e[4] if len(e) > 4 else 0
            ti.gid = e[5] if len(e) > 5 else 0
            ti.mtime = MTIME
            if len(e) > 6 and e[6]:
                ti.pax_headers = {"SCHILY.xattr." + k: v for k, v in e[6].items()}
            if kind == "file":
                ti.type = tarfile.REGTYPE
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                       "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "hardlink"):
                ti.linkname = data
            if kind == "chr":
                ti.devmajor, ti.devminor = 1, 3
            t.addfile(ti)
    return buf.getvalue()


def gz(data):
    return gzip.compress(data, mtime=0)


def zst(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


def plain_tar(blob):
    if blob[:2] == b"\x1f\x8b":
        return gzip.decompress(blob)
    if blob[:4] == b"\x28\xb5\x2f\xfd":
        return subprocess.run(["zstd", "-q", "-d", "-c"], input=blob, capture_output=True, check=True).stdout
    return blob


def sample_layers():
    """Six layers that exercise every rule, as the blobs a registry stores (gzip, zstd, plain, empty)."""
    big = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4: several blocks and a fragment
    l1 = tar_bytes([
        ("etc", "dir"), ("etc/passwd", "file", b"root:x:0:0::/root:/bin/sh\n"),
        ("etc/hostname", "file", b"node\n"),
        ("bin", "dir"), ("bin/tool", "file", b"\x7fELF" + big, 0o755),
        ("bin/tool-link", "hardlink", "bin/tool"),        # survives its first name being replaced
        ("bin/pair-a", "file", b"shared bytes", 0o640, 7, 8),
        ("bin/pair-b", "hardlink", "bin/pair-a"),          # a live hard-link pair
        ("bin/sh", "symlink", "tool", 0o777),
        ("bin/suid", "file", b"#!/bin/sh\n", 0o4755),
        ("tmp", "dir", None, 0o1777),
        ("home/user/.profile", "file", b"export A=1\n", 0o600, 1000, 1000),  # parents implied
        ("opt/app/lib/a.so", "file", b"lib a"), ("opt/app/lib/b.so", "file", b"lib b"),
        ("opt/app/data/x", "file", b"x"),
        ("var/cache/old", "file", b"old"),
        ("caps", "file", b"cap", 0o755, 0, 0, {"security.capability": "\x01\x00\x00\x02", "user.note": "hello"}),
        ("dev/null", "chr"), ("run/fifo", "fifo"),
        ("empty", "file", b""),
    ])
    l2 = tar_bytes([])  # an empty layer: a tar with no entries
    l3 = tar_bytes([
        ("bin/tool", "file", b"replaced", 0o700, 2, 3),
        ("etc/.wh.hostname", "file", b""),
        ("opt/app/lib/.wh..wh..opq", "file", b""),
        ("opt/app/lib/c.so", "file", b"lib c"),
        ("var/.wh.cache", "file", b""),
        ("var/cache", "dir", None, 0o700),
        ("var/cache/new", "file", b"new"),
        ("etc", "dir", None, 0o750, 0, 4),                # a directory's metadata changes, its contents stay
    ])
    l4 = tar_bytes([
        ("opt/app/lib/d.so", "file", b"lib d"),
        ("home/user/.profile", "symlink", "/etc/profile"),  # a file becomes a symlink
        ("opt/app/.wh.data", "file", b""),
        ("etc/passwd", "file", b"root:x:0:0::/root:/bin/bash\n", 0o644, 0, 0, {"user.v": "2"}),
    ])
    return [gz(l1), gz(l2), zst(l3), l4]


# ---- the reference flattening --------------------------------------------------------------------------------

def flatten(blobs, keep_devices=False):
    """path → record, applying the OCI rules to the layers, oldest first. Records of hard-linked names share
    one dict (the `inode`)."""
    tree = {}  # path -> {"inode": dict, "layer": n}

    def parents(path, layer):
        parts = path.split("/")
        for i in range(1, len(parts)):
            p = "/".join(parts[:i])
            if p not in tree:
                tree[p] = {"inode": {"type": "dir", "mode": 0o755, "uid": 0, "gid": 0, "xattrs": {}}, "layer": layer}

    def remove(path):
        for p in [p for p in tree if p == path or p.startswith(path + "/")]:
            del tree[p]

    for n, blob in enumerate(blobs):
        with tarfile.open(fileobj=io.BytesIO(plain_tar(blob)), mode="r:") as t:
            for m in t:
                path = m.name.lstrip("./").rstrip("/")
                if not path:
                    continue
                d, _, base = path.rpartition("/")
                if base == ".wh..wh..opq":
                    for p in [p for p in tree if p.startswith(d + "/") and tree[p]["layer"] < n]:
                        del tree[p]
                    continue
                if base.startswith(".wh."):
                    remove((d + "/" if d else "") + base[4:])
                    continue
                if m.ischr() and not keep_devices:
                    continue
                parents(path, n)
                xattrs = {k[len("SCHILY.xattr."):]: v for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")}
                if m.islnk():
                    inode = tree[m.linkname]["inode"]
                    if path in tree and tree[path]["inode"] is inode:
                        continue
                    remove(path)
                    tree[path] = {"inode": inode, "layer": n}
                    continue
                if m.isdir() and path in tree and tree[path]["inode"]["type"] == "dir":
                    tree[path]["inode"].update(mode=m.mode & 0o7777, uid=m.uid, gid=m.gid, xattrs=xattrs)
                    tree[path]["layer"] = n
                    continue
                remove(path)
                rec = {"type": "dir" if m.isdir() else "symlink" if m.issym() else "file" if m.isfile() else
                       "fifo" if m.isfifo() else "chr", "mode": m.mode & 0o7777, "uid": m.uid, "gid": m.gid,
                       "xattrs": xattrs}
                if m.issym():
                    rec["target"] = m.linkname
                if m.isfile():
                    rec["sha256"] = hashlib.sha256(t.extractfile(m).read()).hexdigest()
                tree[path] = {"inode": rec, "layer": n}
    return {p: v["inode"] for p, v in tree.items()}


def describe(tree):
    """Comparable form: per path its record, plus the groups of names that share an inode."""
    groups = {}
    for p, rec in tree.items():
        groups.setdefault(id(rec), []).append(p)
    out = {}
    for p, rec in tree.items():
        r = {k: v for k, v in rec.items() if k != "xattrs" or v}
        if rec["type"] == "file":
            r["names"] = sorted(groups[id(rec)])
        out[p] = r
    return out


def read_squashfs(path):
    """The squashfs's tree as sqfs2tar (squashfs-tools-ng) writes it, in flatten()'s form."""
    tar = subprocess.run(["sqfs2tar", path], capture_output=True, check=True).stdout
    tree = {}
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as t:
        for m in t:
            path = m.name.lstrip("./").rstrip("/")
            if not path:
                continue
            if m.islnk():
                tree[path] = tree[m.linkname.lstrip("./")]
                continue
            xattrs = {k[len("SCHILY.xattr."):]: v for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")}
            rec = {"type": "dir" if m.isdir() else "symlink" if m.issym() else "file" if m.isfile() else
                   "fifo" if m.isfifo() else "chr", "mode": m.mode & 0o7777, "uid": m.uid, "gid": m.gid, "xattrs": xattrs}
            if m.issym():
                rec["target"] = m.linkname
            if m.isfile():
                rec["sha256"] = hashlib.sha256(t.extractfile(m).read()).hexdigest()
            tree[path] = rec
    return tree


def unsquashfs_listing(path):
    """(path, type letter + permission string, uid, gid) per entry from squashfs-tools' own reader."""
    out = subprocess.run(["unsquashfs", "-lln", path], capture_output=True, text=True, check=True).stdout
    rows = set()
    for line in out.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "/" not in parts[1]:
            continue
        name = parts[5].split(" -> ")[0]
        rel = name[len("squashfs-root"):].lstrip("/")
        if rel:
            uid, gid = parts[1].split("/")
            rows.add((rel, parts[0], int(uid), int(gid)))
    return rows


def perm_string(rec):
    t = {"dir": "d", "file": "-", "symlink": "l", "fifo": "p", "chr": "c"}[rec["type"]]
    m = rec["mode"]
    s = ""
    for shift, special, ch in ((6, 0o4000, "s"), (3, 0o2000, "s"), (0, 0o1000, "t")):
        bits = (m >> shift) & 7
        s += "r" if bits & 4 else "-"
        s += "w" if bits & 2 else "-"
        x = bits & 1
        s += (ch if x else ch.upper()) if m & special else ("x" if x else "-")
    return t + s


class ConverterTest(unittest.TestCase):
    """berth-sqfs: the converter berthd runs, on layer files."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="berth-sqfs-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.dir])

    def convert(self, blobs, *args):
        paths = []
        for i, b in enumerate(blobs):
            p = os.path.join(self.dir, "layer%d" % i)
            with open(p, "wb") as f:
                f.write(b)
            paths.append(p)
        out = os.path.join(self.dir, "out.sqsh")
        r = subprocess.run([BERTH_SQFS, *args, out, *paths], capture_output=True, text=True)
        return r, out

    def test_tree_equals_reference_flattening(self):
        blobs = sample_layers()
        for comp in ("zstd", "gzip"):
            with self.subTest(compressor=comp):
                r, out = self.convert(blobs, "-c", comp)
                self.assertEqual(r.returncode, 0, r.stderr)
                stats = json.loads(r.stdout)
                want = describe(flatten(blobs))
                got = describe(read_squashfs(out))
                self.assertEqual(sorted(got), sorted(want))
                for p in want:
                    self.assertEqual(got[p], want[p], p)
                # the rules really were exercised: a sample of what must and must not be there
                for gone in ("etc/hostname", "opt/app/lib/a.so", "opt/app/data", "var/cache/old", "dev/null"):
                    self.assertNotIn(gone, got)
                for kept in ("opt/app/lib/c.so", "opt/app/lib/d.so", "var/cache/new", "run/fifo", "empty"):
                    self.assertIn(kept, got)
                self.assertEqual(got["bin/tool-link"]["sha256"], hashlib.sha256(b"\x7fELF" + bytes(range(256)) * 4096
                                                                                   + b"tail").hexdigest())
                self.assertEqual(got["bin/pair-a"]["names"], ["bin/pair-a", "bin/pair-b"])
                self.assertEqual(got["caps"]["xattrs"], {"security.capability": "\x01\x00\x00\x02", "user.note": "hello"})
                self.assertEqual(got["etc"]["mode"], 0o750)
                # squashfs-tools reads the same tree
                listing = unsquashfs_listing(out)
                self.assertEqual(listing, {(p, perm_string(rec), rec["uid"], rec["gid"]) for p, rec in flatten(blobs).items()})
                self.assertEqual(stats["files"], sum(1 for rec in {id(v): v for v in flatten(blobs).values()}.values()
                                                     if rec["type"] == "file"))

    def test_devices_kept_on_request(self):
        blobs = sample_layers()
        r, out = self.convert(blobs, "-D")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = read_squashfs(out)
        self.assertEqual(got["dev/null"]["type"], "chr")
        self.assertEqual(describe(got), describe(flatten(blobs, keep_devices=True)))

    def test_reproducible(self):
        blobs = sample_layers()
        digests = []
        for _ in range(2):
            r, out = self.convert(blobs)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                digests.append(hashlib.sha256(f.read()).hexdigest())
        self.assertEqual(digests[0], digests[1])

    def test_parallel_compression_same_bytes(self):
        """By default the block processor compresses in one thread per CPU; the bytes are those of one thread."""
        blobs = sample_layers() + [gz(tar_bytes([("big%d" % i, "file", os.urandom(1 << 20) + b"t" * (1 << 20))
                                                 for i in range(3)]))]
        digests = {}
        for args in ((), ("-j", "1"), ("-j", "3")):
            r, out = self.convert(blobs, *args)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                digests[args] = (json.loads(r.stdout)["threads"], harness.sha256(f.read()))
        self.assertEqual(digests[()][0], min(os.cpu_count(), 32))
        self.assertEqual([t for t, _ in digests.values()][1:], [1, 3])
        self.assertEqual(len({d for _, d in digests.values()}), 1, digests)

    def test_corrupt_and_hostile_layers_fail_with_a_reason(self):
        good = sample_layers()
        cases = {
            "truncated gzip": (good[:1] + [good[0][: len(good[0]) // 2]], "corrupt or truncated"),
            "garbage": ([b"\x1f\x8b" + os.urandom(4000)], "layer 1 of 1"),
            "escape": ([gz(tar_bytes([("../../etc/shadow", "file", b"x")]))], "leaves the root"),
            "dangling hard link": ([tar_bytes([("a", "hardlink", "nowhere")])], "names no file"),
        }
        for name, (blobs, reason) in cases.items():
            with self.subTest(name):
                r, out = self.convert(blobs)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(reason, r.stderr)
                self.assertFalse(os.path.exists(out))

    def test_squashfuse_mount_runs_a_program(self):
        """The image mounts with squashfuse and a program in it runs (without /dev/fuse: unsquashfs extracts it)."""
        script = b"#!/bin/sh\necho from-the-image\n"
        blobs = [gz(tar_bytes([("bin/hello", "file", script, 0o755)]))]
        r, out = self.convert(blobs)
        self.assertEqual(r.returncode, 0, r.stderr)
        root = os.path.join(self.dir, "root")
        os.mkdir(root)
        mounted = os.path.exists("/dev/fuse") and subprocess.run(["squashfuse", out, root]).returncode == 0
        if not mounted:
            os.rmdir(root)
            subprocess.run(["unsquashfs", "-q", "-d", root, out], check=True)
        try:
            run = subprocess.run([os.path.join(root, "bin/hello")], capture_output=True, text=True)
            self.assertEqual(run.stdout, "from-the-image\n")
        finally:
            if mounted:
                subprocess.run(["umount", root])
        print("squashfs checked by", "squashfuse mount" if mounted else "unsquashfs extraction")


# ---- berthd: conversions after a push, stored as a referrer, published ------------------------------------------

LAYER_TYPES = {b"\x1f\x8b": harness.OCI_LAYER, b"\x28\xb5": "application/vnd.oci.image.layer.v1.tar+zstd"}
ARTIFACT_TYPE = "application/vnd.berth.rootfs.squashfs.v1"


def push_layers(b, repo, tag, blobs):
    """An image of these layer blobs; returns (digest, manifest bytes)."""
    layers = [{"mediaType": LAYER_TYPES.get(blob[:2], "application/vnd.oci.image.layer.v1.tar"),
               "digest": b.push_blob(repo, blob), "size": len(blob)} for blob in blobs]
    def diff_id(blob):
        try:
            return harness.sha256(plain_tar(blob))
        except (EOFError, OSError, subprocess.CalledProcessError):  # a broken layer on purpose
            return harness.sha256(blob)
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [
        diff_id(blob) for blob in blobs]}}).encode()
    m = {"schemaVersion": 2, "mediaType": harness.OCI_MANIFEST,
         "config": {"mediaType": harness.OCI_CONFIG, "digest": b.push_blob(repo, cfg), "size": len(cfg)}, "layers": layers}
    st, h, body, raw = b.push_manifest(repo, tag, m)
    assert st == 201, (st, body)
    return h["docker-content-digest"], raw


def set_mode(b, project, mode, tags=None):
    md = {"hpc_squashfs": mode}
    if tags is not None:
        md["hpc_squashfs_tags"] = tags
    return b.request("PUT", "/api/v2.0/projects/" + project, json.dumps({"metadata": md}).encode(),
                     {"Content-Type": "application/json"})


def squashfs_status(b, repo, ref):
    project, name = repo.split("/", 1)
    st, _, body = b.request("GET", "/api/v2.0/projects/%s/repositories/%s/artifacts/%s/squashfs" % (project, name, ref))
    return st, (json.loads(body) if body else None)


def wait_status(b, repo, digest, want=("done", "failed"), timeout=120):
    deadline = time.time() + timeout
    while True:
        st, job = squashfs_status(b, repo, digest)
        if st in (200, 202) and job["status"] in want:
            return job
        if time.time() > deadline:
            raise AssertionError("squashfs of %s: %s %s\n%s" % (digest, st, job, b.logs()))
        time.sleep(0.1)


def fetch_blob(b, repo, digest, headers=None):
    st, h, body = b.request("GET", "/v2/%s/blobs/%s" % (repo, digest), headers=headers)
    for _ in range(3):  # the edge may redirect to the blob location
        if st not in (301, 302, 307) or "location" not in h:
            break
        st, h, body = b.request("GET", h["location"], headers=headers)
    return st, h, body


class GatewayTest(unittest.TestCase):
    """berthd converts on push (or on the first request), stores the squashfs as a referrer artifact and publishes it."""

    @classmethod
    def setUpClass(cls):
        cls.pub = tempfile.mkdtemp(prefix="berth-publish-")
        cls.b = harness.Berthd(env={"BERTH_GATEWAY_PUBLISH_DIR": cls.pub, "BERTH_GATEWAY_LEASE_SECONDS": "5"}).start()
        for p in ("hpc", "lazy", "plain", "picky"):
            cls.b.project(p)

    @classmethod
    def tearDownClass(cls):
        cls.b.cleanup()
        subprocess.run(["rm", "-rf", cls.pub])

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-sqfs-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def check_tree(self, data, blobs):
        path = os.path.join(self.tmp, "got.sqsh")
        with open(path, "wb") as f:
            f.write(data)
        self.assertEqual(describe(read_squashfs(path)), describe(flatten(blobs)))

    def test_push_converts_stores_referrer_and_publishes(self):
        b = self.b
        st, _, body = set_mode(b, "hpc", "push")
        self.assertEqual(st, 200, body)
        blobs = sample_layers()
        digest, raw = push_layers(b, "hpc/app", "v1", blobs)
        job = wait_status(b, "hpc/app", digest)
        self.assertEqual(job["status"], "done", job)
        self.assertEqual(job["compression"], "zstd")
        self.assertEqual(job["source_digest"], digest)
        self.assertEqual(job["attempts"], 1)
        # the referrer artifact, found through the OCI referrers API, holds the squashfs blob
        st, _, body = b.request("GET", "/v2/hpc/app/referrers/%s?artifactType=%s" % (digest, ARTIFACT_TYPE))
        self.assertEqual(st, 200, body)
        refs = json.loads(body)["manifests"]
        self.assertEqual([r["digest"] for r in refs], [job["artifact_digest"]])
        self.assertEqual(refs[0]["annotations"]["io.berth.squashfs.source-digest"], digest)
        self.assertEqual(refs[0]["annotations"]["io.berth.squashfs.compression"], "zstd")
        self.assertEqual(int(refs[0]["annotations"]["io.berth.squashfs.uncompressed-size"]), job["uncompressed_size"])
        st, _, body = b.request("GET", "/v2/hpc/app/manifests/" + job["artifact_digest"], headers={"Accept": harness.OCI_MANIFEST})
        art = json.loads(body)
        self.assertEqual(art["artifactType"], ARTIFACT_TYPE)
        self.assertEqual(art["subject"]["digest"], digest)
        self.assertEqual(art["layers"][0]["digest"], job["digest"])
        # fetchable through /v2 like any blob, with Range
        st, h, data = fetch_blob(b, "hpc/app", job["digest"])
        self.assertEqual(st, 200)
        self.assertEqual(harness.sha256(data), job["digest"])
        self.assertEqual(len(data), job["size"])
        st, h, head = fetch_blob(b, "hpc/app", job["digest"], {"Range": "bytes=0-3"})
        self.assertEqual((st, head), (206, b"hsqs"))
        self.check_tree(data, blobs)
        # published whole, readable by jobs, at <publish_dir>/<repository>/<digest>.sqsh
        pub = os.path.join(self.pub, "hpc/app", digest + ".sqsh")
        self.assertEqual(job["published_path"], pub)
        with open(pub, "rb") as f:
            self.assertEqual(harness.sha256(f.read()), job["digest"])
        self.assertEqual(os.stat(pub).st_mode & 0o777, 0o644)
        self.assertEqual([n for n in os.listdir(os.path.dirname(pub)) if n.startswith(".")], [])
        # the artifact JSON carries the status; /metrics counts it
        st, _, body = b.request("GET", "/api/v2.0/projects/hpc/repositories/app/artifacts/v1")
        self.assertEqual(json.loads(body)["squashfs"]["status"], "done")
        st, _, body = b.request("GET", "/metrics", auth=None)
        self.assertRegex(body.decode(), r'berth_sqfs_conversions_total\{result="done"\} [1-9]')
        # idempotent: the same manifest under another tag is not converted again
        st, _, body, _ = b.push_manifest("hpc/app", "v1-again", raw)
        self.assertEqual(st, 201)
        time.sleep(1.5)
        again = wait_status(b, "hpc/app", digest)
        self.assertEqual((again["attempts"], again["artifact_digest"]), (1, job["artifact_digest"]))
        st, _, body = b.request("GET", "/v2/hpc/app/referrers/%s?artifactType=%s" % (digest, ARTIFACT_TYPE))
        self.assertEqual(len(json.loads(body)["manifests"]), 1)
        # deleting the image removes the published file and the job
        st, _, body = b.request("DELETE", "/v2/hpc/app/manifests/" + digest)
        self.assertEqual(st, 202, body)
        self.assertFalse(harness.eventually(lambda: os.path.exists(pub), False, timeout=10))
        self.assertEqual(squashfs_status(b, "hpc/app", digest)[0], 404)

    def test_modes_and_tag_patterns(self):
        b = self.b
        # off (the default): nothing is converted, and asking does not start it
        digest, _ = push_layers(b, "plain/app", "v1", [gz(tar_bytes([("a", "file", b"a")]))])
        time.sleep(1)
        self.assertEqual(squashfs_status(b, "plain/app", digest)[0], 404)
        st, _, body = b.request("GET", "/api/v2.0/projects/plain/repositories/app/artifacts/v1")
        self.assertIsNone(json.loads(body)["squashfs"])
        # pull: converted on the first request for it
        self.assertEqual(set_mode(b, "lazy", "pull")[0], 200)
        blobs = [gz(tar_bytes([("bin/x", "file", b"x", 0o755)]))]
        digest, _ = push_layers(b, "lazy/app", "v1", blobs)
        time.sleep(1)
        st, _, body = b.request("GET", "/api/v2.0/projects/lazy/repositories/app/artifacts/v1")
        self.assertIsNone(json.loads(body)["squashfs"])
        st, job = squashfs_status(b, "lazy/app", "v1")
        # 202: the request queued it; a worker's periodic poll may claim it before the answer is read
        self.assertEqual(st, 202, job)
        self.assertIn(job["status"], ("queued", "running"))
        self.assertEqual(wait_status(b, "lazy/app", digest)["status"], "done")
        # push with a tag pattern: only matching tags
        self.assertEqual(set_mode(b, "picky", "push", "{release-*,v[0-9]*}")[0], 200)
        st, _, body = b.request("GET", "/api/v2.0/projects/picky")
        self.assertEqual(json.loads(body)["metadata"]["hpc_squashfs_tags"], "{release-*,v[0-9]*}")
        dev, _ = push_layers(b, "picky/app", "dev", [gz(tar_bytes([("dev", "file", b"dev")]))])
        rel, _ = push_layers(b, "picky/app", "release-1", [gz(tar_bytes([("rel", "file", b"rel")]))])
        self.assertEqual(wait_status(b, "picky/app", rel)["status"], "done")
        st, _, body = b.request("GET", "/api/v2.0/projects/picky/repositories/app/artifacts/dev")
        self.assertIsNone(json.loads(body)["squashfs"])
        # bad settings are refused
        for md in ({"hpc_squashfs": "always"}, {"hpc_squashfs_tags": "[release"}):
            st, _, body = b.request("PUT", "/api/v2.0/projects/picky", json.dumps({"metadata": md}).encode(),
                                    {"Content-Type": "application/json"})
            self.assertEqual(st, 400, body)
            self.assertIn("hpc_squashfs", json.loads(body)["errors"][0]["message"])

    def test_index_variants_each_converted(self):
        b = self.b
        self.assertEqual(set_mode(b, "hpc", "push")[0], 200)
        children = []
        for level, content in (("v2", b"built for v2"), ("v3", b"built for v3")):
            blobs = [gz(tar_bytes([("bin/app", "file", content, 0o755)]))]
            d, raw = push_layers(b, "hpc/multi", d_tag(level), blobs)
            children.append((d, len(raw), level, blobs))
        idx = {"schemaVersion": 2, "mediaType": harness.OCI_INDEX, "manifests": [
            {"mediaType": harness.OCI_MANIFEST, "digest": d, "size": n,
             "platform": {"os": "linux", "architecture": "amd64", "variant": level}} for d, n, level, _ in children]}
        st, h, body, _ = b.push_manifest("hpc/multi", "latest", idx, harness.OCI_INDEX)
        self.assertEqual(st, 201, body)
        for d, _, _, blobs in children:
            job = wait_status(b, "hpc/multi", d)
            self.assertEqual(job["status"], "done", job)
            self.check_tree(fetch_blob(b, "hpc/multi", job["digest"])[2], blobs)
        st, job = squashfs_status(b, "hpc/multi", "latest")
        self.assertEqual(st, 400)

    def berth_isa(self, *args, env=None):
        pw = os.path.join(self.tmp, "pw")
        with open(pw, "w") as f:
            f.write(harness.ADMIN_PASSWORD)
        return subprocess.run([BERTH_ISA, "resolve", "--registry", "http://" + self.b.host, "--user", "admin",
                               "--password-file", pw, "--level", "x86-64-v2", *args], capture_output=True, text=True,
                              timeout=120, env=env)

    def test_node_resolve_squashfs(self):
        """berth-isa resolve --squashfs: the published file when it exists, else a resumable, verified download."""
        b = self.b
        self.assertEqual(set_mode(b, "hpc", "push")[0], 200)
        blobs = [gz(tar_bytes([("bin/app", "file", os.urandom(300000), 0o755), ("etc/conf", "file", b"c")]))]
        digest, _ = push_layers(b, "hpc/node", "v1", blobs)
        job = wait_status(b, "hpc/node", digest)
        image = "%s/hpc/node:v1" % b.host
        r = self.berth_isa("--squashfs", image)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, job["published_path"]), r.stderr)
        # a node that does not see the shared file system downloads it into its cache, by digest, verified
        cache = os.path.join(self.tmp, "cache")
        os.rename(job["published_path"], job["published_path"] + ".hidden")
        try:
            r = self.berth_isa("--squashfs", "--cache", cache, image)
            self.assertEqual(r.returncode, 0, r.stderr)
            path = r.stdout.strip()
            self.assertEqual(path, os.path.join(cache, digest + ".sqsh"))
            with open(path, "rb") as f:
                data = f.read()
            self.assertEqual(harness.sha256(data), job["digest"])
            self.check_tree(data, blobs)
            # an interrupted download is resumed from its partial file (Range), a wrong one is thrown away
            os.unlink(path)
            partial = os.path.join(cache, "." + job["digest"] + ".partial")
            with open(partial, "wb") as f:
                f.write(data[:5000])
            r = self.berth_isa("--squashfs", "--cache", cache, image)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path, "rb") as f:
                self.assertEqual(harness.sha256(f.read()), job["digest"])
            self.assertFalse(os.path.exists(partial))
            os.unlink(path)
            with open(partial, "wb") as f:
                f.write(b"\0" * 5000)
            r = self.berth_isa("--squashfs", "--cache", cache, image)
            self.assertEqual(r.returncode, 1)
            self.assertIn("expected " + job["digest"], r.stderr)
            self.assertFalse(os.path.exists(path) or os.path.exists(partial))
            r = self.berth_isa("--squashfs", "--cache", cache, image)
            self.assertEqual(r.returncode, 0, r.stderr)
            # the pyxis importer hands pyxis that path
            importer = os.path.join(harness.ROOT, "deploy", "slurm", "pyxis-importer")
            pw = os.path.join(self.tmp, "pw")
            env = dict(os.environ, BERTH_ISA=BERTH_ISA, BERTH_IMPORT_CACHE=cache, BERTH_IMPORT_CMD="false",
                       BERTH_ISA_ARGS="--registry http://%s --user admin --password-file %s --level x86-64-v2" % (b.host, pw))
            r = subprocess.run([importer, "get", "docker://%s#hpc/node:v1" % b.host], env=env, capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, path), r.stderr)
        finally:
            os.rename(job["published_path"] + ".hidden", job["published_path"])
        # a project that converts nothing: exit 5, so the importer falls back to importing the image itself
        digest, _ = push_layers(b, "plain/node", "v1", blobs)
        r = self.berth_isa("--squashfs", "%s/plain/node:v1" % b.host)
        self.assertEqual(r.returncode, 5, r.stderr)

    def test_corrupt_layer_fails_with_reason_and_publishes_nothing(self):
        b = self.b
        self.assertEqual(set_mode(b, "hpc", "push")[0], 200)
        good = gz(tar_bytes([("data", "file", os.urandom(200000))]))
        digest, _ = push_layers(b, "hpc/broken", "v1", [good[: len(good) // 2]])
        job = wait_status(b, "hpc/broken", digest)
        self.assertEqual(job["status"], "failed")
        self.assertIn("corrupt or truncated", job["reason"])
        self.assertEqual(job["attempts"], 1)  # the same bytes fail the same way: no retry
        self.assertIsNone(job["published_path"])
        self.assertFalse(os.path.exists(os.path.join(self.pub, "hpc/broken")))
        st, _, body = b.request("GET", "/v2/hpc/broken/referrers/" + digest)
        self.assertEqual(json.loads(body)["manifests"], [])


QEMU = shutil.which("qemu-x86_64")
from test_isa import PAYLOAD as ISA_PAYLOAD  # noqa: E402  the one ISA test program (SIGILL below its level)
# (level, index variant, gcc flags) as in test_isa.py; and simulated nodes: (qemu CPU model, what must be picked)
ISA_LEVELS = [("x86-64", None, ["-march=x86-64"]), ("x86-64-v3", "v3", ["-march=x86-64-v3", "-DLEVEL_V3"]),
              ("x86-64-v4", "v4", ["-march=x86-64-v4", "-DLEVEL_V4"])]
ISA_NODES = [("Nehalem", "x86-64-v2", "x86-64"), ("Haswell", "x86-64-v3", "x86-64-v3")]


@unittest.skipUnless(QEMU and shutil.which("skopeo") and shutil.which("gcc"), "qemu-user, skopeo or gcc missing")
class IsaSquashfsTest(unittest.TestCase):
    """An index of ISA builds in a converting project: each variant becomes its own squashfs; for a node's CPU
    model berth-isa resolve --squashfs picks the published file of the right build, and the payload run from the
    mounted (or extracted) tree under qemu-x86_64 -cpu MODEL starts there, while the v4 build dies of SIGILL on a
    v2 CPU — so the pick is checked by the CPU, not by a label."""

    def test_each_variant_converted_picked_per_node_and_runs(self):
        tmp = tempfile.mkdtemp(prefix="berth-sqfs-isa-")
        pub = os.path.join(tmp, "pub")
        os.mkdir(pub)
        b = harness.Berthd(env={"BERTH_GATEWAY_PUBLISH_DIR": pub}).start()
        try:
            b.project("hpc")
            self.assertEqual(set_mode(b, "hpc", "push")[0], 200)
            src = os.path.join(tmp, "payload.c")
            with open(src, "w") as f:
                f.write(ISA_PAYLOAD)
            images, plats = [], []
            for level, variant, flags in ISA_LEVELS:
                out = os.path.join(tmp, "payload-" + level)
                subprocess.run(["gcc", "-O2", "-static", *flags, "-o", out, src], check=True)
                with open(out, "rb") as f:
                    images.append({"bin/payload": f.read()})
                plats.append(("linux", "amd64", variant) if variant else ("linux", "amd64"))
            layout = os.path.join(tmp, "layout")
            index_digest = harness.write_oci_layout(layout, images, plats, tag="1.0")
            r = subprocess.run(["skopeo", "copy", "--all", "--preserve-digests", "--dest-tls-verify=false",
                                "--dest-creds", "admin:" + harness.ADMIN_PASSWORD, "oci:%s:1.0" % layout,
                                "docker://%s/hpc/app:1.0" % b.host], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(layout, "blobs", "sha256", index_digest.split(":")[1])) as f:
                variants = {ISA_LEVELS[i][0]: m["digest"] for i, m in enumerate(json.load(f)["manifests"])}
            published = {}
            for level, digest in variants.items():
                job = wait_status(b, "hpc/app", digest)
                self.assertEqual(job["status"], "done", job)
                self.assertEqual(job["published_path"], os.path.join(pub, "hpc/app", digest + ".sqsh"))
                published[level] = job["published_path"]
            self.assertEqual(len(set(published.values())), 3)

            pw = os.path.join(tmp, "pw")
            with open(pw, "w") as f:
                f.write(harness.ADMIN_PASSWORD)
            how = set()

            def run_from(sqsh, cpu):
                """Mount the squashfs (squashfuse) or extract it, and run bin/payload under qemu -cpu `cpu`."""
                root = tempfile.mkdtemp(dir=tmp)
                mounted = os.path.exists("/dev/fuse") and subprocess.run(["squashfuse", sqsh, root]).returncode == 0
                if not mounted:
                    os.rmdir(root)
                    subprocess.run(["unsquashfs", "-q", "-n", "-d", root, sqsh], check=True, stdout=subprocess.DEVNULL)
                how.add("squashfuse mount" if mounted else "unsquashfs extraction (no usable /dev/fuse)")
                try:
                    return subprocess.run([QEMU, "-cpu", cpu, os.path.join(root, "bin/payload")], capture_output=True,
                                          text=True, timeout=60)
                finally:
                    if mounted:
                        subprocess.run(["umount", root])

            for cpu, node_level, want in ISA_NODES:
                with self.subTest(cpu=cpu):
                    # the node's own CPU picks the build: berth-isa runs under the same CPU model (ASan cannot run
                    # under qemu-user: that build names the model's level instead)
                    args = [BERTH_ISA, "resolve", "--registry", "http://" + b.host, "--user", "admin",
                            "--password-file", pw, "--squashfs", "%s/hpc/app:1.0" % b.host]
                    if os.environ.get("BERTH_SANITIZED") == "1":
                        args[2:2] = ["--level", node_level]
                    else:
                        args = [QEMU, "-cpu", cpu] + args
                    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
                    self.assertEqual((r.returncode, r.stdout.strip()), (0, published[want]), r.stderr)
                    run = run_from(r.stdout.strip(), cpu)
                    self.assertEqual((run.returncode, run.stdout), (0, "payload ran\n"), run.stderr)
            # the check is real: the v4 build from its squashfs dies of SIGILL on a v2 CPU, the v3 one on it too
            for level in ("x86-64-v4", "x86-64-v3"):
                self.assertEqual(run_from(published[level], "Nehalem").returncode, -signal.SIGILL, level)
            print("\n# ISA payloads ran from the squashfs by", ", ".join(sorted(how)))
        finally:
            b.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)


def d_tag(level):
    return "variant-" + level


class CrashTest(unittest.TestCase):
    """SIGKILL during a conversion: after the restart the job is taken up again and the published file is whole."""

    def test_sigkill_mid_conversion_then_restart(self):
        pub = tempfile.mkdtemp(prefix="berth-publish-")
        # xz is slow enough to be caught in the middle of 24 MiB of incompressible data
        b = harness.Berthd(env={"BERTH_GATEWAY_PUBLISH_DIR": pub, "BERTH_GATEWAY_LEASE_SECONDS": "5",
                                "BERTH_GATEWAY_COMPRESSOR": "xz"}).start()
        try:
            b.project("hpc")
            self.assertEqual(set_mode(b, "hpc", "push")[0], 200)
            blobs = [gzip.compress(tar_bytes([("big%d" % i, "file", os.urandom(8 << 20)) for i in range(3)]), 1, mtime=0)]
            digest, _ = push_layers(b, "hpc/big", "v1", blobs)
            job = wait_status(b, "hpc/big", digest, want=("running",), timeout=60)
            time.sleep(1.0)
            b.stop(signal.SIGKILL)
            final = os.path.join(pub, "hpc/big", digest + ".sqsh")
            self.assertFalse(os.path.exists(final), "published before the conversion finished")
            b.start()
            job = wait_status(b, "hpc/big", digest, timeout=300)
            self.assertEqual(job["status"], "done", job)
            self.assertGreaterEqual(job["attempts"], 2)
            with open(final, "rb") as f:
                data = f.read()
            self.assertEqual(harness.sha256(data), job["digest"])
            path = os.path.join(pub, "check.sqsh")
            with open(path, "wb") as f:
                f.write(data)
            self.assertEqual(describe(read_squashfs(path)), describe(flatten(blobs)))
            self.assertEqual([n for n in os.listdir(os.path.dirname(final)) if n.startswith(".")], [])
        finally:
            b.cleanup()
            subprocess.run(["rm", "-rf", pub])

    def test_push_not_queued_before_a_stop_is_converted_at_start(self):
        # a push's hand-off to the converter lives in memory after the commit: a berthd gone in between must not
        # lose the conversion. Stand-in for that moment: pushes made while the project did not convert, then
        # switched to "on push" (which queues nothing by itself) and a restart.
        b = harness.Berthd().start()
        try:
            b.project("hpc")
            blobs = [gzip.compress(tar_bytes([("f", "file", b"catch me")]), 1, mtime=0)]
            digest, _ = push_layers(b, "hpc/app", "v1", blobs)
            push_layers(b, "hpc/app", "dev", [gzip.compress(tar_bytes([("g", "file", b"not me")]), 1, mtime=0)])
            self.assertEqual(set_mode(b, "hpc", "push", "v*")[0], 200)
            jobs = lambda: sum(int(line.rsplit(" ", 1)[1]) for line in b.request("GET", "/metrics")[2].decode().splitlines()
                               if line.startswith("berth_sqfs_jobs{"))
            time.sleep(1.5)  # a dispatcher tick or more: nothing is queued by the switch alone
            self.assertEqual(jobs(), 0)
            b.stop(signal.SIGKILL)
            b.start()
            deadline = time.time() + 60
            while time.time() < deadline and "conversion(s) of pushes not queued" not in b.logs():
                time.sleep(0.1)
            self.assertIn("squashfs: 1 conversion(s) of pushes not queued before the last stop", b.logs())
            deadline = time.time() + 60
            while time.time() < deadline and jobs() != 1:
                time.sleep(0.2)
            self.assertEqual(jobs(), 1, "v1 queued, dev (outside the tag pattern) not")
            self.assertEqual(wait_status(b, "hpc/app", digest)["status"], "done")
        finally:
            b.cleanup()


if __name__ == "__main__":
    harness.main()
