#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The SSD area on a real 8 MiB tmpfs that fills (the area's limit, 64 MiB, is larger, so the
# writes themselves fail with ENOSPC): a client with 16 MiB of memory and --offload_on_evict
# takes a burst of 40 puts of 1 MiB.  No acknowledged object is lost: every one reads back while
# the client lives, the failures are counted, and after kill -9 every object on the tmpfs
# registers again and reads back.  Needs root (mount); skipped (77) otherwise.
if [ "$(id -u)" -ne 0 ]; then
	echo "# skipped: mounting a tmpfs needs root"
	exit 77
fi
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
SZ=1048576
rc=0
export MC_STORE_SHM=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; rc=1; fi; }
metric() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
TM=$MC_TMP/tmpfs
mkdir -p "$TM"
if ! mount -t tmpfs -o size=8m tmpfs "$TM" 2>/dev/null; then
	echo "# skipped: mount -t tmpfs failed (no CAP_SYS_ADMIN?)"
	exit 77
fi
trap 'for p in $MC_PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; umount "$TM"; mc_cleanup' EXIT
mc_start_master --offload_on_evict --client_ttl=2 --client_suspicion_ttl_sec=0 --dormant_segment_ttl_sec=0 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
mc_start_client t1 16MB --enable_offload --ssd_offload_path="$TM/area" \
	--ssd_offload_size_limit=64MB || { mc_dump_logs; exit 1; }
c=$MC_LAST_PID
out=$(MOONCAKE_PUT_SPACE_WAIT_MS=2000 "$T" burst "$MC_TMP/acked_t" t 40 $SZ)
failed=$(metric master_offload_failed_total)
echo "# 40 MiB into 16 MiB of memory over an 8 MiB tmpfs: $out; offloads failed: $failed"
check "the tmpfs filled (ENOSPC counted: $failed failed offloads)" \
	'[ "${failed:-0}" -ge 1 ] && grep -q "No space left" "$MC_TMP/t1.log"'
out=$("$T" probe "$MC_TMP/acked_t" $SZ)
check "no acknowledged object lost on a full tmpfs ($out)" \
	'echo "$out" | grep -q " 0 absent 0 errors 0 wrong"'
kill -9 "$c"; wait "$c" 2>/dev/null
files=$(ls "$TM/area" | grep -c '\.mco$')
mc_start_client t2 16MB --enable_offload --ssd_offload_path="$TM/area" \
	--ssd_offload_size_limit=64MB || { mc_dump_logs; exit 1; }
mc_wait_log t2 "registered" 10
back=$(grep -o '[0-9]* objects registered' "$MC_TMP/t2.log" | head -1 | awk '{print $1}')
mc_wait_unmounted t1 2 || rc=1	# after client_ttl: the dead process's memory copies go
out=$("$T" probe "$MC_TMP/acked_t" $SZ)
check "after kill -9 the $files objects on the full tmpfs register ($back) and read back ($out)" \
	'[ "${back:-0}" -eq "$files" ] && echo "$out" | grep -q "^probe: $files identical .* 0 errors 0 wrong"'
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
