#!/usr/bin/env bash
# lint_static: clang-tidy with the project's .clang-tidy (checks listed and justified there) over every C file of
# the project that the build compiles, using the build's compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS,
# on in CMakeLists.txt). Any finding fails. Generated sources in the build tree (migrations, OpenAPI text) are
# skipped. Exit 77 (SKIPPED) when clang-tidy is missing (tests/ctest-strict fails that in CI).
set -uo pipefail
src=$1
build=$2
tidy=${CLANG_TIDY:-clang-tidy}
if ! command -v "$tidy" >/dev/null; then
  echo "lint_static: $tidy not found (Debian: apt-get install clang-tidy)" >&2
  exit 77
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "lint_static: $build/compile_commands.json missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)" >&2
  exit 1
fi
"$tidy" --version | grep -i version
# each source once (replay.c, config.c and cache.c are compiled into several targets), project files only
mapfile -t files < <(python3 - "$src" "$build" <<'PY'
import json, os, sys
src, build = (os.path.realpath(p) for p in sys.argv[1:3])
seen = set()
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(src + os.sep) and not f.startswith(build + os.sep) and \
            not os.path.relpath(f, src).startswith("build") and f not in seen:
        seen.add(f)
        print(f)
PY
)
if [ "${#files[@]}" -lt 10 ]; then
  echo "lint_static: only ${#files[@]} project files in $build/compile_commands.json; is this the right build tree?" >&2
  exit 1
fi
jobs=${LINT_JOBS:-$(nproc)}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
# one clang-tidy per file, $jobs at a time; --quiet drops the "N warnings generated" noise of suppressed checks
printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "$jobs" "$tidy" -p "$build" --quiet >"$out" 2>&1
status=$?
findings=$(grep -cE '^[^ ]+:[0-9]+:[0-9]+: (warning|error): ' "$out")
grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Use -system-headers' "$out"
echo "lint_static: ${#files[@]} files, $findings findings, $(($(date +%s) - start)) s"
[ "$status" -eq 0 ] && [ "$findings" -eq 0 ]
