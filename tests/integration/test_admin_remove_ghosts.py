#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The admin server's remove and remove_all take the RPC's care (regression: they once skipped
the ghosts of SSD copies that are away and the adoption of objects older than the master, so an
SSD owner could bring back what an operator had removed).

argv: master address, admin (metrics) port.  The master is fresh (no database): objects of
generations older than it are adopted from SSD areas until something closes that window.
A fake client mounts a memory segment and SSD areas and registers SSD copies (REGISTER items of
NotifyOffloadSuccess) without moving bytes.  Prints TAP lines; exit 0 on pass.
"""
import json
import os
import struct
import sys
import time
import urllib.error
import urllib.request

from mcrpc import Client, keys, s, segment

ADDR, ADMIN = sys.argv[1], sys.argv[2]
REGISTER = 3
n_checks = 0
n_failed = 0


def ok(cond, what, got=None):
    global n_checks, n_failed
    n_checks += 1
    if not cond:
        n_failed += 1
    line = ("ok" if cond else "not ok") + " %d - %s" % (n_checks, what)
    if not cond and got is not None:
        line += " (got %r)" % (got,)
    print(line, flush=True)


def admin_post(path):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (ADMIN, path), method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def register(c, disk, items):
    body = c.client_id + disk + struct.pack("<I", len(items))
    for key, addr, gen in items:
        body += struct.pack("<B", REGISTER) + s(key) + struct.pack("<QQiQ", 4096, addr, 0, gen)
    st, r = c.call("NOTIFY_OFFLOAD", body)
    return r.codes() if st == 0 else st


def mount_disk(c, disk):
    st, _ = c.call("MOUNT_LOCAL_DISK", c.client_id + disk + s("fake:1") + s("127.0.0.1:3001") +
                   struct.pack("<Q", 64 << 20))
    return st


def main():
    c = Client(ADDR)
    mem = segment(os.urandom(16), "fake:1", 0x10000000, 1 << 20, "127.0.0.1:3001")
    c.call("MOUNT_SEGMENT", c.client_id + mem)
    c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + mem)
    disk_a, disk_b = os.urandom(16), os.urandom(16)
    ok(mount_disk(c, disk_a) == 0, "an SSD area mounted")
    addr = lambda i: (1 << 62) + (i << 36)

    # Remove of a key the master does not know, while it adopts older objects: an SSD copy of
    # that key must not be adopted afterwards.
    st, j = admin_post("/api/v1/remove?key=old/2")
    ok(st == 404 and j.get("error_code") == -704, "admin remove of an unknown key: 404, -704",
       (st, j))
    res = register(c, disk_a, [("old/2", addr(1), 5)])
    ok(res == [-704], "an older SSD copy of a key removed through the admin server is not "
       "adopted", res)
    res = register(c, disk_a, [("old/1", addr(2), 5), ("gh/1", addr(3), 7)])
    ok(res == [0, 0], "older SSD copies are adopted while the window is open", res)

    # The SSD area goes away: gh/1, only there, is forgotten but leaves a ghost.
    st, _ = c.call("UNMOUNT_SEGMENT", c.client_id + disk_a)
    ok(st == 0, "the SSD area unmounted", st)
    gone = False
    for _ in range(50):
        st, r = c.call("GET_REPLICA_LIST", keys(["gh/1"]))
        r.take("Q")
        if r.replica_lists()[0][0] == -704:
            gone = True
            break
        time.sleep(0.05)
    ok(gone, "its objects are forgotten")
    ok(mount_disk(c, disk_b) == 0, "another SSD area mounted")

    st, j = admin_post("/api/v1/remove_all?force=true")
    ok(st == 200 and j.get("success") is True, "admin remove_all succeeds", (st, j))
    res = register(c, disk_b, [("gh/1", addr(4), 7)])
    ok(res == [-704], "after admin remove_all the ghost of a forgotten SSD object is gone: "
       "its copy is not taken back", res)
    res = register(c, disk_b, [("old/3", addr(5), 5)])
    ok(res == [-704], "after admin remove_all objects older than the master are no longer "
       "adopted", res)
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
