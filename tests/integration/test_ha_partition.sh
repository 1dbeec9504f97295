#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA: the leader partitioned (network namespaces, not a kill).  etcd (three members), three
# masters, a storage client and an application node each in a namespace of their own; a writer
# puts through etcd://.  The leader's node is cut off: within its lease it stops accepting
# changes (it steps down, and a writer inside its node gets no put acknowledged), another master
# takes over and puts go on there; after the heal the old leader rejoins as a standby and catches
# up with the log; elected alone at the end, it serves every put that was acknowledged, with
# nothing more or less in its log than the leader wrote.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/netns_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
etcd_require
TTL=2
SIZE=4096
rc=0

nn_setup etcd m1 m2 m3 c1 app || { mc_dump_logs; exit 1; }
ETCD_IP=${NN_IP[etcd]}
ETCD_IN="ip netns exec $(nn_ns etcd)"
etcd_start 3 || { mc_dump_logs; exit 1; }
CLUSTER=part$$
MASTER="etcd://$ETCD_EPS"
declare -A MPID
start_master() {	# start_master NODE
	nn_start "$1" "$1" "$MC_BIN/mooncake_master" --rpc_address="${NN_IP[$1]}" \
		--rpc_port=$NN_MASTER_PORT --metrics_port=$NN_METRICS_PORT --enable_ha \
		--ha_backend_connstring="$ETCD_EPS" --enable_oplog --cluster_id=$CLUSTER \
		--ha_leader_lease_ttl_sec=$TTL --persist_path="$MC_TMP/$1.db" \
		--oplog_poll_interval_ms=200
	MPID[$1]=$MC_LAST_PID
	nn_wait_port "$1" "${NN_IP[$1]}" $NN_MASTER_PORT
}
# What a master's admin server says, asked from inside its own node (reachable while cut).
state() { nn_exec "$1" curl -sf -m 1 "http://127.0.0.1:$NN_METRICS_PORT/ha_status"; }
metric() { nn_exec "$1" curl -sf -m 1 "http://127.0.0.1:$NN_METRICS_PORT/metrics" |
	awk -v n="$2" '$1 == n { print $2 }'; }
is() { [ "$(state "$1")" = "$2" ]; }
leader() { local n; for n in "$@"; do is "$n" serving && { echo "$n"; return 0; }; done; return 1; }
for n in m1 m2 m3; do start_master $n || { mc_dump_logs; exit 1; }; done
mc_wait_until 20 "a leader" leader m1 m2 m3 || { mc_dump_logs; exit 1; }
L=$(leader m1 m2 m3)
echo "# leader: $L"
export MC_STORE_CLUSTER_ID=$CLUSTER
MC_MASTER=$MASTER
nn_start c1 c1 "$MC_BIN/mooncake_client" --host="${NN_IP[c1]}" --port=$NN_CLIENT_PORT \
	--master_server_address="$MASTER" --metadata_server=P2PHANDSHAKE --global_segment_size=64MB
mc_wait_log c1 "segments re-mounted" || { mc_dump_logs; exit 1; }
MC_PACE_MS=10 nn_drv_bg writer app writer w 600 $SIZE 1 "$MC_TMP/acked" "$MC_TMP/writer.calls"
wpid=$MC_LAST_PID
# A second writer inside the leader's node, addressing it directly: it can still reach the
# leader during the cut, and must get no put acknowledged once the leader's lease is over.
MC_MASTER=${NN_IP[$L]}:$NN_MASTER_PORT MC_PACE_MS=50 \
	nn_drv_bg inside "$L" writer in 600 $SIZE 1 "$MC_TMP/inside.acked" "$MC_TMP/inside.calls"
ipid=$MC_LAST_PID
acked() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
acked_ge() { [ "$(acked "$1")" -ge "$2" ]; }
mc_wait_until 20 "acknowledged puts" acked_ge "$MC_TMP/acked" 20 &&
	mc_wait_until 20 "acknowledged puts inside" acked_ge "$MC_TMP/inside.acked" 5 ||
	{ mc_dump_logs; exit 1; }

nn_cut "$L" drop
t_cut=$(nn_now)
others=$(echo m1 m2 m3 | tr ' ' '\n' | grep -vx "$L" | tr '\n' ' ')
# shellcheck disable=SC2086
mc_wait_until 15 "a new leader" leader $others || rc=1
# shellcheck disable=SC2086
N=$(leader $others)
t_new=$(nn_now)
echo "# new leader $N after $(awk -v a="$t_cut" -v b="$t_new" 'BEGIN { printf "%.3f", b - a }') s"
mc_wait_until $((TTL + 3)) "$L to stop serving" bash -c "! [ \"\$(ip netns exec $(nn_ns "$L") curl -sf -m 1 http://127.0.0.1:$NN_METRICS_PORT/ha_status)\" = serving ]" &&
	echo "ok - the cut-off leader $L no longer serves" ||
	{ echo "not ok - $L still serves"; rc=1; }
grep -q "stepping down" "$MC_TMP/$L.log" &&
	echo "ok - $L stepped down: $(grep -m1 'stepping down' "$MC_TMP/$L.log" | cut -c1-160)" ||
	{ echo "not ok - $L did not log stepping down"; rc=1; }
before=$(acked "$MC_TMP/acked")
mc_wait_until 15 "puts on the new leader" acked_ge "$MC_TMP/acked" $((before + 20)) &&
	echo "ok - puts go on at the new leader $N" || { echo "not ok - no puts after the cut"; rc=1; }
sleep 1		# the inside writer keeps trying against the cut-off master
late=$(awk -v t="$t_cut" '$1 > t && $3 == 0' "$MC_TMP/inside.calls" | wc -l)
tried=$(awk -v t="$t_cut" '$1 > t' "$MC_TMP/inside.calls" | wc -l)
mc_is "$late" 0 "no put started inside the cut-off node after the cut was acknowledged ($tried tried)" || rc=1

nn_heal "$L"
mc_wait_until 20 "$L back as a standby" is "$L" standby &&
	echo "ok - $L rejoined as a standby" || { echo "not ok - $L is '$(state "$L")'"; rc=1; }
nn_stop
nn_wait_pid "$wpid" 30 || rc=1
nn_wait_pid "$ipid" 30 || rc=1
cat "$MC_TMP/writer.log"
caught_up() {
	local want have
	want=$(metric "$N" ha_batch_record_last_batch_id)
	have=$(metric "$L" ha_oplog_applied_sequence_id)
	[ -n "$want" ] && [ "$want" -gt 0 ] && [ "$have" = "$want" ]
}
mc_wait_until 20 "$L to catch up" caught_up &&
	echo "ok - $L applied the log up to the leader's last batch, $(metric "$N" ha_batch_record_last_batch_id)" ||
	{ echo "not ok - $L at $(metric "$L" ha_oplog_applied_sequence_id), leader wrote $(metric "$N" ha_batch_record_last_batch_id)"; rc=1; }
# Nothing diverged: elected alone, the old leader serves every acknowledged put.
for n in $others; do kill -9 "${MPID[$n]}" 2>/dev/null; wait "${MPID[$n]}" 2>/dev/null; done
mc_wait_until 15 "$L elected again" is "$L" serving &&
	echo "ok - $L elected again" || { echo "not ok - $L is '$(state "$L")'"; rc=1; }
cat "$MC_TMP/acked" "$MC_TMP/inside.acked" >"$MC_TMP/all.acked"
nn_drv app verify-acked "$MC_TMP/all.acked" $SIZE || rc=1
[ $rc = 0 ] || mc_dump_logs
exit $rc
