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

    def batch_transfer_sync(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                            opcode, notify=None, transport_hint=""):
        """Move lengths[i] bytes between buffers[i] and peer_buffer_addresses[i] of
        target_hostname in the direction opcode (TransferOpcode.READ or WRITE) and wait; with
        notify (a TransferNotify) the target is told once the bytes are there.  0 or a negative
        code.  transport_hint is accepted for upstream's signature: the engine picks the
        transport per peer itself."""
        write = _opcode_is_write(opcode)
        _check_hint(transport_hint)
        if notify is not None and not isinstance(notify, TransferNotify):
            raise TypeError("notify must be a TransferNotify or None")
        run = self.batch_transfer_sync_write if write else self.batch_transfer_sync_read
        rc = run(target_hostname, buffers, peer_buffer_addresses, lengths)
        if rc == 0 and notify is not None:
            rc = self._send_notify(target_hostname, notify.name, notify.msg)
        return rc

    def batch_transfer_async(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                             opcode, transport_hint=""):
        """Submit the batch without waiting: its id for get_batch_transfer_status (0 when it
        could not be submitted)."""
        write = _opcode_is_write(opcode)
        _check_hint(transport_hint)
        run = self.batch_transfer_async_write if write else self.batch_transfer_async_read
        return run(target_hostname, buffers, peer_buffer_addresses, lengths)


def _opcode_is_write(opcode):
    if isinstance(opcode, bool) or not isinstance(opcode, int) or opcode not in (0, 1):
        raise TypeError("opcode must be a TransferOpcode, not %r" % (opcode,))
    return opcode == TransferOpcode.WRITE


def _check_hint(hint):
    if not isinstance(hint, str):
        raise TypeError("transport_hint must be a str")
