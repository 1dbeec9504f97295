#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: puts asking for more replicas than there are live segments evicted acknowledged
# objects.  With one client (256 MB) and 100 distinct 1 MiB puts of replica_num=2, every put
# returned 0 but only the newest object survived: each under-replicated put evicted the one
# before it at 40% memory use.  Such a put must get the replicas there is room for and evict
# nothing below the high watermark.  Then the same with two clients of unequal size, where the
# small one fills first: the second replica goes where there is room, or not at all.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
rc=0

metric() {
	curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'
}

mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client c1 256MB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$T" fill two 100 1048576 2 || rc=1
"$T" verify two 100 1048576 || rc=1
n=$(metric master_evicted_key_count)
mc_is "$n" 0 "nothing evicted at 40% use" || rc=1
n=$(metric master_put_start_partial_allocations_total)
mc_is "$n" 100 "100 puts placed with one replica of two" || rc=1
n=$(metric master_key_count)
mc_is "$n" 100 "the master holds 100 keys" || rc=1

# A second, smaller client: once it is full, second replicas stop landing there; nothing goes.
mc_start_client c2 48MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c2 || { mc_dump_logs; exit 1; }
"$T" fill more 100 1048576 2 || rc=1
"$T" verify two 100 1048576 || rc=1
"$T" verify more 100 1048576 || rc=1
n=$(metric master_evicted_key_count)
mc_is "$n" 0 "nothing evicted with a full small segment" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
