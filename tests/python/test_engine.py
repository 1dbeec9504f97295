# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine.TransferEngine between two engines (P2PHANDSHAKE)."""
import os

from mooncake.engine import TransferEngine, TransferOpcode, TransferNotify


def make():
    e = TransferEngine()
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    return e


def test_transfer_engine_round_trip():
    tgt, ini = make(), make()
    assert tgt.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == -1   # only once
    name = "127.0.0.1:%d" % tgt.get_rpc_port()
    assert 15000 <= tgt.get_rpc_port() <= 17000 and tgt.get_engine() != 0
    size = 4 << 20
    tbuf = tgt.allocate_managed_buffer(size)
    ibuf = ini.allocate_managed_buffer(size)
    assert tbuf and ibuf
    assert ini.get_first_buffer_address(name) == tbuf
    data = os.urandom(1 << 20)
    assert ini.write_bytes_to_buffer(ibuf, data, len(data)) == 0
    assert ini.transfer_sync_write(name, ibuf, tbuf, len(data)) == 0
    assert tgt.read_bytes_from_buffer(tbuf, len(data)) == data
    other = os.urandom(4096)
    tgt.write_bytes_to_buffer(tbuf + 8192, other, len(other))
    assert ini.transfer_sync(name, ibuf, tbuf + 8192, 4096, TransferOpcode.READ) == 0
    assert ini.read_bytes_from_buffer(ibuf, 4096) == other
    assert ini.batch_transfer_sync_write(name, [ibuf, ibuf + 4096], [tbuf, tbuf + 65536],
                                         [4096, 4096]) == 0
    assert ini.batch_transfer_sync_read(name, [ibuf], [tbuf + 65536], [4096]) == 0
    # Out of the target's registered memory, an unknown segment, a bad opcode.
    assert ini.transfer_sync_write(name, ibuf, tbuf + size - 10, 100) == -1
    assert ini.transfer_sync_write("127.0.0.1:1", ibuf, tbuf, 10) == -1
    assert ini.transfer_sync(name, ibuf, tbuf, 10, 7) == -1
    assert ini.batch_transfer_sync_write(name, [ibuf], [tbuf, tbuf], [1]) == -1
    # Asynchronous forms.
    data2 = os.urandom(8192)
    ini.write_bytes_to_buffer(ibuf, data2, len(data2))
    bid = ini.transfer_submit_write(name, ibuf, tbuf + 100000, 8192)
    assert bid != 0
    while True:
        st = ini.transfer_check_status(bid)
        if st != 0:
            break
    assert st == 1 and tgt.read_bytes_from_buffer(tbuf + 100000, 8192) == data2
    ids = [ini.batch_transfer_async_write(name, [ibuf], [tbuf + 200000], [4096]),
           ini.batch_transfer_async_read(name, [ibuf + 4096], [tbuf + 100000], [4096])]
    assert all(ids) and ini.get_batch_transfer_status(ids) == 0
    assert ini.read_bytes_from_buffer(ibuf + 4096, 4096) == data2[:4096]
    bad = ini.transfer_submit_write(name, ibuf, tbuf + size - 1, 100)
    while True:
        st = ini.transfer_check_status(bad)
        if st != 0:
            break
    assert st == -1                    # outside the target's registered memory
    assert ini.get_batch_transfer_status([0]) == -1
    assert tgt.get_notifies() == []
    assert ini.transfer_sync(name, ibuf, tbuf, 64, TransferOpcode.WRITE,
                             notify=TransferNotify("req-1", "kv ready")) == 0
    got = tgt.get_notifies()
    assert [(n.name, n.msg) for n in got] == [("req-1", "kv ready")] and tgt.get_notifies() == []
    assert ini.send_probe(name) == 0 and ini.send_probe("127.0.0.1:1") < 0
    import ctypes
    extra = [ctypes.create_string_buffer(4096) for _ in range(2)]
    addrs = [ctypes.addressof(b) for b in extra]
    assert ini.batch_register_memory(addrs, [4096, 4096]) == 0
    assert ini.batch_unregister_memory(addrs) == 0
    import json
    assert "cpu:0" in json.loads(ini.get_local_topology())
    assert ini.free_managed_buffer(ibuf, size) == 0
    assert tgt.free_managed_buffer(tbuf, size) == 0
    assert TransferOpcode.WRITE == 1 and TransferOpcode.READ == 0


def test_rdma_device_names(monkeypatch):
    """protocol rdma as upstream: a listed NIC that is missing fails initialize; without a
    list the NICs are discovered and a host without any moves data over tcp (MC_FORCE_HCA
    makes that an error)."""
    import json
    monkeypatch.delenv("MC_FORCE_HCA", raising=False)
    monkeypatch.setenv("MC_TE_FILTERS", "no_such_nic0")   # hide any real NIC of this host
    e = TransferEngine()
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "no_such_nic0,no_such_nic1") == -1
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "bad name!") == -1
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == 0      # tcp fallback
    topo = json.loads(e.get_local_topology())
    assert "cpu:0" in topo and topo["cpu:0"] == [[], []]
    f = TransferEngine()
    monkeypatch.setenv("MC_FORCE_HCA", "1")
    assert f.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "rdma", "", "p2p") == -1
    monkeypatch.setenv("MC_CUSTOM_TOPO_JSON", '{"cpu:0": [["mlx5_7"], []]}')
    assert json.loads(f.get_local_topology()) == {"cpu:0": [["mlx5_7"], []]}
    monkeypatch.delenv("MC_CUSTOM_TOPO_JSON")
    try:
        f.get_local_topology("bad name!")
        assert False, "a bad device filter raises"
    except ValueError:
        pass


