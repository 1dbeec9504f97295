#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Segments at the protocol level (test_segment_rpc.py): ReportTransferFailure (opcode 80) marks
# a segment unhealthy for a doubling backoff, during which it gets no placements and is listed
# last; segment tokens restore a dormant segment only to the process that mounted it.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_start_master --unhealthy_segment_backoff_sec=2 --unhealthy_segment_max_backoff_sec=8 \
	|| { mc_dump_logs; exit 1; }
PYTHONPATH="$MC_TOP_SRCDIR/tests/integration" python3 \
	"$MC_TOP_SRCDIR/tests/integration/test_segment_rpc.py" "127.0.0.1:$MC_MASTER_PORT" \
	"127.0.0.1:$MC_METRICS_PORT" health
rc=$?
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
grep -q "unhealthy for 2000 ms: transfer failure -800 reported by" "$MC_TMP/master.log" \
	&& echo "ok - the master logs the mark" || { echo "not ok - no log line"; rc=1; }
mc_start_master --client_active_ttl_sec=1 --client_suspicion_ttl_sec=1 --dormant_segment_ttl_sec=5 \
	|| { mc_dump_logs; exit 1; }
PYTHONPATH="$MC_TOP_SRCDIR/tests/integration" python3 \
	"$MC_TOP_SRCDIR/tests/integration/test_segment_rpc.py" "127.0.0.1:$MC_MASTER_PORT" \
	"127.0.0.1:$MC_METRICS_PORT" token || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
