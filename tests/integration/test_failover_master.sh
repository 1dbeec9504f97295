#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: while the master did not answer (a partition), calls blocked 30 s; after the heal
# the store needed 24.6 s to answer again; and a PutStart that had timed out on the client was
# executed when it finally arrived.  Here the master is stopped with SIGSTOP for 7 s
# (MC_STOP_SECS), past the deadline (5 s, and 1 s of tolerance) of the put sent into the stop:
# every call
# must end with -900/-901 within the call deadline, the first call after SIGCONT must succeed
# within 2 s, and the put sent while it was stopped must not be executed afterwards (the master
# drops it as past its deadline).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/failover_master_lib.sh"

fm_start
kill -STOP "$MC_MASTER_PID"
fm_go
fm_wait_put_failed
# Time passing: the stop outlasts the put's deadline (MC_RPC_TIMEOUT_MS, 5 s, from the go) and
# the master's 1 s tolerance (MC_RPC_DEADLINE_TOLERANCE_MS), so that the master, continued,
# finds that PutStart expired and drops it.
sleep "$(awk -v g="$FM_GO_WALL" -v n="$(date +%s.%N)" -v s="${MC_STOP_SECS:-7}" \
	'BEGIN { d = s - (n - g); print (d > 0 ? d : 0) }')"
kill -CONT "$MC_MASTER_PID"
FM_SETTLE=expired fm_finish "$(date +%s.%N)" SIGCONT
n=$(fm_metric master_rpc_expired_requests_total)
[ "${n:-0}" -gt 0 ] && echo "ok - the master dropped $n requests past their deadline" \
	|| { echo "not ok - master_rpc_expired_requests_total is '$n'"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
