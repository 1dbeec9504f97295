#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A storage client cut off longer than the master's suspicion window.  Master, two storage
# clients and an application node, each in its own network namespace.  200 objects of 1 MiB
# with replica_num=2 (one replica on each client); a writer keeps putting; c2 is cut off (its
# switch port down; NN_CUT_HOW=drop: iptables DROP inside it) for NN_CUT seconds, past
# Suspected and into Offline (short liveness windows).  While it is cut off, every get of the
# 200 objects returns the right bytes within 5 s (from the replica on c1) and the writer's puts
# go on, each ending within 5 s.  After the heal, without restarting anything, c2's segment is
# back at the master with its replicas of the 200 originals (its memory survived the cut), all
# 200 originals and every put acknowledged meanwhile read back byte-identical, and the first
# put after the heal succeeds within 2 s.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/netns_lib.sh"
SIZE=1048576
WSIZE=131072
# The cut is the scenario: 12 s of silence is past Suspected (3 s) and Offline (3 + 5 s).
CUT=${NN_CUT:-12}
PRE=2		# the writer's run is sized with these; the test waits on its calls instead
POST=${NN_POST:-6}
GET_BOUND=5
HEAL_BOUND=2
rc=0

nn_setup master c1 c2 app || { mc_dump_logs; exit 1; }
# shellcheck disable=SC2046
nn_start_master $(nn_liveness_flags 3 5) || { mc_dump_logs; exit 1; }
nn_start_client c1 512MB || { mc_dump_logs; exit 1; }
nn_start_client c2 512MB || { mc_dump_logs; exit 1; }
nn_drv app fill orig 200 $SIZE 2 || rc=1
n=$(nn_replicas_on c2 orig 200)
[ "$n" = 200 ] && echo "ok - c2 holds one of the two replicas of each of the 200 objects" \
	|| { echo "not ok - c2 holds a replica of $n of the 200 objects"; rc=1; }

nn_drv_bg writer app writer w $((PRE + CUT + POST + 60)) $WSIZE 2 "$MC_TMP/acked" \
	"$MC_TMP/writer.calls"
wpid=$MC_LAST_PID
nn_wait_ok "$MC_TMP/writer.calls" 5 || rc=1
nn_cut c2 "${NN_CUT_HOW:-link}"
t_cut=$(nn_now)
nn_drv_bg reader app reader orig 200 $SIZE $((CUT - 1)) "$MC_TMP/reader.calls"
rpid=$MC_LAST_PID
sleep "$CUT"
# The heal begins now: calls that end after this are not "within the cut" (the heal is
# several commands, and a call can get through before the last), and the first success is
# timed from here.
t_heal=$(nn_now)
nn_heal c2
nn_wait_pid "$rpid" 40 || rc=1
nn_wait_first_ok "$t_heal" $((HEAL_BOUND + POST)) "$MC_TMP/writer.calls" || rc=1
nn_stop
nn_wait_pid "$wpid" 40 || rc=1
cat "$MC_TMP/writer.log" "$MC_TMP/reader.log"

# During the cut.
gets=$(nn_stats "$MC_TMP/reader.calls" "$t_cut" "$t_heal")
puts=$(nn_stats "$MC_TMP/writer.calls" "$t_cut" "$t_heal")
echo "# gets during the cut: $gets"
echo "# puts during the cut: $puts"
[ "$(nn_field "$gets" fail)" = 0 ] && [ "$(nn_field "$gets" n)" -gt 0 ] \
	&& echo "ok - every get during the cut returned the right bytes" \
	|| { echo "not ok - gets during the cut: $gets"; rc=1; }
nn_le "$(nn_field "$gets" max)" $GET_BOUND && echo "ok - every get ended within ${GET_BOUND}s" \
	|| { echo "not ok - slowest get $(nn_field "$gets" max)s"; rc=1; }
acked_cut=$(awk -v a="$t_cut" -v b="$t_heal" '$1 >= a && $1 + $2 < b && $3 == 0' \
	"$MC_TMP/writer.calls" | wc -l)
[ "$acked_cut" -gt 0 ] && echo "ok - $acked_cut puts acknowledged while c2 was cut off" \
	|| { echo "not ok - no put acknowledged while c2 was cut off"; rc=1; }
nn_le "$(nn_field "$puts" max)" $GET_BOUND && echo "ok - every put ended within ${GET_BOUND}s" \
	|| { echo "not ok - slowest put during the cut $(nn_field "$puts" max)s"; rc=1; }
first=$(nn_first_ok "$MC_TMP/writer.calls" "$t_heal")
echo "# seconds from the heal to the first put that succeeded: $first"
nn_le "$first" $HEAL_BOUND && echo "ok - a put succeeded within ${HEAL_BOUND}s of the heal" \
	|| { echo "not ok - first success after the heal: $first"; rc=1; }
awk '{ print $3 }' "$MC_TMP/reader.calls" "$MC_TMP/writer.calls" | sort | uniq -c \
	| sed 's/^/# calls with result /'

# After the heal.
nn_wait_segment c2 15 && echo "ok - c2's segment is back at the master" \
	|| { echo "not ok - the master does not list c2's segment after the heal"; rc=1; }
nn_read_back orig 200 $SIZE $WSIZE
n=$(nn_replicas_on c2 orig 200)
[ "$n" = 200 ] && echo "ok - c2 holds its replica of all 200 originals again (memory kept)" \
	|| { echo "not ok - c2 holds a replica of $n of the 200 originals after the heal"; rc=1; }
nn_alive "$MC_MASTER_PID" "${NN_PID[c1]}" "${NN_PID[c2]}" && echo "ok - no daemon restarted" \
	|| { echo "not ok - a daemon died"; rc=1; }
for m in suspected_transitions_total offline_transitions_total recoveries_total; do
	echo "# master_client_liveness_$m $(nn_metric master_client_liveness_$m)"
done
nn_figures client-cut "$NN_ACKED" "$NN_READABLE" "$gets" "$first"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
