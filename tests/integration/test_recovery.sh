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
sleep 1.5
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT

"$T" write-acked "$MC_TMP/acked" 6 16384 >"$MC_TMP/writer.out" 2>&1 &
writer=$!
sleep 2
kill -KILL "$MC_MASTER_PID"
echo "# master killed"
sleep 1
mc_start master2 "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$MC_MASTER_PORT" \
	--metrics_port="$MC_METRICS_PORT" --persist_path="$DB" --client_ttl=5
mc_wait_port "$MC_MASTER_PORT" || { mc_dump_logs; exit 1; }
wait $writer
cat "$MC_TMP/writer.out"
grep "recovered" "$MC_TMP/master2.log" | sed "s/^/# /"
grep -q "recovered" "$MC_TMP/master2.log" \&\& echo "ok 1 - the restarted master recovered from its database" \
	|| { echo "not ok 1 - no recovery line"; mc_dump_logs; exit 1; }
sleep 2	# clients re-mount after their next ping
"$T" verify-acked "$MC_TMP/acked" 16384
rc=$?
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
