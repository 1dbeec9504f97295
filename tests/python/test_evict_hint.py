# SPDX-License-Identifier: Apache-2.0
"""ReplicateConfig.eviction_hint reaches a master running --eviction_policy=prefix: the last key
of a batch put without a hint is taken for a partial block and evicted first, one hinted 0 is not,
and a single put hinted EVICTION_HINT_LAST_PARTIAL is.  The keys left are read from the admin
port's /get_all_keys, which uses no object (a probe would count as a use and reorder them)."""
import os
import subprocess
import urllib.request

import pytest

from conftest import BUILD, free_port, wait_port, UPSTREAM
from mooncake.store import (MooncakeDistributedStore, ReplicateConfig,
                            EVICTION_HINT_LAST_PARTIAL)

pytestmark = pytest.mark.skipif(UPSTREAM, reason="our master's eviction policy")

VALUE = 256 << 10


@pytest.fixture
def prefix_master(tmp_path):
    port, admin = free_port(), free_port()
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    log = open(str(tmp_path / "master.log"), "w")
    # No lease holds an object and only a put that finds no room evicts, one object at a time.
    p = subprocess.Popen([os.path.join(BUILD, "mooncake_master"), "--rpc_address=127.0.0.1",
                          "--rpc_port=%d" % port, "--metrics_port=%d" % admin,
                          "--eviction_policy=prefix", "--default_kv_lease_ttl=0",
                          "--eviction_high_watermark_ratio=1", "--eviction_ratio=0.001"],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_port(port)
        wait_port(admin)
        yield "127.0.0.1:%d" % port, admin
    finally:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()


def keys_left(admin):
    with urllib.request.urlopen("http://127.0.0.1:%d/get_all_keys" % admin, timeout=5) as r:
        return set(r.read().decode().split())


def hinted(h):
    c = ReplicateConfig()
    c.eviction_hint = h
    return c


def test_eviction_hint_orders_victims(prefix_master):
    addr, admin = prefix_master
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 4 << 20, 1 << 20, "tcp", "", addr) == 0
    try:
        v = b"x" * VALUE
        for i in range(3):
            assert s.put("old%d" % i, v) == 0
        assert s.put_batch(["n0", "n1", "n2"], [v] * 3) == 0                  # no hint
        assert s.put_batch(["f0", "f1", "f2"], [v] * 3, hinted(0)) == 0       # last block full
        assert s.put("p0", v, hinted(EVICTION_HINT_LAST_PARTIAL)) == 0
        with pytest.raises((ValueError, TypeError)):
            s.put("bad", v, hinted(4))
        put = set(keys_left(admin))
        assert {"old0", "n2", "f2", "p0"} <= put and "bad" not in put
        # Fill the 4 MiB segment (16 values) and go on until three objects were evicted.
        i = 0
        while len(put) - len(keys_left(admin) & put) < 3:
            assert s.put("fill%d" % i, v) == 0
            i += 1
            assert i < 64, "nothing was evicted"
        gone = put - keys_left(admin)
        # p0 and n2 first (partial blocks), then the oldest object: not f2.
        assert gone == {"p0", "n2", "old0"}, gone
    finally:
        s.remove_all(force=True)
        s.close()


def test_eviction_hint_rejects_bad_values():
    c = ReplicateConfig()
    assert c.eviction_hint is None and ReplicateConfig.eviction_hint is None
    s = MooncakeDistributedStore()
    for bad in (-1, 2, "1", True, 1.0):
        c.eviction_hint = bad
        with pytest.raises((ValueError, TypeError)):
            s.put("k", b"v", c)
