#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Run every libFuzzer target (tests/fuzz) for its share of HOURS, at nice 19 (the machine is
# shared), growing corpora kept outside the tree, and print per target: seconds run,
# executions, coverage (libFuzzer's cov and ft), corpus size, and the crashes found.
#
#   scripts/fuzz.sh HOURS [TARGET...]     e.g. scripts/fuzz.sh 2; scripts/fuzz.sh 0.1 fuzz_wire
#   scripts/fuzz.sh --build               only make the fuzzing build (scripts/check.sh uses it)
#
# Environment:
#   MC_FUZZ_DIR   where corpora, crashes and logs go (default /var/tmp/mooncake-fuzz): DIR/<target>/
#                 corpus (what libFuzzer grew, seeded from tests/fuzz/corpus/<target>), crashes
#                 (crash-*, leak-*, timeout-*, oom-* inputs), log
#   MC_FUZZ_JOBS  targets fuzzed at once (default 1)
#   CC            a clang with libFuzzer (default clang)
# The build is _build/fuzz (configure CC=clang --enable-fuzzing), made or brought up to date
# here.  A target that crashes is restarted for the rest of its time (the input is kept in
# crashes/); after 3 crashes it stops: fix them first.  To reproduce one:
#   _build/fuzz/tests/fuzz/<target> DIR/<target>/crashes/crash-...
# and once fixed, add the input to tests/fuzz/corpus/<target>/ as regress-<what broke>.
set -u
if [ $# -lt 1 ]; then
	echo "usage: $0 HOURS [TARGET...] | --build" >&2
	exit 2
fi
hours=$1
shift
[ "$hours" = --build ] && hours=0
top=$(cd "$(dirname "$0")/.." && pwd)
out=${MC_FUZZ_DIR:-/var/tmp/mooncake-fuzz}
jobs=${MC_FUZZ_JOBS:-1}
all="fuzz_master fuzz_wire fuzz_tcp_server fuzz_handshake fuzz_admin_http fuzz_metadata_http
fuzz_ssd_area fuzz_options fuzz_store_config"
targets=${*:-$all}
ntargets=$(echo $targets | wc -w)
secs=$(awk -v h="$hours" -v n="$ntargets" -v j="$jobs" 'BEGIN { s = int(h * 3600 * j / n); print (s < 1 ? 1 : s) }')

# ---- the fuzzing build
build="$top/_build/fuzz"
cd "$top" || exit 1
[ -x configure ] || autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi; exit 1; }
mkdir -p "$build"
cd "$build" || exit 1
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
	"$top/configure" -q CC="${CC:-clang}" --enable-fuzzing --disable-python --disable-werror \
		CFLAGS="${CFLAGS:--O1 -g}" >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
fi
bins=""
for t in $targets; do bins="$bins tests/fuzz/$t"; done
# shellcheck disable=SC2086
nice -n 19 make -j"$(nproc 2>/dev/null || echo 2)" $bins >build.log 2>&1 ||
	{ tail -30 build.log; exit 1; }
[ "$hours" = 0 ] && exit 0

# ---- one target for its share of the time
run_target() {
	t=$1
	d="$out/$t"
	mkdir -p "$d/corpus" "$d/crashes"
	: >"$d/log"
	left=$secs
	runs=0
	crashes=0
	before=$(ls "$d/crashes" | wc -l)
	start=$(date +%s)
	case $t in
	fuzz_ssd_area) maxlen=8192 ;;	# 24 blocks of 256 bytes and the flags
	*) maxlen=4096 ;;
	esac
	while [ "$left" -gt 0 ] && [ "$crashes" -lt 3 ]; do
		nice -n 19 "$build/tests/fuzz/$t" -max_total_time="$left" -timeout=10 \
			-rss_limit_mb=2048 -max_len="$maxlen" -print_final_stats=1 -artifact_prefix="$d/crashes/" \
			"$d/corpus" "$top/tests/fuzz/corpus/$t" >>"$d/log" 2>&1
		rc=$?
		n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log" | tail -1)
		runs=$((runs + ${n:-0}))
		[ $rc -eq 0 ] && break
		crashes=$((crashes + 1))
		left=$((secs - ($(date +%s) - start)))
	done
	cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$d/log" | tail -1)
	printf '%-20s %7ss %12s execs  %-22s corpus %5s  crashes %s new (%s kept)\n' "$t" \
		"$(($(date +%s) - start))" "$runs" "${cov:-cov: ? ft: ?}" \
		"$(ls "$d/corpus" | wc -l)" "$(($(ls "$d/crashes" | wc -l) - before))" \
		"$(ls "$d/crashes" | wc -l)"
}

echo "fuzzing $ntargets targets, ${secs}s each, $jobs at a time; corpora in $out"
for t in $targets; do
	while [ "$(jobs -pr | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	run_target "$t" &
done
wait
