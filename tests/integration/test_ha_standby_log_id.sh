#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA on etcd: a standby whose first reads of the log's identity fail (etcd out of reach
# or slow as it starts, e.g. a stepped-down leader that starts over while still cut off) reads it
# again once etcd answers, even though its watches never broke: it catches up with the log and
# can be elected.  The standby's etcd reads fail while a file exists (the test hook
# MC_TEST_ETCD_FAULT=range); its watches are not affected, so it sees etcd and says "standby".
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
FAULT=$MC_TMP/etcd-fault
rc=0

etcd_start 1 || { mc_dump_logs; exit 1; }
ha_start_master 1 || { mc_dump_logs; exit 1; }
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
mc_is "$L" 1 "master1 leads" || { mc_dump_logs; exit 1; }
ha_start_client c1 || { mc_dump_logs; exit 1; }
ha_start_writer 20 1 || { mc_dump_logs; exit 1; }

# master2 starts while its reads fail: the view, the log's identity, the batches.
: >"$FAULT"
MC_TEST_ETCD_FAULT=range MC_TEST_ETCD_FAULT_FILE=$FAULT ha_start_master 2 ||
	{ mc_dump_logs; exit 1; }
mc_wait_until 20 "master2 to see etcd through its watches" ha_is 2 standby || rc=1
# Its first read of the log's identity (the second read it makes as it starts, after the
# view's) failed.
mc_wait_log_count master2 "test hook: etcd /v3/kv/range fails" 2 ||
	{ echo "not ok - master2's reads did not fail"; rc=1; }
grep -q "following log" "$MC_TMP/master2.log" &&
	{ echo "not ok - master2 learnt the log's identity through a failing read"; rc=1; }
rm -f "$FAULT"
# etcd answers again (the watches never broke): master2 learns the log and follows it.
mc_wait_log master2 "following log" 15 &&
	echo "ok - master2 read the log's identity once etcd answered" ||
	{ echo "not ok - master2 never read the log's identity again"; rc=1; }
ha_stop_writer
mc_wait_until 20 "master2 to catch up" ha_caught_up 2 1 &&
	echo "ok - master2 applied the log up to the leader's last batch, $(ha_metric 1 ha_batch_record_last_batch_id)" ||
	{ echo "not ok - master2 at $(ha_metric 2 ha_oplog_applied_sequence_id), master1 wrote $(ha_metric 1 ha_batch_record_last_batch_id)"; rc=1; }
# And it can lead: master1 gone, master2 is elected and serves every acknowledged put.
ha_kill 1
N=$(ha_wait_leader 20 1) && mc_is "$N" 2 "master2 elected after master1's end" || rc=1
"$MC_BIN/tests/integration/fault_tool" verify-acked "$MC_TMP/acked" 4096 || rc=1
[ $rc = 0 ] || mc_dump_logs
exit $rc
