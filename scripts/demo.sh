#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build mooncake, start a local demo cluster on 127.0.0.1 (a master and two mooncake_client
# processes contributing 512 MiB each), do a put/get round trip and print its throughput with
# mooncake_bench, then stop everything.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p _build/demo
cd _build/demo
[ -f Makefile ] || "$top/configure" -q CFLAGS="-O2 -g"
make -j"$(nproc)" >build.log 2>&1 || { tail -40 build.log; exit 1; }
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; sleep 0.3; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
wait_port() { i=0; while ! (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "port $1 did not open" >&2; exit 1; }; sleep 0.1; done; }
./mooncake_master --rpc_address=127.0.0.1 --rpc_port=50051 --metrics_port=9003 >"$tmp/master.log" 2>&1 &
pids="$pids $!"
wait_port 50051
for i in 1 2; do
	./mooncake_client --host=127.0.0.1 --port=$((50051 + i)) --master_server_address=127.0.0.1:50051 \
		--metadata_server=P2PHANDSHAKE --global_segment_size=512MB >"$tmp/client$i.log" 2>&1 &
	pids="$pids $!"
done
sleep 2
echo "== demo cluster: master 127.0.0.1:50051, two clients with 512 MiB each"
./mooncake_bench --master_server_address=127.0.0.1:50051 --value_size=1MB --threads=2 \
	--duration=3 --total_bytes=768MB --verify
./mooncake_bench --master_server_address=127.0.0.1:50051 --value_size=4KB --batch_size=32 \
	--threads=2 --duration=3 --total_bytes=256MB --verify
echo "== done"
