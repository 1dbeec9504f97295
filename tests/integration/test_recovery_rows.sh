#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Recovery from rows that cannot all be honoured: after kill -9 the database is edited so that one
# object's replica overlaps another's and a third is marked as still being written.  The restarted
# master must keep the first (lower offset), drop the overlapping one and quarantine the unfinished
# one (both gone from the file too), keep the rest byte-identical, and stop cleanly.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
DB=$MC_TMP/master.db

mc_start_master --persist_path="$DB" || { mc_dump_logs; exit 1; }
mc_start_client client1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$T" put-gen rows 0 4 4096 1 >"$MC_TMP/fill.out" 2>&1 || { cat "$MC_TMP/fill.out"; mc_dump_logs; exit 1; }
kill -KILL "$MC_MASTER_PID"
mc_wait_gone "$MC_MASTER_PID"

# Replicas are packed as u64 id, u8 type, u8 status, 16-byte segment id, u64 offset, u64 len.
python3 - "$DB" <<'PY' || { mc_dump_logs; exit 1; }
import sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
def reps(key):
    return bytearray(db.execute("SELECT replicas FROM objects WHERE key = ?", (key,)).fetchone()[0])
r0, r2 = reps(b"rows/0"), reps(b"rows/2")
off0 = struct.unpack_from("<Q", r0, 26)[0]
r1 = bytearray(r0)
struct.pack_into("<Q", r1, 26, off0 + 64)	# overlaps rows/0, which sorts first
r2[9] = 2					# MC_REPLICA_PROCESSING: a put in flight
db.execute("UPDATE objects SET replicas = ? WHERE key = ?", (bytes(r1), b"rows/1"))
db.execute("UPDATE objects SET replicas = ? WHERE key = ?", (bytes(r2), b"rows/2"))
db.commit()
PY

mc_log_mark client1
mc_restart_master master2 --persist_path="$DB" || { mc_dump_logs; exit 1; }
MASTER2=$MC_MASTER_PID
mc_wait_remounted client1 || { mc_dump_logs; exit 1; }
rc=0
grep "recovered" "$MC_TMP/master2.log" | sed "s/^/# /"
if grep -q "recovered 1 segments (and 0 dormant), [23] objects .*(1 unfinished puts quarantined" \
	"$MC_TMP/master2.log" && grep -q "overlaps another: dropping it" "$MC_TMP/master2.log"; then
	echo "ok 1 - 3 objects recovered, the unfinished put quarantined, the overlap dropped"
else
	echo "not ok 1 - recovery line or overlap warning missing"; rc=1
fi
if "$T" expect rows 0 1 4096 1 >"$MC_TMP/e1.out" 2>&1 && "$T" expect rows 3 4 4096 1 \
	>>"$MC_TMP/e1.out" 2>&1; then
	echo "ok 2 - the objects kept read back byte-identical"
else
	sed 's/^/# /' "$MC_TMP/e1.out"; echo "not ok 2 - a kept object is wrong"; rc=1
fi
if "$T" expect rows 1 3 4096 absent >"$MC_TMP/e2.out" 2>&1; then
	echo "ok 3 - the overlapping and the unfinished object are gone"
else
	sed 's/^/# /' "$MC_TMP/e2.out"; echo "not ok 3 - a dropped object is still there"; rc=1
fi
t0=$(date +%s%N)
kill -TERM "$MASTER2"
mc_wait_gone "$MASTER2"
echo "# clean stop in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
n=$(mc_db_rows "$DB" objects)
if [ "$n" = 2 ]; then
	echo "ok 4 - the dropped rows are gone from the file ($n rows left)"
else
	echo "not ok 4 - $n object rows left in the file, expected 2"; rc=1
fi
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
