#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA failover times: tests/integration/test_ha_failover.sh with ROUNDS rounds (20) of
# kill -9 of the leader while a writer puts (three etcd members, three masters with
# --ha_leader_lease_ttl_sec=2, two clients); each round checks that a standby serves within 3 s
# and new puts succeed, the end that every acknowledged put reads back.  Prints every round and
# the median and maximum time from the kill to a standby serving.
#   scripts/bench-ha-failover.sh [BUILD_DIR] [ROUNDS]     (BUILD_DIR: _build/opt)
set -u
B=$(cd "${1:-_build/opt}" && pwd)
S=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$B/tests/integration/fault_tool" ] || make -C "$B" tests/integration/fault_tool >/dev/null
MC_TOP_SRCDIR=$S MC_TOP_BUILDDIR=$B HA_ROUNDS=${2:-20} \
	bash "$S/tests/integration/test_ha_failover.sh" | grep -E '^(ok|not ok)|^# (failover|writer|verify)'
