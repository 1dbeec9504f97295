#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Client liveness and replication: three clients; objects on one client only, objects with two
# replicas; that client is killed with SIGKILL.  Before client_ttl runs out, two-replica objects
# are read from their other replica; after it, the dead client's objects are gone (-704) and
# everything else still reads correctly.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool

mc_start_master --client_ttl=3 || { mc_dump_logs; exit 1; }
declare -A port
for c in c1 c2 c3; do
	mc_start_client $c 128MB || { mc_dump_logs; exit 1; }
	port[$c]=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/$c.log" | grep -o '[0-9]*$')
	eval "pid_$c=$MC_LAST_PID"
done
sleep 1.5
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
rc=0
"$T" put-preferred only2 100 "127.0.0.1:${port[c2]}" || rc=1
"$T" put-preferred only1 100 "127.0.0.1:${port[c1]}" || rc=1
"$T" put-preferred repl 100 "127.0.0.1:${port[c2]}" 2 || rc=1
kill -KILL "$pid_c2"
echo "# client c2 killed"
"$T" check repl 100 ok || rc=1		# falls back to the surviving replica
sleep 5					# > client_ttl
"$T" check only2 100 -704 || rc=1
"$T" check only1 100 ok || rc=1
"$T" check repl 100 ok || rc=1
grep -q "declaring it dead" "$MC_TMP/master.log" && echo "ok - master declared the client dead" \
	|| { echo "not ok - no liveness log line"; rc=1; }
sleep 4	# the short-lived test clients above expire too
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk '$1 == "master_active_clients" {print $2}')
[ "$n" = 2 ] && echo "ok - the master reports two clients" || { echo "not ok - master_active_clients is '$n'"; rc=1; }
n=$(curl -sf "http://127.0.0.1:$MC_METRICS_PORT/get_all_segments" | wc -l)
[ "$n" = 2 ] && echo "ok - two segments remain" || { echo "not ok - $n segments"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
