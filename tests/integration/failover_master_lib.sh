# SPDX-License-Identifier: Apache-2.0
# Shared steps of the tests where the master stops answering (test_failover_master.sh: SIGSTOP;
# test_failover_master_cut.sh: its port cut with iptables).  Source after lib.sh.
#   fm_start          a master nobody is declared dead by during the fault, one client, 10
#                     objects; starts "fault_tool master-stop", waits until it is set up
#   fm_go             lets the tool call into the fault
#   fm_wait_put_failed  waits until the tool's put into the fault has failed (past its deadline)
#   fm_finish T WHAT  after the fault ended at wall-clock time T: the first success within 2 s,
#                     the PutStart sent during the fault never executed, the objects intact;
#                     FM_SETTLE=expired: the master reads the stale PutStart as soon as the
#                     fault ends (a stop), wait until it counts it as expired; otherwise
#                     (a cut) give what still arrives of the cut connection a second
T=$MC_BIN/tests/integration/fault_tool
rc=0

fm_metric() {
	curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'
}

fm_start() {
	# Nobody may be declared dead during the fault, not even suspected.
	mc_start_master --client_active_ttl_sec=120 --client_suspicion_ttl_sec=240 ||
		{ mc_dump_logs; exit 1; }
	mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	"$T" fill before 10 4096 || rc=1
	FM_STARTS=$(fm_metric master_put_start_requests_total)
	"$T" master-stop "$MC_TMP/go" >"$MC_TMP/tool.out" 2>&1 &
	FM_TOOL=$!
	# Ready once its store is set up: its first ping went out before the set-up's calls and
	# was answered before them, so it knows the master's clock (deadlines are written in it).
	mc_wait_until 20 "fault_tool master-stop to be set up" test -e "$MC_TMP/go.ready" ||
		{ mc_dump_logs; exit 1; }
}

fm_go() {
	FM_GO_WALL=$(date +%s.%N)
	touch "$MC_TMP/go"
}

fm_wait_put_failed() {
	mc_wait_until 30 "the put into the fault to fail" grep -q "^# put while the master is stopped" \
		"$MC_TMP/tool.out" || rc=1
}

fm_finish() {	# fm_finish END_WALL_TIME WHAT
	local end=$1 what=$2 first d n
	wait "$FM_TOOL" || rc=1
	cat "$MC_TMP/tool.out"
	first=$(sed -n 's/^first_success_wall=//p' "$MC_TMP/tool.out")
	if [ -n "$first" ] && awk -v a="$first" -v b="$end" 'BEGIN { exit !(a - b < 2.0) }'; then
		d=$(awk -v a="$first" -v b="$end" 'BEGIN { printf "%.3f", a - b }')
		echo "ok - first success $d s after $what"
	else
		echo "not ok - first success at '$first', $what at $end"; rc=1
	fi
	if [ "${FM_SETTLE:-}" = expired ]; then
		mc_wait_metric_ge master_rpc_expired_requests_total 1 10 || rc=1
	else
		# Time passing: nothing signals that a cut connection has nothing more to deliver.
		sleep 1
	fi
	n=$(fm_metric master_put_start_requests_total)
	mc_is "$n" "$FM_STARTS" "the PutStart sent during the fault was not executed" || rc=1
	"$T" verify before 10 4096 || rc=1
}
