#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Store client driver for scripts/bench-partition.sh, written against the Python API that
upstream Mooncake's wheel and this project's package share (mooncake.store), so the same
scenarios run on both; PYTHONPATH or the interpreter's environment picks the implementation.
The subcommands and the call-log format are those of tests/integration/fault_tool:

  fill PREFIX N SIZE [REPLICAS]          put PREFIX/0..N-1
  verify PREFIX N SIZE                   every PREFIX/i reads back byte-identical
  writer PREFIX SECONDS SIZE REPLICAS ACKFILE LOG
  reader PREFIX N SIZE SECONDS LOG
  verify-acked FILE SIZE

writer and reader stop at SECONDS or once the file MC_STOP_FILE (if set) exists.
Call log lines: START LATENCY RC OP KEY (RC 0 success, 1 wrong bytes, else an error code; a get
that returns nothing is -1, the Python API gives no code).  Master address in MC_MASTER, this
client's address in MC_LOCAL_HOST.
"""
import hashlib
import os
import sys
import time

from mooncake.store import MooncakeDistributedStore, ReplicateConfig


def content(key, size, gen):
    seed = hashlib.sha256(("%s/%d/%d" % (key, gen, size)).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def connect():
    st = MooncakeDistributedStore()
    rc = st.setup(os.environ.get("MC_LOCAL_HOST", "127.0.0.1"), "P2PHANDSHAKE", 0,
                  64 << 20, "tcp", "", os.environ.get("MC_MASTER", "127.0.0.1:50051"))
    if rc != 0:
        print("setup failed: %d" % rc)
        sys.exit(2)
    return st


def config(replicas):
    c = ReplicateConfig()
    c.replica_num = replicas
    return c


def fill(st, prefix, n, size, replicas=1):
    cfg, bad = config(replicas), 0
    for i in range(n):
        key = "%s/%d" % (prefix, i)
        rc = st.put(key, content(key, size, 3), cfg)
        if rc != 0:
            bad += 1
            if bad <= 3:
                print("# put %s: %d" % (key, rc))
    print("%s - put %d objects of %d bytes, %d replicas, under %s (%d failed)"
          % ("ok" if bad == 0 else "not ok", n, size, replicas, prefix, bad))
    return bad != 0


def check_get(st, key, size, gen):
    v = st.get(key)
    if v is None or len(v) == 0:
        return -1
    return 0 if len(v) == size and v == content(key, size, gen) else 1


def verify(st, prefix, n, size):
    good = bad = 0
    for i in range(n):
        rc = check_get(st, "%s/%d" % (prefix, i), size, 3)
        good += rc == 0
        bad += rc != 0
        if rc != 0 and bad <= 3:
            print("# get %s/%d: %d" % (prefix, i, rc))
    print("# verify %s: %d identical, 0 absent, %d bad" % (prefix, good, bad))
    print("%s - %s/*: %d of %d read back byte-identical"
          % ("ok" if bad == 0 else "not ok", prefix, good, n))
    return bad != 0


def running(end):
    stop = os.environ.get("MC_STOP_FILE")
    return time.monotonic() < end and not (stop and os.path.exists(stop))


def log_call(log, start, lat, rc, op, key):
    log.write("%.6f %.6f %d %s %s\n" % (start, lat, rc, op, key))
    log.flush()


def writer(st, prefix, secs, size, replicas, ackfile, logfile):
    cfg, pace = config(replicas), float(os.environ.get("MC_PACE_MS", "50")) / 1000
    end, i, acked, failed = time.monotonic() + secs, 0, 0, 0
    with open(ackfile, "w") as ack, open(logfile, "w") as log:
        while running(end):
            key = "%s/%d" % (prefix, i)
            i += 1
            t0, w0 = time.monotonic(), time.time()
            rc = st.put(key, content(key, size, 5), cfg)
            log_call(log, w0, time.monotonic() - t0, rc, "put", key)
            if rc == 0:
                ack.write(key + "\n")
                ack.flush()
                acked += 1
            else:
                failed += 1
                time.sleep(0.02)
            time.sleep(pace)
    print("# writer %s: %d puts acknowledged, %d failed" % (prefix, acked, failed))
    return 0


def reader(st, prefix, n, size, secs, logfile):
    end, i, good, failed = time.monotonic() + secs, 0, 0, 0
    with open(logfile, "w") as log:
        while running(end):
            key = "%s/%d" % (prefix, i % n)
            i += 1
            t0, w0 = time.monotonic(), time.time()
            rc = check_get(st, key, size, 3)
            log_call(log, w0, time.monotonic() - t0, rc, "get", key)
            good += rc == 0
            failed += rc != 0
            time.sleep(0.02 if rc else 0.002)
    print("# reader %s: %d gets right, %d failed" % (prefix, good, failed))
    return 0


def verify_acked(st, ackfile, size):
    n = bad = 0
    with open(ackfile) as f:
        for line in f:
            key = line.strip()
            if not key:
                continue
            n += 1
            rc = check_get(st, key, size, 5)
            if rc != 0:
                bad += 1
                if bad <= 5:
                    print("# %s: %d" % (key, rc))
    print("# verify-acked: %d acknowledged, %d identical, %d bad" % (n, n - bad, bad))
    print("%s - all %d acknowledged objects read back byte-identical (%d bad)"
          % ("ok" if n > 0 and bad == 0 else "not ok", n, bad))
    return not (n > 0 and bad == 0)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    st = connect()
    cmd, a = argv[1], argv[2:]
    if cmd == "fill":
        rc = fill(st, a[0], int(a[1]), int(a[2]), int(a[3]) if len(a) > 3 else 1)
    elif cmd == "verify":
        rc = verify(st, a[0], int(a[1]), int(a[2]))
    elif cmd == "writer":
        rc = writer(st, a[0], float(a[1]), int(a[2]), int(a[3]), a[4], a[5])
    elif cmd == "reader":
        rc = reader(st, a[0], int(a[1]), int(a[2]), float(a[3]), a[4])
    elif cmd == "verify-acked":
        rc = verify_acked(st, a[0], int(a[1]))
    else:
        print(__doc__)
        rc = 2
    sys.stdout.flush()
    # Leave without tearing the client down: a store whose master is unreachable may block in
    # its destructor, and the figures are already written.
    os._exit(1 if rc else 0)


if __name__ == "__main__":
    main(sys.argv)
