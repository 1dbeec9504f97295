#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One storage node, in network namespaces (master, one mooncake_client, a writer): 100 puts of
# 1 MiB with replica_num=2 are all acknowledged and all 100 read back byte-identical (a put
# asking for more replicas than there are segments once evicted the object before it).  Then
# the same with 5% packet loss on the client's link and its egress shaped to 200 Mbit/s (iptables
# statistic, tc tbf): 20 more objects, all readable, and the first 100 still there.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/netns_lib.sh"
SIZE=1048576
rc=0

nn_setup master c1 app || { mc_dump_logs; exit 1; }
nn_start_master || { mc_dump_logs; exit 1; }
nn_start_client c1 512MB || { mc_dump_logs; exit 1; }
nn_drv app fill one 100 $SIZE 2 || rc=1
out=$(nn_drv app verify one 100 $SIZE) || rc=1
echo "$out"
readable=$(nn_verified "$out")
[ "$readable" = 100 ] && echo "ok - 100 of 100 objects readable" \
	|| { echo "not ok - $readable of 100 objects readable"; rc=1; }
n=$(nn_metric master_evicted_key_count)
[ "${n:-0}" = 0 ] && echo "ok - nothing evicted" || { echo "not ok - $n objects evicted"; rc=1; }

nn_loss c1 5
nn_rate c1 200mbit
nn_drv app fill lossy 20 $SIZE 2 || rc=1
nn_drv app verify lossy 20 $SIZE || rc=1
n=$(nn_exec c1 iptables -L INPUT -v -n -x | awk '/statistic/ { print $1 }')
[ "${n:-0}" -gt 0 ] && echo "ok - $n packets dropped on the way" \
	|| { echo "not ok - the loss rule dropped nothing"; rc=1; }
nn_clear c1
nn_drv app verify one 100 $SIZE || rc=1
nn_alive "$MC_MASTER_PID" "${NN_PID[c1]}" && echo "ok - no daemon restarted" \
	|| { echo "not ok - a daemon died"; rc=1; }
nn_figures one-node 100 "$readable" "n=0 max=- p99=-" -
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
