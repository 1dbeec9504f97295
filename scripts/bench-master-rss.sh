#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The master's memory per object and put rate per tenth through the RPC path (not a test):
# starts the mooncake_master of each BUILD_DIR given (no persistence), inserts NKEYS (default
# 10M) keys of KEY_LEN (default 40) bytes, each a put of 64 bytes, with tests/bench_master of
# this tree's _build/opt (batched PutStart/PutEnd, one fake segment; the bench sends no pings,
# so the client TTL is long), then its ExistKey and GetReplicaList workloads.  Give an older
# build as well (e.g. a build of main) for a same-run reference; the runs go one after the other.
#   scripts/bench-master-rss.sh BUILD_DIR [BUILD_DIR...]     (NKEYS=, KEY_LEN= in the environment)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
export MC_TOP_SRCDIR=$top MC_TOP_BUILDDIR=$top/_build/opt
. "$top/tests/integration/lib.sh"
[ -x "$MC_TOP_BUILDDIR/tests/bench_master" ] || make -C "$MC_TOP_BUILDDIR" -s tests/bench_master
for b in "$@"; do
	b=$(cd "$b" && pwd)
	port=$(mc_free_port); metrics=$(mc_free_port)
	"$b/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$port" --metrics_port="$metrics" \
		--enable_metric_reporting=false --client_active_ttl_sec=86400 >"$MC_TMP/master.log" 2>&1 &
	pid=$!
	mc_wait_port "$port" >/dev/null || { cat "$MC_TMP/master.log"; exit 1; }
	echo "=== $b/mooncake_master"
	MC_BENCH_KEY_LEN=${KEY_LEN:-40} MC_BENCH_OBJ_SIZE=64 "$MC_TOP_BUILDDIR/tests/bench_master" "127.0.0.1:$port" \
		"$pid" "${NKEYS:-10000000}"
	echo "master CPU (utime+stime): $(awk '{ printf "%.2f s", ($14 + $15) / 100 }' "/proc/$pid/stat")"
	echo "objects in the table: $(curl -s "http://127.0.0.1:$metrics/metrics" |
		awk '/^master_key_count/ { print $2 }')"
	kill "$pid"; wait "$pid" 2>/dev/null
done
