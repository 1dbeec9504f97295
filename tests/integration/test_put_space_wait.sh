#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A burst of puts larger than free memory waits for the space that demotion to SSD frees
# (MOONCAKE_PUT_SPACE_WAIT_MS), instead of failing with -200 (NO_AVAILABLE_HANDLE):
#  1. 192 puts of 1 MiB into a 64 MiB pool with --offload_on_evict, each put tried once: none
#     is refused, and all 192 read back byte for byte;
#  2. the same burst with the wait turned off (MOONCAKE_PUT_SPACE_WAIT_MS=0) is refused some
#     puts: the wait is what absorbs the burst;
#  3. a pool pinned full (hard-pinned objects, nothing can be freed): the master says no room
#     is coming, and a put fails with -200 at once although the bound is 1 s.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
SZ=1048576
rc=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; rc=1; fi; }

mc_start_master --offload_on_evict || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
mc_start_client c1 64MB --enable_offload --ssd_offload_path="$MC_TMP/ssd" \
	--ssd_offload_size_limit=1GB || { mc_dump_logs; exit 1; }
t0=$(date +%s.%N)
out=$("$T" burst "$MC_TMP/acked1" b1 192 $SZ)
t1=$(date +%s.%N)
echo "# $out ($(echo "$t1 - $t0" | bc) s for 192 MiB)"
read -r acked refused <<<"$(echo "$out" | awk '{print $2, $4}')"
check "192 puts of 1 MiB into a 64 MiB pool, each tried once: $acked acknowledged, $refused refused" \
	'[ "$acked" = 192 ] && [ "$refused" = 0 ]'
check "all 192 read back byte for byte (from memory or SSD)" \
	'"$T" verify-acked "$MC_TMP/acked1" $SZ >/dev/null'

# 2. the same burst with no wait (a fresh prefix: the earlier objects are on SSD by now, so
# memory holds only the newest; demotion must free it again).
out=$(MOONCAKE_PUT_SPACE_WAIT_MS=0 "$T" burst "$MC_TMP/acked2" b2 192 $SZ)
echo "# without the wait: $out"
read -r acked2 refused2 <<<"$(echo "$out" | awk '{print $2, $4}')"
check "without the wait the same burst is refused $refused2 puts (-200)" '[ "${refused2:-0}" -gt 0 ]'
check "what was acknowledged without the wait reads back" \
	'"$T" verify-acked "$MC_TMP/acked2" $SZ >/dev/null'

# 3. a pool where nothing can be freed: hard-pinned objects fill it, no SSD.
kill -TERM "$MC_LAST_PID" 2>/dev/null
mc_start_master || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
mc_start_client c2 16MB || { mc_dump_logs; exit 1; }
out=$(MOONCAKE_PUT_SPACE_WAIT_MS=0 "$T" burst "$MC_TMP/pinned" pin 20 $SZ hard)
echo "# pinning: $out"
read -r pin_acked <<<"$(echo "$out" | awk '{print $2}')"
check "hard-pinned objects fill the 16 MiB pool ($pin_acked of 20 fit)" \
	'[ "${pin_acked:-0}" -ge 12 ] && [ "${pin_acked:-0}" -lt 20 ]'
read -r _ prc pms <<<"$(MOONCAKE_PUT_SPACE_WAIT_MS=1000 "$T" timed-put late $SZ)"
check "a put into the pinned-full pool fails with -200 at once, not after the 1 s bound (${pms} ms)" \
	'[ "$prc" = -200 ] && [ "$pms" -lt 500 ]'
read -r _ prc0 pms0 <<<"$(MOONCAKE_PUT_SPACE_WAIT_MS=0 "$T" timed-put late $SZ)"
check "with the wait off it fails at once (${pms0} ms)" '[ "$prc0" = -200 ] && [ "$pms0" -lt 500 ]'
check "the pinned objects are all still there" \
	'"$T" verify-acked "$MC_TMP/pinned" $SZ >/dev/null'
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
