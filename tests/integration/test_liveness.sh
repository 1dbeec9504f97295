#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Client liveness and replication: three clients; objects on one client only, objects with two
# replicas; that client is killed with SIGKILL.  While it is Active or Suspected, two-replica
# objects are read from their other replica; once it is Offline its segment is dormant: its
# objects read -704 (kept unreadable for a process that could prove the same memory), the
# others still read correctly, and a new process started under the same name does not get them
# back (a restarted process has new segments and cannot present the old segment's token).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool

mc_start_master --client_ttl=2 --client_suspicion_ttl_sec=2 || { mc_dump_logs; exit 1; }
declare -A port
for c in c1 c2 c3; do
	mc_start_client $c 128MB || { mc_dump_logs; exit 1; }
	port[$c]=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/$c.log" | grep -o '[0-9]*$')
	eval "pid_$c=$MC_LAST_PID"
done
sleep 1.5
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
metric() { curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
rc=0
"$T" put-preferred only2 100 "127.0.0.1:${port[c2]}" || rc=1
"$T" put-preferred only1 100 "127.0.0.1:${port[c1]}" || rc=1
"$T" put-preferred repl 100 "127.0.0.1:${port[c2]}" 2 || rc=1
kill -KILL "$pid_c2"
echo "# client c2 killed"
"$T" check repl 100 ok || rc=1		# falls back to the surviving replica
sleep 6					# > active + suspicion: Offline
"$T" check only2 100 -704 || rc=1
"$T" check only1 100 ok || rc=1
"$T" check repl 100 ok || rc=1
grep -q "): Offline" "$MC_TMP/master.log" && echo "ok - master declared the client Offline" \
	|| { echo "not ok - no liveness log line"; rc=1; }
grep -q "segment 127.0.0.1:${port[c2]} (.*) dormant" "$MC_TMP/master.log" \
	&& echo "ok - its segment went dormant" || { echo "not ok - no dormant segment"; rc=1; }
sleep 5	# the short-lived test clients above go Offline too
n=$(metric master_active_clients)
[ "$n" = 2 ] && echo "ok - the master reports two clients" || { echo "not ok - master_active_clients is '$n'"; rc=1; }
n=$(metric master_client_liveness_active_clients)
[ "$n" = 2 ] && echo "ok - two clients are Active" || { echo "not ok - $n Active clients"; rc=1; }
n=$(metric master_client_liveness_offline_clients)
[ "${n:-0}" -ge 1 ] && echo "ok - $n clients are Offline" || { echo "not ok - no Offline client"; rc=1; }
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/get_all_segments" | wc -l)
[ "$n" = 2 ] && echo "ok - two segments remain mounted" || { echo "not ok - $n segments"; rc=1; }
n=$(metric master_dormant_segments)
[ "$n" = 1 ] && echo "ok - one segment is dormant" || { echo "not ok - $n dormant segments"; rc=1; }

# A new process under the same name: its objects stay gone.
mc_start_client c2b 128MB --port="${port[c2]}" || { mc_dump_logs; exit 1; }
sleep 2
"$T" check only2 100 -704 || rc=1
grep -q "restored" "$MC_TMP/master.log" && { echo "not ok - a restarted process restored segments"; rc=1; } \
	|| echo "ok - the restarted process got none of the old objects back"
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/get_all_segments" | wc -l)
[ "$n" = 3 ] && echo "ok - the new process mounted its segment" || { echo "not ok - $n segments"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
