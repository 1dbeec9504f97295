# SPDX-License-Identifier: Apache-2.0
"""mooncake: a C implementation of the Mooncake KV-cache store.

`mooncake.store.MooncakeDistributedStore` is a drop-in for upstream's binding.
"""
__version__ = "0.1.0"
