#!/usr/bin/env bash
# Build Berth and serve it on 127.0.0.1:5000 with an embedded default: a private PostgreSQL cluster, storage,
# a self-signed TLS certificate (https://127.0.0.1:5443, HTTP/2) and an admin password, all under ./var.
# Ctrl-C (or SIGTERM) drains requests and stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VAR=${BERTH_VAR:-$ROOT/var}

deploy/install-deps deploy/packages.txt
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
webui/build.sh >/dev/null

mkdir -p "$VAR"
chmod 755 "$VAR"
if [ ! -f "$VAR/tls/cert.pem" ]; then
  mkdir -p "$VAR/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 825 -subj "/CN=berth" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$VAR/tls/key.pem" -out "$VAR/tls/cert.pem" 2>/dev/null
  chmod 600 "$VAR/tls/key.pem"
fi
if [ ! -f "$VAR/admin-password" ]; then
  (umask 077; openssl rand -base64 18 >"$VAR/admin-password")
  echo "berth: generated admin password (shown once, kept in $VAR/admin-password): $(cat "$VAR/admin-password")"
fi
PG_DIR=${BERTH_PG_DIR:-/tmp/berth-pg-$(echo "$VAR" | md5sum | cut -c1-8)}
conninfo=$(deploy/berth-pg start "$PG_DIR")
trap 'deploy/berth-pg stop "$PG_DIR"' EXIT

export BERTH_DATABASE_URL="$conninfo"
export BERTH_STORAGE_ROOT="${BERTH_STORAGE_ROOT:-$VAR/storage}"
export BERTH_HTTP_ADDR="${BERTH_HTTP_ADDR:-127.0.0.1:5000}"
export BERTH_TLS_ADDR="${BERTH_TLS_ADDR:-127.0.0.1:5443}" BERTH_TLS_CERT="$VAR/tls/cert.pem" BERTH_TLS_KEY="$VAR/tls/key.pem"
export BERTH_ADMIN_PASSWORD="$(cat "$VAR/admin-password")"
export BERTH_UI_DIR="${BERTH_UI_DIR:-$ROOT/webui/dist}"
echo "berth: serving http://$BERTH_HTTP_ADDR and https://$BERTH_TLS_ADDR (database in $PG_DIR)"
build/registry/berthd ${BERTH_CONFIG:+--config "$BERTH_CONFIG"} &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; deploy/berth-pg stop "$PG_DIR"' EXIT INT TERM
wait $pid
