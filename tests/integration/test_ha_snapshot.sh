#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA snapshots and log compaction: two of three masters write snapshots every 2 s
# (--enable_oplog_snapshot, and 0.3.13's --enable_snapshot, which is taken for it with a
# deprecation line) into a shared MOONCAKE_SNAPSHOT_LOCAL_PATH; the leader deletes the log in
# etcd up to the latest snapshot.  A standby whose database is deleted then cannot replay the
# log from its start: it restores the latest snapshot, then follows the log; elected alone, it
# serves every acknowledged put.
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
T=$MC_BIN/tests/integration/fault_tool
rc=0
export MOONCAKE_SNAPSHOT_LOCAL_PATH=$MC_TMP/snapshots

etcd_start 3 || { mc_dump_logs; exit 1; }
SNAP="--snapshot_interval_seconds=2 --snapshot_chunk_object_count=100"
ha_start_master 1 || { mc_dump_logs; exit 1; }
# shellcheck disable=SC2086
ha_start_master 2 --enable_oplog_snapshot $SNAP || { mc_dump_logs; exit 1; }
# shellcheck disable=SC2086
ha_start_master 3 --enable_snapshot --snapshot_retention_count=3 $SNAP --enable_snapshot_restore ||
	{ mc_dump_logs; exit 1; }
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
grep -q "enable_snapshot is deprecated" "$MC_TMP/master3.log" &&
	grep -q "enable_snapshot_restore is deprecated" "$MC_TMP/master3.log" &&
	grep -q "snapshot_retention_count is deprecated" "$MC_TMP/master3.log" &&
	echo "ok - 0.3.13's snapshot flags accepted, one deprecation line each" ||
	{ echo "not ok - no deprecation lines"; rc=1; }
ha_start_client c1 || { mc_dump_logs; exit 1; }
ha_start_writer 5 1 || { mc_dump_logs; exit 1; }
mc_wait_until 30 "300 acknowledged puts" ha_acked_ge 300 || { mc_dump_logs; exit 1; }

compacted() { [ "$(ha_metric "$L" ha_oplog_compactions_total)" -ge 1 ] 2>/dev/null; }
mc_wait_until 20 "the leader to compact the log" compacted &&
	echo "ok - the leader compacted the log: $(ha_metric "$L" ha_oplog_compacted_batches_total) batches deleted" ||
	{ echo "not ok - no compaction"; rc=1; }
snaps=$(ls "$MOONCAKE_SNAPSHOT_LOCAL_PATH/mooncake_master_snapshot/$HA_CLUSTER" | grep -c '^[0-9]\{8\}_[0-9]\{6\}_[0-9]\{3\}$')
mc_ge "$snaps" 1 "snapshots in the store: $snaps" || rc=1
in_etcd=$(etcdctl_ get --prefix "/oplog/$HA_CLUSTER/batches/" --keys-only | grep -c .)
last=$(ha_metric "$L" ha_batch_record_last_batch_id)
[ "$in_etcd" -lt "$last" ] &&
	echo "ok - etcd holds $in_etcd of the $last batches written" ||
	{ echo "not ok - etcd holds $in_etcd batches of $last"; rc=1; }

# A standby loses its database after the log was compacted past its start.
S=$(for i in 1 2 3; do [ "$i" != "$L" ] && echo "$i"; done | head -1)
ha_kill "$S"
rm -f "$MC_TMP/master$S.db" "$MC_TMP/master$S.db-wal" "$MC_TMP/master$S.db-shm"
# shellcheck disable=SC2086
[ "$S" = 1 ] && ha_start_master 1 || ha_start_master "$S" --enable_oplog_snapshot $SNAP || rc=1
restored() { [ "$(ha_metric "$S" ha_snapshot_restores_total)" -ge 1 ] 2>/dev/null; }
mc_wait_until 20 "master$S to restore a snapshot" restored &&
	echo "ok - master$S restored the latest snapshot" ||
	{ echo "not ok - master$S restored nothing"; rc=1; }
ha_stop_writer
mc_wait_until 20 "master$S to catch up" ha_caught_up "$S" "$L" &&
	echo "ok - master$S followed the log from the snapshot to batch $(ha_metric "$S" ha_oplog_applied_sequence_id)" ||
	{ echo "not ok - master$S at $(ha_metric "$S" ha_oplog_applied_sequence_id)"; rc=1; }
for i in 1 2 3; do [ "$i" = "$S" ] || ha_kill "$i"; done
mc_wait_until 15 "master$S to lead" ha_is "$S" serving &&
	echo "ok - master$S elected" || { echo "not ok - master$S is '$(ha_state "$S")'"; rc=1; }
"$T" verify-acked "$MC_TMP/acked" 4096 || rc=1
[ $rc = 0 ] || mc_dump_logs
exit $rc
