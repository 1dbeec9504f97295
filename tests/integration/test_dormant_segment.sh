#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Dormant segments: a client stopped (SIGSTOP) past Offline keeps its memory; the master keeps
# its segment's object records dormant (unreadable, -704, not capacity) and, once the same
# process is continued and re-mounts with its segment token, restores them: every object reads
# back byte-identical.  Meanwhile:
#  - an object with a second replica on the other client stays readable, and gets its dormant
#    replica back as a second replica after the restore;
#  - objects removed or put again while the segment is dormant are not resurrected;
#  - the master is killed (kill -9) and restarted from --persist_path: the dormant records
#    survive, and the restore works against the new master.
# Finally the master itself is stopped longer than active + suspicion (it sees every client
# silent, as behind a partition): when it continues, every object still reads back.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
SZ=65536
DB=$MC_TMP/master.db
flags="--client_active_ttl_sec=2 --client_suspicion_ttl_sec=2 --dormant_segment_ttl_sec=300
	--persist_path=$DB"

# shellcheck disable=SC2086
mc_start_master $flags || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
H="http://127.0.0.1:$MC_METRICS_PORT"
metric() { curl -sf "$H/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
seg_field() {	# seg_field SEGMENT FIELD
	curl -sf "$H/get_segments_detail" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["segments"]:
    if s["segment_name"] == sys.argv[1]:
        print(s[sys.argv[2]])' "$1" "$2"
}
nreplicas() {
	curl -s "$H/query_key?key=$1" | python3 -c '
import json, sys
print(len(json.load(sys.stdin).get("data", [])))'
}
rc=0

# c2 alone first: everything put now lives on it.
mc_start_client c2 64MB || { mc_dump_logs; exit 1; }
s2=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/c2.log" | awk '{print $3}')
pid2=$MC_LAST_PID
sleep 1
"$T" put-preferred d 30 "$s2" || rc=1		# kept dormant, then restored
"$T" put-preferred x 10 "$s2" || rc=1		# removed while dormant
"$T" put-gen w 0 10 $SZ 1 || rc=1		# put again while dormant
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
sleep 1
"$T" put-preferred r 10 "$s2" 2 || rc=1		# one replica on each client

kill -STOP "$pid2"
echo "# c2 stopped"
sleep 6.5
st=$(seg_field "$s2" status)
[ "$st" = DORMANT ] && echo "ok - the stopped client's segment is dormant" \
	|| { echo "not ok - its segment is '$st'"; rc=1; }
st=$(seg_field "$s2" client_state)
[ "$st" = offline ] && echo "ok - its client is Offline" || { echo "not ok - its client is '$st'"; rc=1; }
cap=$(metric master_total_capacity_bytes)
[ "$cap" = 67108864 ] && echo "ok - a dormant segment is not capacity" \
	|| { echo "not ok - capacity $cap"; rc=1; }
"$T" check d 30 -704 || rc=1
"$T" check r 10 ok || rc=1
n=$(nreplicas r/0)
[ "$n" = 1 ] && echo "ok - r/0 is read from its live replica only" || { echo "not ok - r/0 lists $n"; rc=1; }
"$T" remove x 0 10 || rc=1
"$T" put-gen w 0 10 $SZ 2 || rc=1
"$T" expect w 0 10 $SZ 2 || rc=1

# The master dies and comes back from its file while the segment is dormant.
kill -9 "$MC_MASTER_PID"; wait "$MC_MASTER_PID" 2>/dev/null
# shellcheck disable=SC2086
mc_start master2 "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$MC_MASTER_PORT" \
	--metrics_port="$MC_METRICS_PORT" $flags
MC_MASTER_PID=$MC_LAST_PID
mc_wait_port "$MC_MASTER_PORT" || { mc_dump_logs; exit 1; }
mc_wait_port "$MC_METRICS_PORT" || { mc_dump_logs; exit 1; }
st=$(seg_field "$s2" status)
[ "$st" = DORMANT ] && echo "ok - after kill -9 and a restart the segment is still dormant" \
	|| { echo "not ok - after the restart its segment is '$st'"; rc=1; }
n=$(metric master_dormant_replicas)
[ "$n" = 40 ] && echo "ok - its 40 replicas are kept (30 alone, 10 with a live twin)" \
	|| { echo "not ok - $n dormant replicas"; rc=1; }
sleep 1.5	# c1 re-mounts
"$T" check d 30 -704 || rc=1
"$T" check r 10 ok || rc=1

kill -CONT "$pid2"
echo "# c2 continued"
mc_wait_log master2 "restored with" 15 || rc=1
sleep 0.5
st=$(seg_field "$s2" status)
[ "$st" = OK ] && echo "ok - the segment is mounted again" || { echo "not ok - it is '$st'"; rc=1; }
n=$(metric master_dormant_replicas_restored_total)
[ "$n" = 40 ] && echo "ok - 40 replicas were restored" || { echo "not ok - $n restored"; rc=1; }
"$T" check d 30 ok || rc=1
"$T" check r 10 ok || rc=1
n=$(nreplicas r/0)
[ "$n" = 2 ] && echo "ok - r/0 has its second replica back" || { echo "not ok - r/0 lists $n"; rc=1; }
"$T" check x 10 -704 || rc=1
"$T" expect w 0 10 $SZ 2 || rc=1
cap=$(metric master_total_capacity_bytes)
[ "$cap" = 134217728 ] && echo "ok - its capacity is back" || { echo "not ok - capacity $cap"; rc=1; }
used=$(metric master_allocated_bytes)
sum=$(curl -sf "$H/metrics" | awk '/^segment_allocated_bytes/ {s += $2} END {print s}')
[ "$used" = "$sum" ] && echo "ok - allocated bytes ($used) are the segments' sum" \
	|| { echo "not ok - allocated $used, segments $sum"; rc=1; }
n=$(metric master_key_count)
[ "$n" = 50 ] && echo "ok - 50 objects (d, r, w)" || { echo "not ok - $n objects"; rc=1; }

kill -STOP "$MC_MASTER_PID"
echo "# master stopped"
sleep 6.5
kill -CONT "$MC_MASTER_PID"
echo "# master continued"
sleep 4
"$T" check d 30 ok || rc=1
"$T" check r 10 ok || rc=1
"$T" expect w 0 10 $SZ 2 || rc=1
n=$(metric master_dormant_segments)
[ "$n" = 0 ] && echo "ok - no segment is left dormant after the master's stop" \
	|| { echo "not ok - $n dormant segments"; rc=1; }
n=$(nreplicas r/0)
[ "$n" = 2 ] && echo "ok - r/0 still has both replicas" || { echo "not ok - r/0 lists $n"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
