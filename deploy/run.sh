#!/usr/bin/env bash
# Build Berth and serve it on 127.0.0.1:5000 with an embedded default: a private PostgreSQL cluster, storage,
# a self-signed TLS certificate (https://127.0.0.1:5443, HTTP/2) and an admin password, all under ./var.
# As root, berthd runs as the system user `berth` (created here): its edge faces the network.
# Ctrl-C (or SIGTERM), a failed start or any error stops everything this script started.
#
#   BERTH_HTTP_ADDR / BERTH_TLS_ADDR   where to listen (host:port) when 5000 / 5443 are taken
#   BERTH_VAR                          state directory (default ./var; as root, user `berth` must reach it)
#   BERTHD                             use this berthd binary instead of building (tests)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VAR=${BERTH_VAR:-$ROOT/var}

pid="" PG_DIR="" pg_started=""
# One way out: stop berthd (it drains), then the database, whatever ended the script. `set -e` is off in here,
# or the first failing step (wait returns berthd's status) would skip the rest.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
  fi
  [ -n "$pg_started" ] && deploy/berth-pg stop "$PG_DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${BERTHD:-}" ]; then
  deploy/install-deps deploy/packages.txt
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j"$(nproc)" >/dev/null
  webui/build.sh >/dev/null
  BERTHD=$ROOT/build/registry/berthd
fi

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
  echo "berth: generated password for user admin (shown once, kept in $VAR/admin-password): $(cat "$VAR/admin-password")"
fi

export BERTH_STORAGE_ROOT="${BERTH_STORAGE_ROOT:-$VAR/storage}"
export BERTH_HTTP_ADDR="${BERTH_HTTP_ADDR:-127.0.0.1:5000}"
export BERTH_TLS_ADDR="${BERTH_TLS_ADDR:-127.0.0.1:5443}" BERTH_TLS_CERT="$VAR/tls/cert.pem" BERTH_TLS_KEY="$VAR/tls/key.pem"
export BERTH_ADMIN_PASSWORD="$(cat "$VAR/admin-password")"
# the web UI when it has been built (webui/build.sh); BERTH_UI_DIR="" serves none
[ -n "${BERTH_UI_DIR+set}" ] || [ ! -f "$ROOT/webui/dist/index.html" ] || export BERTH_UI_DIR="$ROOT/webui/dist"
mkdir -p "$BERTH_STORAGE_ROOT"

run_as=()
if [ "$(id -u)" = 0 ]; then
  if ! id -u berth >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin berth
    echo "berth: created system user berth"
  fi
  # what berthd writes is berth's (once: storage written by an older root-run berthd is handed over whole)
  [ "$(stat -c %U "$BERTH_STORAGE_ROOT")" = berth ] || chown -R berth:berth "$BERTH_STORAGE_ROOT"
  chown berth:berth "$BERTH_TLS_KEY"
  run_as=(setpriv --reuid=berth --regid=berth --init-groups --)
  for need in "$BERTHD:-x" "$BERTH_STORAGE_ROOT:-w" "$BERTH_TLS_KEY:-r" ${BERTH_UI_DIR:+"$BERTH_UI_DIR/index.html:-r"}; do
    if ! "${run_as[@]}" test "${need##*:}" "${need%:*}"; then
      echo "berth: user berth cannot use ${need%:*} (a parent directory is closed to it): set BERTH_VAR to a" \
        "directory it can reach (e.g. /var/lib/berth), or install Berth outside $ROOT" >&2
      exit 1
    fi
  done
fi

PG_DIR=${BERTH_PG_DIR:-/tmp/berth-pg-$(echo "$VAR" | md5sum | cut -c1-8)}
pg_started=1
export BERTH_DATABASE_URL="$(deploy/berth-pg start "$PG_DIR")"

echo "berth: serving http://$BERTH_HTTP_ADDR and https://$BERTH_TLS_ADDR (database in $PG_DIR)"
"${run_as[@]}" "$BERTHD" ${BERTH_CONFIG:+--config "$BERTH_CONFIG"} &
pid=$!
wait "$pid"
