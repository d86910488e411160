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
import subprocess
import tarfile
import tempfile
import unittest

import harness

BERTH_SQFS = os.environ.get("BERTH_SQFS", os.path.join(harness.ROOT, "build", "registry", "berth-sqfs"))
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


if __name__ == "__main__":
    harness.main()
