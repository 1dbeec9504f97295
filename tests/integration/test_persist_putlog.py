#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Puts in flight across a kill -9, at the protocol level (driven by test_persist_putlog.sh).

  before STATE ADDR METRICS_PORT: mount a segment; leave puts in flight that started more than
      a second ago (moved from the put log to the objects table) and just now (still in the put
      log); finish some puts, revoke some, finish and remove others; record in STATE what the
      writer holds and what was acknowledged.
  after STATE ADDR: re-mount the same segment; every finished put reads back at its address;
      the puts in flight are not objects; new puts until the segment is full never get a range
      that an in-flight put or a finished object holds, and get every other one.
Prints TAP lines; exit 0 on pass."""
import json
import struct
import sys
import time
import urllib.request

from mcrpc import Client, config, keys, s, segment, wait_until

SIZE = 64 << 10
SEG = 8 << 20
BASE = 0x10000000
checks = failed = 0


def ok(cond, what):
    global checks, failed
    checks += 1
    failed += not cond
    print(("ok" if cond else "not ok") + " %d - %s" % (checks, what), flush=True)


def put_start(c, names, pin=0):
    body = c.client_id + config(hard_pin=pin) + struct.pack("<I", len(names))
    for n in names:
        body += s(n) + struct.pack("<Q", SIZE)
    st, r = c.call("BATCH_PUT_START", body)
    return [(code, [x["addr"] for x in reps]) for code, reps in r.replica_lists()]


def end(c, names, op="PUT_END"):
    return c.call(op, c.client_id + b"\x04" + keys(names))[1].codes()


def metric(port, name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read()
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def before(state, addr, mport):
    c = Client(addr)
    seg_id = bytes(range(16))
    seg = segment(seg_id, "pl:1", BASE, SEG, "127.0.0.1:4999")
    st1, _ = c.call("MOUNT_SEGMENT", c.client_id + seg)
    st2, _ = c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + seg)
    ok(st1 == 0 and st2 == 0, "a segment of 8 MiB is mounted")
    old = ["old-%d" % i for i in range(20)]
    res = put_start(c, old)
    ok(all(code == 0 for code, _ in res), "20 puts start and are left in flight")
    held = [a for _, addrs in res for a in addrs]
    retired = wait_until(lambda: (metric(mport, "master_persist_putlog_retired_total") or 0) >= 20,
                         10)
    ok(retired, "after a second they move from the put log to the objects table")
    done = ["done-%d" % i for i in range(40)]
    res = put_start(c, done, pin=1)
    ok(all(code == 0 for code, _ in res) and end(c, done) == [0] * 40,
       "40 puts finish (hard-pinned: nothing evicts them)")
    acked = {k: addrs[0] for k, (_, addrs) in zip(done, res)}
    rev = ["rev-%d" % i for i in range(10)]
    ok(all(code == 0 for code, _ in put_start(c, rev)) and end(c, rev, "PUT_REVOKE") == [0] * 10,
       "10 puts are revoked")
    gone = ["gone-%d" % i for i in range(10)]
    put_start(c, gone)
    ok(end(c, gone) == [0] * 10 and
       c.call("REMOVE", b"\x01" + keys(gone))[1].codes() == [0] * 10,
       "10 puts finish and are removed")
    new = ["new-%d" % i for i in range(30)]
    res = put_start(c, new)
    ok(all(code == 0 for code, _ in res), "30 more puts start and are left in flight")
    held += [a for _, addrs in res for a in addrs]
    rows = metric(mport, "master_persist_putlog_rows")
    ok(rows == 1, "the put log holds the one row of puts still in it (%s)" % rows)
    with open(state, "w") as f:
        json.dump({"client": c.client_id.hex(), "seg": seg_id.hex(), "held": held,
                   "acked": acked, "inflight": old + new}, f)
    return 0


def after(state, addr):
    with open(state) as f:
        st = json.load(f)
    c = Client(addr, bytes.fromhex(st["client"]))
    seg = segment(bytes.fromhex(st["seg"]), "pl:1", BASE, SEG, "127.0.0.1:4999")
    code, _ = c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + seg)
    ok(code == 0, "the writer re-mounts its segment")
    acked = st["acked"]
    _, r = c.call("BATCH_GET_REPLICA_LIST", keys(list(acked)))
    r.take("Q")
    lists = r.replica_lists()
    ok(all(code == 0 and reps and reps[0]["addr"] == acked[k]
           for k, (code, reps) in zip(acked, lists)),
       "every acknowledged object is there, at its address")
    ex = c.call("BATCH_EXIST_KEY", keys(st["inflight"]))[1].codes()
    ok(ex == [0] * len(st["inflight"]), "the puts in flight at the crash are not objects")
    taken = set(st["held"]) | set(acked.values())
    got, n = [], 0
    while n < 200:
        res = put_start(c, ["fill-%d" % n])
        n += 1
        if res[0][0] != 0:
            break
        got += res[0][1]	# left in flight: nothing evicts them either
    bad = [a for a in got if a in taken]
    ok(got and not bad, "%d new puts fill the segment; none gets a range held at the crash%s"
       % (len(got), " (%s)" % bad[:3] if bad else ""))
    # 128 slots: 90 held (50 in flight, 40 acknowledged); those revoked or removed are free.
    ok(len(got) == SEG // SIZE - 90, "the ranges of puts revoked or removed are free again (%d)"
       % len(got))
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    rc = before(*sys.argv[2:4], int(sys.argv[4])) if mode == "before" else after(*sys.argv[2:4])
    print("# %d checks, %d failed" % (checks, failed))
    sys.exit(1 if failed or rc else 0)
