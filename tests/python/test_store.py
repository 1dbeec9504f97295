# SPDX-License-Identifier: Apache-2.0
"""mooncake.store.MooncakeDistributedStore against a live cluster: every method of upstream's Python
store API, its return codes and its buffers."""
import ctypes
import os
import threading
import time

import pytest

from mooncake.store import (MooncakeDistributedStore, ReplicateConfig, SoftPinAction,
                            ObjectDataType, ReplicaStatus, MooncakeHostMemAllocator,
                            bind_to_numa_node, BufferHandle, ReplicaDescriptor)
from mooncake.mooncake_config import MooncakeConfig


def buf(n, seed=1):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def cbuf(data):
    """A ctypes buffer holding data; returns (buffer, address)."""
    b = ctypes.create_string_buffer(data, len(data))
    return b, ctypes.addressof(b)


def test_setup_positional_and_kwargs(cluster):
    s = MooncakeDistributedStore()
    assert s.health_check() == 1            # not initialized
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", cluster.master, engine=None,
                 tenant_id="default")
    assert rc == 0 and type(rc) is int
    assert s.health_check() == 0
    host = s.get_hostname()
    assert host.startswith("127.0.0.1:") and 12300 <= int(host.split(":")[1]) <= 14300
    assert s.close() == 0 and s.close() == 0    # idempotent
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", cluster.master) == 0  # reusable
    s.close()


def test_setup_needs_seven_positional(cluster):
    s = MooncakeDistributedStore()
    with pytest.raises(TypeError):
        s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "")
    with pytest.raises(TypeError):
        s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", cluster.master, device_name="x")


def test_setup_dict_form(cluster):
    s = MooncakeDistributedStore()
    rc = s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                  "global_segment_size": "16MB", "local_buffer_size": "16 MB",
                  "master_server_addr": cluster.master, "unknown_key": 1})
    assert rc == 0
    assert s.put("dict/k", b"hello") == 0 and s.get("dict/k") == b"hello"
    s.remove_all(force=True)
    s.close()
    assert MooncakeDistributedStore().setup({"metadata_server": "P2PHANDSHAKE"}) == -600


def test_unreachable_master_fails_fast():
    s = MooncakeDistributedStore()
    t0 = time.time()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", "127.0.0.1:1")
    assert rc == -900 and time.time() - t0 < 5


def test_put_get_and_missing(store):
    assert store.put("a", b"value-a") == 0
    assert store.get("a") == b"value-a"
    assert store.get(key="a") == b"value-a"
    assert store.get("missing") == b""
    assert store.get_size("a") == 7 and store.get_size("missing") == -704
    assert store.is_exist("a") == 1 and store.is_exist("missing") == 0
    with pytest.raises(TypeError):
        store.put(key="x", val=b"y")            # wrong keyword name
    with pytest.raises(TypeError):
        store.put("x", 5)                       # not a buffer


def test_put_existing_key_does_not_overwrite(store):
    assert store.put("same", b"first") == 0
    assert store.put("same", b"second!") == 0
    assert store.get("same") == b"first"


def test_upsert_overwrites(store):
    assert store.upsert("u", b"one") == 0
    assert store.upsert("u", b"two") == 0                 # same size: in place
    assert store.get("u") == b"two"
    assert store.upsert("u", b"three-longer") == 0        # new size
    assert store.get("u") == b"three-longer"
    cfg = ReplicateConfig()
    cfg.soft_pin_ttl_ms = 1000                            # TTL without ENABLE is refused
    assert store.upsert("u", b"x", cfg) == -600


def test_sizes_from_one_byte_to_beyond_local_buffer(store):
    for n in (1, 4095, 65536, (1 << 20) + 1, 8 << 20):     # local_buffer_size is 1 MiB
        data = os.urandom(n)
        assert store.put("size/%d" % n, data) == 0
        assert store.get("size/%d" % n) == data
    assert store.put("empty", b"") == -600


