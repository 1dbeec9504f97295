# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine: upstream's Python transfer engine API over the C transfer engine."""
from enum import IntEnum

from mooncake import _engine

__all__ = ["TransferEngine", "TransferOpcode"]


class TransferOpcode(IntEnum):
    READ = 0
    WRITE = 1


class TransferEngine(_engine.TransferEngine):
    """Moves bytes between this process's registered memory and other processes' by segment
    name (with P2PHANDSHAKE the name is "ip:rpc_port")."""
