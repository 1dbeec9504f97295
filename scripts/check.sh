#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build mooncake with AddressSanitizer + UndefinedBehaviorSanitizer and run every test
# (make check).  Ends with a line "N passed, N failed, N skipped".
#   scripts/check.sh            sanitizer build in _build/check
#   MC_CHECK_PLAIN=1 scripts/check.sh   optimized build without sanitizers
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" || exit 1
cd "$top" || exit 1
[ -x configure ] || autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi; exit 1; }
build="$top/_build/check"
mkdir -p "$build"
cd "$build" || exit 1
if [ "${MC_CHECK_PLAIN:-0}" = 1 ]; then flags=""; else flags="--enable-sanitizers"; fi
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
	"$top/configure" -q $flags CFLAGS="${CFLAGS:--O1 -g}" || exit 1
fi
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" >build.log 2>&1 || { tail -50 build.log; echo "0 passed, 1 failed"; exit 1; }
make -j"$jobs" check >check.log 2>&1
rc=$?
# Per-test results from the automake harness.
grep -ahE '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' check.log
for f in $(find . -name '*.log' -path '*tests*' ! -name test-suite.log); do
	if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "${f%.log}.trs" 2>/dev/null; then
		echo "---- $f"; tail -40 "$f"
	fi
done
pass=$(grep -ahE '^# (PASS|XFAIL):' test-suite.log 2>/dev/null | awk '{s+=$3} END {print s+0}')
fail=$(grep -ahE '^# (FAIL|XPASS|ERROR):' test-suite.log 2>/dev/null | awk '{s+=$3} END {print s+0}')
skip=$(grep -ahE '^# SKIP:' test-suite.log 2>/dev/null | awk '{s+=$3} END {print s+0}')
if [ ! -f test-suite.log ]; then
	tail -30 check.log
	fail=$((fail + 1))
fi
[ $rc -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
# The fuzz targets under libFuzzer for a few seconds each: a second, fuzzing build (clang) in
# _build/fuzz, when clang has its libFuzzer runtime (scripts/deps.sh installs it).
ftest="$top/tests/fuzz/test_fuzz_run.sh"
if "$top/scripts/fuzz.sh" --build >fuzz-build.log 2>&1; then
	MC_TOP_SRCDIR="$top" MC_TOP_BUILDDIR="$top/_build/fuzz" sh "$ftest" >fuzz-run.log 2>&1
	frc=$?
elif ! command -v clang >/dev/null 2>&1; then
	echo "SKIP: clang is missing" >fuzz-run.log
	frc=77
else
	cat fuzz-build.log >fuzz-run.log
	frc=1
fi
case $frc in
0) echo "PASS: tests/fuzz/test_fuzz_run.sh (fuzzing build)"; pass=$((pass + 1)) ;;
77) echo "SKIP: tests/fuzz/test_fuzz_run.sh (fuzzing build): $(tail -1 fuzz-run.log)"
    skip=$((skip + 1)) ;;
*) echo "FAIL: tests/fuzz/test_fuzz_run.sh (fuzzing build)"; tail -60 fuzz-run.log
   fail=$((fail + 1)) ;;
esac
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
