#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: after a network cut between client and master healed, the store needed 24.6 s to
# answer again (its connection waited on the kernel's retransmission backoff), calls during the
# cut blocked 30 s, and a PutStart sent during the cut was executed after the heal.  Here the
# master's port is cut with iptables DROP on the loopback for 12 s (root only): every call must
# end with -900/-901 within the call deadline, the first call must succeed within 2 s of the heal,
# and the PutStart sent during the cut must never be executed.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

if [ "$(id -u)" != 0 ] || ! command -v iptables >/dev/null; then
	echo "# SKIP: needs root and iptables to cut the master's port"
	exit 77
fi
. "$MC_TOP_SRCDIR/tests/integration/failover_master_lib.sh"
cut() {	# cut -I | -D
	iptables "$1" INPUT -i lo -p tcp --dport "$MC_MASTER_PORT" -j DROP 2>/dev/null &&
		iptables "$1" INPUT -i lo -p tcp --sport "$MC_MASTER_PORT" -j DROP 2>/dev/null
}
trap 'cut -D; cut -D; mc_cleanup' EXIT

fm_start
if ! cut -I; then
	echo "# SKIP: iptables cannot add rules here"
	kill "$FM_TOOL"; exit 77
fi
fm_go
# Time passing: the cut lasts 12 s in all, well past the put's 5 s deadline, so that the
# kernel's retransmission backoff on the cut connection grows past the 2 s the heal allows:
# the client must not wait on it.
sleep 12
cut -D
fm_finish "$(date +%s.%N)" "the heal"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
