#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A master and two mooncake_client daemons on 127.0.0.1; cluster_test drives them through the C
# API: 2,000 objects of 1 B..64 MiB, error codes, leases, regex, zero-copy, bad frames, threads;
# once over TCP and once through same-host shared memory.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client client1 512MB || { mc_dump_logs; exit 1; }
mc_start_client client2 512MB || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 client2 || { mc_dump_logs; exit 1; }

# Once over TCP, once with same-host shared memory (the default on one host).
echo "# over TCP (MC_STORE_SHM=0)"
MC_STORE_SHM=0 MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$MC_BIN/tests/integration/cluster_test"
rc=$?
echo "# over same-host shared memory"
MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$MC_BIN/tests/integration/cluster_test" || rc=1
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
