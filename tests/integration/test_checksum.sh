#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Object checksums end to end (MOONCAKE_STORE_CHECKSUM=1): writers send each object's CRC-64
# with PutEnd, readers verify every whole-object read.
#  1. a replica whose bytes rot in its owner's memory is caught: the read falls back to the
#     other replica (right bytes), the master is told and drops the bad one;
#  2. when the last replica is corrupt too the get answers -801 and the object is gone;
#  3. bytes corrupted in flight (MC_TEST_FAULT=read_flip) are caught the same way;
#  4. objects written without a checksum (an older writer, or the switch off) still read;
#  5. an SSD owner does not offload an object whose bytes fail its checksum, nor promote one
#     whose SSD copy fails it, and counts both on its /metrics;
#  6. ranged reads (get_into_ranges) are verified too: the whole object is read and checked, so
#     a replica rotted outside the asked ranges is caught as well as one rotted inside them.
# Corrupting another process's memory needs root (/proc/PID/map_files).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || { echo "# skip: corrupting a client's memory needs root"; exit 77; }
T=$MC_BIN/tests/integration/fault_tool
CORRUPT="python3 $MC_TOP_SRCDIR/tests/integration/corrupt_replica.py"
rc=0
metric() { curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
check() { if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1: got '$2', expected '$3'"; rc=1; fi; }

mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
p1=$MC_LAST_PID
mc_start_client c2 64MB || { mc_dump_logs; exit 1; }
p2=$MC_LAST_PID
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MOONCAKE_STORE_CHECKSUM=1
"$T" fill ck 4 1048576 2 || rc=1
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/query_key?key=ck/0" | grep -o object_checksum | head -1)
check "the master keeps the writer's checksum (/query_key object_checksum)" "$n" object_checksum

# 1. One replica rots: the reader gets the other one and the master drops the bad one.
$CORRUPT "$MC_METRICS_PORT" ck/0 0 "$p1" "$p2" || rc=1
"$T" verify ck 4 1048576 || rc=1
check "one mismatch reported" "$(metric master_checksum_mismatch_total)" 1
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/query_key?key=ck/0" | grep -o buffer_address_ | wc -l)
check "ck/0 keeps one replica" "$n" 1

# 2. The last replica rots too: -801, and the object is removed.
$CORRUPT "$MC_METRICS_PORT" ck/0 0 "$p1" "$p2" || rc=1
out=$("$T" verify ck 4 1048576 2>&1)
echo "$out" | grep -q "get ck/0: -801" && echo "ok - the get answers -801 when no replica verifies" \
	|| { echo "not ok - no -801: $out"; rc=1; }
check "two mismatches reported" "$(metric master_checksum_mismatch_total)" 2
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MC_METRICS_PORT/query_key?key=ck/0")
check "an object with no good replica left is removed" "$code" 404

# 3. In flight: the first read of the run is corrupted on arrival; its key reads right anyway
# (ck/0 is gone: one key may be absent).
MC_TEST_FAULT=read_flip:flip:1 "$T" verify ck 4 1048576 1 || rc=1
check "the in-flight corruption was reported" "$(metric master_checksum_mismatch_total)" 3

# 4. Objects written without checksums read as before, with the switch on or off.
MOONCAKE_STORE_CHECKSUM=0 "$T" fill nock 4 65536 1 || rc=1
"$T" verify nock 4 65536 || rc=1
MOONCAKE_STORE_CHECKSUM=0 "$T" verify ck 4 1048576 1 || rc=1
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/query_key?key=nock/0" | grep -c object_checksum)
check "MOONCAKE_STORE_CHECKSUM=0 writes objects without a checksum" "$n" 0
# 4b. Checksums are on by default: a writer without the variable sends them too.
env -u MOONCAKE_STORE_CHECKSUM "$T" fill dflt 2 65536 1 || rc=1
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/query_key?key=dflt/0" | grep -o object_checksum | head -1)
check "checksums are on by default (/query_key object_checksum)" "$n" object_checksum
# 6. Ranged reads of a checksummed object: a replica rotted at byte 0 is caught although the
# reader asked for ranges only, and the ranges come from the good replica; once no replica
# verifies, every range answers -801.
RG="$MC_TOP_SRCDIR/tests/integration/ranged_get.py $MC_MASTER"
mc_python $RG put rg/0 1048576 2 || rc=1
$CORRUPT "$MC_METRICS_PORT" rg/0 0 "$p1" "$p2" || rc=1
before=$(metric master_checksum_mismatch_total)
mc_python $RG ranges rg/0 1048576 ok || rc=1
check "the ranged read reported the rotten replica" "$(metric master_checksum_mismatch_total)" \
	$((before + 1))
$CORRUPT "$MC_METRICS_PORT" rg/0 0 "$p1" "$p2" || rc=1
mc_python $RG ranges rg/0 1048576 -801 || rc=1

# 5. An SSD owner checks an object's bytes against its checksum before it offloads them: bytes
# that rotted in memory (MC_TEST_FAULT=offload_flip, first offload) do not become an SSD copy.
kill "$p1" "$p2"; wait "$p1" "$p2" 2>/dev/null
kill "$MC_MASTER_PID"; wait "$MC_MASTER_PID" 2>/dev/null
mc_start_master --offload_on_evict --promotion_on_hit --eviction_ratio=0.2 \
	|| { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
mkdir -p "$MC_TMP/ssd"
HP=$(mc_free_port)
MC_TEST_FAULT=offload_flip:flip:1,promote_flip:flip:1 mc_start_client s1 16MB --enable_offload \
	--ssd_offload_path="$MC_TMP/ssd" --ssd_offload_size_limit=256MB \
	--enable_http_server=true --http_port="$HP" || { mc_dump_logs; exit 1; }
"$T" fill off 32 1048576 1 || rc=1
mc_wait_log s1 "not offloaded" 20 && echo "ok - the rotten object was not offloaded" \
	|| { echo "not ok - no offload was refused"; rc=1; }
n=$(grep -c "not offloaded" "$MC_TMP/s1.log")
check "exactly one offload refused" "$n" 1
# The refused one stays in memory or is gone; none reads back wrong.
"$T" verify off 32 1048576 1 || rc=1
# Reads of SSD-only objects promote them: the first promotion's check against the object's
# checksum fails (MC_TEST_FAULT=promote_flip), so that copy is dropped, not made a replica.
"$T" verify off 32 1048576 2 >/dev/null
mc_wait_log s1 "not promoted" 20 && echo "ok - a promotion whose bytes fail the checksum was refused" \
	|| { echo "not ok - no promotion was refused"; rc=1; }
"$T" verify off 32 1048576 2 || rc=1
# The client counts what it refused on its own /metrics, beside its memory.
cm=$(curl -sf "http://127.0.0.1:$HP/metrics")
check "the client's /metrics counts both refusals" \
	"$(echo "$cm" | awk '$1 == "mooncake_checksum_mismatch_total" {print $2}')" 2
echo "$cm" | grep -q "^mooncake_process_rss_bytes [1-9]" \
	&& echo "ok - the client's /metrics shows its memory (mooncake_process_rss_bytes)" \
	|| { echo "not ok - no mooncake_process_rss_bytes on the client's /metrics"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
