# SPDX-License-Identifier: Apache-2.0
"""The transfer-engine calls upstream 0.3.14 added, between two real engines (P2PHANDSHAKE):
nic_hint on every transfer call, register_memory(remote_accessible=...), the *_arrays and
*_pages forms on buffer-protocol arrays, scatter transfers with their tickets, and
MC_FORCE_SHM.  Arrays are array.array / memoryview, so NumPy is not needed (it is used when
present).

With upstream's package first on PYTHONPATH the file runs against upstream's wheel: against
0.3.13.post1 the calls it lacks are skipped (`needs_0314`); `ours_only` marks our semantics.
"""
import array
import ctypes
import os
import subprocess
import sys
import time

import pytest

import mooncake.engine as E
from mooncake.engine import TransferEngine
from conftest import UPSTREAM

needs_0314 = pytest.mark.skipif(not hasattr(TransferEngine, "submit_scatter_write"),
                                reason="a call upstream added in 0.3.14")
ours_only = pytest.mark.skipif(UPSTREAM, reason="our engine's semantics")
N = 1 << 20


class Pair:
    """A target engine and an initiator engine, each with N registered bytes."""

    def __init__(self):
        self.tgt, self.ini = TransferEngine(), TransferEngine()
        for e in (self.tgt, self.ini):
            assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
        self.name = "127.0.0.1:%d" % self.tgt.get_rpc_port()
        self.tmem = ctypes.create_string_buffer(N)
        self.imem = ctypes.create_string_buffer(N)
        self.t, self.i = ctypes.addressof(self.tmem), ctypes.addressof(self.imem)
        assert self.tgt.register_memory(self.t, N) == 0
        assert self.ini.register_memory(self.i, N) == 0
        ctypes.memmove(self.i, os.urandom(N), N)
        ctypes.memmove(self.t, os.urandom(N), N)

    def ibytes(self, off, n):
        return self.imem.raw[off:off + n]

    def tbytes(self, off, n):
        return self.tmem.raw[off:off + n]


@pytest.fixture(scope="module")
def pair():
    return Pair()


def u64(values):
    return array.array("Q", values)


def test_nic_hint_and_transport_hint_on_every_call(pair):
    p = pair
    if not hasattr(TransferEngine, "submit_scatter_write"):
        pytest.skip("nic_hint came with 0.3.14")
    assert p.ini.transfer_sync_write(p.name, p.i, p.t, 64, "", "") == 0
    assert p.ini.transfer_sync_write(p.name, p.i, p.t, 64, transport_hint="tcp",
                                     nic_hint="mlx5_9") == 0
    assert p.tbytes(0, 64) == p.ibytes(0, 64)
    assert p.ini.transfer_sync_read(p.name, p.i + 100, p.t, 64, nic_hint="x") == 0
    assert p.ini.batch_transfer_sync_write(p.name, [p.i], [p.t + 4096], [32], "", "n") == 0
    assert p.ini.batch_transfer_sync_read(p.name, [p.i + 200], [p.t + 4096], [32],
                                          nic_hint="n") == 0
    bid = p.ini.batch_transfer_async_write(p.name, [p.i], [p.t + 8192], [32], nic_hint="n")
    assert bid and p.ini.get_batch_transfer_status([bid]) == 0
    bid = p.ini.transfer_submit_write(p.name, p.i, p.t + 9000, 16, "", "n")
    assert bid
    end = time.time() + 10
    while p.ini.transfer_check_status(bid) == 0 and time.time() < end:
        pass
    assert p.tbytes(9000, 16) == p.ibytes(0, 16)


def test_register_memory_remote_accessible(pair):
    e = pair.ini
    b = ctypes.create_string_buffer(8192)
    a = ctypes.addressof(b)
    if not hasattr(TransferEngine, "submit_scatter_write"):
        pytest.skip("remote_accessible came with 0.3.14")
    assert e.register_memory(a, 4096, "*", False) == 0
    assert e.unregister_memory(a) == 0
    assert e.register_memory(a, 4096, remote_accessible=True) == 0
    assert e.register_memory(a, 4096) != 0, "overlapping registration refused"
    assert e.unregister_memory(a) == 0


