#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The transfer engine C API with P2PHANDSHAKE and with the HTTP metadata service, and
# transfer_engine_bench between two processes.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
rc=0
"$MC_BIN/tests/integration/engine_test" P2PHANDSHAKE || rc=1
P=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --port="$P" --host=127.0.0.1
mc_wait_port "$P" || { mc_dump_logs; exit 1; }
"$MC_BIN/tests/integration/engine_test" "http://127.0.0.1:$P/metadata" || rc=1
# The bench: a target and an initiator process.
mc_start target "$MC_BIN/transfer_engine_bench" --mode=target --buffer_size=64MB \
	--local_server_name=127.0.0.1
mc_wait_log target "target ready" || { mc_dump_logs; exit 1; }
seg=$(sed -n 's/.*segment \([^,]*\),.*/\1/p' "$MC_TMP/target.log")
base=$(sed -n 's/.*buffer 0x\([0-9a-f]*\).*/\1/p' "$MC_TMP/target.log")
for op in write read; do
	out=$(TEB_REMOTE_BASE=$((16#$base)) "$MC_BIN/transfer_engine_bench" --mode=initiator \
		--operation=$op --segment_id="$seg" --buffer_size=64MB --block_size=1MB \
		--batch_size=8 --threads=2 --duration=1 --local_server_name=127.0.0.1 2>&1)
	echo "$out" | sed 's/^/# /'
	if echo "$out" | grep -q "^Throughput: [0-9.]* GB/s$"; then
		echo "ok - transfer_engine_bench $op between two processes"
	else
		echo "not ok - transfer_engine_bench $op"; rc=1
	fi
done
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
