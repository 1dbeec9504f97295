# SPDX-License-Identifier: Apache-2.0
"""The store calls upstream 0.3.14 added, against real daemons: probe_key / batch_probe_key,
is_exist / batch_is_exist with ExistOptions, ranged-read snapshots, the new ReplicateConfig
fields and setup keys, the embedded master, and mooncake.store's package layout.

Each test starts its own master (the `master` fixture) unless it needs flags of ours.  With
MC_PARITY_BIN and upstream's package first on PYTHONPATH the file runs against upstream's wheel:
against 0.3.13.post1 the calls it lacks are skipped (`needs_0314`), against 0.3.14 they run too;
tests of our daemons' flags are `ours_only`.
"""
import ctypes
import os
import subprocess
import sys
import time

import pytest

from conftest import BUILD, UPSTREAM, free_port, wait_port
import mooncake.store as mstore
from mooncake.store import MooncakeDistributedStore, ReplicateConfig

ours_only = pytest.mark.skipif(UPSTREAM, reason="our daemons' flags")
needs_0314 = pytest.mark.skipif(not hasattr(MooncakeDistributedStore, "probe_key"),
                                reason="a call upstream added in 0.3.14")


def client(master, gsize=32 << 20, **kw):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", gsize, 1 << 20, "tcp", "", master, **kw) == 0
    return s


def registered(store, size=4096):
    b = ctypes.create_string_buffer(size)
    assert store.register_buffer(ctypes.addressof(b), size) == 0
    return b, ctypes.addressof(b)


@pytest.fixture
def st(master):
    s = client(master)
    for i in range(6):
        assert s.put("p/%d" % i, b"%d" % i * 100) == 0
    yield s
    s.remove_all(True)
    s.close()


def leased(s, key):
    """A read lease keeps an object from remove without force (OBJECT_HAS_LEASE)."""
    rc = s.remove(key)
    return rc == -706


# ---------------------------------------------------------------- existence checks

def test_is_exist_and_batch_is_exist_lease(st):
    assert st.is_exist("p/0") == 1 and st.is_exist("nope") == 0
    assert st.batch_is_exist(["p/1", "nope"]) == [1, 0]
    assert leased(st, "p/0") and leased(st, "p/1"), "ExistKey leases what it finds"


@needs_0314
def test_probe_key_grants_no_lease(st):
    assert st.probe_key("p/2") == 1 and st.probe_key("nope") == 0
    assert st.batch_probe_key(["p/3", "nope", "p/4"]) == [1, 0, 1]
    assert st.batch_probe_key(["p/3"], "none", 5) == [1]
    assert st.batch_probe_key([]) == []
    assert not leased(st, "p/2") and not leased(st, "p/3") and not leased(st, "p/4")


@needs_0314
def test_batch_probe_key_last_hit_only(st):
    # Groups of two: [p/0 p/1] [p/2 nope] [p/3 p/4]: only the last whole group is leased.
    keys = ["p/0", "p/1", "p/2", "nope", "p/3", "p/4"]
    assert st.batch_probe_key(keys, "LastHitOnly", 2) == [1, 1, 1, 0, 1, 1]
    assert leased(st, "p/3") and leased(st, "p/4")
    assert not leased(st, "p/0") and not leased(st, "p/2")
    # (leased() removed what it found unleased.)
    assert st.batch_probe_key(["p/5", "p/0"], policy="LastHitOnly", candidate_size=1) == [1, 0]


@needs_0314
def test_batch_probe_key_bad_arguments(st):
    for policy in ("bad", "lasthitonly", "NONE"):
        with pytest.raises(ValueError, match="Unknown batch_probe_key policy"):
            st.batch_probe_key(["p/0"], policy)
    assert st.batch_probe_key(["p/0", "p/1", "p/2"], "LastHitOnly", 2) == [-600] * 3
    assert st.batch_probe_key(["p/0"], "LastHitOnly", 0) == [-600]
    with pytest.raises(TypeError):
        st.batch_probe_key(["p/0"], "LastHitOnly", -1)
    with pytest.raises(TypeError):
        st.probe_key(5)