def test_put_parts_and_batch(store):
    assert store.put_parts("parts", b"ab", bytearray(b"cd"), memoryview(b"ef")) == 0
    assert store.get("parts") == b"abcdef"
    with pytest.raises(RuntimeError):
        store.put_parts("parts2", memoryview(b"abcd").cast("B", (2, 2)))
    assert store.put_batch(["b1", "b2"], [b"one", b"two"]) == 0
    assert store.get_batch(["b1", "nope", "b2"]) == [b"one", b"", b"two"]


def test_zero_copy_registered_buffers(store):
    data = buf(3 << 20)
    src, addr = cbuf(data)
    dst, daddr = cbuf(b"\0" * len(data))
    assert store.register_buffer(addr, len(data)) == 0
    assert store.register_buffer(daddr, len(data)) == 0
    assert store.put_from("zc", addr, len(data)) == 0
    assert store.get_into("zc", daddr, len(data)) == len(data)
    assert dst.raw == data
    assert store.get_into("zc", daddr, 10) < 0              # buffer too small
    assert store.get_into("missing", daddr, len(data)) == -704
    assert store.unregister_buffer(addr) == 0
    assert store.unregister_buffer(daddr) == 0


def test_batch_put_from_and_get_into_mixed(store):
    items = [buf(100 + i * 1000, i) for i in range(8)]
    bufs = [cbuf(d) for d in items]
    keys = ["bp/%d" % i for i in range(8)]
    res = store.batch_put_from(keys, [a for _, a in bufs], [len(d) for d in items])
    assert res == [0] * 8 and all(type(r) is int for r in res)
    outs = [cbuf(b"\0" * 10000) for _ in range(9)]
    res = store.batch_get_into(keys + ["bp/missing"], [a for _, a in outs], [10000] * 9)
    assert res[:8] == [len(d) for d in items] and res[8] == -704
    assert all(outs[i][0].raw[:len(items[i])] == items[i] for i in range(8))
    assert store.batch_put_from(["x"], [1, 2], [3]) == [-600]   # mismatched lists
    assert store.batch_put_from([], [], []) == []
    assert store.batch_is_exist(keys[:2] + ["no"]) == [1, 1, 0]
    assert store.batch_is_exist([]) == []


def test_multi_buffers(store):
    parts = [buf(1000, 1), buf(5000, 2), buf(300, 3)]
    bs = [cbuf(p) for p in parts]
    res = store.batch_put_from_multi_buffers(["mb"], [[a for _, a in bs]], [[len(p) for p in parts]])
    assert res == [0]
    assert store.get("mb") == b"".join(parts)
    outs = [cbuf(b"\0" * len(p)) for p in parts]
    res = store.batch_get_into_multi_buffers(["mb", "nope"], [[a for _, a in outs], [outs[0][1]]],
                                             [[len(p) for p in parts], [10]])
    assert res[0] == sum(len(p) for p in parts) and res[1] == -704
    assert [o.raw for o, _ in outs] == parts


def test_get_into_ranges(store):
    data = buf(10000, 7)
    store.put("rg", data)
    out, addr = cbuf(b"\0" * 300)
    res = store.get_into_ranges([addr], [["rg"]], [[[0, 100]]], [[[5000, 10]]], [[[100, 200]]])
    assert res == [[[100, 200]]]
    assert out.raw[:100] == data[5000:5100] and out.raw[100:300] == data[10:210]
    res = store.get_into_ranges([addr], [["rg"]], [[[0]]], [[[9990]]], [[[100]]])
    assert res[0][0][0] == -600                 # outside the object


def test_buffer_handles(store):
    store.put("bh", b"0123456789")
    h = store.get_buffer("bh")
    assert isinstance(h, BufferHandle) and h.size() == 10 and len(h) == 10 and h.ptr() != 0
    assert bytes(h) == b"0123456789" and memoryview(h)[2:4].tobytes() == b"23"
    assert store.get_buffer("nope") is None
    hs = store.batch_get_buffer(["bh", "nope"])
    assert bytes(hs[0]) == b"0123456789" and hs[1] is None


