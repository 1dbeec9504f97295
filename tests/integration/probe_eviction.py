# SPDX-License-Identifier: Apache-2.0
"""What lookups that do not read cost eviction: batch_is_exist (ExistKey, a read lease on every
key it finds) against batch_probe_key (ProbeKey, no lease), as vLLM's scheduler looks up prefix
blocks it may never read.

For each mode a fresh master and a client with a SEGMENT-byte pool: the pool is filled with
"cold" objects, then one thread looks all of them up in a loop (nobody reads them) while another
puts "new" objects, which need eviction.  Printed per mode: puts that succeeded, which objects
eviction freed (cold or new), and the master's count of objects evicted although a lookup lease
held them.  With leases on every cold object, eviction can free only the new objects (or, here,
the leased ones as a last resort; upstream's master frees nothing and puts fail); without them
it frees the least recently used, the cold ones.

    probe_eviction.py MASTER_BIN [--check]

MASTER_BIN is the directory of mooncake_master (ours, or upstream's with its package first on
PYTHONPATH).  --check turns the expectations for our master into assertions (exit 1).
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from mooncake.store import MooncakeDistributedStore

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from conftest import free_port, wait_port  # noqa: E402

SEGMENT = 64 << 20
VALUE = 1 << 20
COLD = 56           # 56 MiB of 64: past the 0.80 watermark below
NEW = 40            # more than the free room: eviction has to run


def metric(port, name):
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read()
    except OSError:
        return None
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def run(master_bin, mode):
    port, mport = free_port(), free_port()
    log = tempfile.NamedTemporaryFile(prefix="mc-probe-master-", suffix=".log", delete=False)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    m = subprocess.Popen([os.path.join(master_bin, "mooncake_master"), "--rpc_address=127.0.0.1",
                          "--rpc_port=%d" % port, "--metrics_port=%d" % mport,
                          "--default_kv_lease_ttl=10000", "--eviction_high_watermark_ratio=0.8",
                          "--eviction_ratio=0.1"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_port(port)
        addr = "127.0.0.1:%d" % port
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", SEGMENT, 4 << 20, "tcp", "", addr) == 0
        value = b"c" * VALUE
        cold = ["cold/%d" % i for i in range(COLD)]
        assert all(s.put(k, value) == 0 for k in cold), "the pool takes the cold objects"
        stop = threading.Event()
        lookups = [0]

        def look():
            while not stop.is_set():
                if mode == "batch_is_exist":
                    s.batch_is_exist(cold)
                else:
                    s.batch_probe_key(cold)
                lookups[0] += 1

        t = threading.Thread(target=look)
        t.start()
        time.sleep(0.3)         # the lookups are running
        ok = fail = 0
        for i in range(NEW):
            rc = s.put("new/%d" % i, b"n" * VALUE)
            ok += rc == 0
            fail += rc != 0
        stop.set()
        t.join()
        # Who is left, checked without leasing anything.
        have = s.batch_probe_key(cold + ["new/%d" % i for i in range(NEW)])
        res = {"mode": mode, "lookups": lookups[0], "puts_ok": ok, "puts_failed": fail,
               "cold_evicted": COLD - sum(1 for x in have[:COLD] if x == 1),
               "new_evicted": ok - sum(1 for x in have[COLD:] if x == 1),
               "leased_evicted": metric(mport, "master_evicted_probe_leased_key_count")}
        s.close()
        return res
    finally:
        m.terminate()
        m.wait(10)
        log.close()
        os.unlink(log.name)


def main():
    master_bin = sys.argv[1]
    check = "--check" in sys.argv
    rows = [run(master_bin, "batch_is_exist"), run(master_bin, "batch_probe_key")]
    print("# pool %d MiB, %d cold objects of 1 MiB looked up in a loop, %d new puts" %
          (SEGMENT >> 20, COLD, NEW))
    print("%-16s %8s %8s %11s %12s %11s %15s" % ("lookup", "lookups", "puts_ok", "puts_failed",
                                                 "cold_evicted", "new_evicted",
                                                 "leased_evicted"))
    for r in rows:
        print("%-16s %8d %8d %11d %12d %11d %15s" % (
            r["mode"], r["lookups"], r["puts_ok"], r["puts_failed"], r["cold_evicted"],
            r["new_evicted"], "n/a" if r["leased_evicted"] is None else r["leased_evicted"]))
    if not check:
        return 0
    exist, probe = rows
    failed = 0
    for cond, what in (
            (exist["puts_ok"] == NEW and probe["puts_ok"] == NEW, "every put succeeds"),
            (exist["new_evicted"] > 0, "with ExistKey leases eviction frees new objects"),
            (probe["new_evicted"] == 0 and probe["cold_evicted"] > 0,
             "without leases eviction frees the cold objects only"),
            (probe["leased_evicted"] == 0, "batch_probe_key leaves no lease to break")):
        print(("ok" if cond else "not ok") + " - " + what)
        failed += not cond
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
