#!/bin/bash
# Benchmark, not a test (docs/benchmarks.md, issue 18): the shared harness's burst with Berth as column A beside
# Distribution and nginx in one run: berthd on a fresh private PostgreSQL and storage, Basic credentials on every
# request, then ../shared/bench/anchors-run with BURST_CLIENTS clients (default 10,000) each fetching a manifest,
# a config and a 1 MiB layer. Output: the harness's tables in OUT (default /tmp/berth-anchors-burst.txt).
# Run as root with nothing else running: ulimit -n 20000 and a wider loopback port range are set for the run and
# the range is put back on exit (left wide, client sockets take the ports test fixtures listen on).
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=${BENCH:-$root/../shared/bench}
BIN=${BIN:-$root/build/registry/berthd}
OUT=${1:-/tmp/berth-anchors-burst.txt}
D=${D:-/tmp/berth-anchors-burst}
ports=$(sysctl -n net.ipv4.ip_local_port_range | tr '\t' ' ')
ulimit -n 20000
sysctl -qw net.ipv4.ip_local_port_range="15000 65000"
rm -rf "$D"; mkdir -p "$D"
cd "$root"
PID=
# VmHWM and VmRSS of every process of berthd's tree (berthd, the edge's master and workers), appended to OUT
per_process() {
  echo; echo "per process at the end (kB): pid name VmHWM VmRSS"
  for p in $PID $(pgrep -P "$PID") $(for c in $(pgrep -P "$PID"); do pgrep -P "$c"; done); do
    echo "$p $(tr -d '\0' < /proc/$p/cmdline | cut -c1-30) $(awk '/^VmHWM|^VmRSS/ {printf "%s ", $2}' /proc/$p/status)"
  done
}
finish() {
  [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null && per_process >> "$OUT"
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  deploy/berth-pg stop "$D/pg" >/dev/null 2>&1 || true
  sysctl -qw net.ipv4.ip_local_port_range="$ports"
}
trap finish EXIT
CONN=$(deploy/berth-pg start "$D/pg" 55723)
env BERTH_DATABASE_URL="$CONN" BERTH_STORAGE_ROOT="$D/store" BERTH_HTTP_ADDR=127.0.0.1:5073 BERTH_LOG_LEVEL=warn \
  BERTH_PROJECTS_AUTO_CREATE=true BERTH_EDGE_ALLOW_ROOT=true BERTH_ADMIN_PASSWORD=Bench-pass-1234 "$BIN" > "$D/berthd.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:5073/v2/ && break; sleep 0.2; done
BURST_CLIENTS=${BURST_CLIENTS:-10000} BURST_LAYER_MIB=1 QUICK=1 BURST_KEEP_GOING=1 AUTH=0 NOSENDFILE=0 \
  CANDIDATE_URL=http://127.0.0.1:5073 CANDIDATE_PID=$PID CANDIDATE_LABEL=berth CANDIDATE_USER=admin \
  CANDIDATE_PASSWORD=Bench-pass-1234 "$BENCH/anchors-run" > "$OUT" 2>&1
echo "berthd $(git rev-parse --short HEAD): $OUT"
