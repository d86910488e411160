#!/bin/bash
# Benchmark, not a test (docs/benchmarks.md, issue 18): what the edge's memory at a 10,000-client burst depends on.
# berthd alone, then the shared harness's burst (../shared/bench/registry-bench) in two steps: a 10-client burst
# pushes the image (--state-out), then — after the edge's nginx.conf is optionally edited and nginx reloaded —
# 10,000 clients (--reuse-state), with a sampler summing the edge workers' VmRSS every 50 ms. Measurement only:
#   REFCONF=1    the anchors' reference nginx configuration (anchors-run's nginx_conf) loaded into the edge's master
#   REFX=1       … with Berth's worker_connections, worker_rlimit_nofile and error_log
#   STATICMAN=1  the burst's manifest by tag served as a static file; STATICBLOB=1 (with it) blobs as plain files
#   STRIP=REGEX  (with STATICMAN) lines of the edge's configuration matching REGEX removed
# Run as root, nothing else running: ulimit -n 20000 and the loopback port range are set here.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=${BENCH:-$root/../shared/bench}
BIN=${BIN:-$root/build/registry/berthd}
ulimit -n 20000
sysctl -qw net.ipv4.ip_local_port_range="15000 65000"
D=${D:-/tmp/berth-edge-burst}; rm -rf $D; mkdir -p $D
cd "$root"
# HUP the edge's master and wait for a new set of workers: nginx keeps the old ones when it refuses an edited
# configuration (an error in berthd.log), and a measurement on them would be of the old configuration
reload() {
  local old; old=$(pgrep -f "nginx: worker" | sort | tr '\n' ' ')
  kill -HUP "$(pgrep -f "nginx: master" | head -1)"
  for _ in $(seq 1 50); do
    sleep 0.1
    local now; now=$(pgrep -f "nginx: worker" | sort | tr '\n' ' ')
    if [ -n "$now" ] && [ -z "$(comm -12 <(tr ' ' '\n' <<<"$old" | grep .) <(tr ' ' '\n' <<<"$now" | grep .))" ]; then return 0; fi
  done
  echo "nginx kept its old workers: the edited configuration was refused (see $D/berthd.log)" >&2
  grep emerg "$D/berthd.log" | tail -1 >&2
  kill "$PID"; deploy/berth-pg stop "$D/pg" >/dev/null 2>&1; exit 1
}
CONN=$(deploy/berth-pg start $D/pg 55722)
env BERTH_DATABASE_URL="$CONN" BERTH_STORAGE_ROOT=$D/store BERTH_HTTP_ADDR=127.0.0.1:5072 BERTH_LOG_LEVEL=warn \
  BERTH_PROJECTS_AUTO_CREATE=true BERTH_EDGE_ALLOW_ROOT=true BERTH_ADMIN_PASSWORD=Bench-pass-1234 $BIN > $D/berthd.log 2>&1 &
PID=$!
for i in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:5072/v2/ && break; sleep 0.2; done
RB="$BENCH/registry-bench --url http://127.0.0.1:5072 --user admin --password Bench-pass-1234 --pid $PID --label berth"
BURST_CLIENTS=10 BURST_LAYER_MIB=1 BURST_REPS=1 QUICK=1 $RB --only burst --state-out $D/state.json > $D/warm.txt 2>&1
if [ "${REFCONF:-0}" = 1 ]; then
  python3 $BENCH/static_tree.py --state $D/state.json --root $D/static > /dev/null
  CONF=$(find $D -name nginx.conf | head -1)
  awk 'index($0,"nginx_conf() {")==1{f=1} f{print} f&&$0=="EOF"{getline; print; exit}' $BENCH/anchors-run > $D/fn.sh
  RUN=$D NGINX_WORKER_CONNECTIONS=11024; mkdir -p $D/nginx; source $D/fn.sh
  nginx_conf 5072 "sendfile on; tcp_nopush on;" "" | sed "s#^pid .*#pid $(dirname $CONF)/nginx.pid;#; s/^worker_processes auto;/worker_processes 2;/" > $CONF
  if [ "${REFX:-0}" = 1 ]; then python3 - "$CONF" <<'PY'
