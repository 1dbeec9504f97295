#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Transfer engine figures against same-run references: tcp vs iperf3 single stream on loopback,
# shm vs a single-thread memcpy of the same block size (transfer_engine_bench --reference=memcpy).
# Two processes on 127.0.0.1; medians of RUNS short runs.  Every tcp run is paired with an
# iperf3 run just before it and every shm run with its own memcpy loop, so a busy machine skews
# both sides of a ratio alike.  One initiator thread (TCP_THREADS for tcp): on a small shared
# machine a second polling thread mostly competes for the cores.
# Usage: [PROTOS="tcp shm"] [RUNS=3] [DUR=1.5] scripts/bench-engine.sh [BUILD]
B=${1:-_build/opt}
TEB="$B/transfer_engine_bench"
RUNS=${RUNS:-3}
DUR=${DUR:-1.5}
[ -x "$TEB" ] || { echo "no $TEB (build first)"; exit 1; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
tmp=$(mktemp -d)
trap 'kill $tpid $ipid 2>/dev/null; rm -rf "$tmp"' EXIT
MC_LOG_LEVEL=warning "$TEB" --mode=target --buffer_size=256MB >"$tmp/target.log" 2>&1 &
tpid=$!
for i in $(seq 50); do grep -q "target ready" "$tmp/target.log" && break; sleep 0.1; done
seg=$(sed -n 's/.*segment \([^,]*\),.*/\1/p' "$tmp/target.log")
base=$(sed -n 's/.*buffer 0x\([0-9a-f]*\).*/\1/p' "$tmp/target.log")
iperf() {
	iperf3 -c 127.0.0.1 -p 5399 -t "${1:-2}" -J 2>/dev/null |
		python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e9))'
}
if command -v iperf3 >/dev/null; then
	iperf3 -s -D -p 5399 -B 127.0.0.1 --pidfile "$tmp/iperf.pid" >/dev/null 2>&1
	sleep 0.5
	ipid=$(cat "$tmp/iperf.pid" 2>/dev/null)
	echo "iperf3 single stream (-t 5): $(iperf 5) GB/s"
fi
for proto in ${PROTOS:-tcp shm}; do
	for bs in 64KB 1MB 16MB; do
		for op in write read; do
			th=${TCP_THREADS:-1}; [ $proto = shm ] && th=1
			: >"$tmp/r"; : >"$tmp/m"; : >"$tmp/i"
			for r in $(seq "$RUNS"); do
				[ $proto = tcp ] && [ -n "$ipid" ] && iperf 2 >>"$tmp/i"
				out=$(TEB_REMOTE_BASE=$((16#$base)) "$TEB" --mode=initiator --protocol=$proto \
					--operation=$op --segment_id="$seg" --buffer_size=256MB --block_size=$bs \
					--batch_size=16 --threads=$th --duration="$DUR" --reference=memcpy 2>&1)
				echo "$out" | grep -q "through $proto" || echo "# WARNING: not through $proto"
				echo "$out" | sed -n 's/^Throughput: \([0-9.]*\) GB\/s$/\1/p' >>"$tmp/r"
				echo "$out" | sed -n 's/^memcpy reference[^:]*: \([0-9.]*\) GB.*/\1/p' >>"$tmp/m"
			done
			g=$(median <"$tmp/r"); m=$(median <"$tmp/m")
			if [ $proto = tcp ] && [ -n "$ipid" ]; then
				refs="$tmp/i"; rname=iperf3
			else
				refs="$tmp/m"; rname=memcpy
			fi
			ratio=$(paste "$tmp/r" "$refs" | awk '{printf "%.2f\n", $1/$2}' | median)
			ref="$rname $(tr '\n' ' ' <"$refs")GB/s; median of paired ratios $ratio"
			echo "$proto $op $bs threads=$th batch=16: median $g GB/s ($(tr '\n' ' ' <"$tmp/r")); $ref"
		done
	done
done