@needs_0314
def test_arrays_forms(pair):
    p = pair
    n = 64
    bufs = u64([p.i + 1024 * k for k in range(n)])
    peers = u64([p.t + 2048 * k for k in range(n)])
    lens = u64([512] * n)
    assert p.ini.batch_transfer_sync_write_arrays(p.name, bufs, peers, lens) == 0
    assert all(p.tbytes(2048 * k, 512) == p.ibytes(1024 * k, 512) for k in range(n))
    back = u64([p.i + 512 * 1024 + 1024 * k for k in range(n)])
    assert p.ini.batch_transfer_sync_read_arrays(p.name, memoryview(back), peers, lens,
                                                 "", "") == 0
    assert all(p.ibytes(512 * 1024 + 1024 * k, 512) == p.tbytes(2048 * k, 512)
               for k in range(n))
    bid = p.ini.batch_transfer_async_write_arrays(p.name, bufs, peers, lens)
    assert bid and p.ini.get_batch_transfer_status([bid]) == 0
    bid = p.ini.batch_transfer_async_read_arrays(p.name, back, peers, lens, nic_hint="n")
    assert bid and p.ini.get_batch_transfer_status([bid]) == 0
    assert p.ini.batch_transfer_sync_write_arrays(p.name, u64([]), u64([]), u64([])) == 0
    with pytest.raises(ValueError, match="same length"):
        p.ini.batch_transfer_sync_write_arrays(p.name, bufs, peers, lens[:1])
    with pytest.raises(TypeError):
        p.ini.batch_transfer_sync_write_arrays(p.name, [p.i], [p.t], [1])
    with pytest.raises(TypeError, match="8-byte integers"):
        p.ini.batch_transfer_sync_write_arrays(p.name, array.array("i", [1]), peers[:1],
                                               lens[:1])
    with pytest.raises(TypeError, match="contiguous"):
        p.ini.batch_transfer_sync_write_arrays(p.name, memoryview(u64([p.i, 0]))[::2],
                                               peers[:1], lens[:1])
    # Out of the target's registered memory: the batch fails.
    assert p.ini.batch_transfer_sync_write_arrays(p.name, bufs[:1], u64([p.t + N - 1]),
                                                  lens[:1]) != 0


@needs_0314
def test_pages_forms(pair):
    p = pair
    src, dst = u64([1, 3]), u64([0, 2])
    # Rows (local base, local stride, remote base, remote stride, length), for both directions.
    rows = [(p.i, 256, p.t + 65536, 512, 16), (p.i + 4096, 128, p.t + 131072, 64, 8)]
    fields = memoryview(u64([v for r in rows for v in r])).cast("B").cast("Q", [2, 5])
    assert p.ini.batch_transfer_sync_write_pages(p.name, src, dst, fields) == 0
    for s, d in zip(src, dst):
        for lb, ls, rb, rs, ln in rows:
            assert p.tbytes(rb - p.t + d * rs, ln) == p.ibytes(lb - p.i + s * ls, ln)
    ctypes.memmove(p.t + 65536, os.urandom(4096), 4096)
    assert p.ini.batch_transfer_sync_read_pages(p.name, src, dst, fields, max_batch_size=1,
                                                nic_hint="n") == 0
    for s, d in zip(src, dst):
        lb, ls, rb, rs, ln = rows[0]
        assert p.ibytes(lb - p.i + s * ls, ln) == p.tbytes(rb - p.t + d * rs, ln)
    assert p.ini.batch_transfer_sync_write_pages(p.name, u64([]), u64([]), fields) == 0
    with pytest.raises(ValueError, match="same length"):
        p.ini.batch_transfer_sync_write_pages(p.name, src, dst[:1], fields)
    with pytest.raises(ValueError, match="positive length"):
        bad = memoryview(u64([p.i, 1, p.t, 1, 0])).cast("B").cast("Q", [1, 5])
        p.ini.batch_transfer_sync_write_pages(p.name, src, dst, bad)
    with pytest.raises(ValueError, match="non-negative strides"):
        bad = memoryview(array.array("q", [p.i, -1, p.t, 1, 1])).cast("B").cast("q", [1, 5])
        p.ini.batch_transfer_sync_write_pages(p.name, array.array("q", [1]),
                                              array.array("q", [1]), bad)
    with pytest.raises(TypeError, match=r"\[rows, 5\]"):
        p.ini.batch_transfer_sync_write_pages(p.name, src, dst, u64([1, 2, 3, 4, 5]))


