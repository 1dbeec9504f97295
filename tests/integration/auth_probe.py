#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Knock on every port of a cluster that has a cluster secret, as three kinds of peer: one that
speaks the port's protocol without the handshake (an upstream or open peer), one that does the
handshake with a wrong secret, and one with the right secret.  Prints TAP lines; exit 1 when a
check failed.

usage: auth_probe.py SECRET WRONG_SECRET master=H:P data=H:P hs=H:P shm=NAME dummy=NAME
       admin=H:P meta=H:P
"""
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

MAGIC = b"MCAUTH1\n"
failed = 0
n = 0


def ok(cond, what):
    global failed, n
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what))
    if not cond:
        failed += 1


def key_of(path):
    with open(path, "rb") as f:
        return f.read().rstrip(b" \t\r\n")


def connect(kind, addr):
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect("\0" + addr)
        return s
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def recv_exact(s, n):
    d = b""
    while len(d) < n:
        c = s.recv(n - len(d))
        if not c:
            break
        d += c
    return d


def closed_without_data(s):
    """The peer closes (or resets) without sending anything more."""
    try:
        return s.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def handshake(s, key):
    """Client side of the handshake.  Returns (server_proved, challenge_len); the proof is
    sent even when the server's is wrong, so that the server judges ours too."""
    nc = os.urandom(32)
    s.sendall(MAGIC + nc)
    ch = recv_exact(s, 72)
    if len(ch) < 72:
        return False, len(ch)
    ns = ch[8:40]
    want = hmac.new(key, b"mooncake-auth-v1 server" + nc + ns, hashlib.sha256).digest()
    s.sendall(hmac.new(key, b"mooncake-auth-v1 client" + nc + ns, hashlib.sha256).digest())
    return ch[:8] == MAGIC and hmac.compare_digest(ch[40:72], want), len(ch)


# What each port's protocol says first, without the handshake.
def rpc_frame(opcode=1, req_id=77):
    return struct.pack("<IBBHIIQ", 0x5052434D, 1, 0, opcode, 0, 0, req_id)


def data_header():
    return struct.pack("<QQB7x", 16, 0x1000, 0x80)    # READ 16 bytes at 0x1000


def hs_frame(t=2, body=b"{}"):
    return struct.pack("<QB", len(body) + 1, t) + body


def probe_socket(name, kind, addr, first, check_refusal, good, wrong, after_auth):
    # 1. no handshake
    s = connect(kind, addr)
    try:
        s.sendall(first)
        ok(check_refusal(s), "%s: a peer without the handshake is refused" % name)
    finally:
        s.close()
    # 2. a wrong secret
    s = connect(kind, addr)
    try:
        proved, got = handshake(s, wrong)
        ok(got == 72 and not proved, "%s: the server's proof fails with a wrong secret" % name)
        try:
            s.sendall(first)
            refused = closed_without_data(s)
        except OSError:
            refused = True      # closed already: the write found it so
        ok(refused, "%s: a wrong-secret peer is closed without an answer" % name)
    finally:
        s.close()
    # 3. the right secret
    s = connect(kind, addr)
    try:
        proved, _ = handshake(s, good)
        ok(proved, "%s: the server proves the secret" % name)
        ok(after_auth(s), "%s: an authenticated peer is served" % name)
    finally:
        s.close()


def rpc_refused(s):
    h = recv_exact(s, 24)
    if len(h) != 24:
        return False
    magic, _, kind, _, blen, status, req_id = struct.unpack("<IBBHIiQ", h)
    return magic == 0x5052434D and kind == 1 and status == -601 and req_id == 77 and \
        closed_without_data(s)


def rpc_served(s):
    s.sendall(rpc_frame(opcode=1, req_id=5))
    h = recv_exact(s, 24)
    return len(h) == 24 and struct.unpack("<IBBHIiQ", h)[6] == 5


def data_served(s):
    # READ 16 bytes at an address nobody registered: a status frame (an error code) comes back.
    s.sendall(data_header())
    st = recv_exact(s, 8)
    return len(st) == 8 and struct.unpack("<I", st[4:8])[0] == 0x4D435456


