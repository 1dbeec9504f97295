#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two rows whose memory ranges overlap (only a damaged file holds such rows), both looked up
# while the background load scans: the first lookup re-reserves its object's range at once, the
# second's overlaps it and is dropped then.  The reservation in order at the end must pass over
# both ranges (the dropped replica has no segment any more): the master keeps serving, the first
# object reads back byte-identical, the second is gone, and so is its row.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
DB=$MC_TMP/master.db
N=4000

mc_persist_fill "$DB" ov $N || exit 1
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
# ov/1's replica moved onto ov/0's range, 64 bytes in (replicas are packed as u64 id, u8 type,
# u8 status, 16-byte segment id, u64 offset, u64 len).
python3 - "$DB" <<'PY' || { mc_dump_logs; exit 1; }
import sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
r0 = bytearray(db.execute("SELECT replicas FROM objects WHERE key = ?", (b"ov/0",)).fetchone()[0])
r1 = bytearray(r0)
struct.pack_into("<Q", r1, 26, struct.unpack_from("<Q", r0, 26)[0] + 64)
db.execute("UPDATE objects SET replicas = ? WHERE key = ?", (bytes(r1), b"ov/1"))
db.commit()
PY
rc=0
check() { mc_check "$@" || rc=1; }

# 4000 rows at 1000 ms a 1024: the scan takes about 3 s.  ov/0 and ov/1, the oldest rows, are
# read last: their lookups are answered from the file, each object's range reserved at once.
mc_restart_persisted master2 "$DB" 1000
check "during the load: ov/0 reads back" "$T" expect ov 0 1 1024 1
"$T" expect ov 1 2 1024 1 >"$MC_TMP/ov1.out" 2>&1	# reserves ov/1's range, which overlaps
mc_check_loading master2 "both were looked up" || rc=1
mc_wait_log master2 "in the background in" 60 || { mc_dump_logs; exit 1; }
check "the master serves after the load" kill -0 "$MPID"
check "the overlap is logged and dropped" grep -q "overlaps another: dropping it" \
	"$MC_TMP/master2.log"
check "ov/0 reads back byte-identical" "$T" expect ov 0 1 1024 1
check "ov/1 is gone" "$T" expect ov 1 2 1024 absent
check "every other object reads back" "$T" expect ov 2 $N 1024 1
kill -TERM "$MPID"
mc_wait_gone "$MPID"
mc_is "$(mc_db_rows "$DB" objects)" $((N - 1)) "ov/1's row is gone from the file" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
