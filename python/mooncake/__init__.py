# SPDX-License-Identifier: Apache-2.0
"""mooncake: a C implementation of the Mooncake KV-cache store.

`mooncake.store.MooncakeDistributedStore` is a drop-in for upstream's binding;
`mooncake.BufferPool` (also `RegisteredBufferPool`) leases registered scratch buffers for its
zero-copy calls.
"""
from pkgutil import extend_path

from mooncake.buffer_pool import BufferPool, RegisteredBufferPool

__path__ = extend_path(__path__, __name__)
__version__ = "0.1.0"
__all__ = ["BufferPool", "RegisteredBufferPool"]
