#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Requests that wait for a master's background load, on the wire (test_persist_bgload.sh).

    bgload_park.py park ADDR METRICS_PORT KEY_LOADED   a put waits, what follows is answered
    bgload_park.py hold ADDR KEY_LOADED                 a put and a remove wait; prints "parked"
                                                        and sleeps (the master is killed)

The master must be loading slowly (MC_TEST_LOAD_DELAY_MS) when it starts.  Prints TAP lines
(park) and exits 0 on pass.
"""
import struct
import sys
import time

from mcrpc import HDR, MAGIC, OP, Client, Reader, config, keys, metric, s

ok_all = True


def ok(cond, what):
    global ok_all
    ok_all = ok_all and bool(cond)
    print(("ok" if cond else "not ok") + " - " + what, flush=True)


def put_start_body(c, key, size=1024):
    return c.client_id + config() + struct.pack("<I", 1) + s(key) + struct.pack("<Q", size)


def loading(port):
    """The load is not over: parked requests or an ExistKey answered from the file show it."""
    return metric(port, "master_load_waiting_requests")


def park(addr, mport, loaded_key):
    a = Client(addr)
    a.sock.settimeout(120)	# the answer comes at the end of the load
    t0 = time.time()
    put = a.send("PUT_START", put_start_body(a, "parked/0"))
    ping = a.send("PING", a.client_id)
    ex = a.send("EXIST_KEY", keys([loaded_key]))
    got = {}
    while ping not in got or ex not in got:
        rid, _, st, body = a.recv()
        got[rid] = (st, body, time.time() - t0)
    ok(put not in got, "a PutStart during the load waits (not answered before the ping behind it)")
    ok(got[ping][0] == 0 and got[ping][2] < 1.0,
       "a Ping behind it on the same connection is answered at once (%.3f s)" % got[ping][2])
    ok(got[ex][0] == 0 and struct.unpack_from("<Ii", got[ex][1]) == (1, 1) and got[ex][2] < 1.0,
       "an ExistKey of a key not loaded yet behind it is answered at once, present (%.3f s)"
       % got[ex][2])
    w = metric(mport, "master_load_waiting_requests")
    ok(w is not None and w >= 1, "master_load_waiting_requests counts it (%s)" % w)

    # The bound: 4096 requests wait on one connection, more are refused at once.
    b = Client(addr)
    b.sock.settimeout(120)
    n = 4100
    frames = []
    for i in range(n):
        frames.append((i + 1, keys(["park/none/%d" % i])))
    b.sock.sendall(b"".join(HDR.pack(MAGIC, 1, 0, OP["REMOVE"], len(k) + 1, 0, rid) +
                            b"\x00" + k for rid, k in frames))
    first = [b.recv() for _ in range(n - 4096)]
    ok([(r[0], r[2]) for r in first] == [(rid, -1010) for rid in range(4097, n + 1)],
       "past 4096 waiting requests on a connection, the next are refused at once with -1010")
    w = metric(mport, "master_load_waiting_requests")
    r = metric(mport, "master_load_refused_requests_total")
    ok(w is not None and w >= 4097 and r == n - 4096,
       "master_load_waiting_requests %s, master_load_refused_requests_total %s" % (w, r))

    # A SetTenant that waits holds back everything behind it on its connection, a ping and a
    # read of a key not loaded yet included.
    d = Client(addr)
    d.sock.settimeout(120)
    d_ids = [d.send("SET_TENANT", s("default")), d.send("PING", d.client_id),
             d.send("EXIST_KEY", keys([loaded_key[:-1] + "2"]))]
    # Requests that wait for the end do not hold back a lookup behind them: 1000 removes wait,
    # the read after them is answered from the file during the load.
    e = Client(addr)
    e.sock.settimeout(120)
    e.sock.sendall(b"".join(HDR.pack(MAGIC, 1, 0, OP["REMOVE"], len(k) + 1, 0, rid) +
                            b"\x00" + k for rid, k in
                            ((i + 1, keys(["park/e/%d" % i])) for i in range(1000))))
    e.next_id = 1001
    e_ex = e.send("EXIST_KEY", keys([loaded_key[:-1] + "3"]))
    rid, _, st, body = e.recv()
    w = metric(mport, "master_load_waiting_requests")
    ok(rid == e_ex and st == 0 and struct.unpack_from("<Ii", body) == (1, 1) and
       w is not None and w >= 1000 + 4096,
       "a read behind 1000 waiting removes is answered during the load, present (req_id %d, "
       "%s waiting)" % (rid, w))
    d.sock.settimeout(0.3)
    try:
        early = d.recv()
    except OSError:
        early = None
    ok(early is None, "nothing behind a waiting SetTenant is answered during the load (%s)"
       % (early[:3] if early else None,))
    d.sock.settimeout(120)

    # The end of the load: the put is answered by its req_id, the removes in their order.
    rid, _, st, body = a.recv()
    ok(rid == put and st == 0, "the PutStart is answered when the load is over (after %.2f s)"
       % (time.time() - t0))
    lists = Reader(body).replica_lists()
    ok(lists[0][0] == 0 and len(lists[0][1]) == 1, "with one replica")
    st, r = a.call("PUT_END", a.client_id + b"\x00" + keys(["parked/0"]))
    ok(st == 0 and r.codes() == [0], "and PutEnd completes it")
    rest = [b.recv() for _ in range(4096)]
    got = [(x[0], x[2], Reader(x[3]).codes() if x[2] == 0 else None) for x in rest]
    ok(got == [(rid, 0, [-704]) for rid in range(1, 4097)],
       "the 4096 waiting removes are answered after the load, in order (-704)")
    if got != [(rid, 0, [-704]) for rid in range(1, 4097)]:
        print("# first answers: %s" % got[:3])
    got = [d.recv() for _ in range(3)]
    ok([(x[0], x[2]) for x in got] == [(i, 0) for i in d_ids] and
       struct.unpack_from("<Ii", got[2][3]) == (1, 1),
       "after the load the SetTenant, the ping and the read behind it are answered, in order")
    got = [e.recv() for _ in range(1000)]
    ok([(x[0], x[2], Reader(x[3]).codes()) for x in got] ==
       [(rid, 0, [-704]) for rid in range(1, 1001)],
       "and the 1000 removes on the other connection, in order (-704)")
    w = metric(mport, "master_load_waiting_requests")
    ok(w == 0, "nothing waits any more (%s)" % w)
    return 0 if ok_all else 1


def hold(addr, remove_key):
    a = Client(addr)
    a.send("PUT_START", put_start_body(a, "lost/0"))
    a.send("REMOVE", b"\x00" + keys([remove_key]))
    print("parked", flush=True)
    time.sleep(60)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "park":
        sys.exit(park(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.exit(hold(sys.argv[2], sys.argv[3]))
