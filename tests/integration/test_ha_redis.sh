#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA with redis as the election backend (--ha_backend_type=redis): two masters, one
# redis-server; clients find the leader through redis:// (upstream's keys); kill -9 the leader:
# the other serves within 3 s, the client mounts its segment there and new puts succeed.  Redis
# holds no log: what was written before the switch is gone, as with upstream (the test checks
# that this limitation is what happens, so that the documentation stays true).
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
command -v redis-server >/dev/null 2>&1 ||
	{ echo "# SKIP: redis-server is not installed (scripts/deps.sh)"; exit 77; }
"$MC_BIN/mooncake_master" --enable_ha --ha_backend_type=redis --ha_backend_connstring=127.0.0.1:1 \
	--rpc_address=127.0.0.1 --check_config >/dev/null 2>&1 ||
	{ echo "# SKIP: this build has no hiredis"; exit 77; }
T=$MC_BIN/tests/integration/fault_tool
rc=0
RPORT=$(mc_free_port)
mc_start redis redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no
mc_wait_port "$RPORT" || { mc_dump_logs; exit 1; }
start() {	# start I
	local i=$1
	[ -n "${HA_PORT[$i]}" ] || HA_PORT[$i]=$(mc_free_port)
	[ -n "${HA_METRICS[$i]}" ] || HA_METRICS[$i]=$(mc_free_port)
	mc_start "master$i" "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 \
		--rpc_port="${HA_PORT[$i]}" --metrics_port="${HA_METRICS[$i]}" --enable_ha \
		--ha_backend_type=redis --ha_backend_connstring="127.0.0.1:$RPORT" \
		--cluster_id="$HA_CLUSTER" --ha_leader_lease_ttl_sec=2 --oplog_poll_interval_ms=100
	HA_PID[$i]=$MC_LAST_PID
	mc_wait_port "${HA_PORT[$i]}"
}
start 1 && start 2 || { mc_dump_logs; exit 1; }
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
view=$(redis-cli -p "$RPORT" HGET "mooncake-store/{$HA_CLUSTER}/master_view" leader_address)
mc_is "$view" "127.0.0.1:${HA_PORT[$L]}" "redis holds the leader's address under upstream's key" || rc=1
MASTER="redis://127.0.0.1:$RPORT"
port=$(mc_free_port)
mc_start c1 "$MC_BIN/mooncake_client" --host=127.0.0.1 --port="$port" \
	--master_server_address="$MASTER" --metadata_server=P2PHANDSHAKE --global_segment_size=64MB
mc_wait_log c1 "serving segment" && mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
export MC_MASTER=$MASTER
"$T" fill before 10 4096 || rc=1
mc_log_mark c1
t0=$(ha_now)
ha_kill "$L"
N=$(ha_wait_leader 10 "$L") || { mc_dump_logs; exit 1; }
d=$(awk -v a="$t0" -v b="$(ha_now)" 'BEGIN { printf "%.3f", b - a }')
awk -v d="$d" 'BEGIN { exit !(d < 3.0) }' && echo "ok - master$N serves $d s after master$L was killed" ||
	{ echo "not ok - master$N serves only after $d s"; rc=1; }
mc_wait_remounted c1 && echo "ok - the client mounted its segment at the new leader" || rc=1
"$T" fill after 10 4096 || rc=1
"$T" verify after 10 4096 || rc=1
"$T" check before 10 -704 && echo "ok - objects from before the switch are gone (no log with redis)" ||
	{ echo "not ok - objects from before the switch"; rc=1; }
[ $rc = 0 ] || mc_dump_logs
exit $rc
