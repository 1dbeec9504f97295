#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA on etcd: requests handled while the leader waits to send a batch of its log again.
# The leader's etcd transactions fail while a file exists (the test hook MC_TEST_ETCD_FAULT),
# so each batch write fails at once and the leader sends it again every 50 ms.  (1) A PutEnd
# whose batch cannot reach etcd is not answered, whatever comes meanwhile (reads on another
# connection, a PutStart on a third); once etcd answers again, both puts are acknowledged.
# (2) When etcd never answers, the leader steps down and the PutEnd is never acknowledged.
# (3) The other master leads: every acknowledged key is readable there, and the first leader
# never built two batches with one number.
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
export PYTHONPATH="$MC_TOP_SRCDIR/tests/integration${PYTHONPATH:+:$PYTHONPATH}"
P=$MC_TOP_SRCDIR/tests/integration/ha_retry.py
FAULT=$MC_TMP/etcd-fault
ACKED=$MC_TMP/acked
: >"$ACKED"
rc=0

etcd_start 1 || { mc_dump_logs; exit 1; }
MC_TEST_ETCD_FAULT=txn MC_TEST_ETCD_FAULT_FILE=$FAULT ha_start_master 1 \
	--log_level=debug --batch_oplog_retry_timeout_sec=3 || { mc_dump_logs; exit 1; }
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
mc_is "$L" 1 "master1 leads" || { mc_dump_logs; exit 1; }
ha_start_master 2 || { mc_dump_logs; exit 1; }
mc_wait_until 20 "master2 to follow" ha_is 2 standby || { mc_dump_logs; exit 1; }
grep -q "test hook: etcd transactions fail while this file exists" "$MC_TMP/master1.log" &&
	echo "ok - the hook is on in master1" || { echo "not ok - no hook line in master1's log"; rc=1; }
grep -q "test hook" "$MC_TMP/master2.log" &&
	{ echo "not ok - the hook is on in master2, which was not given it"; rc=1; }

# (1) etcd fails for a while, then answers again.
python3 "$P" pause "127.0.0.1:${HA_PORT[1]}" "${HA_METRICS[1]}" "$FAULT" "$ACKED" || rc=1
# (2) etcd never answers: master1 steps down (and starts over as a standby).
python3 "$P" stepdown "127.0.0.1:${HA_PORT[1]}" "${HA_METRICS[1]}" "$FAULT" "$ACKED" || rc=1
N=$(ha_wait_leader 20 1) && mc_is "$N" 2 "master2 leads" || rc=1
rm -f "$FAULT"
# What master1 (the first process, before the step down) built: one number, one batch.
dups=$(sed -n 's/.*oplog: batch \([0-9]*\) built.*/\1/p' "$MC_TMP/master1.log" | sort | uniq -d)
built=$(grep -c "oplog: batch [0-9]* built" "$MC_TMP/master1.log")
if [ "$built" -gt 0 ] && [ -z "$dups" ]; then
	echo "ok - master1 built $built batches, each with its own number"
else
	echo "not ok - master1 built $built batches; numbers used twice: $dups"; rc=1
fi
# (3) The acknowledged keys, on the leader that took over from etcd's log.
ha_kill 1
python3 "$P" verify "127.0.0.1:${HA_PORT[2]}" "$ACKED" || rc=1
[ $rc = 0 ] || mc_dump_logs
exit $rc
