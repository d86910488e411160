#!/usr/bin/env bash
# Proves the skip mechanism end to end: a CTest test that exits 77 shows as Skipped (not Passed), tests/ctest-strict
# (what tests/run.sh runs) fails on it and passes without it, and the integration harness exits 77 when a suite
# ran nothing or lacked a dependency, 0 when a skip is marked not applicable, 1 on a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "skip_check: $*" >&2; exit 1; }

mkdir "$tmp/src"
cat > "$tmp/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(skipcheck NONE)
enable_testing()
add_test(NAME ran COMMAND sh -c "exit 0")
add_test(NAME missing_dependency COMMAND sh -c "exit 77")
set_tests_properties(ran missing_dependency PROPERTIES SKIP_RETURN_CODE 77)
CM
cmake -S "$tmp/src" -B "$tmp/build" >/dev/null
cd "$tmp/build"
ctest -R missing_dependency > out.txt 2>&1 || true
grep -q 'missing_dependency .*Skipped' out.txt || { cat out.txt; fail "an exit-77 test did not show as Skipped"; }
grep -q 'Passed' out.txt && fail "an exit-77 test showed as Passed"
if "$here/ctest-strict" > strict.txt 2>&1; then cat strict.txt; fail "ctest-strict passed a run with a skipped test"; fi
"$here/ctest-strict" -R '^ran$' > strict.txt 2>&1 || { cat strict.txt; fail "ctest-strict failed a clean run"; }
if "$here/ctest-strict" -R nothing-matches > strict.txt 2>&1; then fail "ctest-strict passed a run that selected no test"; fi

# the harness: exit status of a suite from what its tests did (no berthd needed: the harness only imports)
cd "$tmp"
suite() {  # suite <name> <python test body>; prints the exit status
  printf 'import sys, unittest\nsys.path.insert(0, "%s/integration")\nfrom harness import NOT_APPLICABLE, main\n%s\nif __name__ == "__main__":\n    main()\n' \
    "$here" "$2" > "$1.py"
  set +e; python3 "$1.py" > "$1.out" 2>&1; echo $?; set -e
}
[ "$(suite none 'class T(unittest.TestCase):
    @unittest.skip("slapd missing")
    def test_a(self): pass')" = 77 ] || fail "a suite that ran nothing did not exit 77"
[ "$(suite partial 'class T(unittest.TestCase):
    def test_a(self): pass
    @unittest.skipUnless(False, "skopeo missing")
    def test_b(self): pass')" = 77 ] || fail "a suite missing a dependency did not exit 77"
[ "$(suite design 'class T(unittest.TestCase):
    def test_a(self): pass
    @unittest.skip(NOT_APPLICABLE + "not under ASan")
    def test_b(self): pass')" = 0 ] || fail "a not-applicable skip made the suite skipped"
[ "$(suite failing 'class T(unittest.TestCase):
    def test_a(self): self.fail("x")
    @unittest.skip("skopeo missing")
    def test_b(self): pass')" = 1 ] || fail "a failing suite with a skip did not exit 1"
echo "skip_check: exit 77 is Skipped, ctest-strict fails on it, the harness reports missing dependencies"