@needs_0314
def test_exist_options(st):
    o = mstore.ExistOptions()
    assert o.prefetch_to_memory is False
    assert str(o) == "ExistOptions: { prefetch_to_memory: 0 }"
    o.prefetch_to_memory = True
    assert str(o) == "ExistOptions: { prefetch_to_memory: 1 }"
    # Without enable_ssd_prefetch the option changes nothing.
    assert st.is_exist("p/0", o) == 1 and st.is_exist(key="nope", options=o) == 0
    assert st.batch_is_exist(["p/1", "nope"], o) == [1, 0]
    assert st.batch_is_exist(keys=["p/1"], options=mstore.ExistOptions()) == [1]


@ours_only
def test_prefetch_to_memory_promotes_ssd_only_objects(tmp_path):
    """An object only an SSD area holds comes back into memory after is_exist with
    prefetch_to_memory on a client with enable_ssd_prefetch; without it, it stays on SSD."""
    port = free_port()
    m = subprocess.Popen([os.path.join(BUILD, "mooncake_master"), "--rpc_address=127.0.0.1",
                          "--rpc_port=%d" % port, "--metrics_port=0", "--enable_offload",
                          "--default_kv_lease_ttl=200"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    addr = "127.0.0.1:%d" % port
    ssd = str(tmp_path / "ssd")
    try:
        wait_port(port)
        w = client(addr, 16 << 20, enable_ssd_offload=True, ssd_offload_path=ssd)
        for i in range(3):
            assert w.put("pf/%d" % i, bytes([i]) * 100000) == 0
        end = time.time() + 10
        while len([f for f in os.listdir(ssd) if f.endswith(".mco")]) < 3 and time.time() < end:
            time.sleep(0.05)
        w.close()
        # Reopened on the same area with fresh memory: the objects are registered from the SSD
        # only.
        w2 = client(addr, 16 << 20, enable_ssd_offload=True, ssd_offload_path=ssd)
        r = MooncakeDistributedStore()
        assert r.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                        "global_segment_size": 0, "master_server_addr": addr,
                        "enable_ssd_prefetch": True, "ssd_prefetch_cooldown_sec": 5,
                        "ssd_prefetch_dedup_ttl_sec": 30}) == 0

        def in_memory(key):
            return any(d.is_memory_replica() for d in r.get_replica_desc(key))

        end = time.time() + 10
        while r.probe_key("pf/2") != 1 and time.time() < end:
            time.sleep(0.05)
        assert r.batch_probe_key(["pf/0", "pf/1", "pf/2"]) == [1, 1, 1]
        assert not in_memory("pf/0") and not in_memory("pf/1")
        o = mstore.ExistOptions()
        assert r.is_exist("pf/0") == 1                  # no option: no promotion
        o.prefetch_to_memory = True
        assert r.batch_is_exist(["pf/1", "nope"], o) == [1, 0]
        end = time.time() + 10
        while not in_memory("pf/1") and time.time() < end:
            time.sleep(0.05)
        assert in_memory("pf/1"), "the prefetched object is in memory"
        assert not in_memory("pf/0"), "the other one stays on SSD"
        assert r.get("pf/1") == bytes([1]) * 100000
        r.close()
        w2.close()
    finally:
        m.terminate()
        m.wait(5)


# ---------------------------------------------------------------- ranged-read snapshots

@needs_0314
def test_ranged_read_snapshot(st):
    snap = st.prepare_get_into_ranges_snapshot(["p/1", "p/2", "nope"])
    assert isinstance(snap, mstore.RangedReadSnapshot)
    dst, a = registered(st)
    got = st.get_into_ranges_from_snapshot(snap, [a], [["p/1", "p/2"]], [[[0], [10]]],
                                           [[[0], [5]]], [[[10], [10]]])
    assert got == [[[10], [10]]]
    assert dst.raw[:20] == b"1" * 10 + b"2" * 10
    assert st.get_into_ranges_from_snapshot(snap, [a], [["p/3"]], [[[0]]], [[[0]]],
                                            [[[10]]]) == [[[-600]]], "not in the snapshot"
    assert st.get_into_ranges_from_snapshot(snap, [a], [["nope"]], [[[0]]], [[[0]]],
                                            [[[10]]]) == [[[-704]]]
    assert st.get_into_ranges_from_snapshot(snap, [a], [["p/1"]], [[[0]]], [[[95]]],
                                            [[[10]]]) == [[[-600]]], "past the object's end"
    other = MooncakeDistributedStore()
    with pytest.raises(RuntimeError):
        other.get_into_ranges_from_snapshot(snap, [a], [["p/1"]], [[[0]]], [[[0]]], [[[1]]])
    with pytest.raises(RuntimeError):
        other.prepare_get_into_ranges_snapshot(["p/1"])
    assert st.prepare_get_into_ranges_snapshot([]) is not None


