#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Object checksums on the master, over the wire (test_checksum_rpc.py): PutEnd stores them,
# GetReplicaList and /query_key return them, the SSD tier's tasks and registrations carry them,
# ReportChecksumMismatch drops a corrupt replica (master_checksum_mismatch_total), and a master
# restarted on the same --persist_path still has them.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
flags="--enable_offload --default_kv_lease_ttl=300 --persist_path=$MC_TMP/master.db"
# shellcheck disable=SC2086
mc_start_master $flags || { mc_dump_logs; exit 1; }
export MC_METRICS_PORT
python3 "$MC_TOP_SRCDIR/tests/integration/test_checksum_rpc.py" "127.0.0.1:$MC_MASTER_PORT" main \
	"$MC_TMP/state"
rc=$?
grep -q "checksum mismatch on ck/two, replica .* expected 0000000000001234, computed 0000000000004321" \
	"$MC_TMP/master.log" && echo "ok - the master's log names the key, the replica and both values" ||
	{ echo "not ok - no log line of the mismatch"; rc=1; }
CTL="$MC_BIN/mooncake_ctl --master=127.0.0.1:$MC_METRICS_PORT"
if [ -x "$MC_BIN/mooncake_ctl" ]; then
	$CTL get-info ck/1 | grep -q "^object_checksum: deadbeef01234567$" &&
		$CTL --json get-info ck/1 | grep -q '"object_checksum": "deadbeef01234567"' &&
		! $CTL get-info ck/none | grep -q object_checksum &&
		echo "ok - mooncake_ctl get-info shows the checksum, and none for an object without" ||
		{ echo "not ok - mooncake_ctl get-info and object_checksum"; rc=1; }
fi
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
kill -9 "$MC_MASTER_PID"
wait "$MC_MASTER_PID" 2>/dev/null
# shellcheck disable=SC2086
mc_start_master $flags || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_checksum_rpc.py" "127.0.0.1:$MC_MASTER_PORT" reload \
	"$MC_TMP/state" || rc=1
kill -9 "$MC_MASTER_PID"
wait "$MC_MASTER_PID" 2>/dev/null
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
