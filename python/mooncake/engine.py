# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine: upstream's Python transfer engine API over the C transfer engine."""
from enum import Enum, IntEnum

from mooncake import _engine

__all__ = ["TransferEngine", "TransferOpcode", "TransferNotify", "ScatterTransferTicket",
           "ScatterTransferCompletionStatus", "SUPPORT_MULTI_PROTOCOL", "SUPPORT_CUDA",
           "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_INTRA_NVLINK", "SUPPORT_MNNVL", "SUPPORT_MUSA",
           "Read", "Write"]

# One transport per peer segment here (memcpy, same-host shm, rdma or tcp, chosen by the engine),
# not upstream's multi-protocol build.
SUPPORT_MULTI_PROTOCOL = False
# Upstream's build flags: this engine moves host memory over memcpy, shm, tcp and rdma only.
SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_INTRA_NVLINK = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False


class TransferNotify:
    """A message delivered to the target engine after a transfer (transfer_sync(notify=...))."""

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return "TransferNotify(name=%r, msg=%r)" % (self.name, self.msg)


class TransferOpcode(IntEnum):
    """Upstream's names are Read and Write (also exported as mooncake.engine.Read/Write);
    READ and WRITE are aliases of them."""

    Read = 0
    Write = 1
    READ = 0
    WRITE = 1


Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferEngine(_engine.TransferEngine):
    """Moves bytes between this process's registered memory and other processes' by segment
    name (with P2PHANDSHAKE the name is "ip:rpc_port")."""

    TransferOpcode = TransferOpcode

    def get_notifies(self):
        """Notifications other engines sent to this one since the last call."""
        return [TransferNotify(n, m) for n, m in self._get_notifies()]

    # Scatter transfers (upstream 0.3.14): ranges of fragments, each range a local and a remote
    # window (base address, capacity) and its fragments (local offset, remote offset, length)
    # inside both; all fragments in flight at once.

    def _scatter(self, opcode, endpoint, local_base_addresses, local_capacities,
                 remote_base_addresses, remote_capacities, local_offsets, remote_offsets,
                 lengths):
        return ScatterTransferTicket(self, self._scatter_submit(
            endpoint, opcode, local_base_addresses, local_capacities, remote_base_addresses,
            remote_capacities, local_offsets, remote_offsets, lengths))

    def submit_scatter_write(self, endpoint, local_base_addresses, local_capacities,
                             remote_base_addresses, remote_capacities, local_offsets,
                             remote_offsets, lengths):
        """Start writing the fragments; returns a ScatterTransferTicket at once."""
        return self._scatter(TransferOpcode.WRITE, endpoint, local_base_addresses,
                             local_capacities, remote_base_addresses, remote_capacities,
                             local_offsets, remote_offsets, lengths)

    def submit_scatter_read(self, endpoint, local_base_addresses, local_capacities,
                            remote_base_addresses, remote_capacities, local_offsets,
                            remote_offsets, lengths):
        """Start reading the fragments; returns a ScatterTransferTicket at once."""
        return self._scatter(TransferOpcode.READ, endpoint, local_base_addresses,
                             local_capacities, remote_base_addresses, remote_capacities,
                             local_offsets, remote_offsets, lengths)

    def scatter_transfer_sync_write_with_ticket(self, *args):
        """submit_scatter_write, then wait until the ticket is drained."""
        t = self.submit_scatter_write(*args)
        t.drain(-1)
        return t

    def scatter_transfer_sync_read_with_ticket(self, *args):
        """submit_scatter_read, then wait until the ticket is drained."""
        t = self.submit_scatter_read(*args)
        t.drain(-1)
        return t


    def batch_transfer_sync(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                            opcode, notify=None, transport_hint="", nic_hint=""):
        """Move lengths[i] bytes between buffers[i] and peer_buffer_addresses[i] of
        target_hostname in the direction opcode (TransferOpcode.READ or WRITE) and wait; with
        notify (a TransferNotify) the target is told once the bytes are there.  0 or a negative
        code.  transport_hint is accepted for upstream's signature: the engine picks the
        transport per peer itself; nic_hint names the local NIC to use first (rdma)."""
        write = _opcode_is_write(opcode)
        _check_hint(transport_hint)
        if notify is not None and not isinstance(notify, TransferNotify):
            raise TypeError("notify must be a TransferNotify or None")
        run = self.batch_transfer_sync_write if write else self.batch_transfer_sync_read
        rc = run(target_hostname, buffers, peer_buffer_addresses, lengths, transport_hint,
                 nic_hint)
        if rc == 0 and notify is not None:
            rc = self._send_notify(target_hostname, notify.name, notify.msg)
        return rc

    def batch_transfer_async(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                             opcode, transport_hint="", nic_hint=""):
        """Submit the batch without waiting: its id for get_batch_transfer_status (0 when it
        could not be submitted)."""
        write = _opcode_is_write(opcode)
        _check_hint(transport_hint)
        run = self.batch_transfer_async_write if write else self.batch_transfer_async_read
        return run(target_hostname, buffers, peer_buffer_addresses, lengths, transport_hint,
                   nic_hint)


def _opcode_is_write(opcode):
    if isinstance(opcode, bool) or not isinstance(opcode, int) or opcode not in (0, 1):
        raise TypeError("opcode must be a TransferOpcode, not %r" % (opcode,))
    return opcode == TransferOpcode.WRITE


def _check_hint(hint):
    if not isinstance(hint, str):
        raise TypeError("transport_hint must be a str")


class ScatterTransferCompletionStatus(IntEnum):
    """How a scatter transfer ended: every fragment arrived, some failed (nothing is in
    flight any more), or not known yet (still running)."""
    COMPLETED = 0
    FAILED_DRAINED = -1
    COMPLETION_UNKNOWN = -2

    __str__ = Enum.__str__


class ScatterTransferTicket:
    """Keeps a scatter operation alive until native DMA is drained.

    Until drained, the engine may still write into (or read from) the local memory of the
    fragments: keep it allocated and registered.  drain(timeout_ms) waits up to timeout_ms
    (a negative value: as long as it takes, within the engine's transfer timeout) and returns
    the status; drained tells whether the transfer has ended."""

    def __init__(self, engine, batch):
        self._engine = engine
        self._batch = batch if batch > 0 else 0
        if batch == 0:
            self._status = ScatterTransferCompletionStatus.COMPLETED     # nothing to move
        elif batch < 0:
            self._status = ScatterTransferCompletionStatus.FAILED_DRAINED
        else:
            self._status = ScatterTransferCompletionStatus.COMPLETION_UNKNOWN

    @property
    def status(self):
        return self._status

    @property
    def drained(self):
        return self._status != ScatterTransferCompletionStatus.COMPLETION_UNKNOWN

    def drain(self, timeout_ms, /):
        if not self.drained:
            ms = timeout_ms if timeout_ms >= 0 else 1 << 40
            rc = self._engine._batch_poll(self._batch, ms)
            if rc == 1:
                self._status = ScatterTransferCompletionStatus.COMPLETED
            elif rc < 0:
                self._status = ScatterTransferCompletionStatus.FAILED_DRAINED
        return self._status

    def __del__(self):
        # The engine's batch is freed only once drained; a ticket dropped early waits here.
        try:
            while not self.drained:
                self.drain(1000)
        except Exception:       # interpreter shutdown: nothing more can be done
            pass

    def __repr__(self):
        return "ScatterTransferTicket(status=%s)" % self._status.name
