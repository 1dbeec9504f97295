#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Puts in flight across kill -9 with the put log (src/persist/persist_putlog.c): a writer leaves
# puts in flight (some moved to the objects table after a second, some still in the log), other
# puts finish, are revoked, or finish and are removed; the master dies with SIGKILL.  The
# restarted master (loading in the background, slowed down) reports exactly the puts in flight as
# quarantined, every acknowledged object reads back at its address, the puts in flight are not
# objects, and new puts filling the segment never get a range an in-flight put holds, while the
# ranges of the revoked and removed puts are free again.  The log's rows of the crashed master go
# once it is loaded: at a clean stop the log holds the new puts still in flight.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
DB=$MC_TMP/master.db
PY="python3 $MC_TOP_SRCDIR/tests/integration/test_persist_putlog.py"
export PYTHONPATH=$MC_TOP_SRCDIR/tests/integration

mc_start_master --persist_path="$DB" || { mc_dump_logs; exit 1; }
$PY before "$MC_TMP/state.json" "127.0.0.1:$MC_MASTER_PORT" "$MC_METRICS_PORT" ||
	{ mc_dump_logs; exit 1; }
# wait, not mc_wait_gone: the port is free only once every thread of the process has ended.
kill -KILL "$MC_MASTER_PID"
wait "$MC_MASTER_PID" 2>/dev/null
mc_restart_persisted master2 "$DB" 200
M2=$MC_MASTER_PID
rc=0
$PY after "$MC_TMP/state.json" "127.0.0.1:$MC_MASTER_PORT" || rc=1
mc_wait_log master2 "recovered" || rc=1
grep "recovered" "$MC_TMP/master2.log" | sed "s/^/# /"
if grep -q "recovered .* 40 objects .*(50 unfinished puts quarantined, 0 unusable" \
	"$MC_TMP/master2.log"; then
	echo "ok - the 50 puts in flight at the crash are quarantined, no more"
else
	echo "not ok - the 50 puts in flight at the crash are quarantined, no more"; rc=1
fi
kill -TERM "$M2"
wait "$M2" 2>/dev/null
n=$(mc_db_rows "$DB" putlog)
if [ "$n" = 38 ]; then
	echo "ok - the put log holds the 38 new puts still in flight, no row of the crashed master"
else
	echo "not ok - the put log holds $n rows after a clean stop, not the 38 puts in flight"; rc=1
fi
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
