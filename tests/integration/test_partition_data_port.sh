#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A writer that cannot reach one storage client's data port while the master can.  Master, two
# storage clients and an application node, each in its own network namespace; 100 objects of
# 1 MiB with replica_num=2 (one replica on each client).  Then iptables in the application's
# namespace drops its packets to c2's listening ports for NN_CUT seconds, nobody else's: a
# writer (one replica per put) and a reader keep going.  Every put succeeds (placed on c1 after
# at most a bounded failed attempt on c2) and ends within 5 s; every get of the 100 objects
# returns the right bytes within 5 s.  Once the ports are open again, without restarting
# anything, the 100 objects and every put acknowledged read back byte-identical.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/netns_lib.sh"
SIZE=1048576
WSIZE=131072
# The cut is the scenario: 15 s with c2's data ports dropped.
CUT=${NN_CUT:-15}
PRE=2		# the drivers' runs are sized with these; the test waits on their calls instead
POST=${NN_POST:-3}
BOUND=5
rc=0

nn_setup master c1 c2 app || { mc_dump_logs; exit 1; }
nn_start_master || { mc_dump_logs; exit 1; }
nn_start_client c1 512MB || { mc_dump_logs; exit 1; }
nn_start_client c2 512MB || { mc_dump_logs; exit 1; }
nn_drv app fill orig 100 $SIZE 2 || rc=1
ports=$(nn_listen_ports c2)
[ -n "$ports" ] || { echo "not ok - c2 listens on no port"; mc_dump_logs; exit 1; }

nn_drv_bg writer app writer w $((PRE + CUT + POST + 60)) $WSIZE 1 "$MC_TMP/acked" \
	"$MC_TMP/writer.calls"
wpid=$MC_LAST_PID
nn_drv_bg reader app reader orig 100 $SIZE $((PRE + CUT + POST + 60)) "$MC_TMP/reader.calls"
rpid=$MC_LAST_PID
nn_wait_ok "$MC_TMP/writer.calls" 5 && nn_wait_ok "$MC_TMP/reader.calls" 5 || rc=1
for p in $ports; do nn_block app "${NN_IP[c2]}" "$p"; done
t_cut=$(nn_now)
sleep "$CUT"
# The heal begins now: calls that end after this are not "within the cut" (the heal is
# several commands, and a call can get through before the last), and the first success is
# timed from here.
t_heal=$(nn_now)
for p in $ports; do nn_unblock app "${NN_IP[c2]}" "$p"; done
nn_wait_first_ok "$t_heal" $((POST + 10)) "$MC_TMP/writer.calls" "$MC_TMP/reader.calls"
nn_stop
nn_wait_pid "$rpid" 40 || rc=1
nn_wait_pid "$wpid" 40 || rc=1
cat "$MC_TMP/writer.log" "$MC_TMP/reader.log"

puts=$(nn_stats "$MC_TMP/writer.calls" "$t_cut" "$t_heal")
gets=$(nn_stats "$MC_TMP/reader.calls" "$t_cut" "$t_heal")
echo "# puts while c2's ports were dropped: $puts"
echo "# gets while c2's ports were dropped: $gets"
awk -v a="$t_cut" -v b="$t_heal" '$1 < b && $1 + $2 > a { print $4, $3 }' \
	"$MC_TMP/writer.calls" "$MC_TMP/reader.calls" | sort | uniq -c | sed 's/^/# calls and results /'
[ "$(nn_field "$puts" n)" -gt 0 ] && [ "$(nn_field "$puts" fail)" = 0 ] \
	&& echo "ok - every put succeeded while c2 was unreachable" \
	|| { echo "not ok - puts while c2 was unreachable: $puts"; rc=1; }
nn_le "$(nn_field "$puts" max)" $BOUND && echo "ok - every put ended within ${BOUND}s" \
	|| { echo "not ok - slowest put $(nn_field "$puts" max)s"; rc=1; }
[ "$(nn_field "$gets" n)" -gt 0 ] && [ "$(nn_field "$gets" fail)" = 0 ] \
	&& echo "ok - every get returned the right bytes while c2 was unreachable" \
	|| { echo "not ok - gets while c2 was unreachable: $gets"; rc=1; }
nn_le "$(nn_field "$gets" max)" $BOUND && echo "ok - every get ended within ${BOUND}s" \
	|| { echo "not ok - slowest get $(nn_field "$gets" max)s"; rc=1; }
first=$(nn_first_ok "$MC_TMP/writer.calls" "$t_heal")
echo "# seconds from the heal to the first put that succeeded: $first"

nn_read_back orig 100 $SIZE $WSIZE
nn_alive "$MC_MASTER_PID" "${NN_PID[c1]}" "${NN_PID[c2]}" && echo "ok - no daemon restarted" \
	|| { echo "not ok - a daemon died"; rc=1; }
nn_figures data-port "$NN_ACKED" "$NN_READABLE" "$gets" "$first"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
