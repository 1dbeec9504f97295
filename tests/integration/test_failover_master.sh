#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: while the master did not answer (a partition), calls blocked 30 s; after the heal
# the store needed 24.6 s to answer again; and a PutStart that had timed out on the client was
# executed when it finally arrived.  Here the master is stopped with SIGSTOP for 9 s
# (MC_STOP_SECS): every call must end with -900/-901 within the call deadline, the first call
# after SIGCONT must succeed within 2 s, and the put sent while it was stopped must not be
# executed afterwards.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
rc=0

metric() {
	curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'
}

# Nobody may be declared dead during the stop (with client liveness states, not even suspected).
ttl="--client_ttl=120"
"$MC_BIN/mooncake_master" --help 2>&1 | grep -q -- --client_suspicion_ttl_sec &&
	ttl="$ttl --client_suspicion_ttl_sec=240"
mc_start_master $ttl || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$T" fill before 10 4096 || rc=1
starts=$(metric master_put_start_requests_total)
"$T" master-stop "$MC_TMP/go" >"$MC_TMP/tool.out" 2>&1 &
tool=$!
for i in $(seq 200); do [ -e "$MC_TMP/go.ready" ] && break; sleep 0.1; done
sleep 0.5			# its first pings are answered: it knows the master's clock
kill -STOP "$MC_MASTER_PID"
touch "$MC_TMP/go"
sleep "${MC_STOP_SECS:-9}"
kill -CONT "$MC_MASTER_PID"
cont=$(date +%s.%N)
wait $tool || rc=1
cat "$MC_TMP/tool.out"
first=$(sed -n 's/^first_success_wall=//p' "$MC_TMP/tool.out")
if [ -n "$first" ] && awk -v a="$first" -v b="$cont" 'BEGIN { exit !(a - b < 2.0) }'; then
	d=$(awk -v a="$first" -v b="$cont" 'BEGIN { printf "%.3f", a - b }')
	echo "ok - first success $d s after SIGCONT"
else
	echo "not ok - first success at '$first', SIGCONT at $cont"; rc=1
fi
n=$(metric master_put_start_requests_total)
[ "$n" = "$starts" ] && echo "ok - the PutStart sent to the stopped master was not executed" \
	|| { echo "not ok - PutStart requests executed: $starts before the stop, $n after"; rc=1; }
n=$(metric master_rpc_expired_requests_total)
[ "${n:-0}" -gt 0 ] && echo "ok - the master dropped $n requests past their deadline" \
	|| { echo "not ok - master_rpc_expired_requests_total is '$n'"; rc=1; }
"$T" verify before 10 4096 || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
