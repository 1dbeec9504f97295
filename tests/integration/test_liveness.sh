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
mc_wait_mounted c1 c2 c3 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
metric() { mc_metric "$1"; }
rc=0
"$T" put-preferred only2 100 "127.0.0.1:${port[c2]}" || rc=1
"$T" put-preferred only1 100 "127.0.0.1:${port[c1]}" || rc=1
"$T" put-preferred repl 100 "127.0.0.1:${port[c2]}" 2 || rc=1
kill -KILL "$pid_c2"
echo "# client c2 killed"
"$T" check repl 100 ok || rc=1		# falls back to the surviving replica
# Offline after active + suspicion (2 + 2 s) of silence: its segment goes dormant.
mc_wait_log master "segment 127.0.0.1:${port[c2]} (.*) dormant" 15 || rc=1
"$T" check only2 100 -704 || rc=1
"$T" check only1 100 ok || rc=1
"$T" check repl 100 ok || rc=1
grep -q "): Offline" "$MC_TMP/master.log" && echo "ok - master declared the client Offline" \
	|| { echo "not ok - no liveness log line"; rc=1; }
grep -q "segment 127.0.0.1:${port[c2]} (.*) dormant" "$MC_TMP/master.log" \
	&& echo "ok - its segment went dormant" || { echo "not ok - no dormant segment"; rc=1; }
# The short-lived fault_tool clients above go Offline too.
mc_wait_metric master_active_clients 2 15
n=$(metric master_active_clients)
mc_is "$n" 2 "the master reports two clients (master_active_clients)" || rc=1
n=$(metric master_client_liveness_active_clients)
mc_is "$n" 2 "two clients are Active" || rc=1
n=$(metric master_client_liveness_offline_clients)
mc_ge "$n" 1 "clients are Offline ($n)" || rc=1
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/get_all_segments" | wc -l)
mc_is "$n" 2 "two segments remain mounted" || rc=1
n=$(metric master_dormant_segments)
mc_is "$n" 1 "one segment is dormant" || rc=1

# A new process under the same name: its objects stay gone.
mc_start_client c2b 128MB --port="${port[c2]}" || { mc_dump_logs; exit 1; }
mc_wait_mounted c2b || rc=1
"$T" check only2 100 -704 || rc=1
grep -q "restored" "$MC_TMP/master.log" && { echo "not ok - a restarted process restored segments"; rc=1; } \
	|| echo "ok - the restarted process got none of the old objects back"
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/get_all_segments" | wc -l)
mc_is "$n" 3 "the new process mounted its segment" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
