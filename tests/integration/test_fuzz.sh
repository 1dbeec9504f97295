#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Hostile input for a few seconds each: random and mutated RPC frames at the master, random
# requests at a client's TCP data port.  Both must keep serving correctly afterwards (under the
# sanitizers in CI, any memory error also fails the run through the daemons' exit).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
S=$MC_TOP_SRCDIR/tests/integration
rc=0
# The RPC fuzz gets a master of its own: mutated frames mount absurd segments and reserve absurd
# objects, which legitimately drive that master's eviction policy.
mc_start_master || { mc_dump_logs; exit 1; }
fuzzed_master=$MC_MASTER_PID
python3 "$S/fuzz_master.py" "127.0.0.1:$MC_MASTER_PORT" 7 5 && echo "ok 1 - the master answers after fuzzing" \
	|| { echo "not ok 1 - master fuzz"; rc=1; }
kill -0 "$fuzzed_master" || { echo "not ok - the fuzzed master died"; rc=1; }
mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
c1pid=$MC_LAST_PID
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
dport=$(ss -ltnp 2>/dev/null | grep "pid=$c1pid," | awk '{print $4}' | sed 's/.*://' | sort -n | while read p; do
	grep -q "endpoint 127.0.0.1:$p" "$MC_TMP/c1.log" && echo "$p"; done | head -1)
if [ -n "$dport" ]; then
	python3 "$S/fuzz_data.py" "$dport" 5
	kill -0 "$c1pid" && echo "ok 2 - the client survives a fuzzed data port" || { echo "not ok 2 - client died"; rc=1; }
else
	echo "# could not find the data port: data fuzz skipped"
fi
seg=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/c1.log" | awk '{print $3}')
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
MC_STORE_SHM=0 "$MC_BIN/tests/integration/fault_tool" put-preferred fz 50 "$seg" >/dev/null || rc=1
MC_STORE_SHM=0 "$MC_BIN/tests/integration/fault_tool" check fz 50 ok || rc=1
kill -0 "$MC_MASTER_PID" || { echo "not ok - master died"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