@needs_0314
def test_snapshot_belongs_to_its_store(st, master):
    snap = st.prepare_get_into_ranges_snapshot(["p/1"])
    other = client(master, 0)
    dst, a = registered(other)
    with pytest.raises(ValueError, match="another Store"):
        other.get_into_ranges_from_snapshot(snap, [a], [["p/1"]], [[[0]]], [[[0]]], [[[1]]])
    other.close()


@ours_only
def test_snapshot_renews_its_replica_lists(cluster):
    """The cluster's master leases for 500 ms: a snapshot read long after still reads, and the
    lists it renewed follow a key that was put again meanwhile."""
    s = client(cluster.master)
    assert s.put("snap/a", b"A" * 64) == 0
    snap = s.prepare_get_into_ranges_snapshot(["snap/a"])
    dst, a = registered(s)
    assert s.get_into_ranges_from_snapshot(snap, [a], [["snap/a"]], [[[0]]], [[[0]]],
                                           [[[8]]]) == [[[8]]]
    time.sleep(0.6)             # past the lease: the lists must be renewed before reading
    assert s.remove("snap/a") == 0 and s.put("snap/a", b"B" * 64) == 0
    assert s.get_into_ranges_from_snapshot(snap, [a], [["snap/a"]], [[[0]]], [[[0]]],
                                           [[[8]]]) == [[[8]]]
    assert dst.raw[:8] == b"B" * 8
    s.remove_all(True)
    s.close()


# ---------------------------------------------------------------- configuration

@needs_0314
def test_replicate_config_new_fields(st):
    c = ReplicateConfig()
    for f in ("preferred_hca_names", "per_key_preferred_hca_names", "residency_affinity_ids",
              "session_ids"):
        assert getattr(c, f) is None
    for f, bad in (("session_ids", [1]), ("preferred_hca_names", "mlx5_0"),
                   ("per_key_preferred_hca_names", ["a"])):
        with pytest.raises(TypeError):
            setattr(c, f, bad)
    c.preferred_hca_names = ["mlx5_0", "mlx5_1"]        # any count: NICs to prefer
    c.session_ids = ["s1"]
    c.residency_affinity_ids = ["r1"]
    c.per_key_preferred_hca_names = [["mlx5_0"], []]    # single puts do not look at it
    assert c.session_ids == ["s1"] and c.per_key_preferred_hca_names == [["mlx5_0"], []]
    assert st.put("cfg/a", b"x", c) == 0 and st.get("cfg/a") == b"x"
    buf, a = registered(st)
    # session_ids and residency_affinity_ids hold one id per key of any put, and
    # per_key_preferred_hca_names one list per key of a batch: two here.
    c.session_ids, c.residency_affinity_ids = ["s1", "s2"], ["r1", "r2"]
    assert st.put("cfg/b", b"x", c) == -600
    assert st.batch_put_from(["cfg/b", "cfg/c"], [a, a + 16], [16, 16], c) == [0, 0]
    assert st.batch_put_from(["cfg/d", "cfg/e", "cfg/f"], [a, a + 16, a + 32], [16] * 3,
                             c) == [-600] * 3
    c.per_key_preferred_hca_names = [["a"], ["b"], ["c"]]
    assert st.batch_put_from(["cfg/d", "cfg/e", "cfg/f"], [a, a + 16, a + 32], [16] * 3,
                             c) == [-600] * 3, "the session and residency ids count two"
    c.session_ids = c.residency_affinity_ids = c.per_key_preferred_hca_names = None
    assert st.batch_put_from(["cfg/d", "cfg/e", "cfg/f"], [a, a + 16, a + 32], [16] * 3,
                             c) == [0] * 3
    c.session_ids = []
    assert st.put("cfg/g", b"x", c) == -600
    st.unregister_buffer(a)


