#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: after a network cut between client and master healed, the store needed 24.6 s to
# answer again (its connection waited on the kernel's retransmission backoff), calls during the
# cut blocked 30 s, and a PutStart sent during the cut was executed after the heal.  Here the
# master's port is cut with iptables DROP on the loopback for 12 s (root only): every call must
# end with -900/-901 within the call deadline, the first call must succeed within 2 s of the heal,
# and the PutStart sent during the cut must never be executed.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
rc=0

if [ "$(id -u)" != 0 ] || ! command -v iptables >/dev/null; then
	echo "# SKIP: needs root and iptables to cut the master's port"
	exit 77
fi
metric() {
	curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'
}
cut() {	# cut -I | -D
	iptables "$1" INPUT -i lo -p tcp --dport "$MC_MASTER_PORT" -j DROP 2>/dev/null &&
		iptables "$1" INPUT -i lo -p tcp --sport "$MC_MASTER_PORT" -j DROP 2>/dev/null
}
trap 'cut -D; cut -D; mc_cleanup' EXIT

# Nobody may be declared dead during the stop (with client liveness states, not even suspected).
ttl="--client_ttl=120"
"$MC_BIN/mooncake_master" --help 2>&1 | grep -q -- --client_suspicion_ttl_sec &&
	ttl="$ttl --client_suspicion_ttl_sec=240"
mc_start_master $ttl || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$T" fill before 10 4096 || rc=1
starts=$(metric master_put_start_requests_total)
"$T" master-stop "$MC_TMP/go" >"$MC_TMP/tool.out" 2>&1 &
tool=$!
for i in $(seq 200); do [ -e "$MC_TMP/go.ready" ] && break; sleep 0.1; done
sleep 0.5			# its first pings are answered: it knows the master's clock
if ! cut -I; then
	echo "# SKIP: iptables cannot add rules here"
	kill $tool; exit 77
fi
touch "$MC_TMP/go"
sleep 12
cut -D
heal=$(date +%s.%N)
wait $tool || rc=1
cat "$MC_TMP/tool.out"
first=$(sed -n 's/^first_success_wall=//p' "$MC_TMP/tool.out")
if [ -n "$first" ] && awk -v a="$first" -v b="$heal" 'BEGIN { exit !(a - b < 2.0) }'; then
	d=$(awk -v a="$first" -v b="$heal" 'BEGIN { printf "%.3f", a - b }')
	echo "ok - first success $d s after the heal"
else
	echo "not ok - first success at '$first', heal at $heal"; rc=1
fi
sleep 1			# whatever of the cut connection still arrives is read by now
n=$(metric master_put_start_requests_total)
[ "$n" = "$starts" ] && echo "ok - the PutStart sent during the cut was not executed" \
	|| { echo "not ok - PutStart requests executed: $starts before the cut, $n after"; rc=1; }
"$T" verify before 10 4096 || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
