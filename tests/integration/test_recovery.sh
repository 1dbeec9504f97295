#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Crash recovery: a writer puts objects continuously while the master is killed with SIGKILL and
# restarted on the same database; every put that returned 0 must read back byte-identical, and
# objects written after the restart must not have overwritten earlier ones.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
DB=$MC_TMP/master.db

mc_start_master --persist_path="$DB" --client_ttl=5 || { mc_dump_logs; exit 1; }
mc_start_client client1 512MB || { mc_dump_logs; exit 1; }
mc_start_client client2 512MB || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 client2 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT

"$T" write-acked "$MC_TMP/acked" 6 16384 >"$MC_TMP/writer.out" 2>&1 &
writer=$!
# The master dies with the writer in full flight: after its first 50 acknowledged puts.
mc_wait_until 10 "50 acknowledged puts" eval '[ "$(wc -l <"$MC_TMP/acked")" -ge 50 ]' ||
	{ mc_dump_logs; exit 1; }
mc_log_mark client1 client2
kill -KILL "$MC_MASTER_PID"
echo "# master killed after $(wc -l <"$MC_TMP/acked") acknowledged puts"
mc_wait_gone "$MC_MASTER_PID"
mc_restart_master master2 --persist_path="$DB" --client_ttl=5 || { mc_dump_logs; exit 1; }
rc=0
wait $writer
cat "$MC_TMP/writer.out"
grep "recovered" "$MC_TMP/master2.log" | sed "s/^/# /"
grep -q "recovered" "$MC_TMP/master2.log" && echo "ok 1 - the restarted master recovered from its database" \
	|| { echo "not ok 1 - no recovery line"; mc_dump_logs; exit 1; }
mc_wait_remounted client1 client2 || rc=1	# after their next ping
"$T" verify-acked "$MC_TMP/acked" 16384 || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
