# SPDX-License-Identifier: Apache-2.0
"""ReplicateConfig.eviction_hint reaches a master running --eviction_policy=prefix: the last key
of a batch put without a hint is taken for a partial block and evicted first, one hinted 0 is not,
and a single put hinted EVICTION_HINT_LAST_PARTIAL is.  The keys left are read from the admin
port's /get_all_keys, which uses no object (a probe would count as a use and reorder them).
Behind a relay that answers -600 to a PutStart carrying the hint, as a master from before the
hint does, puts still succeed: the library asks again without it, and sends it no more."""
import socket
import struct
import threading
import urllib.request

import pytest

from conftest import own_master, wait_port, UPSTREAM
from mooncake.store import (MooncakeDistributedStore, ReplicateConfig,
                            EVICTION_HINT_LAST_PARTIAL)

pytestmark = pytest.mark.skipif(UPSTREAM, reason="our master's eviction policy")

VALUE = 256 << 10


@pytest.fixture
def prefix_master(tmp_path):
    # No lease holds an object and only a put that finds no room evicts, one object at a time.
    with own_master(tmp_path, ["--eviction_policy=prefix", "--default_kv_lease_ttl=0",
                               "--eviction_high_watermark_ratio=1",
                               "--eviction_ratio=0.001"]) as (addr, admin):
        wait_port(admin)
        yield addr, admin


def keys_left(admin):
    with urllib.request.urlopen("http://127.0.0.1:%d/get_all_keys" % admin, timeout=5) as r:
        return set(r.read().decode().split())


def hinted(h):
    c = ReplicateConfig()
    c.eviction_hint = h
    return c


def test_eviction_hint_orders_victims(prefix_master):
    addr, admin = prefix_master
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 4 << 20, 1 << 20, "tcp", "", addr) == 0
    try:
        v = b"x" * VALUE
        for i in range(3):
            assert s.put("old%d" % i, v) == 0
        assert s.put_batch(["n0", "n1", "n2"], [v] * 3) == 0                  # no hint
        assert s.put_batch(["f0", "f1", "f2"], [v] * 3, hinted(0)) == 0       # last block full
        assert s.put("p0", v, hinted(EVICTION_HINT_LAST_PARTIAL)) == 0
        with pytest.raises((ValueError, TypeError)):
            s.put("bad", v, hinted(4))
        put = set(keys_left(admin))
        assert {"old0", "n2", "f2", "p0"} <= put and "bad" not in put
        # Fill the 4 MiB segment (16 values) and go on until three objects were evicted.
        i = 0
        while len(put) - len(keys_left(admin) & put) < 3:
            assert s.put("fill%d" % i, v) == 0
            i += 1
            assert i < 64, "nothing was evicted"
        gone = put - keys_left(admin)
        # p0 and n2 first (partial blocks), then the oldest object: not f2.
        assert gone == {"p0", "n2", "old0"}, gone
    finally:
        s.remove_all(force=True)
        s.close()


def test_eviction_hint_rejects_bad_values():
    c = ReplicateConfig()
    assert c.eviction_hint is None and ReplicateConfig.eviction_hint is None
    s = MooncakeDistributedStore()
    for bad in (-1, 2, "1", True, 1.0):
        c.eviction_hint = bad
        with pytest.raises((ValueError, TypeError)):
            s.put("k", b"v", c)


HDR = struct.Struct("<IBBHIiQ")
PUT_STARTS = (20, 21, 26, 27)   # PutStart, BatchPutStart, UpsertStart, BatchUpsertStart


def _after_items(body):
    """Bytes left in a PutStart-family body after its items."""
    at = 16                                             # client id
    at += 4 + 1 + 1 + 1 + 8 + 1 + 4                     # config up to data_type
    at += 4 + struct.unpack_from("<I", body, at)[0]     # preferred_segment
    npref = struct.unpack_from("<I", body, at)[0]
    at += 4
    for _ in range(npref):
        at += 4 + struct.unpack_from("<I", body, at)[0]
    n = struct.unpack_from("<I", body, at)[0]
    at += 4
    for _ in range(n):
        at += 4 + struct.unpack_from("<I", body, at)[0] + 8
    return len(body) - at


class OldMasterRelay:
    """Relays a client's frames to the master, but answers -600 itself to a PutStart with bytes
    after its items, as a master from before the eviction hint does."""

    def __init__(self, master):
        host, port = master.rsplit(":", 1)
        self.master = (host, int(port))
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.addr = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.refused = 0
        self.hintless_puts = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            m = socket.create_connection(self.master)
            threading.Thread(target=self._up, args=(c, m), daemon=True).start()
            threading.Thread(target=self._down, args=(m, c), daemon=True).start()

    @staticmethod
    def _exact(sock, n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf

    def _up(self, c, m):
        try:
            while True:
                hdr = self._exact(c, HDR.size)
                magic, ver, kind, op, blen, status, rid = HDR.unpack(hdr)
                body = self._exact(c, blen)
                if op in PUT_STARTS and _after_items(body) > 0:
                    with self.lock:
                        self.refused += 1
                        c.sendall(HDR.pack(magic, ver, 1, op, 0, -600, rid))
                    continue
                if op in PUT_STARTS:
                    self.hintless_puts += 1
                m.sendall(hdr + body)
        except (ConnectionError, OSError):
            c.close()
            m.close()

    def _down(self, m, c):
        try:
            while True:
                data = m.recv(65536)
                if not data:
                    break
                with self.lock:
                    c.sendall(data)
        except OSError:
            pass
        c.close()
        m.close()


def test_eviction_hint_dropped_for_an_older_master(prefix_master):
    addr, _ = prefix_master
    relay = OldMasterRelay(addr)
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 4 << 20, 1 << 20, "tcp", "", relay.addr) == 0
    try:
        v = b"y" * 4096
        assert s.put_batch(["h0", "h1"], [v, v], hinted(EVICTION_HINT_LAST_PARTIAL)) == 0
        assert relay.refused == 1 and relay.hintless_puts == 1
        assert s.put("h2", v, hinted(0)) == 0
        assert s.put("h3", v) == 0
        assert relay.refused == 1 and relay.hintless_puts == 3
        for k in ("h0", "h1", "h2", "h3"):
            assert s.get(k) == v
    finally:
        s.remove_all(force=True)
        s.close()
