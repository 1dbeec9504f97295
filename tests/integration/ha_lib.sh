# SPDX-License-Identifier: Apache-2.0
# HA masters for the tests and scripts/bench-ha*.sh: masters on 127.0.0.1 sharing an etcd
# cluster (etcd_lib.sh), each with its own ports and SQLite file.  Source after lib.sh and
# etcd_lib.sh.
#   ha_start_master I [FLAGS...]   start master I (1-based; again with the same ports and file);
#                                  HA_FLAGS are added to every master
#   ha_role I / ha_state I         its /role and /ha_status
#   ha_leader                      the index of the master serving as leader (empty if none)
#   ha_wait_leader [SECONDS] [NOT] wait until some master (other than NOT) serves; prints it
#   ha_kill I                      kill -9 master I
#   ha_metric I NAME               a metric of master I
#   ha_start_client NAME           a mooncake_client (64 MB) finding the leader through etcd://,
#                                  waited for until mounted
#   ha_start_writer PACE_MS REPLICAS  fault_tool's writer through etcd:// (MC_MASTER; keys in
#                                  $MC_TMP/acked, calls in $MC_TMP/calls), stopped by ha_stop_writer;
#                                  waits for its first 20 acknowledged puts
#   ha_acked / ha_acked_ge N       puts acknowledged so far (at least N)
#   ha_caught_up STANDBY LEADER    STANDBY applied the last batch LEADER wrote
declare -A HA_PORT HA_METRICS HA_PID
HA_CLUSTER=ha$$
HA_LEASE=${HA_LEASE:-2}
HA_FLAGS=${HA_FLAGS:-}
export MC_STORE_CLUSTER_ID=$HA_CLUSTER

ha_start_master() {
	local i=$1; shift
	[ -n "${HA_PORT[$i]:-}" ] || HA_PORT[$i]=$(mc_free_port)
	[ -n "${HA_METRICS[$i]:-}" ] || HA_METRICS[$i]=$(mc_free_port)
	mc_start "master$i" "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 \
		--rpc_port="${HA_PORT[$i]}" --metrics_port="${HA_METRICS[$i]}" \
		--enable_ha --ha_backend_type=etcd --ha_backend_connstring="$ETCD_EPS" \
		--enable_oplog --cluster_id="$HA_CLUSTER" --ha_leader_lease_ttl_sec="$HA_LEASE" \
		--persist_path="$MC_TMP/master$i.db" --oplog_poll_interval_ms=200 \
		$HA_FLAGS "$@"
	HA_PID[$i]=$MC_LAST_PID
	mc_wait_port "${HA_PORT[$i]}"
}

ha_role() { curl -sf -m 1 "http://127.0.0.1:${HA_METRICS[$1]}/role"; }
ha_state() { curl -sf -m 1 "http://127.0.0.1:${HA_METRICS[$1]}/ha_status"; }
ha_metric() { mc_metric "$2" "${HA_METRICS[$1]}"; }
ha_is() { [ "$(ha_state "$1")" = "$2" ]; }

ha_leader() {
	local i
	for i in "${!HA_PORT[@]}"; do
		kill -0 "${HA_PID[$i]}" 2>/dev/null || continue
		[ "$(ha_state "$i")" = serving ] && { echo "$i"; return 0; }
	done
	return 1
}

ha_wait_leader() {	# ha_wait_leader [SECONDS] [NOT]
	local secs=${1:-20} not=${2:-} i=0 l
	while [ $i -lt $((secs * 20)) ]; do
		l=$(ha_leader)
		if [ -n "$l" ] && [ "$l" != "$not" ]; then echo "$l"; return 0; fi
		sleep 0.05; i=$((i + 1))
	done
	echo "# no master serves as leader after ${secs}s" >&2
	return 1
}

ha_kill() {
	kill -9 "${HA_PID[$1]}" 2>/dev/null
	wait "${HA_PID[$1]}" 2>/dev/null
}

# ha_now: wall-clock seconds with fractions.
ha_now() { date +%s.%N; }

ha_start_client() {	# 256 MB: the paced writer (4 KiB puts) cannot fill it within a test's
	local port		# time limit, so eviction never takes an acknowledged object
	port=$(mc_free_port)
	mc_start "$1" "$MC_BIN/mooncake_client" --host=127.0.0.1 --port="$port" \
		--master_server_address="etcd://$ETCD_EPS" --metadata_server=P2PHANDSHAKE \
		--global_segment_size=256MB
	mc_wait_log "$1" "serving segment" && mc_wait_mounted "$1"
}

ha_acked() { if [ -f "$MC_TMP/acked" ]; then wc -l <"$MC_TMP/acked"; else echo 0; fi; }
ha_acked_ge() { [ "$(ha_acked)" -ge "$1" ]; }

ha_start_writer() {	# sets HA_WRITER; exports MC_MASTER for fault_tool's later calls
	export MC_MASTER="etcd://$ETCD_EPS"
	MC_STOP_FILE=$MC_TMP/stop MC_PACE_MS=$1 \
		"$MC_BIN/tests/integration/fault_tool" writer w 600 4096 "$2" "$MC_TMP/acked" \
		"$MC_TMP/calls" >"$MC_TMP/writer.out" 2>&1 &
	HA_WRITER=$!
	MC_PIDS="$MC_PIDS $HA_WRITER"
	mc_wait_until 20 "the writer's first acknowledged puts" ha_acked_ge 20
}

ha_stop_writer() {
	touch "$MC_TMP/stop"
	wait "$HA_WRITER"
	cat "$MC_TMP/writer.out"
}

ha_caught_up() {
	local want have
	want=$(ha_metric "$2" ha_batch_record_last_batch_id)
	have=$(ha_metric "$1" ha_oplog_applied_sequence_id)
	[ -n "$want" ] && [ "$want" -gt 0 ] && [ "$have" = "$want" ]
}
