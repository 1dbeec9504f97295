#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA on etcd (three etcd members, three masters, two clients, a writer): kill -9 the
# leader HA_ROUNDS times (2; scripts/bench-ha-failover.sh runs 20); each time a standby serves
# within 3 s, new puts succeed, and the killed master comes back as a standby; at the end every
# put that returned 0 reads back byte-identical.  Prints the failover times.
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
T=$MC_BIN/tests/integration/fault_tool
ROUNDS=${HA_ROUNDS:-2}
rc=0

etcd_start 3 || { mc_dump_logs; exit 1; }
for i in 1 2 3; do ha_start_master "$i" || { mc_dump_logs; exit 1; }; done
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
echo "# leader: master$L"
ha_start_client c1 && ha_start_client c2 || { mc_dump_logs; exit 1; }
ha_start_writer 10 2 || { mc_dump_logs; exit 1; }

TIMES=""
for ((r = 1; r <= ROUNDS; r++)); do
	L=$(ha_wait_leader 20) || { rc=1; break; }
	before=$(ha_acked)
	t0=$(ha_now)
	ha_kill "$L"
	N=$(ha_wait_leader 10 "$L") || { echo "not ok - round $r: no new leader"; rc=1; break; }
	t1=$(ha_now)
	d=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	TIMES="$TIMES $d"
	if awk -v d="$d" 'BEGIN { exit !(d < 3.0) }'; then
		echo "ok - round $r: master$L killed, master$N serves after $d s"
	else
		echo "not ok - round $r: master$N serves only after $d s (limit 3 s)"; rc=1
	fi
	mc_wait_until 15 "new puts after the failover" ha_acked_ge $((before + 20)) &&
		echo "ok - round $r: new puts succeed on master$N" ||
		{ echo "not ok - round $r: no new puts after the failover"; rc=1; }
	ha_start_master "$L" || rc=1
	mc_wait_until 20 "master$L back as a standby" ha_is "$L" standby &&
		echo "ok - round $r: master$L rejoined as a standby" ||
		{ echo "not ok - round $r: master$L is '$(ha_state "$L")'"; rc=1; }
done
ha_stop_writer
"$T" verify-acked "$MC_TMP/acked" 4096 || rc=1
echo "# failover times (s):$TIMES"
echo "$TIMES" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{ a[NR] = $1 } END {
	if (NR) printf "# failover: %d rounds, median %.3f s, max %.3f s\n", NR,
		(NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2), a[NR] }'
[ $rc = 0 ] || mc_dump_logs
exit $rc
