#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: while the master did not answer (a partition), calls blocked 30 s; after the heal
# the store needed 24.6 s to answer again; and a PutStart that had timed out on the client was
# executed when it finally arrived.  Here the master is stopped with SIGSTOP for 9 s
# (MC_STOP_SECS): every call must end with -900/-901 within the call deadline, the first call
# after SIGCONT must succeed within 2 s, and the put sent while it was stopped must not be
# executed afterwards (the master drops it as past its deadline).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/failover_master_lib.sh"

fm_start
kill -STOP "$MC_MASTER_PID"
fm_go
sleep "${MC_STOP_SECS:-9}"
kill -CONT "$MC_MASTER_PID"
fm_finish "$(date +%s.%N)" SIGCONT
n=$(fm_metric master_rpc_expired_requests_total)
[ "${n:-0}" -gt 0 ] && echo "ok - the master dropped $n requests past their deadline" \
	|| { echo "not ok - master_rpc_expired_requests_total is '$n'"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
