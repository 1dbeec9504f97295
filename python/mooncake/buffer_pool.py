# SPDX-License-Identifier: Apache-2.0
"""mooncake.buffer_pool: registered scratch buffers for the zero-copy store calls.

    pool = BufferPool(store)
    with pool.buffer(1 << 20) as lease:
        n = store.get_into("key", lease.ptr, lease.size)
        data = bytes(lease.buffer[:n])

A lease is a block of memory registered with the store (register_buffer), page-aligned, at least
the size asked for; `lease.buffer` is a writable memoryview of exactly that size.  Blocks come in
size classes (powers of two from min_size_class up; above max_size_class a block of the exact
size, not kept after release) and released blocks are kept for the next lease of their class.

Limits: max_bytes bounds the bytes of the blocks leased at once (0: twice the store's local
buffer, or 64 MiB without one), max_regions the number of leases at once; a single lease is always
granted when no other is active.  When a lease does not fit, acquire() waits for releases
(block=True, at most timeout seconds) or raises RuntimeError.  A lease whose memoryviews are still
alive cannot be released, and a pool with active leases cannot be closed (RuntimeError).
"""
import ctypes
import mmap
import threading
import time

__all__ = ["BufferPool", "RegisteredBufferPool", "BufferLease", "RegisteredBufferLease"]

_MIN_DEFAULT_LIMIT = 64 << 20


