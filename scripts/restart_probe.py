#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A persisted master's start as a client sees it, without a process start per probe (which a
loaded 2-core machine delays by tenths of a second): one Python process starts the master on
DB, connects as soon as the RPC port accepts, sends one ExistKey of KEY and times the answer.

    scripts/restart_probe.py MASTER DB KEY [PORT]

Prints the seconds from the master's start to the port accepting and to the answer (1: found),
then stops the master (SIGTERM) 1.5 s after the start.  The master's log is in /tmp/pr.log (its
'in the background in' line says when the load ended, if it did by then).  With WAIT_LOAD=1 it
stops the master only once the load is done (at most 120 s) and also prints the seconds from
the start to the log's line of the load's end, by that line's own time (milliseconds; nothing
polls the master meanwhile).
"""
import datetime
import os
import socket
import struct
import subprocess
import sys
import time

master, db, key = sys.argv[1], sys.argv[2], sys.argv[3].encode()
port = int(sys.argv[4]) if len(sys.argv) > 4 else 24101
t0 = time.time()
p = subprocess.Popen([master, "--rpc_address=127.0.0.1", "--rpc_port=%d" % port,
                      "--metrics_port=%d" % (port + 1), "--persist_path=" + db,
                      "--enable_metric_reporting=false", "--remount_grace_period_sec=600"],
                     stdout=open("/tmp/pr.log", "w"), stderr=subprocess.STDOUT)
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=0.05)
        s.settimeout(30)
        break
    except OSError:
        if p.poll() is not None:
            sys.exit("the master exited: see /tmp/pr.log")
        time.sleep(0.002)
t1 = time.time()
body = struct.pack("<II", 1, len(key)) + key
# The RPC header: magic, version, kind, opcode (43: BatchExistKey), body length, status, req_id.
s.sendall(struct.pack("<IBBHIiQ", 0x5052434D, 1, 0, 43, len(body), 0, 1) + body)
buf = b""
while len(buf) < 32:
    d = s.recv(64)
    if not d:
        sys.exit("connection closed")
    buf += d
t2 = time.time()
status = struct.unpack_from("<i", buf, 12)[0]
ans = struct.unpack_from("<Ii", buf, 24)[1] if status == 0 else status
loaded = ""
if os.environ.get("WAIT_LOAD") == "1":
    while time.time() - t0 < 120 and p.poll() is None:
        done = [ln for ln in open("/tmp/pr.log") if "in the background in" in ln]
        if done:
            at = datetime.datetime.strptime(done[0][:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            loaded = ", loaded after %.3f s" % (at - t0)
            break
        time.sleep(0.05)
time.sleep(max(0.0, 1.5 - (time.time() - t0)))
p.terminate()
p.wait()
print("port %.3f s, ExistKey=%d after %.3f s (%.3f s after the port)%s" %
      (t1 - t0, ans, t2 - t0, t2 - t1, loaded))
