#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: a get of an object whose replica sits on a client that does not answer blocked
# 30 s and ended -707 instead of reading the other replica; puts placed there failed -800
# after 5 s each.  Here one of two storage clients is stopped with SIGSTOP (its kernel still
# accepts connections and data, nothing answers: a stand-in for a cut): every get of a
# two-replica object must return the right bytes within 5 s, every put must end within the
# bounds (a failed write is reported to the master, revoked and tried once more), and after
# SIGCONT everything acknowledged reads back.  The read lease (1.5 s) is shorter than the
# progress timeout (2 s), so a get that tried the stopped client first must fetch a new lease
# rather than fail with -707.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
export MC_STORE_SHM=0		# read the stopped client's memory over tcp, not through a mapping
rc=0

metric() {
	curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'
}

# Nobody may be declared dead during the stop (with client liveness states, not even suspected).
ttl="--client_ttl=120"
"$MC_BIN/mooncake_master" --help 2>&1 | grep -q -- --client_suspicion_ttl_sec &&
	ttl="$ttl --client_suspicion_ttl_sec=240"
mc_start_master $ttl --default_kv_lease_ttl=1500 || { mc_dump_logs; exit 1; }
mc_start_client c1 256MB || { mc_dump_logs; exit 1; }
mc_start_client c2 256MB || { mc_dump_logs; exit 1; }
pid_c2=$MC_LAST_PID
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$T" fill two 40 1048576 2 || rc=1

kill -STOP "$pid_c2"
echo "# client c2 stopped"
"$T" get-loop two 40 1048576 8 || rc=1
# With the master's liveness marking (issue 24), a reported segment gets no new placements,
# so every put succeeds; without it a retried put may land on the stopped client again.
[ -n "$(metric master_client_liveness_active_clients)" ] && export MC_EXPECT_ALL_PUTS=1
: >"$MC_TMP/acked"
"$T" put-loop during ${MC_NPUTS:-12} 1048576 1 "$MC_TMP/acked" || rc=1
n=$(metric master_transfer_failure_reports_total)
[ "${n:-0}" -gt 0 ] && echo "ok - failed transfers were reported to the master ($n)" \
	|| { echo "not ok - master_transfer_failure_reports_total is '$n'"; rc=1; }
kill -CONT "$pid_c2"
echo "# client c2 continued"
"$T" verify two 40 1048576 || rc=1
if [ -s "$MC_TMP/acked" ]; then
	"$T" verify-acked "$MC_TMP/acked" 1048576 || rc=1
fi
# The puts that failed left nothing behind (their allocations were revoked): putting the same
# keys again succeeds and every one of them reads back.
: >"$MC_TMP/acked2"
MC_EXPECT_ALL_PUTS=1 "$T" put-loop during "${MC_NPUTS:-12}" 1048576 1 "$MC_TMP/acked2" || rc=1
"$T" verify-acked "$MC_TMP/acked2" 1048576 || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
