#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The happy-path cost of the master's persistence, two builds side by side in one run:
#   scripts/bench-persist.sh BUILD_A BUILD_B [ROUNDS]
# Each round starts, for A then B, a master with --persist_path (in a temporary directory on
# the same disk), one mooncake_client with a 2 GB segment, warms the segment with 1 MiB puts,
# then runs mooncake_bench puts of 4 KiB and of 1 MiB values for 4 s each.  Rounds alternate the
# builds so the machine's noise falls on both; prints every run, then the medians of 4 KiB put
# latency (p50, p99) and of 1 MiB put throughput.
set -eu
A=$1 B=$2 ROUNDS=${3:-6}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

run_build() {	# run_build BUILD LABEL
	local b=$1 label=$2 dir p m c mp cp i vs
	dir=$(mktemp -d)
	p=$((30000 + RANDOM % 5000)) m=$((35000 + RANDOM % 5000)) c=$((40000 + RANDOM % 5000))
	"$b/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=$p --metrics_port=$m \
		--persist_path="$dir/master.db" --enable_metric_reporting=false >"$dir/m.log" 2>&1 &
	mp=$!
	sleep 0.5
	"$b/mooncake_client" --host=127.0.0.1 --port=$c --master_server_address=127.0.0.1:$p \
		--metadata_server=P2PHANDSHAKE --global_segment_size=2GB >"$dir/c.log" 2>&1 &
	cp=$!
	for i in $(seq 50); do grep -q "serving segment" "$dir/c.log" && break; sleep 0.1; done
	"$b/mooncake_bench" --master_server_address=127.0.0.1:$p --operation=put \
		--value_size=1MB --duration=2 --total_bytes=1500MB >/dev/null 2>&1 || true
	for vs in 4KB 1MB; do
		"$b/mooncake_bench" --master_server_address=127.0.0.1:$p --operation=put \
			--value_size=$vs --duration=4 --total_bytes=1500MB --json 2>/dev/null |
			sed "s/^/$label /" | tee -a "$out"
	done
	kill $cp $mp 2>/dev/null || true
	wait $cp $mp 2>/dev/null || true
	rm -rf "$dir"
}

for r in $(seq "$ROUNDS"); do
	run_build "$A" A
	run_build "$B" B
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [(l.split(" ", 1)[0], json.loads(l.split(" ", 1)[1])) for l in open(sys.argv[1])]
for label in ("A", "B"):
    small = [r for b, r in rows if b == label and r["value_size"] == 4096]
    big = [r for b, r in rows if b == label and r["value_size"] == 1048576]
    if not small or not big:
        continue
    print("%s: 4 KiB put p50 %.0f us, p99 %.0f us; 1 MiB put %.0f MiB/s (medians of %d runs)" % (
        label, statistics.median(r["p50_us"] for r in small),
        statistics.median(r["p99_us"] for r in small),
        statistics.median(r["MiBps"] for r in big), len(big)))
PY
