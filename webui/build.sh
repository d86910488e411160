#!/usr/bin/env bash
# Build the web UI: `npm ci` from the committed lockfile (skipped when node_modules already matches it), then
# esbuild into webui/dist (or $1). Called by deploy/run.sh and tests/run.sh; berthd serves the result when
# ui.dir (BERTH_UI_DIR) points at it.
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-$PWD/dist}
if ! command -v npm >/dev/null; then
  ../deploy/install-deps <(echo nodejs npm)
fi
lock=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.berth-lock 2>/dev/null)" != "$lock" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock" >node_modules/.berth-lock
fi
node build.mjs --out "$out"
