#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Protocol-level tests of the master's SSD tier: offload on eviction (memory kept until the SSD
# copy is acknowledged), reads falling back to LOCAL_DISK, promotion, EvictDiskReplica and leases,
# REGISTER, DROP tasks, persistence of LOCAL_DISK replicas across a restart, a dead client,
# generations and the ghosts of a dead SSD area (persisted across a second restart).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
flags="--offload_on_evict --promotion_on_hit --default_kv_lease_ttl=300 --client_ttl=2
	--client_suspicion_ttl_sec=0 --dormant_segment_ttl_sec=0
	--remount_grace_period_sec=3 --persist_path=$MC_TMP/master.db --eviction_high_watermark_ratio=0.95"
# shellcheck disable=SC2086
mc_start_master $flags || { mc_dump_logs; exit 1; }
export MC_METRICS_PORT
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_tier.py" "127.0.0.1:$MC_MASTER_PORT" main \
	"$MC_TMP/state"
rc=$?
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
kill -9 "$MC_MASTER_PID"
wait "$MC_MASTER_PID" 2>/dev/null
# shellcheck disable=SC2086
mc_start_master $flags || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_tier.py" "127.0.0.1:$MC_MASTER_PORT" reload \
	"$MC_TMP/state" || rc=1
kill -9 "$MC_MASTER_PID"
wait "$MC_MASTER_PID" 2>/dev/null
# shellcheck disable=SC2086
mc_start_master $flags || { mc_dump_logs; exit 1; }
python3 "$MC_TOP_SRCDIR/tests/integration/test_master_tier.py" "127.0.0.1:$MC_MASTER_PORT" ghosts \
	"$MC_TMP/state" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