def test_remove_lease_force_regex_all(store):
    store.put("rm", b"x")
    assert store.get("rm") == b"x"              # grants a lease (500 ms in this cluster)
    assert store.remove("rm") == -706
    assert store.remove("rm", force=True) == 0
    assert store.remove("rm") == -704
    for i in range(6):
        store.put("rx/%d" % i, b"v")
    time.sleep(0.6)
    assert store.remove_by_regex("^rx/[0-2]$") == 3
    assert store.batch_remove(["rx/3", "rx/4", "nope"], force=True) == [0, 0, -704]
    assert store.remove_all(force=True) >= 1
    assert store.is_exist("rx/5") == 0


def test_replica_descriptors_and_clear(store, cluster):
    store.put("rd", b"abc")
    reps = store.get_replica_desc("rd")
    assert len(reps) == 1 and reps[0].is_memory_replica()
    assert reps[0].status == ReplicaStatus.COMPLETE
    d = reps[0].get_memory_descriptor().buffer_descriptor
    assert d.size == 3 and d.transport_endpoint.startswith("127.0.0.1:")
    m = store.batch_get_replica_desc(["rd", "nope"])
    assert len(m["rd"]) == 1 and "nope" not in m
    time.sleep(0.6)                             # lease expires
    assert store.batch_replica_clear(["rd", "nope"]) == ["rd"]
    assert store.is_exist("rd") == 0


def test_replicate_config_fields(store):
    cfg = ReplicateConfig()
    assert cfg.replica_num == 1 and cfg.soft_pin_action == SoftPinAction.PRESERVE
    assert hasattr(ReplicateConfig, "group_ids") and "replica_num" in str(cfg)
    with pytest.raises(TypeError):
        cfg.soft_pin_ttl_ms = -1
    with pytest.raises(TypeError):
        cfg.soft_pin_ttl_ms = 1 << 64
    cfg.with_hard_pin = True
    cfg.data_type = ObjectDataType.KVCACHE
    cfg.preferred_segments = [store.get_hostname()]
    assert store.put(key="cfg", value=b"v", config=cfg) == 0
    cfg2 = ReplicateConfig()
    cfg2.soft_pin_action = SoftPinAction.ENABLE
    cfg2.soft_pin_ttl_ms = 60000
    assert store.put("soft", b"v", cfg2) == 0


def test_sixteen_threads(store):
    errors = []

    def work(t):
        for i in range(60):
            k = "mt/%d/%d" % (t, i)
            v = os.urandom(100 + i * 50)
            if store.put(k, v) != 0 or store.get(k) != v or store.is_exist(k) != 1:
                errors.append(k)
            if i % 3 == 0 and store.remove(k, force=True) != 0:
                errors.append("rm " + k)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_subclassing(cluster):
    class Mine(MooncakeDistributedStore):
        def setup(self, *args):
            self.called = True
            return super().setup(*args)

    s = Mine()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", cluster.master) == 0
    assert s.called and s.put("sub", b"x") == 0 and s.get("sub") == b"x"
    s.remove("sub", force=True)
    s.close()


def test_host_allocator_and_numa():
    a = MooncakeHostMemAllocator()
    p = a.alloc(1 << 20)
    assert p != 0 and p % 4096 == 0
    a.free(p)
    bind_to_numa_node(0)


def test_uninitialized_returns():
    s = MooncakeDistributedStore()
    assert s.put("k", b"v") == -1 and s.get("k") == b"" and s.is_exist("k") == -1
    assert s.batch_put_from_multi_buffers(["k"], [[1]], [[1]]) == []
    assert s.close() == 0


def test_mooncake_config(tmp_path, monkeypatch):
    p = tmp_path / "mooncake.json"
    p.write_text('{"local_hostname": "h", "metadata_server": "P2PHANDSHAKE", '
                 '"master_server_address": "m:1", "global_segment_size": "4gb", '
                 '"protocol": "TCP"}')
    c = MooncakeConfig.load_from_file(str(p))
    assert c.global_segment_size == 4 << 30 and c.protocol == "tcp"
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(p))
    assert MooncakeConfig.load_from_file().local_hostname == "h"
    monkeypatch.delenv("MOONCAKE_CONFIG_PATH")     # it comes before the variables
    monkeypatch.setenv("MOONCAKE_MASTER", "m:2")
    monkeypatch.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "16 MB")
    e = MooncakeConfig.load_from_env()
    assert e.master_server_address == "m:2" and e.global_segment_size == 16 << 20
    monkeypatch.delenv("MOONCAKE_MASTER")
    with pytest.raises(ValueError):
        MooncakeConfig.load_from_env()


