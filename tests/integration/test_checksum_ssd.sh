#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# An object's checksum survives its SSD copy: a writer puts objects with and without a checksum
# into an SSD client's memory, the master has them offloaded (--enable_offload), the client is
# killed (-9) and declared dead (its objects go, the master keeps their ghosts), and restarted
# on the same SSD area: it registers its copies with the checksums their records kept, and the
# objects come back with them (test_checksum_ssd.py).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
PY="$MC_TOP_SRCDIR/tests/integration/test_checksum_ssd.py"
mc_start_master --enable_offload --client_ttl=2 --client_suspicion_ttl_sec=0 \
	--dormant_segment_ttl_sec=0 --default_kv_lease_ttl=300 || { mc_dump_logs; exit 1; }
export MC_STORE_SHM=0
SSD=$MC_TMP/ssd
mkdir -p "$SSD"
rc=0
metric() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
mc_start_client c1 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=64MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
python3 "$PY" "127.0.0.1:$MC_MASTER_PORT" put || rc=1
i=0
while [ "$(metric master_offloaded_key_count)" != 2 ] && [ $i -lt 100 ]; do
	sleep 0.1; i=$((i + 1))
done
[ "$(metric master_offloaded_key_count)" = 2 ] && echo "ok - both objects were offloaded" \
	|| { echo "not ok - offloads: $(metric master_offloaded_key_count)"; rc=1; }
kill -9 "$c1"; wait "$c1" 2>/dev/null
python3 "$PY" "127.0.0.1:$MC_MASTER_PORT" gone && echo "ok - the dead client's objects are gone" \
	|| { echo "not ok - the dead client's objects stay"; rc=1; }
mc_start_client c1b 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=64MB || { mc_dump_logs; exit 1; }
mc_wait_log c1b "registered" 10
python3 "$PY" "127.0.0.1:$MC_MASTER_PORT" check || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
