#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Store throughput on loopback next to iperf3 measured in the same run: starts a master and two
# mooncake_client processes from BUILD (default _build/demo), runs mooncake_bench for 1 MiB and
# 4 KiB values (single and batched), three times each, and prints every run; then iperf3's
# single-stream loopback bandwidth three times.
set -eu
B=${1:-$(cd "$(dirname "$0")/.." && pwd)/_build/demo}
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
P=$((20000 + RANDOM % 20000))
"$B/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=$P --metrics_port=0 --log_level=warn >"$tmp/m.log" 2>&1 &
pids="$pids $!"
sleep 0.5
for i in 1 2; do
	"$B/mooncake_client" --host=127.0.0.1 --port=$((P + i)) --master_server_address=127.0.0.1:$P \
		--global_segment_size=2GB --log_level=warn >"$tmp/c$i.log" 2>&1 &
	pids="$pids $!"
done
sleep 2
run() { "$B/mooncake_bench" --master_server_address=127.0.0.1:$P --duration=3 "$@"; }
for r in 1 2 3; do
	run --value_size=1MB --threads=4 --total_bytes=3GB
	run --value_size=4KB --threads=4 --total_bytes=1GB
	run --value_size=4KB --batch_size=64 --threads=2 --total_bytes=1GB
done
iperf3 -s -D -p $((P + 10)) >/dev/null 2>&1
sleep 0.5
for r in 1 2 3; do
	iperf3 -c 127.0.0.1 -p $((P + 10)) -t 3 | awk '/sender/ {print "iperf3 single stream:", $7, $8}'
done
pkill -f "iperf3 -s -D -p $((P + 10))" || true
