"""Pull profile of the s3 driver (not a test; docs/benchmarks.md, issue 19). One blob (PULL_MIB, 128) read with curl
to /dev/null by 1 and CLIENTS (32) clients: straight from the gateway (curl --aws-sigv4, the limit), through Berth's
edge (berthd authorises, nginx proxies the presigned URL) in several edge variants, and from a second berthd on the
same database and bucket with storage.s3.redirect (307, the client follows to the gateway). Each repetition measures
direct and every variant back to back (PULL_REPS, 5); ratios are taken per repetition against that repetition's
direct figure, then the median. The edge variants are applied to the running edge's nginx.conf with a reload
(SIGHUP; the new workers are waited for), so every variant runs against the same berthd, blob and gateway. Then
small blobs (SMALL_KIB, 16): wrk (WRK_SECONDS, 3) with 1 and 32 connections, a Bearer token as clients send, to see
what berthd's part (auth + presign) and the gateway connection cost per request. BENV="K=V ..." adds berthd
environment; ONLY="v1 v2" limits the variants. Needs the CTest fixtures pg and ceph:

    BERTH_TEST_PG_DIR=… BERTH_TEST_PG_PORT=… BERTH_TEST_CEPH_DIR=… BERTHD=build/registry/berthd \
      flock /work/wt/bench.lock python3 tests/integration/bench_s3_pull.py
"""
import concurrent.futures
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["BERTH_TEST_STORAGE_DRIVER"] = "s3"
from harness import Berthd, ADMIN_AUTH
MIB = 1 << 20
SIZE = int(os.environ.get("PULL_MIB", "128")) * MIB
REPS = int(os.environ.get("PULL_REPS", "5"))
CLIENTS = int(os.environ.get("CLIENTS", "32"))
SMALL = int(os.environ.get("SMALL_KIB", "16")) * 1024
WRK_S = int(os.environ.get("WRK_SECONDS", "3"))
BENV = dict(x.split("=", 1) for x in os.environ.get("BENV", "").split() if x)


def s3_location(conf):
    """The span of the edge's internal s3 location block."""
    i = conf.index("location /_berth/blobs/ {")
    return i, conf.index("\n    }\n", i)


def in_location(extra):
    """Add directives to the s3 location, replacing the ones it has already (nginx refuses duplicates)."""
    def f(conf):
        a, z = s3_location(conf)
        loc = conf[a:z]
        for d in extra.split(";"):
            if d.strip() and d.split()[0] != "proxy_set_header":  # a list: the location keeps its others
                loc = re.sub(r"\n\s*%s [^;]*;" % d.split()[0], "", loc)
        return conf[:a] + loc + "\n      " + extra + conf[z:]
    return f


def keepalive(n=16):
    def f(conf):
        a, z = s3_location(conf)
        m = re.search(r"proxy_pass (https?)://([^/;]+)/;", conf[a:z])
        conf = conf[:a + m.start()] + "proxy_pass %s://berth_s3/;" % m.group(1) + conf[a + m.end():]
        i = conf.index("  server {\n")
        return conf[:i] + "  upstream berth_s3 { server %s; keepalive %d; }\n" % (m.group(2), n) + conf[i:]
    return f


def workers(n):
    return lambda conf: re.sub(r"worker_processes \d+;", "worker_processes %d;" % n, conf)


def nocache(conf):
    """The edge before it kept slices: every GET streams from the gateway (proxy_buffering off)."""
    conf = re.sub(r"  proxy_cache_path [^;]*;\n", "", conf)
    a, z = s3_location(conf)
    loc = conf[a:z]
    for d in ("slice", "proxy_cache", "proxy_cache_key", "proxy_set_header Range", "proxy_cache_valid", "proxy_cache_lock",
              "proxy_ignore_headers", "proxy_buffering", "open_file_cache"):
        loc = re.sub(r"\n\s*%s [^;]*;[^\n]*" % d, "", loc)
    return conf[:a] + loc + "\n      proxy_buffering off;" + conf[z:]


