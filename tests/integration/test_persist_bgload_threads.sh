#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The background load by several threads, each scanning ranges of generations
# (MC_LOAD_THREADS): while four slowed threads scan, keys of the first, a middle and the last
# range not loaded yet read back byte-identical and unknown keys are absent; a kill -9 in the
# middle of such a load loses nothing; after it the table holds every key once (the key count
# is the number of keys; a range read twice or not at all would show) and every key reads
# back; two rows of one key in the first and a later range load as the newer, and the older
# row is deleted; the table is read from the file's pages (after the kill -9 too: the log is
# emptied at start), and through SQLite's statements with MC_LOAD_PAGES=0; a key whose newest
# row is unusable stays absent, its older row does not stand in.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
DB=$MC_TMP/master.db
N=12000

mc_persist_fill "$DB" lt $N || exit 1
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT

# restart NAME THREADS DELAY_MS: the master again on the same port and file.
restart() { MC_LOAD_THREADS=$2 mc_restart_persisted "$1" "$DB" "$3"; }
stop() { kill -TERM "$MPID"; wait "$MPID" 2>/dev/null; }
rc=0
check() { mc_check "$@" || rc=1; }	# check DESCRIPTION CMD...: one TAP line

# 12000 rows in 16 ranges, four threads each sleeping 1 s after every 1024 rows it reads: a
# scan of over 2 s.
restart t1 4 1000
check "the load uses four threads" grep -q "loading .*: 4 threads, [0-9]* ranges" "$MC_TMP/t1.log"
check "during the load: keys of the first range read back" "$T" expect lt 0 10 1024 1
check "during the load: keys of a middle range read back" "$T" expect lt 3000 3010 1024 1
check "during the load: keys of the last range read back" "$T" expect lt $((N - 10)) $N 1024 1
check "during the load: keys never stored are absent" "$T" expect none 0 5 1024 absent
mc_check_loading t1 "the reads were answered" || rc=1
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null

restart t2 4 0
mc_wait_log t2 "in the background in" 30 || { mc_dump_logs; exit 1; }
mc_is "$(mc_metric master_key_count)" $N "after kill -9 during the load: every key once" || rc=1
check "after kill -9 during the load: every key reads back" "$T" expect lt 0 $N 1024 1
check "after kill -9: the table is read from the file's pages" \
	grep -q "(\([0-9]*\) of \1 parts from the file's pages)" "$MC_TMP/t2.log"
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null

# Two rows of one key: an older copy of lt/5000's row (generation 1, another size) in the
# first range, its own row in a later one.
mc_persist_older_row "$DB" lt/5000
mc_is "$(mc_persist_key_rows "$DB" lt/5000)" 2 "the file holds two rows of lt/5000" || rc=1
restart t3 3 0
mc_wait_log t3 "in the background in" 30 || { mc_dump_logs; exit 1; }
mc_is "$(mc_metric master_key_count)" $N "three threads: every key once" || rc=1
check "the key with two rows reads back as the newer" "$T" expect lt 5000 5001 1024 1
check "every other key reads back" "$T" expect lt 0 $N 1024 1
check "the log says the older row goes" grep -q "have a newer row of their key" "$MC_TMP/t3.log"
check "the pages gave the older row too" \
	grep -q "(\([0-9]*\) of \1 parts from the file's pages)" "$MC_TMP/t3.log"
stop
mc_is "$(mc_persist_key_rows "$DB" lt/5000)" 1 "the older row is deleted" || rc=1

# Through SQLite's statements (MC_LOAD_PAGES=0): the same table.
MC_LOAD_PAGES=0 restart t4 2 0
mc_wait_log t4 "in the background in" 30 || { mc_dump_logs; exit 1; }
mc_is "$(mc_metric master_key_count)" $N "through SQLite: every key once" || rc=1
check "through SQLite: every key reads back" "$T" expect lt 0 $N 1024 1
check "through SQLite: no part from the pages" \
	grep -q "(0 of [0-9]* parts from the file's pages)" "$MC_TMP/t4.log"
stop
# A key whose newest row is unusable (its segment unknown) and an older, usable row: the key
# stays absent (an older row never stands in for a newer one) and both rows go.
python3 - "$DB" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
# An older copy of the row (generation 1, all else the same: usable on its own).
db.execute("INSERT INTO objects(gen, key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
           "replicas, checksum) SELECT 1, key, size, flags, put_start_ms, soft_pin_until_ms, "
           "writer, replicas, checksum FROM objects WHERE key = ?", (b"lt/6000",))
gen, reps = db.execute("SELECT gen, replicas FROM objects WHERE key = ? AND gen > 1",
                       (b"lt/6000",)).fetchone()
reps = bytearray(reps)
for i in range(0, len(reps), 42):
    reps[i + 10:i + 26] = b"\xee" * 16
db.execute("UPDATE objects SET replicas = ? WHERE gen = ?", (bytes(reps), gen))
db.commit()
PY
MC_LOAD_THREADS=2 restart t5 2 0
mc_wait_log t5 "in the background in" 30 || { mc_dump_logs; exit 1; }
mc_is "$(mc_metric master_key_count)" $((N - 1)) "a newest row unusable: the key is absent" || rc=1
check "... and its older row does not stand in" "$T" expect lt 6000 6001 1024 absent
stop
mc_is "$(mc_persist_key_rows "$DB" lt/6000)" 0 "... and both its rows go" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
