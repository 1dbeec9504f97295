#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The master's 0.3.14 additions driven over its protocol and admin HTTP (test_probe_rpc.py),
# and the flags 0.3.14 introduced.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
rc=0
"$MC_BIN/mooncake_master" --handler_worker_thread_num=4 --client_active_ttl_sec=12 \
	--client_suspicion_ttl_sec=30 --check_config >/dev/null ||
	{ echo "not ok - 0.3.14 flags accepted"; rc=1; }
"$MC_BIN/mooncake_master" --help | grep -q -- '--max_kv_soft_pin_ttl=<duration>  (default: 604800000)' ||
	{ echo "not ok - --max_kv_soft_pin_ttl defaults to 7 days"; rc=1; }
mc_start_master --handler_worker_thread_num=2 || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_probe_rpc.py" "127.0.0.1:$MC_MASTER_PORT" \
	"127.0.0.1:$MC_METRICS_PORT" || rc=1
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
grep -q -- "--handler_worker_thread_num ignored" "$MC_TMP/master.log" ||
	{ echo "not ok - --handler_worker_thread_num is noted in the log"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
