# SPDX-License-Identifier: Apache-2.0
"""A minimal Python client of the master RPC protocol (doc/protocol.md), for tests.

Encodes requests, matches responses by req_id, decodes the bodies of the common operations.
"""
import os
import re
import socket
import struct

MAGIC = 0x5052434D
HDR = struct.Struct("<IBBHIiQ")



def _read_ops():
    """The opcodes from the master's operation table (src/proto/rpc_ops.h): no second list."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "src", "proto", "rpc_ops.h")
    with open(path) as f:
        ops = {m.group(1): int(m.group(2))
               for m in re.finditer(r"^\s*X\((\w+),\s*(\d+),", f.read(), re.M)}
    if not ops:
        raise RuntimeError("no operations found in " + path)
    return ops


OP = _read_ops()


def wait_until(pred, timeout, step=0.1):
    """Call pred() every step seconds until it is true or timeout seconds passed; its last
    value.  Tests wait for a condition with a deadline instead of sleeping."""
    import time
    end = time.time() + timeout
    while True:
        v = pred()
        if v or time.time() >= end:
            return v
        time.sleep(step)


def metric(port, name):
    """The value of the metric name on the admin port (/metrics), or None (absent, or no
    answer)."""
    import urllib.request
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == name:
            return float(f[1])
    return None


def s(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<I", len(b)) + b


def keys(ks):
    return struct.pack("<I", len(ks)) + b"".join(s(k) for k in ks)


def config(replica_num=1, hard_pin=0, soft_pin=0, preferred=()):
    return (struct.pack("<IBBBQBI", replica_num, hard_pin, soft_pin, 0, 0, 0, 0) + s("") +
            struct.pack("<I", len(preferred)) + b"".join(s(p) for p in preferred))


def segment(seg_id, name, base, size, endpoint, protocol="tcp"):
    return seg_id + s(name) + struct.pack("<QQ", base, size) + s(endpoint) + s(protocol)


class Reader:
    def __init__(self, b):
        self.b, self.o = b, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def str(self):
        n = self.take("I")
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def replica(self):
        rid, typ, status, size = self.take("QBBQ")
        r = dict(id=rid, type=typ, status=status, size=size)
        if typ == 0:
            r["addr"] = self.take("Q")
            r["segment"] = self.str().decode()
            r["endpoint"] = self.str().decode()
            r["protocol"] = self.str().decode()
        elif typ == 1:
            r["path"] = self.str().decode()
        elif typ == 2:
            r["client_id"] = self.b[self.o:self.o + 16]
            self.o += 16
            r["endpoint"] = self.str().decode()
            r["addr"] = self.take("Q")
        return r

    def replica_lists(self):
        out = []
        for _ in range(self.take("I")):
            code, n = self.take("iI")
            out.append((code, [self.replica() for _ in range(n)]))
        return out

    def codes(self):
        return [self.take("i") for _ in range(self.take("I"))]


class Client:
    def __init__(self, addr, client_id=None):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.next_id = 1
        self.client_id = client_id or os.urandom(16)

    def close(self):
        self.sock.close()

    def send(self, op, body, req_id=None, deadline=0):
        """deadline: the request header's status field (low 32 bits of a wall-clock ms)."""
        rid = self.next_id if req_id is None else req_id
        self.next_id += 1
        self.sock.sendall(HDR.pack(MAGIC, 1, 0, OP[op] if isinstance(op, str) else op,
                                   len(body), struct.unpack("<i", struct.pack("<I", deadline))[0],
                                   rid) + body)
        return rid

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by master")
            buf += chunk
        return buf

    def recv(self):
        magic, ver, kind, op, blen, status, rid = HDR.unpack(self.recv_exact(HDR.size))
        assert magic == MAGIC and kind == 1
        return rid, op, status, self.recv_exact(blen)

    def call(self, op, body=b"", deadline=0):
        rid = self.send(op, body, deadline=deadline)
        got, _, status, body = self.recv()
        assert got == rid, (got, rid)
        return status, Reader(body)
