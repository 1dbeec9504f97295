#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Eviction: a 64 MiB pool filled and then half again with 1 MiB objects after every key was
# probed with ExistKey; least recently read objects go first, recently read (leased) and
# hard-pinned ones stay, and no put fails.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_start_master --default_kv_lease_ttl=10000 || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_POOL_BYTES=67108864 "$MC_BIN/tests/integration/fault_tool" eviction
rc=$?
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
