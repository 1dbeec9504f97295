#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A client stopped (SIGSTOP) longer than --client_active_ttl_sec but shorter than active +
# suspicion is Suspected: the master reports it, places no new replica on it (puts all land on
# the other client), lists its replicas last, and once it is continued it recovers and every
# object, on it or elsewhere, reads back byte-identical.  Nothing is dropped.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
SZ=65536

mc_start_master --client_active_ttl_sec=2 --client_suspicion_ttl_sec=20 \
	|| { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_start_client c2 64MB || { mc_dump_logs; exit 1; }
s2=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/c2.log" | awk '{print $3}')
pid2=$MC_LAST_PID
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
H="http://127.0.0.1:$MC_METRICS_PORT"
metric() { curl -sf "$H/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
seg_used() { curl -sf "$H/metrics" | awk -v s="segment_allocated_bytes{segment=\"$1\"}" '$1 == s {print $2}'; }
seg_field() {	# seg_field SEGMENT FIELD
	curl -sf "$H/get_segments_detail" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["segments"]:
    if s["segment_name"] == sys.argv[1]:
        print(s[sys.argv[2]])' "$1" "$2"
}
first_endpoint() {
	curl -sf "$H/query_key?key=$1" | python3 -c '
import json, sys
print(json.load(sys.stdin)["data"][0]["transport_endpoint_"])'
}
rc=0
mc_wait_mounted c1 c2 || { mc_dump_logs; exit 1; }
"$T" put-preferred on2 20 "$s2" || rc=1
"$T" put-preferred both 10 "$s2" 2 || rc=1
e2=$(first_endpoint on2/0)	# the data endpoint of c2

kill -STOP "$pid2"
echo "# c2 stopped"
# Suspected after client_active_ttl_sec (2 s) of silence.
mc_wait_until 10 "c2 to be Suspected" eval '[ "$(seg_field "$s2" client_state)" = suspected ]'
st=$(seg_field "$s2" client_state)
mc_is "$st" suspected "the stopped client is Suspected" || rc=1
n=$(metric master_client_liveness_suspected_clients)
[ "${n:-0}" -ge 1 ] && echo "ok - master_client_liveness_suspected_clients is $n" \
	|| { echo "not ok - master_client_liveness_suspected_clients is '$n'"; rc=1; }
before=$(seg_used "$s2")
"$T" fill new 20 $SZ 1 || rc=1
after=$(seg_used "$s2")
mc_is "${after:-none}" "${before:-unknown}" "no put went to the Suspected client (its bytes in use)" || rc=1
# Every both/i has a replica on each client: the first one listed must not be c2's.
n2=0
for i in 0 1 2 3 4 5 6 7 8 9; do
	[ "$(first_endpoint "both/$i")" = "$e2" ] && n2=$((n2 + 1))
done
[ $n2 -eq 0 ] && echo "ok - readers get the Active client's replica first" \
	|| { echo "not ok - $n2 of 10 objects list the Suspected client's replica first"; rc=1; }

kill -CONT "$pid2"
echo "# c2 continued"
mc_wait_until 10 "c2 to be Active again" eval '[ "$(seg_field "$s2" client_state)" = active ]'
st=$(seg_field "$s2" client_state)
mc_is "$st" active "it is Active again" || rc=1
n=$(metric master_client_liveness_recoveries_total)
[ "${n:-0}" -ge 1 ] && echo "ok - master_client_liveness_recoveries_total is $n" \
	|| { echo "not ok - no recovery counted"; rc=1; }
"$T" check on2 20 ok || rc=1
"$T" check both 10 ok || rc=1
"$T" verify new 20 $SZ || rc=1
n=$(metric master_key_count)
mc_is "$n" 50 "all 50 objects are there" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