BUF_ON = "proxy_buffering on; proxy_buffers 8 64k; proxy_busy_buffers_size 128k;"
def streamed(f):
    return lambda conf: f(nocache(conf))


VARIANTS = {  # name: nginx.conf -> nginx.conf. "landed" keeps 32 MiB slices on disk (warm: every variant answers
    # once before the runs); "cold" is landed with the kept slices removed before each measurement; "nocache" streams
    # every GET from the gateway (proxy_buffering off with the http block's 64k proxy_buffer_size, a new gateway
    # connection per GET, 2 workers, sendfile on), and the rest are one change each to nocache
    "cold": lambda c: c,  # first: its measurement leaves the slices warm for the next
    "landed": lambda c: c,
    "cold_slice16": lambda c: c.replace("slice 32m;", "slice 16m;"),
    "cold_slice64": lambda c: c.replace("slice 32m;", "slice 64m;"),
    "nocache": nocache,
    "keepalive": streamed(keepalive()),
    "buf256k": streamed(in_location("proxy_buffer_size 256k; proxy_buffers 4 256k;")),
    "buf1m": streamed(in_location("proxy_buffer_size 1m; proxy_buffers 4 1m;")),
    "buffering_on+temp0": streamed(in_location(BUF_ON + " proxy_max_temp_file_size 0;")),
    "buffering_on+temp": streamed(in_location(BUF_ON)),
    "1worker": streamed(workers(1)),
    "sendfile_off": streamed(lambda c: c.replace("sendfile on; tcp_nopush on;", "sendfile off; tcp_nopush off;")),
}
if os.environ.get("ONLY"):
    VARIANTS = {k: v for k, v in VARIANTS.items() if k in os.environ["ONLY"].split()}


def children(pid):
    try:
        return set(int(x) for x in open("/proc/%d/task/%d/children" % (pid, pid)).read().split())
    except OSError:
        return set()


def tree_cpu(pid, tree=True):
    tot, todo = 0, [pid]
    while todo:
        q = todo.pop()
        try:
            f = open("/proc/%d/stat" % q).read().rsplit(")", 1)[1].split()
            tot += int(f[11]) + int(f[12])
            if tree:
                todo += list(children(q))
        except OSError:
            pass
    return tot / os.sysconf("SC_CLK_TCK")


class Edge:
    """The proxied berthd's nginx: rewrite its conf from the landed one and reload."""
    def __init__(self, b):
        self.b = b
        self.path = os.path.join(b.env["BERTH_RUN_DIR"], "nginx.conf")
        self.landed = open(self.path).read()
        self.master = int(open(os.path.join(b.env["BERTH_RUN_DIR"], "nginx.pid")).read())
        self.current = None

    def apply(self, name):
        if name == self.current:
            return
        conf = VARIANTS[name](self.landed)
        assert name in ("landed", "cold") or conf != self.landed, name
        with open(self.path, "w") as f:
            f.write(conf)
        old = children(self.master)
        os.kill(self.master, signal.SIGHUP)
        t0 = time.time()
        while time.time() - t0 < 10:  # new workers up, old ones gone (an invalid conf keeps the old workers)
            now = children(self.master)
            if now and not (now & old):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the edge did not reload into %s:\n%s" % (name, self.b.logs()[-3000:]))
        self.current = name


def curl(args):
    out = subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", *args],
                         capture_output=True, text=True, check=True).stdout.split()
    assert int(out[1]) == SIZE, out
    return float(out[0])


def rate(args, n):
    if n == 1:
        return SIZE / MIB / curl(args)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        list(ex.map(lambda _: curl(args), range(n)))
    return n * SIZE / MIB / (time.time() - t0)


