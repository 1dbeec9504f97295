# SPDX-License-Identifier: Apache-2.0
"""A client given a standby's address follows the leader it names, also when its first calls
went out together: a standby executes none of them, so a call whose refusal arrives after the
first one's is not lost (it once ended RPC_FAIL: set-up failed with -900).

The standby is faked: it answers every request UNAVAILABLE_IN_CURRENT_MODE naming a real
master, the first on a connection after 50 ms and each of the others 100 ms after the one
before, so the client holds the first refusal while its other calls are still unanswered."""
import socket
import struct
import threading
import time

import pytest

from conftest import UPSTREAM, free_port

MAGIC = 0x5052434D
HDR = struct.Struct("<IBBHIiQ")
UNAVAILABLE = -1011


class FakeStandby:
    def __init__(self, leader, delay=0.1, first_leader=None):
        self.leader = leader.encode()
        self.first_leader = first_leader.encode() if first_leader else None
        self.conns = 0
        self.delay = delay
        self.port = free_port()
        self.requests = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        self.stop = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                leader = self.first_leader if self.conns == 1 and self.first_leader \
                    else self.leader
            threading.Thread(target=self.serve, args=(c, leader), daemon=True).start()

    def answer(self, opcode, req_id, leader):
        body = struct.pack("<I", len(leader)) + leader + struct.pack("<q", 7)
        return HDR.pack(MAGIC, 1, 1, opcode, len(body), UNAVAILABLE, req_id) + body

    def serve(self, c, leader):
        buf, first = b"", True
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
                while len(buf) >= HDR.size:
                    magic, _, kind, opcode, blen, _, req_id = HDR.unpack_from(buf)
                    if magic != MAGIC or kind != 0:
                        return
                    if len(buf) < HDR.size + blen:
                        break
                    buf = buf[HDR.size + blen:]
                    with self.lock:
                        self.requests += 1
                    # The first answer after 50 ms (the client's next calls go out
                    # meanwhile), the others after delay.
                    time.sleep(0.05 if first else self.delay)
                    first = False
                    c.sendall(self.answer(opcode, req_id, leader))
        except OSError:
            return
        finally:
            c.close()

    def close(self):
        self.stop = True
        self.sock.close()


@pytest.mark.parametrize("lanes", ["0", "1"])
def test_first_calls_follow_the_leader(master, monkeypatch, lanes):
    from mooncake.store import MooncakeDistributedStore

    if UPSTREAM:
        pytest.skip("our client's handling of a standby's answer (a fake of our wire format)")
    # "0": every call on the main connection; "1": API calls on direct lanes where they can
    # (a lane refused by a standby hands its call to the main connection).
    monkeypatch.setenv("MC_RPC_DIRECT", lanes)
    fake = FakeStandby(master)
    stores = []
    try:
        # One with a segment (its set-up mounts it), then one without (its set-up asks
        # whether the master serves); the second puts into the first's segment.
        for segment in (16 << 20, 0):
            s = MooncakeDistributedStore()
            rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, 16 << 20, "tcp", "",
                         "127.0.0.1:%d" % fake.port)
            assert rc == 0, "set-up through the standby (segment %d): %d" % (segment, rc)
            stores.append(s)
            key = "standby-follow-%d" % segment
            assert s.put(key, b"v" * 100) == 0
            assert s.get(key) == b"v" * 100
        assert fake.requests >= 2, "the fake standby saw %d requests" % fake.requests
    finally:
        for s in reversed(stores):
            s.close()
        fake.close()


def test_back_from_a_lost_leader(master, monkeypatch):
    """The leader a standby named does not answer: the client goes back to the address it was
    given, whose next answer names the leader that serves."""
    from mooncake.store import MooncakeDistributedStore

    if UPSTREAM:
        pytest.skip("our client's handling of a standby's answer (a fake of our wire format)")
    monkeypatch.setenv("MC_RPC_DIRECT", "0")
    dead = "127.0.0.1:%d" % free_port()       # reserved, nothing listens there
    fake = FakeStandby(master, first_leader=dead)
    s = MooncakeDistributedStore()
    try:
        rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp", "",
                     "127.0.0.1:%d" % fake.port)
        assert rc == 0, "set-up through a standby that first named a dead leader: %d" % rc
        assert fake.conns >= 2, "the client came back to the standby %d times" % fake.conns
        assert s.put("standby-back", b"w" * 64) == 0
        assert s.get("standby-back") == b"w" * 64
    finally:
        s.close()
        fake.close()
