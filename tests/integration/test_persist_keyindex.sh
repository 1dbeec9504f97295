#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The objects table keyed by generation and its key index (PATH.keys) across restarts: with the
# index, a restarted master answers reads of keys it has not loaded yet while its (slowed) scan
# goes on; with the index deleted, or corrupt, it answers them right once the scan is done, and
# builds the index again; two rows of one key in the file (the older one left by a crash or an
# upgrade) load as the newer, and the older row is deleted; runs merge eight at a time and the
# merged index answers; a file of schema 7 (objects keyed by key) is upgraded in place and every
# object reads back.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
DB=$MC_TMP/master.db
N=3000

mc_persist_fill "$DB" ki $N || exit 1
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT

# restart NAME DELAY_MS: the master again on the same port and file.
restart() { mc_restart_persisted "$1" "$DB" "$2"; }
stop() { kill -TERM "$MPID"; wait "$MPID" 2>/dev/null; }
rc=0
check() { mc_check "$@" || rc=1; }	# check DESCRIPTION CMD...: one TAP line

# 3000 rows at 400 ms a 1024: a scan of about 1.2 s.
restart m2 400
check "with the index: keys not loaded yet read back during the load" \
	"$T" expect ki $((N - 10)) $N 1024 1
check "with the index: keys never stored are absent during the load" \
	"$T" expect none 0 3 1024 absent
mc_check_loading m2 "with the index the reads were answered" || rc=1
mc_wait_log m2 "in the background in" 30 || { mc_dump_logs; exit 1; }
stop

# No index: the reads wait for the scan (within the client's 2 s), and are right.
rm -f "$DB.keys" "$DB.keys-wal" "$DB.keys-shm"
restart m3 200
check "without the index: keys not loaded yet read back" "$T" expect ki 100 110 1024 1
check "without the index: keys never stored are absent" "$T" expect none 0 3 1024 absent
check "without the index: the log says why lookups wait" \
	grep -q "key index .* not used: .*lookups of keys not loaded yet wait for the scan" \
	"$MC_TMP/m3.log"
mc_wait_log m3 "in the background in" 30 || { mc_dump_logs; exit 1; }
check "a new index is built" test -s "$DB.keys"
stop

# A corrupt index: never used, and built again.
python3 - "$DB.keys" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(0)
    f.write(b"\xa5" * 4096)
PY
rm -f "$DB.keys-wal" "$DB.keys-shm"
restart m4 200
check "with a corrupt index: keys not loaded yet read back" "$T" expect ki 200 210 1024 1
check "with a corrupt index: keys never stored are absent" "$T" expect none 0 3 1024 absent
check "with a corrupt index: the log says it is not used" \
	grep -q "key index .* not used" "$MC_TMP/m4.log"
mc_wait_log m4 "in the background in" 30 || { mc_dump_logs; exit 1; }
stop
restart m5 400
check "the index built again answers during the load" "$T" expect ki 300 310 1024 1
mc_check_loading m5 "the rebuilt index answered" || rc=1
mc_wait_log m5 "in the background in" 30 || { mc_dump_logs; exit 1; }
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null

# Two rows of one key: an older copy of ki/7's row (the oldest generation, other bytes' size)
# is put in the file.  The newer row wins; the older goes.
mc_persist_older_row "$DB" ki/7
mc_is "$(mc_persist_key_rows "$DB" ki/7)" 2 "the file holds two rows of ki/7" || rc=1
restart m6 0
mc_wait_log m6 "in the background in" 30 || { mc_dump_logs; exit 1; }
check "the key reads back as the newer row" "$T" expect ki 7 8 1024 1
check "every other key reads back" "$T" expect ki 0 $N 1024 1
check "the log says the older row goes" grep -q "have a newer row of their key" "$MC_TMP/m6.log"
stop
mc_is "$(mc_persist_key_rows "$DB" ki/7)" 1 "the older row is deleted" || rc=1

# Runs merge: ten rounds of puts a second and more apart, a run each (the helper writes one
# a second), merge eight at a time; the merged index still answers for every round's keys.
restart m8 0
mc_wait_log m8 "in the background in" 30 || { mc_dump_logs; exit 1; }
for i in $(seq 0 9); do
	MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$T" put-gen mg $((i * 20)) $((i * 20 + 20)) 1024 1 \
		>"$MC_TMP/mg.out" 2>&1 || { cat "$MC_TMP/mg.out"; mc_dump_logs; exit 1; }
	sleep 1.2	# the helper's run interval (1 s): one run a round
done
stop
runs=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
	"SELECT count(*) FROM runs").fetchone()[0])' "$DB.keys")
check "runs merged: $runs left of 14 written (all of one class: never more than 7)" test "$runs" -le 7
restart m9 400
check "after merges: keys of every round read back during the load" "$T" expect mg 0 200 1024 1
check "after merges: keys never stored are absent" "$T" expect none 0 3 1024 absent
mc_wait_log m9 "in the background in" 30 || { mc_dump_logs; exit 1; }
stop

# Schema 7: the same objects keyed by key, as a master before schema 8 wrote them.
python3 - "$DB" "$MC_TMP/v7.db" <<'PY'
import sqlite3, sys
src = sqlite3.connect(sys.argv[1])
dst = sqlite3.connect(sys.argv[2])
for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND "
                          "name != 'objects'"):
    dst.execute(sql)
for t in ("segments", "meta", "records"):
    for r in src.execute("SELECT * FROM " + t):
        dst.execute("INSERT INTO %s VALUES (%s)" % (t, ",".join("?" * len(r))), r)
dst.execute("DELETE FROM meta WHERE name = 'keys_id'")
dst.execute("CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, flags INTEGER "
            "NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, "
            "writer BLOB NOT NULL, replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0, "
            "checksum INTEGER) WITHOUT ROWID")
for r in src.execute("SELECT key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
                     "replicas, gen, checksum FROM objects"):
    dst.execute("INSERT INTO objects VALUES (?,?,?,?,?,?,?,?,?)", r)
dst.execute("PRAGMA user_version=7")
dst.commit()
PY
DB=$MC_TMP/v7.db
restart m7 0
mc_wait_log m7 "in the background in" 30 || { mc_dump_logs; exit 1; }
check "a schema 7 file is upgraded" grep -q "keyed by generation now (schema 8)" "$MC_TMP/m7.log"
check "after the upgrade every key reads back" "$T" expect ki 0 $N 1024 1
stop
mc_is "$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
	"PRAGMA user_version").fetchone()[0])' "$DB")" 8 "the file is at schema 8" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
