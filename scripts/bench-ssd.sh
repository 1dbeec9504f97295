#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SSD tier benchmark (not a test).  Needs a build (default _build/check; BUILD=dir to change).
#
#  1. SSD read throughput: a client with a 16 MiB memory segment and an SSD area under
#     $SSD_DIR (default: a directory in the build tree, i.e. the same device as the tree) takes
#     N 1 MiB objects through --offload_on_evict, so nearly all are SSD-only.  The page cache of
#     the object files is dropped (posix_fadvise DONTNEED: no root needed), then another process
#     reads every object over the data port.  Same run, same device, same bytes: dd of one file
#     of N MiB, sequential, 1 MiB blocks, with O_DIRECT (iflag=direct), and buffered after the
#     same DONTNEED.  Reported as ratios.
#  2. Hit rate of /work/shared/traces/conversation_trace.jsonl (or $TRACE) replayed with
#     BLOCK-byte blocks (default 4096) and a memory pool of 1/8 of the working set, without and
#     with the SSD tier (--offload_on_evict; SSD area unlimited).
# Usage: scripts/bench-ssd.sh [read|trace|all]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/_build/check}
export MC_TOP_BUILDDIR=$BUILD MC_TOP_SRCDIR=$top
. "$top/tests/integration/lib.sh"
B=$BUILD/tests/bench_ssd
N=${N:-512}
TRACE=${TRACE:-/work/shared/traces/conversation_trace.jsonl}
BLOCK=${BLOCK:-4096}
SSD_DIR=${SSD_DIR:-$BUILD/bench-ssd.$$}
what=${1:-all}
export MC_STORE_SHM=0
trap 'mc_cleanup; rm -rf "$SSD_DIR"' EXIT

drop_cache() {	# drop the page cache of every file under $1
	python3 - "$1" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
}

mbps() {	# dd's summary line -> MiB/s
	awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") t = $(i - 1); b = $1 }
	     END { printf "%.1f", b / t / 1048576 }'
}

bench_read() {
	rm -rf "$SSD_DIR"; mkdir -p "$SSD_DIR/objects"
	mc_start_master --offload_on_evict --eviction_ratio=0.2 --default_kv_lease_ttl=200 \
		--enable_metric_reporting=false || exit 1
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	mc_start_client c1 16MB --enable_offload --ssd_offload_path="$SSD_DIR/objects" \
		--ssd_offload_size_limit=$(((N + 64) << 20)) || { mc_dump_logs; exit 1; }
	fill=$("$B" fill obj "$N" 1048576) || { echo "$fill"; mc_dump_logs; exit 1; }
	sleep 1
	files=$(ls "$SSD_DIR/objects" | grep -c '\.mco$')
	echo "# $files of $N objects on SSD"
	# Offload throughput: the fill is paced by offloads (memory is freed only once a copy is
	# durable on SSD).  Same-run references: dd writing the same bytes to one file on the same
	# device, synced once at the end, and synced after every 1 MiB block (oflag=dsync).
	ddw=$(dd if=/dev/zero of="$SSD_DIR/wref" bs=1M count="$N" conv=fdatasync 2>&1 | mbps)
	dds=$(dd if=/dev/zero of="$SSD_DIR/wref" bs=1M count="$N" oflag=dsync 2>&1 | mbps)
	rm -f "$SSD_DIR/wref"
	fmb=$(echo "$fill" | awk '/^fill:/ {printf "%.1f", $2 * $5 / 1048576 / $8}')
	echo "offload: put $N MiB through a 16 MiB pool at $fmb MiB/s; dd write (one fdatasync)" \
		"$ddw MiB/s, dd oflag=dsync $dds MiB/s; ratio $(echo "$fmb $ddw" |
		awk '{printf "%.2f", $1 / $2}'), $(echo "$fmb $dds" | awk '{printf "%.2f", $1 / $2}')   [$fill]"
	# Reference file: the same number of bytes on the same file system.
	dd if=/dev/urandom of="$SSD_DIR/ref" bs=1M count="$N" status=none
	for run in 1 2 3; do
		drop_cache "$SSD_DIR"
		direct=$(dd if="$SSD_DIR/ref" of=/dev/null bs=1M iflag=direct 2>&1 | mbps)
		drop_cache "$SSD_DIR"
		buffered=$(dd if="$SSD_DIR/ref" of=/dev/null bs=1M 2>&1 | mbps)
		drop_cache "$SSD_DIR"
		line=$("$B" read obj "$N" 1048576 8)
		mc=$(echo "$line" | sed 's/.* \([0-9.]*\) MiB\/s.*/\1/')
		echo "run $run: mooncake SSD reads $mc MiB/s (cold, batch 8); dd O_DIRECT $direct MiB/s," \
			"dd buffered cold $buffered MiB/s; ratio vs O_DIRECT $(echo "$mc $direct" |
			awk '{printf "%.2f", $1 / $2}'), vs buffered $(echo "$mc $buffered" |
			awk '{printf "%.2f", $1 / $2}')   [$line]"
	done
	# Warm: the same read with the object files in the page cache.
	line=$("$B" read obj "$N" 1048576 8)
	echo "warm (page cache): $line"
	curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | grep -E '^(file|mem)_cache_hit_nums_ '
	kill "$MC_LAST_PID" "$MC_MASTER_PID" 2>/dev/null
	sleep 0.5
}

bench_trace() {
	local distinct pool
	distinct=$(python3 -c "
import json, sys
s = set()
for l in open('$TRACE'):
    s.update(json.loads(l)['hash_ids'])
print(len(s))")
	pool=$((distinct * BLOCK / 8))
	echo "# trace: $distinct distinct blocks of $BLOCK bytes; memory pool $pool bytes (1/8)"
	for mode in memory ssd; do
		rm -rf "$SSD_DIR"; mkdir -p "$SSD_DIR/objects"
		if [ $mode = memory ]; then
			mc_start_master --enable_metric_reporting=false || exit 1
			export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
			mc_start_client t1 "$pool" || exit 1
		else
			mc_start_master --offload_on_evict --enable_metric_reporting=false || exit 1
			export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
			mc_start_client t1 "$pool" --enable_offload --ssd_offload_path="$SSD_DIR/objects" \
				--ssd_offload_size_limit=$((distinct * (BLOCK + 8192))) || exit 1
		fi
		echo "$mode: $("$B" trace "$TRACE" "$BLOCK" 2>/dev/null)"
		curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" |
			grep -E '^(file|mem)_cache_hit_nums_ |^master_offloaded_key_count '
		kill "$MC_LAST_PID" "$MC_MASTER_PID" 2>/dev/null
		sleep 0.5
	done
}

case $what in
read) bench_read ;;
trace) bench_trace ;;
*) bench_read; bench_trace ;;
esac
