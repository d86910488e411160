"""Benchmark of the HPC gateway's converter (docs/benchmarks.md, "HPC squashfs"); not part of CTest.

Builds an image of BENCH_SQFS_GIB GiB of file contents (default 4) in three gzip layers — many small files, large
files (half random, half text), and a layer that deletes and replaces part of the first — and flattens it:
  1. berth-sqfs (what berthd runs): wall and CPU seconds, peak RSS, the tree's peak memory;
  2. skopeo copy + umoci unpack + mksquashfs (the per-node pipeline), on the same cores.
Both with zstd and BENCH_SQFS_THREADS compressor threads (default: all CPUs; berth-sqfs -j, mksquashfs -processors).
skopeo copies the OCI layout into a second one (oci: to oci:, digests verified): its own CPU without a network.
Prints one JSON line per run, and the machine's CPUs and load average before each.
"""
import gzip
import hashlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BERTH_SQFS = os.environ.get("BERTH_SQFS", os.path.join(ROOT, "build", "registry", "berth-sqfs"))
GIB = float(os.environ.get("BENCH_SQFS_GIB", "4"))
THREADS = os.environ.get("BENCH_SQFS_THREADS", str(os.cpu_count()))
WORDS = b" ".join(b"word%d" % i for i in range(20000))


def content(i, size):
    if i % 2:
        return os.urandom(size)
    out = bytearray()
    while len(out) < size:
        out += WORDS[(i * 7919) % 1000:]
    return bytes(out[:size])


def layer(path, entries):
    """entries: iterator of (name, bytes or None for a whiteout marker file)."""
    with open(path, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as t:
                for name, data in entries:
                    ti = tarfile.TarInfo(name)
                    ti.mode = 0o644
                    ti.mtime = 1700000000
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def oci_layout(d, layers):
    blobs = os.path.join(d, "blobs", "sha256")
    os.makedirs(blobs)
    descs = []
    diff_ids = []
    for p in layers:
        dg = sha_file(p)
        shutil.copy(p, os.path.join(blobs, dg))
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + dg,
                      "size": os.path.getsize(p)})
        with gzip.open(p, "rb") as f:
            h = hashlib.sha256()
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        diff_ids.append("sha256:" + h.hexdigest())

    def put(data):
        dg = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, dg), "wb") as f:
            f.write(data)
        return "sha256:" + dg, len(data)
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids},
                      "config": {}}).encode()
    cd, cs = put(cfg)
    m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
                    "layers": descs}).encode()
    md, ms = put(m)
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                      "digest": md, "size": ms,
                                                      "annotations": {"org.opencontainers.image.ref.name": "bench"}}]}, f)
    with open(os.path.join(d, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit("%s failed: %s" % (cmd[0], r.stderr[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r, wall, cpu, after.ru_maxrss


def main():
    tmp = tempfile.mkdtemp(prefix="bench-sqfs-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    try:
        total = int(GIB * (1 << 30))
        small_n = 40000
        small = [("usr/share/doc/pkg%d/file%d.txt" % (i // 50, i), content(i, 2000 + (i * 37) % 6000)) for i in range(small_n)]
        small_bytes = sum(len(d) for _, d in small)
        big_n = max(1, int((total - small_bytes) / (64 << 20)))
        l1, l2, l3 = (os.path.join(tmp, "l%d.tar.gz" % i) for i in (1, 2, 3))
        t0 = time.time()
        layer(l1, small)
        layer(l2, (("opt/data/blob%d.bin" % i, content(i, 64 << 20)) for i in range(big_n)))
        layer(l3, [("usr/share/doc/pkg%d/.wh.file%d.txt" % (i // 50, i), b"") for i in range(0, small_n, 3)]
              + [("usr/share/doc/pkg0/.wh..wh..opq", b""), ("usr/share/doc/pkg0/new.txt", b"new")])
        gen = time.time() - t0
        layers_bytes = sum(os.path.getsize(p) for p in (l1, l2, l3))
        print(json.dumps({"built": "image", "content_bytes": small_bytes + big_n * (64 << 20), "small_files": small_n,
                          "big_files": big_n, "layer_bytes": layers_bytes, "seconds": round(gen, 1)}), flush=True)

        out = os.path.join(tmp, "berth.sqsh")
        print(json.dumps({"cpus": os.cpu_count(), "threads": int(THREADS), "loadavg": os.getloadavg()}), flush=True)
        r, wall, cpu, rss = timed([BERTH_SQFS, "-c", "zstd", "-j", THREADS, out, l1, l2, l3])
        st = json.loads(r.stdout)
        print(json.dumps({"run": "berth-sqfs", "threads": st["threads"], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                          "max_rss_kib": st["max_rss_kib"], "tree_peak_bytes": st["tree_peak_bytes"],
                          "dir_table_bytes": st["dir_table_bytes"], "entries": st["entries"], "image_bytes": st["image_bytes"],
                          "MB_per_s": round(st["content_bytes"] / wall / 1e6, 1)}), flush=True)
        os.unlink(out)

        src = os.path.join(tmp, "registry")
        oci_layout(src, (l1, l2, l3))
        for p in (l1, l2, l3):
            os.unlink(p)
        print(json.dumps({"cpus": os.cpu_count(), "threads": int(THREADS), "loadavg": os.getloadavg()}), flush=True)
        layout = os.path.join(tmp, "oci")
        r, w0, c0, _ = timed(["skopeo", "copy", "oci:%s:bench" % src, "oci:%s:bench" % layout])
        shutil.rmtree(src)
        bundle = os.path.join(tmp, "bundle")
        r, w1, c1, _ = timed(["umoci", "unpack", "--image", layout + ":bench", bundle])
        out = os.path.join(tmp, "pipeline.sqsh")
        r, w2, c2, rss2 = timed(["mksquashfs", os.path.join(bundle, "rootfs"), out, "-comp", "zstd", "-processors", THREADS,
                                 "-noappend", "-quiet", "-no-progress"])
        print(json.dumps({"run": "skopeo copy + umoci unpack + mksquashfs", "wall_s": round(w0 + w1 + w2, 1),
                          "cpu_s": round(c0 + c1 + c2, 1), "skopeo_wall_s": round(w0, 1), "skopeo_cpu_s": round(c0, 1),
                          "unpack_wall_s": round(w1, 1), "unpack_cpu_s": round(c1, 1), "mksquashfs_wall_s": round(w2, 1),
                          "mksquashfs_cpu_s": round(c2, 1), "max_rss_kib_any_step": rss2,
                          "image_bytes": os.path.getsize(out), "loadavg_after": os.getloadavg()}), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
