#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Protocol-level tests of the master's SSD tier (doc/protocol.md, MOUNT_LOCAL_DISK ...).

argv: master address, mode.  "main" runs against a master started with --offload_on_evict
--promotion_on_hit --default_kv_lease_ttl=300 --client_ttl=2 --persist_path=...; "reload" checks
what a restarted master (same --persist_path) recovered.  A fake client drives the protocol: it
mounts a 1 MiB memory segment and an SSD area and answers tasks without moving bytes (the master
never sees bytes).  Prints TAP lines; exit 0 on pass.
"""
import os
import struct
import sys
import time

from mcrpc import Client, config, keys, s, segment, wait_until

ADDR = sys.argv[1]
STATE = sys.argv[3] if len(sys.argv) > 3 else None
n_checks = 0
n_failed = 0
OFFLOAD, PROMOTE, DROP, REGISTER, LOST = 0, 1, 2, 3, 4
KB = 1024
ADDRS = {}


def ok(cond, what):
    global n_checks, n_failed
    n_checks += 1
    if not cond:
        n_failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n_checks, what), flush=True)


def put(c, name, size):
    body = c.client_id + config() + struct.pack("<I", 1) + s(name) + struct.pack("<Q", size)
    st, r = c.call("PUT_START", body)
    code, reps = r.replica_lists()[0]
    if code == 0:
        st, r = c.call("PUT_END", c.client_id + b"\x04" + keys([name]))
        code = r.codes()[0]
        ADDRS[name] = reps[0]["addr"]
    return code


def get_list(c, name):
    st, r = c.call("GET_REPLICA_LIST", keys([name]))
    r.take("Q")
    return r.replica_lists()[0]


def heartbeat(c, disk):
    st, r = c.call("OFFLOAD_HEARTBEAT", c.client_id + disk + struct.pack("<IQ", 100, 0))
    if st:
        return st, []
    tasks = []
    for _ in range(r.take("I")):
        kind = r.take("B")
        key = r.str().decode()
        size, src = r.take("QQ")
        dst_ep = r.str().decode()
        dst, gen = r.take("QQ")
        tasks.append(dict(kind=kind, key=key, size=size, src=src, dst_ep=dst_ep, dst=dst,
                          gen=gen))
    return 0, tasks


def notify(c, disk, items):
    body = c.client_id + disk + struct.pack("<I", len(items))
    for item in items:
        kind, key, size, addr, result = item[:5]
        gen = item[5] if len(item) > 5 else 0
        body += struct.pack("<B", kind) + s(key) + struct.pack("<QQiQ", size, addr, result, gen)
    st, r = c.call("NOTIFY_OFFLOAD", body)
    return st, (r.codes() if st == 0 else [])


def evict_disk(c, disk, names):
    st, r = c.call("EVICT_DISK_REPLICA", c.client_id + disk + keys(names))
    return r.codes() if st == 0 else st


def metric(name):
    import urllib.request
    port = os.environ.get("MC_METRICS_PORT")
    if not port:
        return None
    text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5).read()
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


def main():
    c = Client(ADDR)
    disk = os.urandom(16)
    mem_id = os.urandom(16)
    seg = segment(mem_id, "fake:1", 0x10000000, 1 << 20, "127.0.0.1:3001")
    c.call("MOUNT_SEGMENT", c.client_id + seg)
    c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + seg)
    st, _ = heartbeat(c, disk)
    ok(st == -101, "a heartbeat for an SSD area the master does not know gives -101")
    st, _ = c.call("MOUNT_LOCAL_DISK", c.client_id + disk + s("fake:1") + s("127.0.0.1:3001") +
                   struct.pack("<Q", 0))
    ok(st == -600, "an SSD area of 0 bytes is refused")
    st, _ = c.call("MOUNT_LOCAL_DISK", c.client_id + disk + s("fake:1") + s("127.0.0.1:3001") +
                   struct.pack("<Q", 64 << 20))
    ok(st == 0, "MountLocalDiskSegment of 64 MiB")
    st, tasks = heartbeat(c, disk)
    ok(st == 0 and tasks == [], "an idle heartbeat has no tasks")
    ok(metric("master_total_file_capacity_bytes") == 64 << 20,
       "master_total_file_capacity_bytes counts the SSD area")

    # Fill the 1 MiB segment; the next put makes eviction choose a victim, which waits for SSD.
    codes = [put(c, "o/%d" % i, 300 * KB) for i in range(3)]
    ok(codes == [0, 0, 0], "three 300 KiB objects fill the 1 MiB segment")
    first_addr = ADDRS["o/0"]
    time.sleep(0.4)             # their read leases end
    code = put(c, "o/3", 300 * KB)
    ok(code == -200, "a put while the victim is being offloaded fails (-200): memory is not "
       "freed before the SSD copy is in")
    st, tasks = heartbeat(c, disk)
    off = [t for t in tasks if t["kind"] == OFFLOAD]
    ok(len(off) >= 1 and off[0]["key"] == "o/0" and off[0]["src"] == first_addr and
       off[0]["size"] == 300 * KB and off[0]["gen"] > 0,
       "the heartbeat hands out an offload of the LRU object with its memory address and "
       "generation")
    ok(get_list(c, "o/0")[0] == 0 and get_list(c, "o/0")[1][0]["type"] == 0,
       "while offloading the object is still read from memory")
    time.sleep(0.4)
    st, res = notify(c, disk, [(OFFLOAD, t["key"], t["size"], (1 << 62) + (i << 36), 0)
                               for i, t in enumerate(off)])
    ok(st == 0 and res == [0] * len(off), "NotifyOffloadSuccess acknowledged")
    code, reps = get_list(c, "o/0")
    ok(code == 0 and len(reps) == 1 and reps[0]["type"] == 2 and reps[0]["addr"] == 1 << 62 and
       reps[0]["client_id"] == c.client_id and reps[0]["endpoint"] == "127.0.0.1:3001",
       "after the offload the object is read from the SSD (LOCAL_DISK, owner, address)")
    ok(put(c, "o/3", 300 * KB) == 0, "its memory was freed: the put now fits")
    st, res = notify(c, disk, [(REGISTER, "o/0", 300 * KB, (1 << 62) + (9 << 36), 0,
                                off[0]["gen"] + 1)])
    ok(res == [-705], "REGISTER of a copy with another generation than the master's is refused")
    # Memory is full: a second SSD read does not start a promotion (no eviction for it).
    adm0, rej0 = metric("master_promotion_admitted_total"), metric("master_promotion_rejected_cap_total")
    code, reps = get_list(c, "o/0")
    st, tasks = heartbeat(c, disk)
    ok(code == 0 and reps[0]["type"] == 2 and not [t for t in tasks if t["kind"] == PROMOTE] and
       metric("master_promotion_admitted_total") == adm0 and
       metric("master_promotion_rejected_cap_total") == rej0 + 1,
       "with memory full a hot SSD object is not promoted: counted as rejected, not admitted, "
       "still read from SSD")
    time.sleep(0.4)
    st, r = c.call("REMOVE", b"\x00" + keys(["o/2"]))
    ok(r.codes() == [0], "make room for a promotion")
    # The second SSD read admits a promotion (promotion_admission_threshold 2).
    code, reps = get_list(c, "o/0")
    st, tasks = heartbeat(c, disk)
    pro = [t for t in tasks if t["kind"] == PROMOTE]
    ok(len(pro) == 1 and pro[0]["key"] == "o/0" and pro[0]["src"] == 1 << 62 and
       pro[0]["dst_ep"] == "127.0.0.1:3001",
       "a repeatedly read SSD object gets a promotion task (SSD address -> memory replica)")
    if pro:
        ok(get_list(c, "o/0")[1][0]["type"] == 2, "until promoted it is still read from SSD")
        st, res = notify(c, disk, [(PROMOTE, "o/0", 300 * KB, 0, 0)])
        ok(res == [0], "NotifyPromotion acknowledged")
        code, reps = get_list(c, "o/0")
        ok(code == 0 and [r["type"] for r in reps] == [0] and reps[0]["addr"] == pro[0]["dst"],
           "after promotion the object is read from memory")
        ok(evict_disk(c, disk, ["o/0"]) == [-706],
           "EvictDiskReplica of an object a reader holds is refused (-706)")
        time.sleep(0.4)
        ok(evict_disk(c, disk, ["o/0"]) == [0], "once the lease ended the SSD copy may go")
        ok(get_list(c, "o/0")[0] == 0, "the memory copy stays readable")

    # A failed offload (the SSD write failed) keeps the object in memory, its last copy, and
    # the area backs off: no offload is handed out to it for a while.
    time.sleep(0.4)
    put(c, "o/4", 300 * KB)
    st, tasks = heartbeat(c, disk)
    off = [t for t in tasks if t["kind"] == OFFLOAD]
    ok(len(off) >= 1, "another eviction asks for an offload")
    st, res = notify(c, disk, [(OFFLOAD, t["key"], t["size"], 0, -800) for t in off])
    ok(res == [0] * len(off) and
       all(get_list(c, t["key"])[0] == 0 and get_list(c, t["key"])[1][0]["type"] == 0
           for t in off),
       "an offload that failed leaves the object readable in memory (not evicted)")
    put(c, "o/5", 300 * KB)
    st, tasks = heartbeat(c, disk)
    ok(not [t for t in tasks if t["kind"] == OFFLOAD],
       "right after a failed offload the area backs off: no offload task is handed out")
    st, res = notify(c, disk, [(OFFLOAD, "o/1", 300 * KB, 5 << 60, 0)])
    ok(res == [-704], "an answer to no task is refused (-704: delete what you wrote)")

    # Objects found on the SSD at start-up.
    st, res = notify(c, disk, [(REGISTER, "reg/a", 5000, (1 << 62) + (40 << 36), 0),
                               (REGISTER, "o/3", 12345, (1 << 62) + (41 << 36), 0),
                               (REGISTER, "", 10, 1, 0),
                               (REGISTER, "reg/b", 10, 0x7f0000001000, 0)])
    ok(res == [0, -705, -600, -600], "REGISTER: a new key is added, a different size refused, an "
       "empty key or an address outside the disk window invalid")
    code, reps = get_list(c, "reg/a")
    ok(code == 0 and reps[0]["type"] == 2 and reps[0]["size"] == 5000,
       "a registered object is readable from its SSD")
    # Removing an object that has an SSD copy tells the owner to delete it.
    time.sleep(0.4)
    st, r = c.call("REMOVE", b"\x00" + keys(["reg/a"]))
    ok(r.codes() == [0], "Remove of an SSD-only object")
    st, tasks = heartbeat(c, disk)
    ok(any(t["kind"] == DROP and t["key"] == "reg/a" and t["src"] == (1 << 62) + (40 << 36)
           for t in tasks), "the owner gets a DROP task for its SSD copy")
    st, res = notify(c, disk, [(REGISTER, "keep/1", 7000, (1 << 62) + (42 << 36), 0)])
    ok(res == [0], "keep/1 registered for the restart check")
    # An SSD copy its owner found corrupt is forgotten at once (leases or not).
    st, res = notify(c, disk, [(REGISTER, "lost/1", 4000, (1 << 62) + (60 << 36), 0)])
    code, reps = get_list(c, "lost/1")
    st, res2 = notify(c, disk, [(LOST, "lost/1", 4000, (1 << 62) + (60 << 36), -400),
                                (LOST, "lost/1", 4000, (1 << 62) + (60 << 36), -400)])
    ok(res == [0] and code == 0 and res2 == [0, -704] and get_list(c, "lost/1")[0] == -704,
       "LOST: a corrupt SSD copy is forgotten even while leased (then unknown: -704)")

    # Generations (the master started on a new database, so it adopts what older masters
    # wrote, newest first, and remembers what was removed meanwhile).
    st, res = notify(c, disk, [(REGISTER, "pre/1", 100, (1 << 62) + (50 << 36), 0, 5)])
    ok(res == [0], "an object written before this master is adopted")
    st, res = notify(c, disk, [(REGISTER, "pre/1", 100, (1 << 62) + (51 << 36), 0, 9),
                               (REGISTER, "pre/1", 100, (1 << 62) + (52 << 36), 0, 7)])
    code, reps = get_list(c, "pre/1")
    ok(res == [0, -705] and code == 0 and [r["addr"] for r in reps] == [(1 << 62) + (51 << 36)],
       "of two adopted copies the newer generation wins, an older one is refused")
    st, tasks = heartbeat(c, disk)
    ok(any(t["kind"] == DROP and t["key"] == "pre/1" and t["src"] == (1 << 62) + (50 << 36)
           for t in tasks), "the replaced older copy gets a DROP task")
    time.sleep(0.35)
    st, r = c.call("REMOVE", b"\x00" + keys(["pre/1"]))
    st, res = notify(c, disk, [(REGISTER, "pre/1", 100, (1 << 62) + (53 << 36), 0, 9)])
    ok(r.codes() == [0] and res == [-704],
       "a removed key is not adopted again from another SSD copy")
    st, res = notify(c, disk, [(REGISTER, "keep/%d" % i, 7000, (1 << 62) + ((42 + i) << 36), 0)
                               for i in (2, 3, 4)])
    ok(res == [0, 0, 0], "keep/2..4 registered for the ghost checks")
    if STATE:
        with open(STATE, "wb") as f:
            f.write(c.client_id + disk + mem_id)
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


def reload():
    with open(STATE, "rb") as f:
        raw = f.read()
    c = Client(ADDR, client_id=raw[:16])
    disk = raw[16:32]
    code, reps = get_list(c, "keep/1")
    ok(code == 0 and len(reps) == 1 and reps[0]["type"] == 2 and
       reps[0]["addr"] == (1 << 62) + (42 << 36) and reps[0]["size"] == 7000,
       "a restarted master still has the LOCAL_DISK replica, exactly")
    st, tasks = heartbeat(c, disk)
    ok(st == 0, "the SSD area survived the restart (heartbeat accepted)")
    # A second client fills memory until eviction hands out offloads that are never answered.
    d = Client(ADDR)
    ddisk = os.urandom(16)
    seg = segment(os.urandom(16), "fake2:1", 0x20000000, 1 << 20, "127.0.0.1:3002")
    d.call("MOUNT_SEGMENT", d.client_id + seg)
    d.call("REMOUNT_SEGMENT", d.client_id + struct.pack("<I", 1) + seg)
    d.call("MOUNT_LOCAL_DISK", d.client_id + ddisk + s("fake2:1") + s("127.0.0.1:3002") +
           struct.pack("<Q", 64 << 20))
    codes = []
    for i in range(12):
        codes.append(put(d, "d/%d" % i, 300 * KB))
        if codes[-1] == -200:
            break
        time.sleep(0.35 if i % 3 == 2 else 0)
    inflight = []
    for cl, dk in ((c, disk), (d, ddisk)):
        st, tasks = heartbeat(cl, dk)
        inflight += [t["key"] for t in tasks if t["kind"] == OFFLOAD]
    ok(codes[-1] == -200 and inflight, "offloads are in flight when the clients die (%s)" %
       ",".join(inflight))
    # Now both clients go silent: after client_ttl their objects, memory and SSD, are gone.
    wait_until(lambda: get_list(c, "keep/1")[0] == -704, 10)
    ok(get_list(c, "keep/1")[0] == -704, "a dead client's SSD objects are dropped")
    ok(all(get_list(c, k)[0] == -704 for k in inflight),
       "objects whose offload was in flight leave no dangling replica")
    st, tasks = heartbeat(c, disk)
    ok(st == -101, "its SSD area is unmounted")
    ok(metric("master_key_count") == 0 and metric("master_allocated_bytes") == 0
       and metric("master_allocated_file_size_bytes") == 0,
       "no key, no memory and no SSD bytes are left accounted")

    # Ghosts: the dead client's SSD objects may come back only as they were.
    st, r = c.call("REMOVE", b"\x00" + keys(["keep/2"]))
    ok(r.codes() == [-704], "keep/2, only on the dead SSD, is removed (not found)")
    e = Client(ADDR)
    edisk = os.urandom(16)
    seg = segment(os.urandom(16), "fake3:1", 0x30000000, 1 << 20, "127.0.0.1:3003")
    e.call("MOUNT_SEGMENT", e.client_id + seg)
    e.call("REMOUNT_SEGMENT", e.client_id + struct.pack("<I", 1) + seg)
    e.call("MOUNT_LOCAL_DISK", e.client_id + edisk + s("fake3:1") + s("127.0.0.1:3003") +
           struct.pack("<Q", 64 << 20))
    ok(put(e, "keep/3", 500) == 0, "keep/3 is put again while its SSD copy was away")
    st, res = notify(e, edisk, [(REGISTER, "keep/1", 7000, (1 << 62) + (42 << 36), 0, 0),
                                (REGISTER, "keep/2", 7000, (1 << 62) + (44 << 36), 0, 0),
                                (REGISTER, "keep/3", 7000, (1 << 62) + (45 << 36), 0, 0),
                                (REGISTER, "never/1", 10, (1 << 62) + (47 << 36), 0, 0)])
    ok(res == [0, -704, -705, -704], "the restarted owner gets keep/1 back; keep/2 (removed "
       "meanwhile), keep/3 (put again) and a key this master never knew are refused")
    code, reps = get_list(e, "keep/3")
    ok(code == 0 and len(reps) == 1 and reps[0]["type"] == 0 and reps[0]["size"] == 500,
       "keep/3 reads the new bytes")
    with open(STATE, "ab") as f:
        f.write(e.client_id + edisk)
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


def ghosts():
    """A second restart: the ghosts of the dead SSD area were persisted."""
    with open(STATE, "rb") as f:
        raw = f.read()
    e = Client(ADDR, client_id=raw[48:64])
    edisk = raw[64:80]
    st, _ = heartbeat(e, edisk)
    ok(st == 0, "the SSD area survived the restart")
    st, res = notify(e, edisk, [(REGISTER, "keep/4", 7000, (1 << 62) + (46 << 36), 0, 3),
                                (REGISTER, "keep/4", 7000, (1 << 62) + (46 << 36), 0, 0),
                                (REGISTER, "keep/2", 7000, (1 << 62) + (44 << 36), 0, 0)])
    ok(res == [-704, 0, -704], "after a restart the persisted ghost of keep/4 takes exactly its "
       "generation back, and removed keep/2 stays removed")
    code, reps = get_list(e, "keep/1")
    ok(code == 0 and reps[0]["type"] == 2, "keep/1 registered before the restart is still there")
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit({"main": main, "reload": reload, "ghosts": ghosts}[sys.argv[2]]())