import re, sys
c = sys.argv[1]; s = open(c).read()
s = re.sub(r"worker_connections \d+;", "worker_connections 20000;", s)
s = s.replace("daemon off;", "daemon off;\nworker_rlimit_nofile 17778;", 1)
s = re.sub(r"(?m)^error_log .*$", "error_log stderr warn;", s)
open(c, "w").write(s)
PY
  fi
  reload
  curl -s -o /dev/null -w "refconf check %{http_code} %{size_download}\n" http://127.0.0.1:5072/v2/regbench/burst/manifests/latest
fi
if [ "${STATICMAN:-0}" = 1 ]; then
  curl -s -u admin:Bench-pass-1234 -H "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json" \
    -D $D/mh.txt -o $D/manifest.json http://127.0.0.1:5072/v2/regbench/burst/manifests/latest
  CT=$(grep -i "^content-type" $D/mh.txt | cut -d' ' -f2 | tr -d '\r')
  CONF=$(find $D -name nginx.conf | head -1)
  python3 - "$CONF" "$CT" "$D/manifest.json" <<'PY'
import sys, os, signal, subprocess
conf, ct, mf = sys.argv[1:4]
s = open(conf).read()
i = s.index('    location ~ "^/v2/.+/blobs/sha256')
s = s[:i] + '    location = /v2/regbench/burst/manifests/latest { default_type %s; alias %s; }\n' % (ct, mf) + s[i:]
open(conf, "w").write(s)
print("static manifest", ct, os.path.getsize(mf))
PY
  reload
  if [ "${STATICBLOB:-0}" = 1 ]; then python3 - "$CONF" $D/store/blobs <<'PY'
import re, sys, os, signal, subprocess
conf, blob_root = sys.argv[1], sys.argv[2]
s = open(conf).read()
start = s.rindex('\n', 0, s.index('/blobs/(?<berth_digest>')) + 1  # the kept decisions' location
end = s.index('\n    }\n', start) + len('\n    }\n')
new = ('    location ~ "^/v2/.+/blobs/sha256:([0-9a-f]{2})([0-9a-f]{62})$" {\n'
       '      root %s;\n      default_type application/octet-stream;\n'
       '      try_files /sha256/$1/$1$2 =404;\n    }\n' % blob_root)
s = s[:start] + new + s[end:]
open(conf, "w").write(s)
print("static blob location")
PY
    reload
  fi
  if [ -n "${STRIP:-}" ]; then python3 - "$CONF" "$STRIP" <<'PY'
import re, sys, os, signal, subprocess
conf, pat = sys.argv[1:3]
lines = open(conf).read().split("\n")
keep = [l for l in lines if not re.search(pat, l)]
open(conf, "w").write("\n".join(keep))
print("stripped", len(lines) - len(keep), "lines")
PY
  reload; fi
  curl -s -o /dev/null -w "static check %{http_code} %{size_download}\n" http://127.0.0.1:5072/v2/regbench/burst/manifests/latest
fi
( while kill -0 $PID 2>/dev/null; do
    rss=0; for w in $(pgrep -f "nginx: worker" ); do r=$(awk '/VmRSS/{print $2}' /proc/$w/status 2>/dev/null); rss=$((rss + ${r:-0})); done
    echo "$(date +%T.%N | cut -c1-12) up=0 workers_rss_kib=$rss"; sleep 0.05; done ) > $D/sample.txt &
SP=$!
BURST_CLIENTS=10000 BURST_LAYER_MIB=1 BURST_KEEP_GOING=1 BURST_REPS=2 QUICK=1 $RB --only burst,rss --reuse-state $D/state.json 2>&1 | tail -22
kill $SP; kill $PID; wait $PID 2>/dev/null || true
deploy/berth-pg stop $D/pg >/dev/null 2>&1 || true
awk -F'[ =]' '{if ($5>m) m=$5} END {print "max workers rss", m}' $D/sample.txt
