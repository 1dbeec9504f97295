#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Replay every input of every fuzz target's corpus (tests/fuzz/corpus/<target>/: the seeds and
# the regression inputs of the crashes fixed) through its target, once each.  In a plain or
# sanitizer build the targets are linked with fuzz_replay.c; in a fuzzing build they are
# libFuzzer binaries, told -runs=0 (run the corpus, fuzz nothing).  Any crash, leak or sanitizer
# report fails the test.
set -u
top=${MC_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MC_TOP_BUILDDIR:-$top}
targets="fuzz_master fuzz_wire fuzz_tcp_server fuzz_handshake fuzz_admin_http fuzz_metadata_http
fuzz_ssd_area fuzz_options fuzz_store_config"
log=$(mktemp "${TMPDIR:-/tmp}/mc-fuzz-replay.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
fail=0
for t in $targets; do
	bin="$build/tests/fuzz/$t"
	corpus="$top/tests/fuzz/corpus/$t"
	if [ ! -x "$bin" ]; then
		echo "FAIL $t: $bin not built"
		fail=1
		continue
	fi
	n=$(ls "$corpus" | wc -l)
	if "$bin" -runs=0 "$corpus" >"$log" 2>&1; then
		echo "ok $t: $n inputs"
	else
		echo "FAIL $t: see below"
		tail -40 "$log"
		fail=1
	fi
done
exit $fail
