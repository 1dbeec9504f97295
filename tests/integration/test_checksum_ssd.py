#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Object checksums through a real client's SSD area (test_checksum_ssd.sh).

argv: master address, mode.  "put": a writer that moves no bytes puts ssd/ck (checksum
0, the CRC-64 of its 4096 zero bytes) and ssd/none (none) into the only mounted segment, the SSD client's.
"gone": exit 0 once both keys read -704.  "check": both are back from the SSD, ssd/ck with its
checksum, ssd/none without.  Prints TAP lines; exit 0 on pass.
"""
import struct
import sys
import time

from mcrpc import Client, config, keys, s

ADDR, MODE = sys.argv[1], sys.argv[2]
# The CRC-64 of ssd/ck's bytes: 4096 zero bytes (a fresh segment's, nothing is written), which
# is 0.  The SSD owner checks the bytes against it before offloading them, so it must be right;
# that it is 0 also shows a present checksum of value 0 survives the record and registration.
CK = 0
failed = 0


def ok(cond, what):
    global failed
    failed += 0 if cond else 1
    print(("ok" if cond else "not ok") + " - " + what, flush=True)


def get(c, names):
    st, r = c.call("BATCH_GET_REPLICA_LIST", keys(names))
    r.take("Q")
    lists = r.replica_lists()
    sums = []
    for _ in names:
        present, value = r.take("BQ")
        sums.append(value if present else None)
    return lists, sums


c = Client(ADDR)
if MODE == "put":
    for name, ck in (("ssd/ck", CK), ("ssd/none", None)):
        body = c.client_id + config() + struct.pack("<I", 1) + s(name) + struct.pack("<Q", 4096)
        st, r = c.call("PUT_START", body)
        code = r.replica_lists()[0][0] if st == 0 else st
        end = c.client_id + struct.pack("<B", 4) + keys([name])
        if ck is not None:
            end += struct.pack("<BQ", 1, ck)
        st, r = c.call("PUT_END", end)
        ok(code == 0 and st == 0 and r.codes() == [0], "put %s" % name)
elif MODE == "gone":
    deadline = time.time() + 20
    while time.time() < deadline:
        lists, _ = get(c, ["ssd/ck", "ssd/none"])
        if [code for code, _ in lists] == [-704, -704]:
            sys.exit(0)
        time.sleep(0.2)
    sys.exit(1)
else:
    deadline = time.time() + 20
    while True:
        lists, sums = get(c, ["ssd/ck", "ssd/none"])
        if [code for code, _ in lists] == [0, 0] or time.time() > deadline:
            break
        time.sleep(0.2)
    ok([code for code, _ in lists] == [0, 0] and
       all(reps and reps[0]["type"] == 2 for _, reps in lists),
       "both objects are back, from the restarted client's SSD (LOCAL_DISK)")
    ok(sums == [CK, None], "ssd/ck kept its checksum through the SSD record and the "
       "registration, ssd/none has none (%s)" % (sums,))
sys.exit(1 if failed else 0)
