# SPDX-License-Identifier: Apache-2.0
"""A minimal Python client of the master RPC protocol (doc/protocol.md), for tests.

Encodes requests, matches responses by req_id, decodes the bodies of the common operations.
"""
import os
import socket
import struct

MAGIC = 0x5052434D
HDR = struct.Struct("<IBBHIiQ")

OP = dict(PING=1, SERVICE_READY=2, GET_FSDIR=3, GET_STORAGE_CONFIG=4, FS_HEARTBEAT=5, FS_EVICT=6,
          MOUNT_SEGMENT=10, REMOUNT_SEGMENT=11, UNMOUNT_SEGMENT=12,
          PUT_START=20, BATCH_PUT_START=21, PUT_END=22, BATCH_PUT_END=23, PUT_REVOKE=24,
          BATCH_PUT_REVOKE=25, UPSERT_START=26, BATCH_UPSERT_START=27, UPSERT_END=28,
          BATCH_UPSERT_END=29, UPSERT_REVOKE=30, BATCH_UPSERT_REVOKE=31, GET_REPLICA_LIST=40,
          BATCH_GET_REPLICA_LIST=41, GET_REPLICA_LIST_BY_REGEX=42, EXIST_KEY=43,
          BATCH_EXIST_KEY=44, REMOVE=50, BATCH_REMOVE=51, REMOVE_BY_REGEX=52, REMOVE_ALL=53,
          BATCH_QUERY_IP=60, BATCH_REPLICA_CLEAR=61, MOUNT_LOCAL_DISK=70,
          OFFLOAD_HEARTBEAT=71, NOTIFY_OFFLOAD=72, EVICT_DISK_REPLICA=73,
          REPORT_TRANSFER_FAILURE=80)


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
