#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write a synthetic --persist_path database: one memory segment and N complete objects.

    scripts/gen-persist-db.py PATH N [SCHEMA]

For restart benchmarks at sizes a fill through the RPC path takes too long to reach (10M and
more).  Keys are "obj-%012d" (48 bytes with the prefix below), 64 bytes each; their offsets in
the segment are a permutation of the keys' order, so reading the table in key order finds the
ranges scattered over the segment as a real table does.  The segment belongs to a client that
is not running: a master started on the file keeps it for --remount_grace_period_sec.
SCHEMA is 8 (the default: the objects table keyed by generation) or 7 (keyed by key, which a
master upgrades in place when it opens the file).  The file has no key index (PATH.keys): a
master started on it builds one.
"""
import math
import sqlite3
import struct
import sys

path, n = sys.argv[1], int(sys.argv[2])
schema = int(sys.argv[3]) if len(sys.argv) > 3 else 8
if schema not in (7, 8):
    sys.exit("gen-persist-db.py: SCHEMA is 7 or 8")
seg_id = bytes(range(1, 17))
client_id = bytes(range(17, 33))
writer = client_id
prefix = "synthetic/restart/bench/"          # 24 bytes: keys of 40 bytes
db = sqlite3.connect(path)
if schema == 8:
    objects = """CREATE TABLE IF NOT EXISTS objects(gen INTEGER PRIMARY KEY, key BLOB NOT NULL,
  size INTEGER NOT NULL, flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL,
  soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, replicas BLOB NOT NULL,
  checksum INTEGER, sgen INTEGER);"""
else:
    objects = """CREATE TABLE IF NOT EXISTS objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL,
  flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL,
  writer BLOB NOT NULL, replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0,
  checksum INTEGER) WITHOUT ROWID;"""
db.executescript("""
PRAGMA journal_mode=WAL;
PRAGMA synchronous=OFF;
CREATE TABLE IF NOT EXISTS segments(id BLOB PRIMARY KEY, client_id BLOB NOT NULL,
  name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER NOT NULL,
  endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind INTEGER NOT NULL DEFAULT 0,
  token BLOB, dormant_until_ms INTEGER NOT NULL DEFAULT 0);
""" + objects + """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS records(kind INTEGER NOT NULL, id BLOB NOT NULL,
  value BLOB NOT NULL, PRIMARY KEY(kind, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS putlog(id INTEGER PRIMARY KEY, recs BLOB NOT NULL);
PRAGMA user_version=%d;
""" % schema)
db.execute("INSERT OR REPLACE INTO segments VALUES (?,?,?,?,?,?,?,0,NULL,0)",
           (seg_id, client_id, "127.0.0.1:1", 0x10000000, n * 128 + (1 << 20),
            "127.0.0.1:1", "tcp"))
# A step coprime with n scatters the offsets over [0, n) in key order.
step = int(n * 0.618033) | 1
while math.gcd(step, n) != 1:
    step += 2
rep = struct.Struct("<QBB16sQQ")


def rows():
    for j in range(n):
        slot = (j * step) % n
        key = ("%s%016d" % (prefix, j)).encode()
        yield (key, 64, 0, 1700000000000, 0, writer,
               rep.pack(j + 1, 0, 3, seg_id, slot * 64, 64), j + 1, None)


if schema == 8:
    db.executemany("INSERT INTO objects(key, size, flags, put_start_ms, soft_pin_until_ms, "
                   "writer, replicas, gen, checksum) VALUES (?,?,?,?,?,?,?,?,?)", rows())
else:
    db.executemany("INSERT INTO objects VALUES (?,?,?,?,?,?,?,?,?)", rows())
db.execute("INSERT OR REPLACE INTO meta VALUES ('next_gen', ?)", (n + 1,))
# The generations 1..N were this database's (none adopted from before it).
db.execute("INSERT OR REPLACE INTO meta VALUES ('gen_epoch', 1)")
db.execute("INSERT OR REPLACE INTO meta VALUES ('next_replica_id', ?)", (n + 1,))
db.commit()
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
