#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Master HA on etcd when the disks and etcd fail: (1) kill -9 one etcd member (the first of the
# masters' endpoint list) while a writer puts: service continues; (2) kill the leader, delete its
# SQLite file and start it again: it rejoins from etcd as a standby and catches up; (3) with the
# other masters gone it is elected and every put that returned 0 reads back byte-identical;
# (4) a removal through the admin HTTP is acknowledged once etcd has it; (5) a client given a
# standby's address follows the leader the standby names.
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
T=$MC_BIN/tests/integration/fault_tool
rc=0

etcd_start 3 || { mc_dump_logs; exit 1; }
for i in 1 2 3; do ha_start_master "$i" || { mc_dump_logs; exit 1; }; done
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
ha_start_client c1 || { mc_dump_logs; exit 1; }
ha_start_writer 10 1 || { mc_dump_logs; exit 1; }

# (1) One etcd member dies: the rest keep a quorum.
etcd_kill 1
before=$(ha_acked)
mc_wait_until 15 "puts after an etcd member died" ha_acked_ge $((before + 50)) &&
	echo "ok - etcd member 1 killed: puts go on ($(( $(ha_acked) - before )) more)" ||
	{ echo "not ok - no puts after etcd member 1 died"; rc=1; }
# With a 2 s lease a leader may step down while etcd elects its own new leader (about 1 s
# without answers); with the default 5 s it rides that out.  Either way puts went on.
L2=$(ha_wait_leader 10) || rc=1
echo "# leader before: master$L, after: master$L2"
etcd_restart 1
mc_wait_until 20 "etcd member 1 back" etcdctl_ endpoint health --cluster || rc=1

# (2) The leader loses its disk state.
L=$(ha_wait_leader 10) || rc=1
ha_kill "$L"
rm -f "$MC_TMP/master$L.db" "$MC_TMP/master$L.db-wal" "$MC_TMP/master$L.db-shm"
N=$(ha_wait_leader 10 "$L") || rc=1
ha_start_master "$L" || rc=1
mc_wait_until 20 "master$L back as a standby" ha_is "$L" standby &&
	echo "ok - master$L, its database deleted, rejoined as a standby" ||
	{ echo "not ok - master$L is '$(ha_state "$L")'"; rc=1; }
before=$(ha_acked)
mc_wait_until 15 "more puts" ha_acked_ge $((before + 20)) || rc=1
ha_stop_writer
mc_wait_until 20 "master$L to catch up with master$N" ha_caught_up "$L" "$N" &&
	echo "ok - master$L replayed the log from etcd up to batch $(ha_metric "$L" ha_oplog_applied_sequence_id)" ||
	{ echo "not ok - master$L at batch $(ha_metric "$L" ha_oplog_applied_sequence_id), leader at $(ha_metric "$N" ha_batch_record_last_batch_id)"; rc=1; }

# (3) Only master L is left: it leads with the table it rebuilt from etcd.
for i in 1 2 3; do [ "$i" = "$L" ] || ha_kill "$i"; done
mc_wait_until 15 "master$L to lead" ha_is "$L" serving &&
	echo "ok - master$L elected" || { echo "not ok - master$L is '$(ha_state "$L")'"; rc=1; }
"$T" verify-acked "$MC_TMP/acked" 4096 || rc=1

# (4) An admin removal is answered once durable, and a standby refuses it.
key=$(head -1 "$MC_TMP/acked")
code=$(curl -s -o "$MC_TMP/rm.out" -w '%{http_code}' -X POST \
	"http://127.0.0.1:${HA_METRICS[$L]}/api/v1/remove?key=$key&force=true")
mc_is "$code" 200 "admin remove of $key on the leader: $(cat "$MC_TMP/rm.out")" || rc=1
ha_start_master "$N" || rc=1
mc_wait_until 20 "master$N back as a standby" ha_is "$N" standby || rc=1
code=$(curl -s -o "$MC_TMP/rm.out" -w '%{http_code}' -X POST \
	"http://127.0.0.1:${HA_METRICS[$N]}/api/v1/remove?key=$key&force=true")
mc_is "$code" 503 "a standby refuses an admin removal: $(cat "$MC_TMP/rm.out")" || rc=1
grep -q '"error_code":-1011' "$MC_TMP/rm.out" || { echo "not ok - no -1011 in the answer"; rc=1; }
# (5) A client given the standby's own address follows the leader it names.
MC_MASTER=127.0.0.1:${HA_PORT[$N]} "$T" fill redirected 5 4096 &&
	MC_MASTER=127.0.0.1:${HA_PORT[$L]} "$T" verify redirected 5 4096 ||
	{ echo "not ok - a client of the standby did not reach the leader"; rc=1; }
[ $rc = 0 ] || mc_dump_logs
exit $rc
