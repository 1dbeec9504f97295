# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine: upstream's Python transfer engine API over the C transfer engine."""
from enum import IntEnum

from mooncake import _engine

__all__ = ["TransferEngine", "TransferOpcode", "TransferNotify"]


class TransferNotify:
    """A message delivered to the target engine after a transfer (transfer_sync(notify=...))."""

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return "TransferNotify(name=%r, msg=%r)" % (self.name, self.msg)


class TransferOpcode(IntEnum):
    READ = 0
    WRITE = 1


class TransferEngine(_engine.TransferEngine):
    """Moves bytes between this process's registered memory and other processes' by segment
    name (with P2PHANDSHAKE the name is "ip:rpc_port")."""

    def get_notifies(self):
        """Notifications other engines sent to this one since the last call."""
        return [TransferNotify(n, m) for n, m in self._get_notifies()]
