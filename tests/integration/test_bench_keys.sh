#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mooncake_bench --key_order: random keys are distinct, scattered hexadecimal under the thread's
# prefix, and read back with the right bytes (--verify); sequential keys stay decimal.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
CTL="$MC_BIN/mooncake_ctl"
[ -x "$CTL" ] || { echo "# SKIP: mooncake_ctl not built"; exit 77; }
mc_start_master --enable_metric_reporting || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
bench() {	# bench ORDER: 1024 puts of 64 bytes, then verified gets; JSON lines on stdout
	timeout 60 "$MC_BIN/mooncake_bench" --master_server_address=127.0.0.1:"$MC_MASTER_PORT" \
		--key_order="$1" --value_size=64 --key_size=48 --batch_size=16 --threads=2 \
		--total_bytes=64KB --duration=1 --verify --json --keep 2>>"$MC_TMP/bench.err"
}
# Both phases ran with no error: puts of every key, gets of some with their bytes checked.
clean() {	# clean FILE
	python3 -c '
import json, sys
ph = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    ph[d["phase"]] = d
assert ph["put"]["ops"] == 1024 and ph["put"]["errors"] == 0, ph
assert ph["get"]["ops"] > 0 and ph["get"]["errors"] == 0, ph' "$1"
}
bench random >"$MC_TMP/random.json"
t "random keys: every put and verified get succeeds" 'clean "$MC_TMP/random.json"'
"$CTL" --master=127.0.0.1:"$MC_METRICS_PORT" keys >"$MC_TMP/keys.txt"
t "random keys are 48 bytes: prefix, 16 hex digits, padding" \
	'[ "$(grep -cE "^bench/[0-9]+/[01]/[0-9a-f]{16}k+$" "$MC_TMP/keys.txt")" = 1024 ] &&
	 [ "$(awk "length(\$0) != 48" "$MC_TMP/keys.txt" | wc -l)" = 0 ]'
t "random keys are scattered: consecutive puts are not neighbours" \
	'[ "$(sort "$MC_TMP/keys.txt" | uniq | wc -l)" = 1024 ] &&
	 ! grep -qE "^bench/[0-9]+/0/0000000000000[0-9a-f]{3}k" "$MC_TMP/keys.txt"'
"$CTL" --master=127.0.0.1:"$MC_METRICS_PORT" remove-all --force >/dev/null
bench sequential >"$MC_TMP/seq.json"
t "sequential keys: every put and verified get succeeds" 'clean "$MC_TMP/seq.json"'
t "sequential keys are decimal" \
	'[ "$("$CTL" --master=127.0.0.1:"$MC_METRICS_PORT" keys | grep -cE "^bench/[0-9]+/[01]/[0-9]{1,3}k+$")" = 1024 ]'
echo "1..$n"
[ $fail -eq 0 ] || mc_dump_logs
exit $fail
