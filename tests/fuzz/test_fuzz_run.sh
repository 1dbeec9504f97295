#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A short libFuzzer run of every fuzz target (MC_FUZZ_SECONDS each, default 3) from a copy of
# its seed corpus, in a build configured with --enable-fuzzing (clang).  Elsewhere it skips
# (77), saying what it needs: clang's libFuzzer runtime, or a fuzzing build (scripts/check.sh
# makes one in _build/fuzz when clang has the runtime; scripts/fuzz.sh runs them for hours).
set -u
top=${MC_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MC_TOP_BUILDDIR:-$top}
secs=${MC_FUZZ_SECONDS:-3}
targets="fuzz_master fuzz_wire fuzz_tcp_server fuzz_handshake fuzz_admin_http fuzz_metadata_http
fuzz_ssd_area fuzz_options fuzz_store_config"
probe="$build/tests/fuzz/fuzz_wire"
if ! "$probe" -help=1 2>&1 | grep -q max_total_time; then
	rt=$(clang -print-resource-dir 2>/dev/null)
	if [ -z "$rt" ] || ! ls "$rt"/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
		echo "SKIP: clang's libFuzzer runtime is missing (Debian: clang libclang-rt-14-dev)"
	else
		echo "SKIP: not a fuzzing build (configure CC=clang --enable-fuzzing; scripts/check.sh does it in _build/fuzz)"
	fi
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mc-fuzz-run.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
for t in $targets; do
	mkdir -p "$work/$t/corpus" "$work/$t/crash"
	cp "$top/tests/fuzz/corpus/$t/"* "$work/$t/corpus/"
	if "$build/tests/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/$t/crash/" "$work/$t/corpus" \
		>"$work/$t/log" 2>&1; then
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log")
		cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/$t/log" | tail -1)
		echo "ok $t: ${execs:-?} runs in ${secs}s, $cov"
	else
		echo "FAIL $t:"
		tail -60 "$work/$t/log"
		mkdir -p "$build/tests/fuzz/crashes/$t"
		for f in "$work/$t/crash/"*; do
			[ -f "$f" ] || continue
			cp "$f" "$build/tests/fuzz/crashes/$t/"
			echo "input (kept in $build/tests/fuzz/crashes/$t/):"
			od -A d -c "$f" | head -40
		done
		fail=1
	fi
done
exit $fail