def hs_refused(s):
    h = recv_exact(s, 9)
    if len(h) != 9:
        return False
    ln = struct.unpack("<Q", h[:8])[0]
    body = recv_exact(s, ln - 1)
    return b"unauthorized" in body


def hs_served(s):
    s.sendall(hs_frame(t=2))
    h = recv_exact(s, 9)
    if len(h) != 9:
        return False
    body = recv_exact(s, struct.unpack("<Q", h[:8])[0] - 1)
    return b"success" in body


def shm_served(s):
    hdr = s.recv(64)
    return len(hdr) >= 8


def dummy_served(s):
    data = recv_exact(s, 4096)
    return data.endswith(b"\n") and b"master_server_address" in data


def http(method, url, headers=None, body=None):
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def sign(key, method, uri, body):
    ts = str(int(time.time()))
    nonce = os.urandom(16).hex()
    msg = "mooncake-http-v1\n%s\n%s\n%s\n%s\n%s" % (method, uri, ts, nonce,
                                                    hashlib.sha256(body).hexdigest())
    return "%s:%s:%s" % (ts, nonce, hmac.new(key, msg.encode(), hashlib.sha256).hexdigest())


def probe_http(name, base, method, path, body, good, wrong, ok_codes):
    st, _ = http(method, base + path, body=body)
    ok(st == 401, "%s: %s %s without credentials is 401 (got %d)" % (name, method, path, st))
    st, _ = http(method, base + path, {"X-Mooncake-Auth": sign(wrong, method, path, body or b"")},
                 body)
    ok(st == 401, "%s: %s %s signed with a wrong secret is 401 (got %d)" % (name, method, path, st))
    st, _ = http(method, base + path, {"X-Mooncake-Auth": sign(good, method, path + "x",
                                                                body or b"")}, body)
    ok(st == 401, "%s: a signature over another path is 401 (got %d)" % (name, st))
    st, _ = http(method, base + path, {"X-Mooncake-Auth": sign(good, method, path, body or b"")},
                 body)
    ok(st in ok_codes, "%s: %s %s signed with the secret is served (got %d)" %
       (name, method, path, st))
    tok = hmac.new(good, b"mooncake-http-token-v1", hashlib.sha256).hexdigest()
    st, _ = http(method, base + path, {"Authorization": "Bearer " + tok}, body)
    ok(st in ok_codes, "%s: the bearer token derived from the secret is accepted (got %d)" %
       (name, st))
    st, _ = http("GET", base + "/metrics")
    ok(st == 200, "%s: GET /metrics stays open (got %d)" % (name, st))


def main():
    good, wrong = key_of(sys.argv[1]), key_of(sys.argv[2])
    ports = dict(a.split("=", 1) for a in sys.argv[3:])
    if "master" in ports:
        probe_socket("master RPC", "tcp", ports["master"], rpc_frame(), rpc_refused, good, wrong,
                     rpc_served)
    if "data" in ports:
        probe_socket("engine TCP data", "tcp", ports["data"], data_header(), closed_without_data,
                     good, wrong, data_served)
    if "hs" in ports:
        probe_socket("engine handshake", "tcp", ports["hs"], hs_frame(), hs_refused, good, wrong,
                     hs_served)
    if "shm" in ports:
        probe_socket("engine shm socket", "unix", ports["shm"], b"x" * 8, closed_without_data,
                     good, wrong, shm_served)
    if "dummy" in ports:
        probe_socket("dummy client socket", "unix", ports["dummy"], b"x" * 8,
                     closed_without_data, good, wrong, dummy_served)
    if "admin" in ports:
        probe_http("admin HTTP", "http://" + ports["admin"], "POST",
                   "/api/v1/remove?key=auth-probe-none", b"", good, wrong, (200, 404))
    if "meta" in ports:
        probe_http("metadata HTTP", "http://" + ports["meta"], "PUT", "/metadata?key=auth-probe",
                   json.dumps({"a": 1}).encode(), good, wrong, (200,))
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
