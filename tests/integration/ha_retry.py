#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Requests while the HA leader waits to send a batch of its log again (test_ha_write_retry.sh).

    ha_retry.py pause ADDR METRICS_PORT FAULT_FILE ACKED   etcd fails while FAULT_FILE exists
                                                           (MC_TEST_ETCD_FAULT): a PutEnd waits,
                                                           reads and a put come in the pause,
                                                           then etcd answers again
    ha_retry.py stepdown ADDR METRICS_PORT FAULT_FILE ACKED  the same, but etcd never answers:
                                                           the leader steps down
    ha_retry.py verify ADDR ACKED                          every key in ACKED is readable

Keys whose put was acknowledged are appended to ACKED.  Prints TAP lines; exit 0 on pass.
"""
import os
import socket
import struct
import sys
import time
import urllib.request

from mcrpc import Client, Reader, config, keys, metric, s, segment, wait_until

ok_all = True


def ok(cond, what):
    global ok_all
    ok_all = ok_all and bool(cond)
    print(("ok" if cond else "not ok") + " - " + what, flush=True)


def http(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


FAILURES = "ha_oplog_etcd_write_failures_total"


def put_start(c, key):
    st, r = c.call("PUT_START", c.client_id + config() + struct.pack("<I", 1) + s(key) +
                   struct.pack("<Q", 4096))
    return st


def put_end_body(c, key):
    return c.client_id + b"\x00" + keys([key])


def answer(c, timeout):
    """The next answer on c within timeout seconds: (req_id, status, codes), or None when
    none came (or the master closed the connection)."""
    c.sock.settimeout(timeout)
    try:
        rid, _, st, body = c.recv()
    except (socket.timeout, ConnectionError, OSError):
        return None
    return rid, st, (Reader(body).codes() if st == 0 and body else None)


def record(ackfile, key):
    with open(ackfile, "a") as f:
        f.write(key + "\n")


def acked(rep, rid):
    return rep is not None and rep[0] == rid and rep[1] == 0 and rep[2] == [0]


def setup(addr, mport, fault, key):
    """A client with a segment and a key put started (durable); then etcd fails and its
    PutEnd is sent.  Returns the client, the PutEnd's req_id and the failures seen before."""
    a = Client(addr)
    st, _ = a.call("MOUNT_SEGMENT", a.client_id + segment(os.urandom(16), "retry:" + key,
                                                           0x10000000, 1 << 26, "127.0.0.1:1"))
    ok(st == 0, "a segment mounted (%d)" % st)
    ok(put_start(a, key) == 0, "PutStart %s" % key)
    before = metric(mport, FAILURES) or 0
    open(fault, "w").close()
    pe = a.send("PUT_END", put_end_body(a, key))
    ok(wait_until(lambda: (metric(mport, FAILURES) or 0) > before, 10, 0.02),
       "the batch of the PutEnd of %s fails to reach etcd" % key)
    return a, pe, before


def in_pause(addr, mport, put_key):
    """Reads on one connection and a put on another while the batch waits to be sent again:
    each is handled in one of the leader's 50 ms pauses (the injected failures are at once).
    Returns the client whose PutStart put_key waits (None without put_key)."""
    b = Client(addr)
    c = Client(addr) if put_key else None
    for i in range(20):
        b.send("EXIST_KEY", keys(["retry/none/%d" % i]))
        if c is not None and i == 10:
            c.send("PUT_START", c.client_id + config() + struct.pack("<I", 1) + s(put_key) +
                   struct.pack("<Q", 4096))
        time.sleep(0.02)
    return c


def pause(addr, mport, fault, ackfile):
    a, pe, before = setup(addr, mport, fault, "retry/1")
    c = in_pause(addr, mport, "retry/2")
    early = answer(a, 0.5)
    ok(early is None, "no answer to the PutEnd while its batch is not in etcd (%s)" % (early,))
    early2 = answer(c, 0.1)
    ok(early2 is None, "nor to a PutStart that came in the pause (%s)" % (early2,))
    if early2 is not None:
        c.sock.close()	# its answer came: the PutEnd below goes on a connection of its own
        c = Client(addr, c.client_id)
    n = (metric(mport, FAILURES) or 0) - before
    ok(n >= 5, "the batch was tried again and again (%d failures)" % n)
    if acked(early, pe):
        record(ackfile, "retry/1")
    os.unlink(fault)
    rep = answer(a, 10)
    ok(acked(rep, pe), "etcd answers again: the PutEnd is acknowledged (%s)" % (rep,))
    if acked(rep, pe):
        record(ackfile, "retry/1")
    rep2 = early2 if early2 is not None else answer(c, 10)
    ok(rep2 is not None and rep2[1] == 0,
       "so is the PutStart from the pause (%s)" % (rep2 and rep2[:2],))
    try:
        st, r = c.call("PUT_END", put_end_body(c, "retry/2"))
        codes = r.codes() if st == 0 else None
    except (OSError, ConnectionError) as e:
        st, codes = str(e), None
    ok(st == 0 and codes == [0], "and its PutEnd (%s %s)" % (st, codes))
    if st == 0 and codes == [0]:
        record(ackfile, "retry/2")
    return 0 if ok_all else 1


def stepdown(addr, mport, fault, ackfile):
    a, pe, before = setup(addr, mport, fault, "retry/3")
    in_pause(addr, mport, None)
    ok(wait_until(lambda: http(mport, "/ha_status") not in ("serving", ""), 20, 0.05),
       "the leader that cannot write its batch steps down")
    rep = answer(a, 2)
    ok(not acked(rep, pe), "the PutEnd whose batch never reached etcd was not acknowledged "
       "(%s)" % (rep,))
    if acked(rep, pe):
        record(ackfile, "retry/3")
    return 0 if ok_all else 1


def verify(addr, ackfile):
    names = [line.strip() for line in open(ackfile) if line.strip()]
    c = Client(addr)
    st, r = c.call("BATCH_EXIST_KEY", keys(names))
    codes = r.codes() if st == 0 else None
    ok(st == 0 and codes == [1] * len(names),
       "every acknowledged key is readable on the new leader (%s: %s)" % (names, codes))
    return 0 if ok_all else 1


if __name__ == "__main__":
    if sys.argv[1] == "pause":
        sys.exit(pause(*sys.argv[2:6]))
    if sys.argv[1] == "stepdown":
        sys.exit(stepdown(*sys.argv[2:6]))
    sys.exit(verify(sys.argv[2], sys.argv[3]))
