#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Protocol-level tests of mooncake_master: operation semantics and hostile frames.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_start_master || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_rpc.py" "127.0.0.1:$MC_MASTER_PORT"
rc=$?
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_rpc.py" "127.0.0.1:$MC_MASTER_PORT" extra || rc=1
# Impossible segments: refused with upstream's codes and a log line naming the peer.
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_rpc.py" "127.0.0.1:$MC_MASTER_PORT" mounts || rc=1
if grep -q "MountSegment from 127.0.0.1:[0-9]* (client .*) refused: segment m:1: size 0 (INVALID_PARAMS)" \
	"$MC_TMP/master.log" && grep -q "refused: segment ma:1: segment name ma:1 already mounted by another client" \
	"$MC_TMP/master.log"; then
	echo "ok - refused mounts are logged with the peer and the reason"
else
	echo "not ok - refused mounts are logged with the peer and the reason"; rc=1
fi
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
# Zombie puts, on a master with short put timeouts.
mc_start_master --put_start_discard_timeout_sec=1 --put_start_release_timeout_sec=3 || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_rpc.py" "127.0.0.1:$MC_MASTER_PORT" zombie || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
