#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The admin server's remove and remove_all do what the RPC Remove and RemoveAll do: forget the
# ghosts of SSD copies that are away and close the adoption of older objects (they once did not).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_start_master || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_admin_remove_ghosts.py" \
	"127.0.0.1:$MC_MASTER_PORT" "$MC_METRICS_PORT"
rc=$?
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
