#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The master cut off.  Master, two storage clients and an application node, each in its own
# network namespace; 50 objects of 1 MiB are written, then a writer and a reader run while
# iptables inside the master's namespace drops everything but loopback for NN_CUT seconds
# (longer than the clients' liveness windows; NN_CUT_HOW=link takes its switch port down instead).
# During the cut every store call ends within its deadline (5 s, plus 1 s of slack) with -900
# or -901 instead of blocking; the first call after the heal succeeds within 2 s; without
# restarting anything, both segments are back at the master and the 50 objects and every put
# acknowledged read back byte-identical.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/netns_lib.sh"
SIZE=1048576
WSIZE=131072
# The cut is the scenario: 15 s without the master, past the clients' liveness windows.
CUT=${NN_CUT:-15}
PRE=2		# the drivers' runs are sized with these; the test waits on their calls instead
POST=${NN_POST:-6}
CALL_BOUND=6		# the per-call deadline (MC_RPC_TIMEOUT_MS, 5 s) and 1 s of slack
HEAL_BOUND=2
rc=0

nn_setup master c1 c2 app || { mc_dump_logs; exit 1; }
# shellcheck disable=SC2046
nn_start_master $(nn_liveness_flags 3 5) || { mc_dump_logs; exit 1; }
nn_start_client c1 512MB || { mc_dump_logs; exit 1; }
nn_start_client c2 512MB || { mc_dump_logs; exit 1; }
nn_drv app fill orig 50 $SIZE || rc=1

nn_drv_bg writer app writer w $((PRE + CUT + POST + 60)) $WSIZE 1 "$MC_TMP/acked" \
	"$MC_TMP/writer.calls"
wpid=$MC_LAST_PID
nn_drv_bg reader app reader orig 50 $SIZE $((PRE + CUT + POST + 60)) "$MC_TMP/reader.calls"
rpid=$MC_LAST_PID
nn_wait_ok "$MC_TMP/writer.calls" 5 && nn_wait_ok "$MC_TMP/reader.calls" 5 || rc=1
nn_cut master "${NN_CUT_HOW:-drop}"
t_cut=$(nn_now)
sleep "$CUT"
# The heal begins now: calls that end after this are not "within the cut" (the heal is
# several commands, and a call can get through before the last), and the first success is
# timed from here.
t_heal=$(nn_now)
nn_heal master
nn_wait_first_ok "$t_heal" $((HEAL_BOUND + POST)) "$MC_TMP/writer.calls" "$MC_TMP/reader.calls" || rc=1
nn_stop
nn_wait_pid "$rpid" 40 || rc=1
nn_wait_pid "$wpid" 40 || rc=1
cat "$MC_TMP/writer.log" "$MC_TMP/reader.log"

# During the cut.
calls=$(cat "$MC_TMP/writer.calls" "$MC_TMP/reader.calls" | sort -n)
echo "$calls" >"$MC_TMP/all.calls"
during=$(nn_stats "$MC_TMP/all.calls" "$t_cut" "$t_heal")
gets=$(nn_stats "$MC_TMP/reader.calls" "$t_cut" "$t_heal")
echo "# calls during the cut: $during"
echo "# gets during the cut: $gets"
nn_le "$(nn_field "$during" max)" $CALL_BOUND \
	&& echo "ok - every call during the cut ended within ${CALL_BOUND}s" \
	|| { echo "not ok - slowest call during the cut $(nn_field "$during" max)s"; rc=1; }
# Calls that started and ended inside the cut: none may succeed by magic, all must say why.
codes=$(awk -v a="$t_cut" -v b="$t_heal" '$1 >= a && $1 + $2 < b { print $3 }' "$MC_TMP/all.calls" \
	| sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
echo "# results of calls within the cut: $codes"
other=$(awk -v a="$t_cut" -v b="$t_heal" '$1 >= a && $1 + $2 < b && $3 != -900 && $3 != -901' \
	"$MC_TMP/all.calls" | wc -l)
n=$(awk -v a="$t_cut" -v b="$t_heal" '$1 >= a && $1 + $2 < b' "$MC_TMP/all.calls" | wc -l)
if [ "$n" = 0 ]; then
	echo "not ok - no call ended while the master was cut off"; rc=1
elif [ "$NN_CODES" = 0 ]; then
	echo "# $n calls ended within the cut; this driver reports no error codes"
elif [ "$other" = 0 ]; then
	echo "ok - all $n calls that ended within the cut ended -900 or -901"
else
	echo "not ok - $other of $n calls that ended within the cut ended otherwise"; rc=1
fi
first=$(nn_first_ok "$MC_TMP/all.calls" "$t_heal")
echo "# seconds from the heal to the first success: $first (puts $(nn_first_ok \
	"$MC_TMP/writer.calls" "$t_heal"), gets $(nn_first_ok "$MC_TMP/reader.calls" "$t_heal"))"
nn_le "$first" $HEAL_BOUND && echo "ok - a call succeeded within ${HEAL_BOUND}s of the heal" \
	|| { echo "not ok - first success after the heal: $first"; rc=1; }

# After the heal.
nn_wait_segment c1 15 && nn_wait_segment c2 15 && echo "ok - both segments are back at the master" \
	|| { echo "not ok - the master does not list both segments after the heal"; rc=1; }
nn_read_back orig 50 $SIZE $WSIZE
nn_alive "$MC_MASTER_PID" "${NN_PID[c1]}" "${NN_PID[c2]}" && echo "ok - no daemon restarted" \
	|| { echo "not ok - a daemon died"; rc=1; }
nn_figures master-cut "$NN_ACKED" "$NN_READABLE" "$gets" "$first"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