def test_batch_transfer_with_opcode_and_notify():
    """upstream's batch_transfer_sync / batch_transfer_async (opcode, notify, transport_hint)."""
    tgt, ini = make(), make()
    name = "127.0.0.1:%d" % tgt.get_rpc_port()
    size = 1 << 20
    tbuf, ibuf = tgt.allocate_managed_buffer(size), ini.allocate_managed_buffer(size)
    data = os.urandom(8192)
    ini.write_bytes_to_buffer(ibuf, data, len(data))
    assert ini.batch_transfer_sync(name, [ibuf, ibuf + 4096], [tbuf + 4096, tbuf],
                                   [4096, 4096], TransferOpcode.WRITE) == 0
    assert tgt.read_bytes_from_buffer(tbuf, 8192) == data[4096:] + data[:4096]
    assert ini.batch_transfer_sync(name, [ibuf + 65536], [tbuf], [8192], TransferOpcode.READ,
                                   notify=TransferNotify("req-9", "done"),
                                   transport_hint="tcp") == 0
    assert ini.read_bytes_from_buffer(ibuf + 65536, 8192) == data[4096:] + data[:4096]
    assert [(n.name, n.msg) for n in tgt.get_notifies()] == [("req-9", "done")]
    # Two batches in flight at once are not ordered: the read goes once the write is done.
    bid = ini.batch_transfer_async(name, [ibuf], [tbuf + 131072], [8192], TransferOpcode.WRITE)
    assert bid and ini.get_batch_transfer_status([bid]) == 0
    bid2 = ini.batch_transfer_async(name, [ibuf + 131072], [tbuf + 131072], [8192],
                                    TransferOpcode.READ, transport_hint="")
    assert bid2 and ini.get_batch_transfer_status([bid2]) == 0
    assert ini.read_bytes_from_buffer(ibuf + 131072, 8192) == data
    # Errors: memory outside the target's registration, lists that differ, an unknown peer.
    assert ini.batch_transfer_sync(name, [ibuf], [tbuf + size - 8], [64],
                                   TransferOpcode.WRITE) < 0
    assert ini.batch_transfer_sync(name, [ibuf], [tbuf, tbuf], [64], TransferOpcode.WRITE) < 0
    assert ini.batch_transfer_async("127.0.0.1:1", [ibuf], [tbuf], [64],
                                    TransferOpcode.WRITE) == 0
    for bad in (lambda: ini.batch_transfer_sync(name, [ibuf], [tbuf], [64], 7),
                lambda: ini.batch_transfer_sync(name, [ibuf], [tbuf], [64], "write"),
                lambda: ini.batch_transfer_async(name, [ibuf], [tbuf], [64], None),
                lambda: ini.batch_transfer_sync(name, [ibuf], [tbuf], [64],
                                                TransferOpcode.WRITE, notify="x"),
                lambda: ini.batch_transfer_sync(name, ["a"], [tbuf], [64], TransferOpcode.WRITE),
                lambda: ini.batch_transfer_async(name, [ibuf], [tbuf], [64],
                                                 TransferOpcode.READ, transport_hint=3)):
        try:
            bad()
            assert False, "a wrong argument type raises"
        except TypeError:
            pass
    tgt.free_managed_buffer(tbuf, size)
    ini.free_managed_buffer(ibuf, size)


def test_send_probe_uses_the_published_rpc_port(tmp_path):
    """With a metadata service the segment name's port is not the handshake port: send_probe
    must find the port in the peer's descriptor (it used to dial the name's port: -102)."""
    import subprocess
    from conftest import BUILD, free_port, wait_port
    port = free_port()
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    meta = subprocess.Popen([os.path.join(BUILD, "mooncake_http_metadata_server"),
                             "--port=%d" % port, "--host=127.0.0.1"],
                            stdout=open(str(tmp_path / "meta.log"), "w"),
                            stderr=subprocess.STDOUT, env=env)
    try:
        wait_port(port)
        url = "http://127.0.0.1:%d/metadata" % port
        dead = free_port()              # nothing listens there
        tgt, ini = TransferEngine(), TransferEngine()
        assert tgt.initialize("127.0.0.1:%d" % dead, url, "tcp", "") == 0
        assert ini.initialize("127.0.0.1:%d" % free_port(), url, "tcp", "") == 0
        assert tgt.get_rpc_port() != dead
        assert ini.send_probe("127.0.0.1:%d" % dead) == 0
        assert ini.send_probe(peer_server_name="127.0.0.1:%d" % dead) == 0
        assert ini.send_probe("127.0.0.1:%d" % free_port()) < 0      # not published
        assert ini.send_probe("no-port") < 0 and ini.send_probe("") < 0
        try:
            ini.send_probe(5)
            assert False, "a non-str name raises"
        except TypeError:
            pass
    finally:
        meta.terminate()
        meta.wait(5)
