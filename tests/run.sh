#!/usr/bin/env bash
# Install what is missing, build Berth twice (release, and ASan+UBSan), and run the whole suite with CTest on
# both builds. The tests start their own PostgreSQL, berthd instances and clients; nothing must be running.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
deploy/install-deps deploy/packages.txt deploy/test-packages.txt
webui/build.sh  # npm ci + esbuild into webui/dist: served by integration_webui's berthd
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBERTH_SANITIZE=ON -DBERTH_TEST_PG_PORT=55434 >/dev/null
cmake --build build-asan -j"$jobs"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DBERTH_BUILD_FUZZERS=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzzers
status=0
echo "== libFuzzer runs (clang, ASan+UBSan)"
(cd build-fuzz && ctest --output-on-failure -j2 -R '^fuzz_run_') || status=1
echo "== release build"
(cd build && ctest --output-on-failure -j2 "$@") || status=1
echo "== ASan+UBSan build"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2 "$@") || status=1
exit $status