def test_setup_dummy_attaches_to_the_local_daemon(cluster):
    s = MooncakeDistributedStore()
    assert s.setup_dummy(8 << 20, 1 << 20, "127.0.0.1:%d" % cluster.client_port) == 0
    data = os.urandom(3 << 20)
    assert s.put("dummy/k", data) == 0 and s.get("dummy/k") == data
    reps = s.get_replica_desc("dummy/k")
    assert reps and reps[0].segment_name == "127.0.0.1:%d" % cluster.client_port
    p = s.alloc_from_mem_pool(1 << 20)
    assert p != 0 and s.alloc_from_mem_pool(16 << 20) == 0
    ctypes.memmove(p, data, 1 << 20)
    assert s.put_from("dummy/zc", p, 1 << 20) == 0 and s.get("dummy/zc") == data[:1 << 20]
    s.remove_all(force=True)
    s.close()
    assert MooncakeDistributedStore().setup_dummy(0, 0, "127.0.0.1:1") == -900


def test_setup_dummy_follows_the_daemons_protocol(cluster):
    import json
    import socket
    from conftest import free_port
    sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sk.settimeout(5)
    sk.connect("\0mooncake_client_%d.sock" % cluster.client_port)
    info = json.loads(sk.makefile().readline())
    sk.close()
    # No engine behind the daemon here (tcp): it says so, and names no NICs.
    assert info["protocol"] == "tcp" and info["rdma_devices"] == ""
    # A daemon on rdma: the dummy runs rdma too, so a NIC it names must exist here.
    port = free_port()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\0mooncake_client_%d.sock" % port)
    srv.listen(1)
    reply = dict(info, protocol="rdma", rdma_devices="mc_no_such_nic0")

    def serve():
        c, _ = srv.accept()
        c.sendall((json.dumps(reply) + "\n").encode())
        c.close()
    t = threading.Thread(target=serve)
    t.start()
    try:
        assert MooncakeDistributedStore().setup_dummy(0, 1 << 20, "127.0.0.1:%d" % port) != 0
    finally:
        t.join(5)
        srv.close()


def test_remaining_put_forms(store):
    meta, maddr = cbuf(b"META")
    data, daddr = cbuf(b"payload-bytes")
    assert store.put_from_with_metadata("pm", daddr, maddr, 13, 4) == 0
    assert store.get("pm") == b"METApayload-bytes"
    assert store.upsert_parts("up/parts", b"ab", b"cd") == 0
    assert store.upsert_parts("up/parts", b"xy", b"zw") == 0 and store.get("up/parts") == b"xyzw"
    assert store.upsert_batch(["ub/1", "ub/2"], [b"one", b"two"]) == 0
    assert store.upsert_batch(["ub/1"], [b"ONE"]) == 0 and store.get("ub/1") == b"ONE"
    b1, a1 = cbuf(b"first!")
    assert store.upsert_from("uf", a1, 6) == 0 and store.get("uf") == b"first!"
    b2, a2 = cbuf(b"second")
    assert store.batch_upsert_from(["uf", "uf2"], [a2, a2], [6, 6]) == [0, 0]
    assert store.get("uf") == b"second" and store.get("uf2") == b"second"
    assert store.put_from("bad", 0, 10) == -600


def test_init_all_mounts_more_memory(cluster):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp", "",
                   cluster.master) == 0
    assert s.init_all("tcp", "", 16 << 20) == 0
    cfg = ReplicateConfig()
    cfg.preferred_segment = s.get_hostname()
    data = os.urandom(12 << 20)
    # Two 12 MiB objects cannot share one 16 MiB segment: both on our name needs the second.
    assert s.put("init_all/1", data, cfg) == 0 and s.put("init_all/2", data, cfg) == 0
    segs = [s.get_replica_desc(k)[0].segment_name for k in ("init_all/1", "init_all/2")]
    assert segs == [s.get_hostname()] * 2 and s.get("init_all/2") == data
    s.remove_all(force=True)
    s.close()


