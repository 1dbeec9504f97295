# SPDX-License-Identifier: Apache-2.0
"""mooncake.async_store: the store with an awaitable form of every method.

MooncakeDistributedStoreAsync is a MooncakeDistributedStore; for each method m it also answers
async_m, a coroutine function that runs m in the event loop's default executor, so the loop is
not held while the store waits on the network:

    store = MooncakeDistributedStoreAsync()
    store.setup(...)
    await store.async_put("k", b"v")
    data = await store.async_get("k")
"""
import asyncio
import functools

from mooncake.store import MooncakeDistributedStore

__all__ = ["MooncakeDistributedStoreAsync"]

_PREFIX = "async_"


class MooncakeDistributedStoreAsync(MooncakeDistributedStore):
    """MooncakeDistributedStore plus async_<method> coroutines."""

    def __getattr__(self, name):
        # Only reached for names the class and the instance do not have.
        if not name.startswith(_PREFIX):
            raise AttributeError("'%s' object has no attribute '%s'"
                                 % (type(self).__name__, name))
        target = name[len(_PREFIX):]
        try:
            method = getattr(self, target)
        except AttributeError:
            raise AttributeError("'%s' object has no attribute '%s' (nor '%s')"
                                 % (type(self).__name__, name, target)) from None
        if not callable(method):
            raise AttributeError("'%s' is not callable" % target)

        @functools.wraps(method)
        async def run_in_executor(*args, **kwargs):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(method, *args, **kwargs))

        # Keep it, so the next lookup finds it directly.
        setattr(self, name, run_in_executor)
        return run_in_executor