@pytest.mark.parametrize("extra", [
    {"enable_ssd_prefetch": True}, {"enable_ssd_prefetch": "false"},
    {"ssd_prefetch_cooldown_sec": 0, "ssd_prefetch_dedup_ttl_sec": 0},
    {"ssd_prefetch_cooldown_sec": "7", "ssd_prefetch_dedup_ttl_sec": 1.5},
    {"egm_numa_nodes": "auto"}, {"enable_egm_store_pool": False},
    {"enable_embedded_master": False},
])
def test_setup_dict_keys_of_0314(master, extra):
    d = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
         "master_server_addr": master}
    d.update(extra)
    s = MooncakeDistributedStore()
    assert s.setup(d) == 0
    assert s.put("dk/a", b"v") == 0 and s.get("dk/a") == b"v"
    s.remove_all(True)
    s.close()


@ours_only
@pytest.mark.parametrize("extra", [
    {"ssd_prefetch_cooldown_sec": "soon"}, {"ssd_prefetch_dedup_ttl_sec": -1},
    {"enable_egm_store_pool": True},
])
def test_setup_dict_bad_keys_of_0314(master, extra):
    d = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
         "master_server_addr": master}
    d.update(extra)
    assert MooncakeDistributedStore().setup(d) == -600


# ---------------------------------------------------------------- embedded master

@needs_0314
def test_embedded_master_makes_one_process_a_store():
    addr = "127.0.0.1:%d" % free_port()
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 1 << 20, "tcp", "", addr,
                   enable_embedded_master=True) == 0
    assert s.put("emb/a", b"hello") == 0 and s.get("emb/a") == b"hello"
    assert s.batch_probe_key(["emb/a", "emb/x"]) == [1, 0]
    assert s.remove("emb/a", True) == 0 and s.get("emb/a") == b""
    s.close()


@ours_only
def test_embedded_master_takes_other_clients():
    """Ours listens on master_server_addr (upstream's picks a private port): other clients
    join the process's store there."""
    addr = "127.0.0.1:%d" % free_port()
    s = client(addr, enable_embedded_master=True)
    assert s.put("emb/a", b"hello") == 0
    t = client(addr, 0)
    assert t.get("emb/a") == b"hello" and t.put("emb/b", b"world") == 0
    assert s.get("emb/b") == b"world"
    t.close()
    s.close()


@needs_0314
def test_embedded_master_from_the_environment():
    addr = "127.0.0.1:%d" % free_port()
    prog = ("import sys\nfrom mooncake.store import MooncakeDistributedStore\n"
            "s = MooncakeDistributedStore()\n"
            "rc = s.setup({'local_hostname': '127.0.0.1', 'metadata_server': 'P2PHANDSHAKE',"
            " 'master_server_addr': %r})\n"
            "ok = rc == 0 and s.put('env/a', b'x') == 0 and s.get('env/a') == b'x'\n"
            "s.close()\nsys.exit(0 if ok else 1)\n" % addr)
    env = dict(os.environ, MOONCAKE_ENABLE_EMBEDDED_MASTER="1")
    assert subprocess.run([sys.executable, "-c", prog], env=env, timeout=60).returncode == 0


@ours_only
def test_embedded_master_port_taken(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 1 << 20, "tcp", "", master,
                   enable_embedded_master=True) != 0, "the address is the running master's"
    s.close()


# ---------------------------------------------------------------- package layout

@needs_0314
def test_store_is_a_package_over_the_native_module():
    import mooncake._store
    assert hasattr(mstore, "__path__"), "mooncake.store is a package"
    assert mooncake._store.__file__.endswith(".so")
    from mooncake.store import MooncakeHostMemAllocator, ReplicaStatus, SoftPinAction  # noqa
    assert mstore.RangedReadSnapshot.__module__ == "mooncake._store"


@needs_0314
@pytest.mark.parametrize("backend,ok", [("cpp", True), ("rs", False), ("x", False)])
def test_store_backend_variable(backend, ok):
    env = dict(os.environ, MOONCAKE_STORE_BACKEND=backend)
    p = subprocess.run([sys.executable, "-c", "import mooncake.store"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode == 0) == ok, p.stderr
    if not ok:
        assert "MOONCAKE_STORE_BACKEND" in p.stderr.strip().splitlines()[-1]
