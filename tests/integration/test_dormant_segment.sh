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
metric() { mc_metric "$1"; }
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
mc_wait_mounted c2 || { mc_dump_logs; exit 1; }
"$T" put-preferred d 30 "$s2" || rc=1		# kept dormant, then restored
"$T" put-preferred x 10 "$s2" || rc=1		# removed while dormant
"$T" put-gen w 0 10 $SZ 1 || rc=1		# put again while dormant
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
"$T" put-preferred r 10 "$s2" 2 || rc=1		# one replica on each client

kill -STOP "$pid2"
echo "# c2 stopped"
# Offline after active + suspicion (2 + 2 s) of silence: its segment goes dormant.
mc_wait_log master "segment $s2 (.*) dormant" 15 || rc=1
st=$(seg_field "$s2" status)
mc_is "$st" DORMANT "the stopped client's segment is dormant" || rc=1
st=$(seg_field "$s2" client_state)
mc_is "$st" offline "its client is Offline" || rc=1
cap=$(metric master_total_capacity_bytes)
mc_is "$cap" 67108864 "a dormant segment is not capacity" || rc=1
"$T" check d 30 -704 || rc=1
"$T" check r 10 ok || rc=1
n=$(nreplicas r/0)
mc_is "$n" 1 "r/0 is read from its live replica only" || rc=1
"$T" remove x 0 10 || rc=1
"$T" put-gen w 0 10 $SZ 2 || rc=1
"$T" expect w 0 10 $SZ 2 || rc=1

# The master dies and comes back from its file while the segment is dormant.
mc_log_mark c1 c2
kill -9 "$MC_MASTER_PID"; wait "$MC_MASTER_PID" 2>/dev/null
# shellcheck disable=SC2086
mc_restart_master master2 $flags || { mc_dump_logs; exit 1; }
mc_wait_port "$MC_METRICS_PORT" || { mc_dump_logs; exit 1; }
st=$(seg_field "$s2" status)
mc_is "$st" DORMANT "after kill -9 and a restart the segment is still dormant" || rc=1
n=$(metric master_dormant_replicas)
mc_is "$n" 40 "its 40 replicas are kept (30 alone, 10 with a live twin)" || rc=1
mc_wait_remounted c1 || rc=1	# at its next ping
"$T" check d 30 -704 || rc=1
"$T" check r 10 ok || rc=1

kill -CONT "$pid2"
echo "# c2 continued"
mc_wait_log master2 "restored with" 15 || rc=1
mc_wait_remounted c2 || rc=1
st=$(seg_field "$s2" status)
mc_is "$st" OK "the segment is mounted again" || rc=1
n=$(metric master_dormant_replicas_restored_total)
mc_is "$n" 40 "40 replicas were restored" || rc=1
"$T" check d 30 ok || rc=1
"$T" check r 10 ok || rc=1
n=$(nreplicas r/0)
mc_is "$n" 2 "r/0 has its second replica back" || rc=1
"$T" check x 10 -704 || rc=1
"$T" expect w 0 10 $SZ 2 || rc=1
cap=$(metric master_total_capacity_bytes)
mc_is "$cap" 134217728 "its capacity is back" || rc=1
used=$(metric master_allocated_bytes)
sum=$(curl -sf "$H/metrics" | awk '/^segment_allocated_bytes/ {s += $2} END {print s}')
mc_is "$used" "$sum" "allocated bytes ($used) are the segments' sum" || rc=1
n=$(metric master_key_count)
mc_is "$n" 50 "50 objects (d, r, w)" || rc=1

kill -STOP "$MC_MASTER_PID"
echo "# master stopped"
# Time passing: the master must sleep past active + suspicion (4 s) since the clients' last
# pings, so that on waking it finds every client silent that long.
sleep 4.5
mc_log_mark master2
kill -CONT "$MC_MASTER_PID"
echo "# master continued"
# It sees the clients ping again before declaring them Offline, or declares them Offline and
# they re-mount with their tokens (restored): wait until both report in good standing.
mc_wait_metric master_active_clients 2 15 || rc=1
mc_wait_metric master_dormant_segments 0 15 || rc=1
"$T" check d 30 ok || rc=1
"$T" check r 10 ok || rc=1
"$T" expect w 0 10 $SZ 2 || rc=1
n=$(metric master_dormant_segments)
mc_is "$n" 0 "no segment is left dormant after the master's stop" || rc=1
n=$(nreplicas r/0)
mc_is "$n" 2 "r/0 still has both replicas" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