def wrk(url, headers, conns):
    h = []
    for k, v in headers.items():
        h += ["-H", "%s: %s" % (k, v)]
    out = subprocess.run(["wrk", "-t", "1" if conns == 1 else "2", "-c", str(conns), "-d", "%ds" % WRK_S, "--latency", *h, url],
                         capture_output=True, text=True, check=True).stdout
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert bad is None, out
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 1e-3, "ms": 1, "s": 1e3}[p50.group(2)]
    return rps, float(p50.group(1)) * scale


load0 = open("/proc/loadavg").read().split()[0]
b = Berthd(env=BENV).start().project("p")
r = None
try:
    # a second instance on the same database and bucket prefix, answering blob GETs with 307 to the gateway
    r = Berthd(dbname=b.dbname, storage=b.storage, env=dict(BENV, BERTH_S3_REDIRECT="true")).start()
    data = os.urandom(MIB) * (SIZE // MIB)
    d = b.push_blob("p/big", data)
    del data
    small = b.push_blob("p/big", os.urandom(SMALL))
    e = b.env
    direct = "%s/%s/%s/blobs/sha256/%s/%s" % (e["BERTH_S3_ENDPOINT"], e["BERTH_S3_BUCKET"], e["BERTH_S3_PREFIX"], d[7:9], d[7:])
    dargs = ["--aws-sigv4", "aws:amz:%s:s3" % e["BERTH_S3_REGION"], "--user", "%s:%s" % (e["BERTH_S3_ACCESS_KEY"], e["BERTH_S3_SECRET_KEY"]),
             "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", direct]
    eargs, rargs = [], []

    def new_token():  # a pull token lives 5 minutes: a fresh one for each repetition
        st, _, body = b.request("GET", "/service/token?service=berth-registry&scope=repository:p/big:pull")
        assert st == 200, (st, body)
        bearer = {"Authorization": "Bearer " + json.loads(body)["token"]}
        eargs[:] = ["-H", "Authorization: " + bearer["Authorization"], "http://%s/v2/p/big/blobs/%s" % (b.host, d)]
        # curl drops the Authorization header when the redirect leaves for another host:port, as the presigned URL needs
        rargs[:] = ["-L", "-H", "Authorization: " + bearer["Authorization"], "http://%s/v2/p/big/blobs/%s" % (r.host, d)]
        return bearer
    new_token()
    st, h, _ = r.request("GET", "/v2/p/big/blobs/" + small)
    assert st == 307 and h["location"].startswith(e["BERTH_S3_ENDPOINT"]), (st, h)
    edge = Edge(b)
    for name in VARIANTS:  # each variant loads and answers once before the measured runs
        edge.apply(name)
        curl(eargs)
    curl(dargs), curl(rargs)
    ratio = {k: {1: [], CLIENTS: []} for k in list(VARIANTS) + ["redirect"]}
    rows = ["direct"] + list(VARIANTS) + ["redirect"]
    mibs = {k: {1: [], CLIENTS: []} for k in rows}
    # CPU seconds per GiB pulled by 1 client: gateway (radosgw + OSD), berthd + its edge, the client (curl)
    cdir = os.path.join(os.environ["BERTH_TEST_CEPH_DIR"], "run")
    gw_pids = [int(open(os.path.join(cdir, f)).read()) for f in os.listdir(cdir) if f.startswith(("client.", "osd.")) and f.endswith(".pid")]
    cpu = {k: [0.0, 0.0, 0.0, 0.0] for k in rows}  # gateway, berthd+edge (of the instance serving), client, GiB

    def sample(inst):
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (sum(tree_cpu(p) for p in gw_pids), tree_cpu(inst.proc.pid), ch.ru_utime + ch.ru_stime)

    def measure(name, n):
        if name == "direct":
            args, inst = dargs, b
        elif name == "redirect":
            args, inst = rargs, r
        else:
            edge.apply(name)
            args, inst = eargs, b
            if name.startswith("cold"):
                subprocess.run(["find", os.path.join(b.env["BERTH_RUN_DIR"], "blobcache"), "-type", "f", "-delete"], check=True)
        c0 = sample(inst)
        x = rate(args, n)
        if n == 1:
            c1 = sample(inst)
            for i in range(3):
                cpu[name][i] += c1[i] - c0[i]
            cpu[name][3] += SIZE / (1 << 30)
        mibs[name][n].append(x)
        return x

    for rep in range(REPS):
        new_token()
        for n in (1, CLIENTS):
            ref = measure("direct", n)
            for name in rows[1:]:
                ratio[name][n].append(measure(name, n) / ref)
        print("rep %d done, load %s" % (rep + 1, open("/proc/loadavg").read().split()[0]), flush=True)
    load1 = open("/proc/loadavg").read().split()[0]
    print("RESULT %s %d MiB, %d reps, load %s -> %s" % (os.environ.get("LABEL", ""), SIZE // MIB, REPS, load0, load1))
    print("| variant | 1 client MiB/s | ratio to direct (per rep) | %d clients MiB/s | ratio to direct (per rep) | CPU s/GiB, 1 client: gateway / berthd+edge / curl |" % CLIENTS)
    print("|---|---|---|---|---|---|")
    md = statistics.median
    for name in rows if REPS else []:  # PULL_REPS=0: only the small blobs
        c = cpu[name]
        cs = "%.2f / %.3f / %.2f" % (c[0] / c[3], c[1] / c[3], c[2] / c[3])
        if name == "direct":
            print("| direct gateway GET | %.0f | 1 | %.0f | 1 | %s |" % (md(mibs[name][1]), md(mibs[name][CLIENTS]), cs))
            continue
        print("| %s | %.0f | %.2f (%s) | %.0f | %.2f (%s) | %s |" % (
            name, md(mibs[name][1]), md(ratio[name][1]), " ".join("%.2f" % x for x in ratio[name][1]),
            md(mibs[name][CLIENTS]), md(ratio[name][CLIENTS]), " ".join("%.2f" % x for x in ratio[name][CLIENTS]), cs))
    # small blobs: requests per second; berthd's own CPU per request apart from the edge's
    bearer = new_token()
    surl = "http://%s/v2/p/big/blobs/%s" % (b.host, small)
    print("\nsmall blob %d KiB, wrk %d s: req/s, median latency ms, berthd CPU ms/req, berthd+edge CPU ms/req" % (SMALL // 1024, WRK_S))
    for name in ["landed", "nocache", "keepalive"]:
        if name not in VARIANTS:
            continue
        edge.apply(name)
        for n in (1, CLIENTS):
            c0, t0 = tree_cpu(b.proc.pid, tree=False), tree_cpu(b.proc.pid)
            rps, p50 = wrk(surl, bearer, n)
            c1, t1 = tree_cpu(b.proc.pid, tree=False), tree_cpu(b.proc.pid)
            nreq = rps * WRK_S
            print("edge %s c%d: %.0f req/s, p50 %.2f ms, berthd %.3f ms/req, berthd+edge %.3f ms/req" % (
                name, n, rps, p50, (c1 - c0) * 1e3 / nreq, (t1 - t0) * 1e3 / nreq))
    for n in (1, CLIENTS):  # the 307 alone: berthd's auth + presign (wrk does not follow redirects)
        c0, t0 = tree_cpu(r.proc.pid, tree=False), tree_cpu(r.proc.pid)
        rps, p50 = wrk("http://%s/v2/p/big/blobs/%s" % (r.host, small), bearer, n)
        c1, t1 = tree_cpu(r.proc.pid, tree=False), tree_cpu(r.proc.pid)
        nreq = rps * WRK_S
        print("redirect (307 only) c%d: %.0f req/s, p50 %.2f ms, berthd %.3f ms/req, berthd+edge %.3f ms/req" % (
            n, rps, p50, (c1 - c0) * 1e3 / nreq, (t1 - t0) * 1e3 / nreq))
finally:
    if r is not None:
        r.cleanup()
    b.cleanup()