def test_setup_with_ssd_offload(cluster, tmp_path):
    """setup(enable_ssd_offload=True, ssd_offload_path=...) contributes an SSD area: with a master
    running --enable_offload every object gets an SSD copy; a store reopened on the same area
    registers them again and they stay readable after its memory is gone."""
    import subprocess
    from conftest import BUILD, free_port, wait_port
    port = free_port()
    master = subprocess.Popen([os.path.join(BUILD, "mooncake_master"), "--rpc_address=127.0.0.1",
                               "--rpc_port=%d" % port, "--metrics_port=0", "--enable_offload",
                               "--default_kv_lease_ttl=200"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=cluster.env)
    try:
        wait_port(port)
        addr = "127.0.0.1:%d" % port
        ssd = str(tmp_path / "ssd")
        w = MooncakeDistributedStore()
        assert w.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 1 << 20, "tcp", "", addr,
                       enable_ssd_offload=True, ssd_offload_path=ssd) == 0
        for i in range(4):
            assert w.put("ssd/%d" % i, buf(100000, i)) == 0
        end = time.time() + 10
        while len([f for f in os.listdir(ssd) if f.endswith(".mco")]) < 4 and time.time() < end:
            time.sleep(0.05)
        assert len([f for f in os.listdir(ssd) if f.endswith(".mco")]) == 4
        w.close()                       # its memory and SSD area are unmounted
        r = MooncakeDistributedStore()
        assert r.setup("127.0.0.1", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", addr) == 0
        assert r.get("ssd/0") == b""    # gone with its owner
        w2 = MooncakeDistributedStore()
        assert w2.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                         "global_segment_size": "16MB", "master_server_addr": addr,
                         "enable_ssd_offload": True, "ssd_offload_path": ssd}) == 0
        # Registered again (in the background, each value checked first), read from the SSD.
        end = time.time() + 10
        while r.get("ssd/3") == b"" and time.time() < end:
            time.sleep(0.05)
        for i in range(4):
            assert r.get("ssd/%d" % i) == buf(100000, i)
        r.close()
        w2.close()
    finally:
        master.terminate()
        master.wait(5)


def test_replica_descriptors_of_a_batch(store):
    """batch_get_replica_desc builds its descriptors in one pass: every field of every one is
    the master's, as the replica list (_query) gives them; keys repeated, missing or given
    as any iterable answer as before; a class without slots is still made by calling it."""
    keys = ["rdb/%d" % i for i in range(40)]
    for i, k in enumerate(keys):
        assert store.put(k, b"x" * (i + 1)) == 0
    raw = store._query(keys)
    asked = keys + ["rdb/none", keys[3]]
    m = store.batch_get_replica_desc(iter(asked))
    assert isinstance(m, dict) and sorted(m) == sorted(set(keys))
    assert "rdb/none" not in m
    for i, k in enumerate(keys):
        code, reps = raw[k]
        assert code == 0 and len(m[k]) == len(reps) == 1
        d, r = m[k][0], reps[0]
        assert type(d) is ReplicaDescriptor
        assert d.id == r["id"] and d.status == ReplicaStatus(r["status"])
        assert d.segment_name == r["segment"] and d.is_memory_replica()
        assert not d.is_disk_replica() and not d.is_local_disk_replica()
        b = d.get_memory_descriptor().buffer_descriptor
        assert (b.size, b.buffer_address, b.transport_endpoint, b.protocol) == \
            (i + 1, r["addr"], r["endpoint"], r["protocol"])
        assert repr(d).startswith("ReplicaDescriptor(status=COMPLETE")
    one = store.get_replica_desc(keys[5])
    assert isinstance(one, list) and one[0].id == raw[keys[5]][1][0]["id"]
    assert store.get_replica_desc("rdb/none") == []
    assert store.batch_get_replica_desc([]) == {}
    with pytest.raises(TypeError):
        store.batch_get_replica_desc([1])

    class Plain:
        def __init__(self, raw):
            self.raw = raw
    p = store._replica_descs(keys[:2], Plain)
    assert [type(x) for x in p[keys[0]]] == [Plain] and p[keys[1]][0].raw[3] == 2
