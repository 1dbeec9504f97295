#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Reads fall back to SSD copies when the only memory replicas are on a Suspected client: a
# client whose objects are all copied to its SSD area (--enable_offload) is killed with -9 and
# restarted at once on the same area, which registers the SSD copies again.  Once the old
# process is Suspected (long before it is Offline), readers are given the SSD copies after its
# memory replicas, and every object reads back byte-identical.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
N=20
SZ=65536
mc_start_master --enable_offload --client_active_ttl_sec=2 --client_suspicion_ttl_sec=60 \
	--default_kv_lease_ttl=500 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
SSD=$MC_TMP/ssd
mkdir -p "$SSD"
metric() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
rc=0
mc_start_client c1 64MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=64MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
"$T" fill f $N $SZ || rc=1
mc_wait_metric master_offloaded_key_count $N 10
mc_is "$(metric master_offloaded_key_count)" $N "all $N objects have an SSD copy" || rc=1

kill -9 "$c1"; wait "$c1" 2>/dev/null
mc_start_client c1b 64MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=64MB || { mc_dump_logs; exit 1; }
mc_wait_log c1b "registered" 10 || rc=1
# Suspected after client_active_ttl_sec (2 s) of silence.
mc_wait_metric_ge master_client_liveness_suspected_clients 1 10
n=$(metric master_client_liveness_suspected_clients)
[ "${n:-0}" -ge 1 ] && echo "ok - the killed process is Suspected" || { echo "not ok - none Suspected"; rc=1; }
"$T" verify f $N $SZ || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
