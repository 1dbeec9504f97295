# SPDX-License-Identifier: Apache-2.0
"""mooncake.BufferPool (mooncake.buffer_pool) and mooncake.async_store against a live master.

Runs against upstream's wheel as well (MC_PARITY_BIN, see conftest.py).
"""
import asyncio
import threading
import time

import pytest

import mooncake
from mooncake.async_store import MooncakeDistributedStoreAsync
from mooncake.buffer_pool import BufferPool, RegisteredBufferPool
from mooncake.store import MooncakeDistributedStore


@pytest.fixture
def store(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master) == 0
    yield s
    s.remove_all()
    s.close()


def test_exported_names():
    assert mooncake.BufferPool is BufferPool and mooncake.RegisteredBufferPool is BufferPool
    assert RegisteredBufferPool is BufferPool
    import mooncake.store as st
    assert st.BufferPool is BufferPool and st.RegisteredBufferPool is BufferPool


def test_needs_a_set_up_store():
    with pytest.raises(RuntimeError):
        BufferPool(None)
    with pytest.raises(RuntimeError):
        BufferPool("not a store")
    with pytest.raises(RuntimeError):
        BufferPool(MooncakeDistributedStore())


def test_lease_round_trip(store):
    pool = BufferPool(store)
    lease = pool.acquire(1000)
    assert lease.size == 1000 and lease.ptr != 0
    view = lease.buffer
    assert isinstance(view, memoryview) and len(view) == 1000 and not view.readonly
    view[:11] = b"hello world"
    del view
    assert store.put_from("bp/a", lease.ptr, 11) == 0
    lease.release()
    with pool.buffer(4096) as out:
        assert store.get_into("bp/a", out.ptr, out.size) == 11
        assert bytes(out.buffer[:11]) == b"hello world"
        assert store.get_into_ranges([out.ptr], [["bp/a"]], [[[100]]], [[[6]]],
                                     [[[5]]]) == [[[5]]]
        assert bytes(out.buffer[100:105]) == b"world"
    with pytest.raises(RuntimeError):
        out.ptr
    assert store.get("bp/a") == b"hello world"
    pool.close()


def test_zero_size_and_wrong_types(store):
    pool = BufferPool(store)
    lease = pool.acquire(0)
    assert lease.size == 0
    lease.release()
    for bad in (-1, "x", None, 1.5):
        with pytest.raises(TypeError):
            pool.acquire(bad)
    pool.close()


def test_release_rules(store):
    pool = BufferPool(store)
    lease = pool.acquire(64)
    view = lease.buffer[2:8]                # a slice still holds the lease's memory
    with pytest.raises(RuntimeError):
        lease.release()
    with pytest.raises(RuntimeError):
        pool.close()
    del view
    lease.release()
    lease.release()                         # twice: nothing more
    with pytest.raises(RuntimeError):
        lease.ptr
    assert lease.size == 64
    with pytest.raises(BufferError):
        lease.buffer
    pool.close()
    pool.close()
    with pytest.raises(RuntimeError):
        pool.acquire(10)


def test_exhaustion_non_blocking_and_timeout(store):
    pool = BufferPool(store)            # local buffer 16 MiB: one burst beyond it fits
    a = pool.acquire(10 << 20)
    b = pool.acquire(10 << 20)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(20 << 20, block=False)
    t0 = time.time()
    with pytest.raises(RuntimeError, match="timed out"):
        pool.acquire(20 << 20, timeout=0.3)
    assert 0.25 <= time.time() - t0 < 5
    a.release()
    b.release()
    pool.acquire(20 << 20, block=False).release()
    pool.close()


def test_blocked_acquire_wakes_on_release(store):
    pool = BufferPool(store, max_regions=1)
    first = pool.acquire(100)
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(100, timeout=10)))
    t.start()
    time.sleep(0.2)
    assert got == []
    first.release()
    t.join(10)
    assert len(got) == 1 and got[0].size == 100
    got[0].release()
    pool.close()


def test_max_regions_without_blocking(store):
    pool = BufferPool(store, max_regions=1, block_on_exhaustion=False)
    a = pool.acquire(100)
    with pytest.raises(RuntimeError):
        pool.acquire(100)
    a.release()
    pool.acquire(100).release()
    pool.close()


def test_prewarm_and_reuse(store):
    pool = BufferPool(store, prewarm_size=1 << 20, prewarm_count=2)
    pool.prewarm(4096, 1)
    leases = [pool.acquire(1 << 20) for _ in range(3)]
    for i, lease in enumerate(leases):
        lease.buffer[:4] = b"L%03d" % i
        assert store.put_from("bp/p%d" % i, lease.ptr, 4) == 0
    for lease in leases:
        lease.release()
    assert [store.get("bp/p%d" % i) for i in range(3)] == [b"L000", b"L001", b"L002"]
    pool.close()


def test_async_store(master):
    s = MooncakeDistributedStoreAsync()
    assert isinstance(s, MooncakeDistributedStore)
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master) == 0

    async def run():
        assert await s.async_put("as/k", b"async value") == 0
        got = await asyncio.gather(*(s.async_get("as/k") for _ in range(8)))
        assert got == [b"async value"] * 8
        assert await s.async_is_exist("as/k") == 1
        assert await s.async_batch_is_exist(["as/k", "as/none"]) == [1, 0]
        assert await s.async_get_size("as/k") == 11
        with pytest.raises(TypeError):
            await s.async_put("as/k", 5)

    asyncio.run(run())
    assert s.async_get is s.async_get                   # made once, then kept
    with pytest.raises(AttributeError):
        s.async_no_such_method
    with pytest.raises(AttributeError):
        s.no_such_attribute
    s.close()