@needs_0314
def test_scatter_tickets(pair):
    p = pair
    S = E.ScatterTransferCompletionStatus
    assert list(S.__members__) == ["COMPLETED", "FAILED_DRAINED", "COMPLETION_UNKNOWN"]
    assert (int(S.COMPLETED), int(S.FAILED_DRAINED), int(S.COMPLETION_UNKNOWN)) == (0, -1, -2)
    assert E.SUPPORT_MULTI_PROTOCOL is False
    t = p.ini.submit_scatter_write(p.name, [p.i, p.i + 1000], [1000, 1000],
                                   [p.t + 300000, p.t + 304096], [100, 4096],
                                   [[0, 10], [5]], [[0, 50], [4000]], [[10, 20], [96]])
    assert isinstance(t, E.ScatterTransferTicket)
    assert t.drain(5000) == S.COMPLETED and t.drained and t.status == S.COMPLETED
    assert p.tbytes(300000, 10) == p.ibytes(0, 10)
    assert p.tbytes(300050, 20) == p.ibytes(10, 20)
    assert p.tbytes(304096 + 4000, 96) == p.ibytes(1005, 96)
    t = p.ini.scatter_transfer_sync_read_with_ticket(p.name, [p.i + 20000], [100],
                                                     [p.t + 300000], [100], [[0]], [[0]],
                                                     [[100]])
    assert t.drained and t.status == S.COMPLETED
    assert p.ibytes(20000, 100) == p.tbytes(300000, 100)
    t = p.ini.scatter_transfer_sync_write_with_ticket(p.name, [p.i], [10], [p.t], [10], [[0]],
                                                      [[0]], [[0]])
    assert t.status == S.COMPLETED, "zero-length fragments complete"
    # Fragments that disagree, leave their range, or reach unregistered memory fail.
    for args in (([p.i], [10], [p.t], [10], [[0, 1]], [[0]], [[2]]),
                 ([p.i], [10], [p.t, p.t], [10], [[0]], [[0]], [[2]]),
                 ([p.i], [10], [p.t], [10], [[0]], [[0]], [[20]]),
                 ([p.i], [10], [p.t + 16 * N], [10], [[0]], [[0]], [[2]])):
        t = p.ini.submit_scatter_write(p.name, *args)
        assert t.drain(5000) == S.FAILED_DRAINED and t.drained


def _force_shm_child():
    e, f = TransferEngine(), TransferEngine()
    for x in (e, f):
        assert x.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    b = ctypes.create_string_buffer(4096)
    c = ctypes.create_string_buffer(4096)
    assert e.register_memory(ctypes.addressof(b), 4096) == 0
    assert f.register_memory(ctypes.addressof(c), 4096) == 0
    ctypes.memmove(ctypes.addressof(b), b"z" * 4096, 4096)
    rc = e.transfer_sync_write("127.0.0.1:%d" % f.get_rpc_port(), ctypes.addressof(b),
                               ctypes.addressof(c), 4096)
    print("rc=%d same=%d" % (rc, c.raw == b.raw))


@ours_only
@pytest.mark.parametrize("env,want", [({"MC_FORCE_SHM": "1"}, "rc=0 same=1"),
                                      ({"MC_FORCE_SHM": "1", "MC_TE_SHM": "0"}, "rc=-1"),
                                      ({"MC_FORCE_SHM": "1", "MC_FORCE_TCP": "1",
                                        "MC_TE_SHM": "0"}, "rc=0 same=1")])
def test_force_shm(env, want):
    """MC_FORCE_SHM: same-host shm is the only transport (without it, nothing reaches the
    peer); MC_FORCE_TCP wins over it."""
    prog = ("import sys; sys.path.insert(0, %r); import test_engine_v0314 as t; "
            "t._force_shm_child()" % os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", prog], env=dict(os.environ, **env),
                       capture_output=True, text=True, timeout=60)
    assert want in p.stdout, p.stdout + p.stderr
