# SPDX-License-Identifier: Apache-2.0
"""The direct lane to the master: a calling thread sends its request on its own connection and
reads the answer itself.  It must follow the main connection's rules: a master that closed the
idle lane, or refuses it (max_connections), costs no failed call; a stopped master ends a call with -900 after
2 s of silence (-901 at the call's deadline when that comes first), later calls fail at once until
the master answers again, and then calls succeed again."""
import os
import signal
import threading
import time

import pytest

from conftest import Cluster

RPC_FAIL, RPC_TIMEOUT = -900, -901


@pytest.fixture
def own_cluster(request):
    c = Cluster(getattr(request, "param", ()))
    yield c
    for p in c.procs:
        try:
            p.send_signal(signal.SIGCONT)
        except OSError:
            pass
    c.stop()


def open_store(cluster, env=None):
    from mooncake.store import MooncakeDistributedStore
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 1 << 20, "tcp", "",
                       cluster.master) == 0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return s


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


def wait_success(fn, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if fn() == 1:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("own_cluster", [["--rpc_conn_timeout_seconds=2"]], indirect=True)
def test_lane_closed_by_an_idle_master_is_reopened(own_cluster, capfd):
    s = open_store(own_cluster)
    assert s.put("idle", b"v") == 0
    assert s.is_exist("idle") == 1
    time.sleep(3.5)         # the master closes the idle lane after 2 s (the main one is pinged)
    assert s.is_exist("idle") == 1, "a call on a lane the master had closed failed"
    assert s.batch_is_exist(["idle", "none"]) == [1, 0]
    s.close()
    err = capfd.readouterr().err
    assert "unreachable" not in err, err


@pytest.mark.parametrize("own_cluster", [["--max_connections=3"]], indirect=True)
def test_lane_refused_by_max_connections_leaves_calls_working(own_cluster, capfd):
    # The daemon's two connections and our main one fit; our lane is refused.
    s = open_store(own_cluster)
    end = time.monotonic() + 2.5
    n = 0
    while time.monotonic() < end:
        assert s.put("r/%d" % n, b"v") == 0
        assert s.batch_is_exist(["r/%d" % n, "none"]) == [1, 0]
        n += 1
    s.close()
    err = capfd.readouterr().err
    assert "unreachable" not in err, err
    log = open(os.path.join(own_cluster.tmp, "master.log")).read()
    assert "refusing connection" in log, "the lane was not refused: the test proves nothing"


def stopped_master_case(cluster, env, first_code, first_lo, first_hi):
    s = open_store(cluster, env)
    assert s.put("k", b"v") == 0
    assert s.is_exist("k") == 1
    master = cluster.procs[0]
    master.send_signal(signal.SIGSTOP)
    try:
        r, t = timed(lambda: s.is_exist("k"))
        assert r == first_code and first_lo <= t <= first_hi, (r, t)
        r, t = timed(lambda: s.is_exist("k"))
        assert r == RPC_FAIL and t < 0.5, ("a call while the master is suspect", r, t)
    finally:
        master.send_signal(signal.SIGCONT)
    assert wait_success(lambda: s.is_exist("k"), 5), "no success within 5 s of SIGCONT"
    assert s.get("k") == b"v"
    s.close()


def test_stopped_master_ends_a_call_after_2s_of_silence(own_cluster):
    stopped_master_case(own_cluster, None, RPC_FAIL, 1.8, 3.0)


def test_stopped_master_ends_a_call_at_its_deadline(own_cluster):
    stopped_master_case(own_cluster, {"MC_RPC_TIMEOUT_MS": "500"}, RPC_TIMEOUT, 0.4, 1.2)


def test_stopped_master_ends_a_spinning_call_after_2s_of_silence(own_cluster):
    # MC_RPC_SPIN=1: the call looks for its answer before it sleeps, whatever the cores.
    stopped_master_case(own_cluster, {"MC_RPC_SPIN": "1"}, RPC_FAIL, 1.8, 3.0)


@pytest.mark.parametrize("spin", ["0", "1"])
def test_spin_or_not_calls_of_every_size_answer_right(own_cluster, spin):
    """Whether a lane call spins depends on how long the last answer of its size took: small
    and large calls mixed on one lane, spinning forced on or off, every answer is right."""
    s = open_store(own_cluster, {"MC_RPC_SPIN": spin})
    for r in range(20):
        keys = ["sp%s/%d/%d" % (spin, r, i) for i in range(128)]
        assert s.put_batch(keys, [b"%d" % i for i in range(128)]) == 0
        assert s.is_exist(keys[r]) == 1 and s.is_exist("sp-none") == 0
        assert s.batch_is_exist(keys + ["sp-none"]) == [1] * 128 + [0]
        assert s.get(keys[r]) == b"%d" % r
    s.close()


def test_lane_off_and_threads_mixing_lane_and_loop(own_cluster):
    off = open_store(own_cluster, {"MC_RPC_DIRECT": "0"})
    assert off.put("off", b"x" * 100) == 0 and off.get("off") == b"x" * 100
    off.close()
    s = open_store(own_cluster)
    keys = ["t/%d" % i for i in range(64)]
    for k in keys[::2]:
        assert s.put(k, b"v") == 0
    want = [1, 0] * 32
    bad = []

    def worker():
        for _ in range(300):
            r = s.batch_is_exist(keys)
            if r != want:
                bad.append(r)

    ts = [threading.Thread(target=worker) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad, bad[:2]
    s.close()


def master_connections(master):
    """This process's established TCP connections to the master's port."""
    port = int(master.rsplit(":", 1)[1])
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    for name in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[2].rsplit(":", 1)[1], 16) == port and f[3] == "01" and f[9] in inodes:
                n += 1
    return n


def test_threads_calling_at_once_get_lanes_of_their_own(own_cluster):
    # One thread keeps to one lane; threads calling at once open more (up to four), and every
    # answer still goes to the call that asked.
    s = open_store(own_cluster)
    keys = ["lanes/%d" % i for i in range(32)]
    for k in keys[::2]:
        assert s.put(k, b"v") == 0
    for _ in range(50):
        assert s.batch_is_exist(keys) == [1, 0] * 16
    assert master_connections(own_cluster.master) == 2, "one thread, more than one lane"
    bad = []

    def worker(tid):
        for i in range(400):
            k = "lanes/t%d/%d" % (tid, i)
            if s.put(k, b"w%d" % i) != 0 or s.batch_is_exist([k, k + "/none"]) != [1, 0]:
                bad.append(k)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad, bad[:3]
    n = master_connections(own_cluster.master)
    assert 3 <= n <= 5, "%d connections to the master: threads did not get lanes" % n
    assert s.get("lanes/t3/399") == b"w399"
    s.close()