def _size_arg(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("%s must be a non-negative int, not %r" % (name, value))
    return value


class _Block:
    __slots__ = ("mem", "addr", "size", "cached")

    def __init__(self, size):
        self.mem = mmap.mmap(-1, size)
        probe = ctypes.c_char.from_buffer(self.mem)
        self.addr = ctypes.addressof(probe)
        del probe
        self.size = size
        self.cached = True

    def has_views(self):
        """True while a memoryview of the block is alive (it holds an export of the mapping)."""
        try:
            self.mem.resize(self.size)
        except BufferError:
            return True
        return False


class BufferLease:
    """One leased block: ptr and size for the zero-copy calls, buffer to read and write it."""

    __slots__ = ("_pool", "_block", "_size")

    def __init__(self, pool, block, size):
        self._pool = pool
        self._block = block
        self._size = size

    def _live(self):
        if self._block is None:
            raise RuntimeError("buffer lease is closed")
        return self._block

    @property
    def ptr(self):
        return self._live().addr

    @property
    def size(self):
        return self._size

    @property
    def buffer(self):
        if self._block is None:
            raise BufferError("buffer lease is closed")
        return memoryview(self._block.mem)[:self._size]

    def release(self):
        """Give the block back to its pool.  Releasing twice does nothing."""
        block = self._block
        if block is None:
            return
        if block.has_views():
            raise RuntimeError("cannot release buffer while exported views exist")
        self._block = None
        self._pool._give_back(block)

    def __enter__(self):
        self._live()
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        block = self._block
        if block is not None and not block.has_views():
            self._block = None
            self._pool._give_back(block)

    def __repr__(self):
        if self._block is None:
            return "<BufferLease closed>"
        return "<BufferLease ptr=0x%x size=%d>" % (self._block.addr, self._size)


class BufferPool:
    """Registered scratch buffers leased from a set-up MooncakeDistributedStore."""

    def __init__(self, store, max_bytes=0, min_size_class=65536, max_size_class=None,
                 alignment=8388608, block_on_exhaustion=True, default_timeout=None,
                 max_regions=None, prewarm_size=None, prewarm_count=0):
        if store is None:
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        if not (callable(getattr(store, "register_buffer", None))
                and callable(getattr(store, "health_check", None))):
            raise RuntimeError("BufferPool needs a MooncakeDistributedStore, not %s"
                               % type(store).__name__)
        if store.health_check() == 1:
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        _size_arg(max_bytes, "max_bytes")
        _size_arg(min_size_class, "min_size_class")
        _size_arg(alignment, "alignment")
        _size_arg(prewarm_count, "prewarm_count")
        for value, name in ((max_size_class, "max_size_class"), (max_regions, "max_regions"),
                            (prewarm_size, "prewarm_size")):
            if value is not None:
                _size_arg(value, name)
        if default_timeout is not None and not isinstance(default_timeout, (int, float)):
            raise TypeError("default_timeout must be a number of seconds or None")
        self._store = store
        local = getattr(store, "_local_buffer_size", 0) or 0
        self._limit = max_bytes or (2 * local if local else _MIN_DEFAULT_LIMIT)
        self._min_class = max(mmap.PAGESIZE, 1 << max(min_size_class - 1, 0).bit_length())
        self._max_class = max_size_class
        self._block = bool(block_on_exhaustion)
        self._timeout = default_timeout
        self._max_regions = max_regions
        self._cv = threading.Condition()
        self._free = {}             # class size -> [blocks]
        self._cached_bytes = 0
        self._active = 0
        self._active_bytes = 0
        self._closed = False
        if prewarm_size is not None and prewarm_count:
            self.prewarm(prewarm_size, prewarm_count)

    def _class_of(self, size):
        if self._max_class is not None and size > self._max_class:
            return -((-size) // mmap.PAGESIZE) * mmap.PAGESIZE
        return max(self._min_class, 1 << max(size - 1, 0).bit_length())

    def _kept(self, cls):
        return self._max_class is None or cls <= self._max_class

    def _fits(self, cls):
        if self._max_regions is not None and self._active >= self._max_regions:
            return False
        return self._active == 0 or self._active_bytes + cls <= self._limit

    def _drop(self, block):
        self._store.unregister_buffer(block.addr)
        block.mem.close()

    def _new_block(self, cls):
        # Cached blocks of other classes go first when they would take the pool over its limit.
        for other in list(self._free):
            while (self._free[other] and other != cls
                   and self._active_bytes + self._cached_bytes + cls > self._limit):
                block = self._free[other].pop()
                self._cached_bytes -= block.size
                self._drop(block)
        block = _Block(cls)
        rc = self._store.register_buffer(block.addr, cls)
        if rc != 0:
            block.mem.close()
            raise RuntimeError("registering a %d-byte buffer with the store failed: %d"
                               % (cls, rc))
        block.cached = self._kept(cls)
        return block

    def acquire(self, size, block=None, timeout=None):
        """A lease of size bytes.  block (default: the pool's block_on_exhaustion) waits for
        other leases to be released, at most timeout seconds (default: default_timeout)."""
        _size_arg(size, "size")
        wait = self._block if block is None else bool(block)
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        cls = self._class_of(size)
        with self._cv:
            while True:
                if self._closed:
                    raise RuntimeError("buffer pool is closed")
                if self._fits(cls):
                    break
                if not wait:
                    raise RuntimeError("buffer pool is exhausted")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RuntimeError("timed out waiting for buffer")
                self._cv.wait(left)
            free = self._free.get(cls)
            if free:
                blk = free.pop()
                self._cached_bytes -= blk.size
            else:
                blk = self._new_block(cls)
            self._active += 1
            self._active_bytes += cls
        return BufferLease(self, blk, size)

    buffer = acquire

    def _give_back(self, block):
        with self._cv:
            self._active -= 1
            self._active_bytes -= block.size
            if block.cached and not self._closed:
                self._free.setdefault(block.size, []).append(block)
                self._cached_bytes += block.size
            else:
                self._drop(block)
            self._cv.notify_all()

    def prewarm(self, size, count):
        """Register count blocks for leases of size bytes ahead of use (within the limit)."""
        _size_arg(size, "size")
        _size_arg(count, "count")
        cls = self._class_of(size)
        if not self._kept(cls):
            return
        with self._cv:
            if self._closed:
                raise RuntimeError("buffer pool is closed")
            for _ in range(count):
                if self._active_bytes + self._cached_bytes + cls > self._limit:
                    break
                self._free.setdefault(cls, []).append(self._new_block(cls))
                self._cached_bytes += cls

    def close(self):
        """Unregister and free the kept blocks.  Fails while leases are active."""
        with self._cv:
            if self._active:
                raise RuntimeError("cannot close buffer pool with active leases")
            for blocks in self._free.values():
                for block in blocks:
                    self._drop(block)
            self._free.clear()
            self._cached_bytes = 0
            self._closed = True
            self._cv.notify_all()


RegisteredBufferPool = BufferPool
RegisteredBufferLease = BufferLease
