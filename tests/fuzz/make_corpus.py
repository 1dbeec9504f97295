#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/seed-*).

Seeds are real inputs: request frames as mcrpc.py (the tests' client of the master RPC) encodes
them, HTTP requests as curl and the engines send them, descriptors and configuration files as
the daemons write them, SSD areas in their on-disk format.  Regression inputs of fixed crashes
are kept beside them under other names (regress-*) and are not touched here.

    python3 tests/fuzz/make_corpus.py [OUTDIR]     (default: tests/fuzz/corpus next to this)
"""
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import mcrpc  # noqa: E402
from mcrpc import OP, s, keys, config, segment  # noqa: E402

HDR = struct.Struct("<IBBHIiQ")
TICK, CONF = 0x4B54434D, 0x4643434D
CLIENT = bytes(range(16))
SEG = bytes([0x11] * 16)
DISK = bytes([0x22] * 16)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")


def frame(op, body=b"", req_id=1):
    return HDR.pack(mcrpc.MAGIC, 1, 0, OP[op], len(body), 0, req_id) + body


def tick(ms, what=3):
    return HDR.pack(TICK, 0, 0, what, 0, 0, ms)


def conf(flags):
    return HDR.pack(CONF, 0, 0, flags, 0, 0, 0)


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- master: frames back to back --------------------------------------------------------
def mount(seg=SEG, base=0x100000000, size=64 << 20, name="127.0.0.1:17001"):
    return frame("MOUNT_SEGMENT", CLIENT + segment(seg, name, base, size, name))


def remount(seg=SEG, base=0x100000000, size=64 << 20, name="127.0.0.1:17001", token=None):
    """ReMountSegment, as a client sends it after (re)connecting: it is then in good standing."""
    body = CLIENT + struct.pack("<I", 1) + segment(seg, name, base, size, name)
    return frame("REMOUNT_SEGMENT", body + (token or b""))


def put_start(key, size, op="PUT_START", cfg=None):
    return frame(op, CLIENT + (cfg or config()) + struct.pack("<I", 1) + s(key) +
                 struct.pack("<Q", size))


def put_end(key, op="PUT_END", checksum=None):
    body = CLIENT + bytes([4]) + keys([key])
    if checksum is not None:
        body += struct.pack("<BQ", 1, checksum)
    return frame(op, body)


def master():
    m = mount() + remount()
    token = bytes(range(100, 116))
    write("fuzz_master", "dormant-restore",
          frame("MOUNT_SEGMENT", CLIENT + segment(SEG, "127.0.0.1:17001", 0x100000000, 64 << 20,
                                                  "127.0.0.1:17001") + token) +
          remount(token=token) + put_start("d", 4096) + put_end("d") + tick(15000) +
          tick(30000) + frame("GET_REPLICA_LIST", keys(["d"])) + remount(token=token) +
          frame("PING", CLIENT) + frame("GET_REPLICA_LIST", keys(["d"])))
    write("fuzz_master", "two-clients", m + frame("MOUNT_SEGMENT", bytes([9] * 16) + segment(
        bytes([0x33] * 16), "127.0.0.1:17003", 0x200000000, 32 << 20, "127.0.0.1:17003")) +
          put_start("z", 1 << 20, cfg=config(replica_num=2, preferred=("127.0.0.1:17003",))) +
          put_end("z") + frame("REPORT_TRANSFER_FAILURE", CLIENT + struct.pack("<I", 1) +
                               s("127.0.0.1:17003") + struct.pack("<i", -800)) +
          put_start("z2", 4096) + tick(6000) + frame("UNMOUNT_SEGMENT", bytes([9] * 16) +
                                                     bytes([0x33] * 16)) + tick(1))
    write("fuzz_master", "ping", frame("PING", CLIENT) + frame("SERVICE_READY"))
    write("fuzz_master", "put-get", m + put_start("k1", 4096) + put_end("k1") +
          frame("GET_REPLICA_LIST", keys(["k1"])) + frame("EXIST_KEY", keys(["k1", "k2"])) +
          frame("REMOVE", b"\x00" + keys(["k1"])))
    write("fuzz_master", "batch", m + frame("BATCH_PUT_START", CLIENT + config(replica_num=2) +
          struct.pack("<I", 3) + s("a") + struct.pack("<Q", 100) + s("b") +
          struct.pack("<Q", 1 << 20) + s("c") + struct.pack("<Q", 7)) +
          frame("BATCH_PUT_END", CLIENT + bytes([0]) + keys(["a", "b"])) +
          frame("BATCH_PUT_REVOKE", CLIENT + bytes([0]) + keys(["c"])) +
          frame("BATCH_GET_REPLICA_LIST", keys(["a", "b", "c"])) +
          frame("GET_REPLICA_LIST_BY_REGEX", s("^[ab]$")) +
          frame("REMOVE_BY_REGEX", b"\x01" + s("a.*")) + frame("REMOVE_ALL", b"\x00"))
    write("fuzz_master", "upsert-checksum", m + put_start("u", 64, "UPSERT_START") +
          put_end("u", "UPSERT_END", checksum=0x1234) +
          put_start("u", 128, "UPSERT_START") + frame("UPSERT_REVOKE", CLIENT + b"\x04" +
                                                     keys(["u"])) +
          frame("REPORT_CHECKSUM_MISMATCH", CLIENT + struct.pack("<I", 1) + s("u") +
                struct.pack("<QQQ", 1, 0x1234, 0x9999)))
    write("fuzz_master", "pins-evict", m + put_start("p", 60 << 20, cfg=config(hard_pin=1)) +
          put_end("p") + put_start("q", 8 << 20, cfg=config(soft_pin=1)) + put_end("q") +
          tick(5000, 2) + put_start("r", 8 << 20) + tick(700000, 3))
    write("fuzz_master", "liveness", m + put_start("x", 10) + tick(15000) + frame("PING", CLIENT) +
          tick(30000) + tick(700000) + frame("REMOUNT_SEGMENT", CLIENT + struct.pack("<I", 1) +
                                              segment(SEG, "127.0.0.1:17001", 0x100000000,
                                                      64 << 20, "127.0.0.1:17001", "tcp")) +
          frame("UNMOUNT_SEGMENT", CLIENT + SEG) + tick(10))
    write("fuzz_master", "failures", m + frame("REPORT_TRANSFER_FAILURE", CLIENT +
          struct.pack("<I", 2) + s("127.0.0.1:17001") + struct.pack("<i", -800) + s("nope") +
          struct.pack("<i", -800)) + put_start("y", 100) +
          frame("BATCH_QUERY_IP", struct.pack("<I", 1) + CLIENT) +
          frame("BATCH_REPLICA_CLEAR", CLIENT + s("127.0.0.1:17001") + keys(["y"])))
    disk = (frame("MOUNT_LOCAL_DISK", CLIENT + DISK + s("disk0") + s("127.0.0.1:17002") +
                  struct.pack("<Q", 1 << 30)) +
            frame("OFFLOAD_HEARTBEAT", CLIENT + DISK + struct.pack("<IQ", 16, 0) + b"\x01"))
    write("fuzz_master", "ssd-tier", conf(2 | 8) + m + disk + put_start("o", 4096) +
          put_end("o") + frame("OFFLOAD_HEARTBEAT", CLIENT + DISK + struct.pack("<IQ", 16, 0)) +
          frame("NOTIFY_OFFLOAD", CLIENT + DISK + struct.pack("<I", 2) + b"\x00" + s("o") +
                struct.pack("<QQiQ", 4096, 1 << 62, 0, 1) + b"\x03" + s("old") +
                struct.pack("<QQiQ", 10, (1 << 62) + (1 << 36), 0, 0)) +
          frame("EVICT_DISK_REPLICA", CLIENT + DISK + keys(["o"])) +
          frame("GET_REPLICA_LIST", keys(["o", "old"])) + tick(40000))
    write("fuzz_master", "fsdir", conf(1 | 64) + m + frame("GET_FSDIR") +
          frame("GET_STORAGE_CONFIG") + put_start("f", 100) + put_end("f") +
          frame("FS_HEARTBEAT", CLIENT + struct.pack("<I", 0)) +
          frame("FS_EVICT", CLIENT + keys(["f"])) +
          frame("FS_HEARTBEAT", CLIENT + struct.pack("<IQ", 1, 1)))
    write("fuzz_master", "prefix-policy", conf(16 | 32) + m +
          b"".join(put_start("chain/%d" % i, 4 << 20) + put_end("chain/%d" % i)
                   for i in range(4)) + tick(1000, 2))


# ---- wire: selector, argument, bytes ----------------------------------------------------
def wire():
    w = lambda k, a, b=b"": bytes([k, a]) + b  # noqa: E731
    write("fuzz_wire", "ints", w(0, 0, b"\x01") + w(1, 0, b"\x02\x03") + w(2, 0, b"\x04" * 4) +
          w(3, 0, b"\x05" * 8) + w(4, 0, b"\xff" * 4) + w(5, 0, b"\x80" * 8))
    write("fuzz_wire", "strings", w(6, 2, s("hello")) + w(7, 10, s("cstr")) + w(8, 3, b"abc") +
          w(9, 2, struct.pack("<I", 3)) + w(10, 0, CLIENT) + w(11, 1, s("x")))
    write("fuzz_wire", "composites", w(12, 0, segment(SEG, "n", 1, 2, "e:1")) +
          w(13, 0, config(2, 1, 1, ("a", "b"))) +
          w(14, 0, struct.pack("<QBBQQ", 1, 0, 3, 10, 0x1000) + s("seg") + s("ep:1") + s("tcp")) +
          w(14, 0, struct.pack("<QBBQ", 2, 1, 3, 10) + s("/mnt/x")) +
          w(14, 0, struct.pack("<QBBQ", 3, 2, 3, 10) + CLIENT + s("ep:2") +
            struct.pack("<Q", 1 << 62)) +
          w(15, 0, s("seg") + struct.pack("<i", -800)) +
          w(16, 0, s("k") + struct.pack("<QQQ", 1, 2, 3)))
    write("fuzz_wire", "header", w(18, 255, HDR.pack(mcrpc.MAGIC, 1, 1, 20, 100, 0, 7)) +
          w(19, 10, struct.pack("<Iq", 5000, 7000)) + w(17, 2, b"\x01" + b"\x00" * 8 * 1 +
                                                       b"\x00" * 9))


# ---- tcp data plane: {u64 size, u64 addr, u8 op|0x80, 7 zero} ---------------------------
MEM = 0x300000000000


def tcp_req(op, addr, size, payload=b""):
    return struct.pack("<QQB7x", size, addr, 0x80 | op) + payload


def tcp():
    write("fuzz_tcp_server", "write-read", tcp_req(1, MEM + 16, 8, b"abcdefgh") +
          tcp_req(0, MEM + 16, 8))
    write("fuzz_tcp_server", "refused", tcp_req(1, MEM + (64 << 10), 8, b"x" * 8) +
          tcp_req(0, 0x10, 4) + tcp_req(0, MEM + (64 << 10) + 4096, 4096))
    write("fuzz_tcp_server", "file", tcp_req(0, 1 << 62, 4096) + tcp_req(0, (1 << 62) + 100, 10))
    write("fuzz_tcp_server", "v1-header", struct.pack("<QQB7x", 8, MEM, 1))


# ---- handshake: mode byte, then frames or JSON ------------------------------------------
def hs_frame(t, obj):
    j = json.dumps(obj).encode()
    return struct.pack("<QB", len(j) + 1, t) + j


def handshake():
    write("fuzz_handshake", "metadata", b"\x00" + hs_frame(1, {}))
    write("fuzz_handshake", "probe", b"\x00" + hs_frame(2, {}))
    write("fuzz_handshake", "notify", b"\x00" + hs_frame(3, {"name": "a", "notify_msg": "hi"}))
    write("fuzz_handshake", "connection", b"\x00" + hs_frame(0, {"local_nic_path": "h:1@mlx5_0"}))
    write("fuzz_handshake", "desc-tcp", b"\x01" + json.dumps({
        "name": "127.0.0.1:15001", "protocol": "tcp", "tcp_data_port": 17001,
        "tcp_proto_version": 2, "timestamp": "1700000000",
        "buffers": [{"name": "127.0.0.1:15001", "addr": 140737488355328, "length": 1 << 20}],
        "shm_host_id": "abc", "shm_uid": 0, "shm_socket": "@mc-shm"}).encode())
    write("fuzz_handshake", "desc-rdma", b"\x01" + json.dumps({
        "name": "10.0.0.1:15001", "protocol": "rdma", "tcp_data_port": 17001,
        "devices": [{"name": "mlx5_0", "lid": 0, "gid": "00:" * 15 + "01"},
                    {"name": "mlx5_1", "lid": 0, "gid": "00:" * 15 + "02"}],
        "priority_matrix": {"cpu:0": [["mlx5_0"], ["mlx5_1"]], "*": [["mlx5_1"], []]},
        "buffers": [{"name": "cpu:0", "addr": 4096, "length": 8192, "rkey": [1, 2]},
                    {"name": "cpu:1", "addr": 65536, "length": 4096, "rkey": [3, 4]}]}).encode())
    write("fuzz_handshake", "desc-nvmeof", b"\x01" + json.dumps({
        "name": "file-seg", "protocol": "nvmeof",
        "buffers": [{"file_path": "/dev/null", "length": 4096,
                     "local_path_map": {"h": "/dev/null"}}]}).encode())
    write("fuzz_handshake", "rdma-conn", b"\x02" + json.dumps({
        "local_nic_path": "10.0.0.1:15001@mlx5_0", "peer_nic_path": "10.0.0.2:15001@mlx5_1",
        "local_lid": 7, "local_gid": ":".join(["fe"] + ["%02x" % i for i in range(15)]),
        "qp_num": [100, 101], "reply_msg": ""}).encode())


# ---- HTTP ------------------------------------------------------------------------------
def http(method, path, body=b"", extra=""):
    if isinstance(body, str):
        body = body.encode()
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s" % (method, path, extra)
    if body or method in ("PUT", "POST"):
        head += "Content-Length: %d\r\n" % len(body)
    return (head + "\r\n").encode() + body


def admin():
    for name, reqs in {
        "metrics": http("GET", "/metrics") + http("GET", "/metrics/summary"),
        "health": http("GET", "/health") + http("GET", "/role") + http("GET", "/ha_status"),
        "query": http("GET", "/query_key?key=key0") + http("GET", "/batch_query_keys?keys=key0,key1,nope"),
        "listing": http("GET", "/get_all_keys") + http("GET", "/get_all_segments") +
        http("GET", "/query_segment?segment=127.0.0.1:17001") + http("GET", "/get_segments_detail"),
        "remove": http("POST", "/api/v1/remove?key=key0") + http("POST", "/api/v1/remove?key=key1&force=1"),
        "remove-all": http("POST", "/api/v1/remove_all") + http("POST", "/api/v1/remove_all?force=true"),
        "not-found": http("GET", "/nope?x=%zz") + http("DELETE", "/metrics"),
    }.items():
        write("fuzz_admin_http", name, reqs)


def metadata():
    desc = json.dumps({"name": "seg", "protocol": "tcp", "tcp_data_port": 1, "buffers": []})
    for name, reqs in {
        "get": http("GET", "/metadata?key=mooncake/ram/seg") + http("GET", "/metadata?key=nope"),
        "put": http("PUT", "/metadata?key=mooncake%2Fram%2Fx", desc, "Content-Type: application/json\r\n") +
        http("GET", "/metadata?key=mooncake/ram/x"),
        "rpc-meta": http("PUT", "/metadata?key=mooncake/rpc_meta/seg", '{"rpc_port":1}') +
        http("PUT", "/metadata?key=mooncake/rpc_meta/seg", '{"rpc_port":2}'),
        "delete": http("DELETE", "/metadata?key=mooncake/ram/seg") + http("DELETE", "/metadata?key=x"),
        "bad": http("GET", "/metadata") + http("GET", "/metadata?key=a&key=b") +
        http("POST", "/metadata?key=a", "x") + http("GET", "/health") + http("PATCH", "/health"),
        "chunked": b"PUT /metadata?key=c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n0\r\n\r\n",
        "http10": b"GET /metadata?key=mooncake/ram/seg HTTP/1.0\r\n\r\n",
    }.items():
        write("fuzz_metadata_http", name, reqs)


# ---- SSD area: flags, then 256-byte chunks -------------------------------------------------
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def record(key, seq, value_len, gen=1, ocrc=None):
    """A record's first 256 bytes as ssd_area.c writes them (value bytes are zero here)."""
    key = key.encode()
    data_off = (64 + len(key) + 4095) // 4096 * 4096
    flags = 1 if ocrc is not None else 0
    hdr = bytearray(struct.pack("<IIQQII", 0x4453434D, 3, seq, value_len, len(key), 0) +
                    struct.pack("<QIB3xQ8x", gen, crc32c(bytes(value_len)), flags, ocrc or 0))
    crc = crc32c(bytes(hdr) + key)
    hdr[28:32] = struct.pack("<I", crc)
    rec = bytes(hdr) + key
    assert data_off == 4096
    return rec.ljust(256, b"\x00")


def ssd():
    sb = struct.pack("<IIQ", 0x4153434D, 1, 0)
    sb = (sb + struct.pack("<I", 0)).ljust(256, b"\x00")
    free = struct.pack("<IIQI", 0x4653434D, 1, 4096, 0).ljust(256, b"\x00")
    # single file, repaired: superblock, a record (2 blocks), a free block
    write("fuzz_ssd_area", "file-fixed", b"\x01" + sb + record("k1", 1, 100) + bytes(256) + free)
    write("fuzz_ssd_area", "file-zero", b"\x00" + bytes(512))
    write("fuzz_ssd_area", "file-dupkeys", b"\x01" + sb + record("k", 1, 10) + bytes(256) +
          record("k", 2, 10, ocrc=77) + bytes(256))
    write("fuzz_ssd_area", "dir-fixed", b"\x03" + record("a", 1, 100) + record("b", 2, 5000) +
          record("a", 3, 10))
    write("fuzz_ssd_area", "dir-names", b"\x07" + record("a", 1, 10) + b"\x01\x09\x01" +
          bytes(253))


# ---- options and configuration files ------------------------------------------------------
def options():
    write("fuzz_options", "json", b"\x08" + json.dumps({
        "flag": False, "rpc_port": 8080, "ratio": 0.5, "name": "x", "size": "16MiB",
        "ttl": "30s", "host": "::1", "addr": "[::1]:80", "endpoint": "h:1",
        "metadata": "etcd://a:1,b:2", "protocol": "RDMA", "nics": "mlx5_0,mlx5_1",
        "token": "abc", "path": "/var/x", "json_key_differs": 3}).encode())
    write("fuzz_options", "json-cli", b"\xf0" + b'{"rpc_port": "9", "unknown": 1}')
    write("fuzz_options", "argv", b"\x01" + b"\x00".join([
        b"--noflag", b"--port", b"70", b"-ratio=0.25", b"--size=4 gb", b"--ttl=2h",
        b"--metadata=http://h:1/metadata", b"--", b"rest"]))
    for i, v in enumerate([b"1.2.3.4:5", b"[fe80::1]:65535", b"redis://h", b"4096k", b"yes"]):
        write("fuzz_options", "value-%d" % i, b"\x02" + v)
        write("fuzz_options", "parse-%d" % i, b"\x03" + v)


def store_config():
    write("fuzz_store_config", "json", b"\x00" + json.dumps({
        "local_hostname": "127.0.0.1:12345", "metadata_server": "P2PHANDSHAKE",
        "global_segment_size": "4gb", "local_buffer_size": 1 << 30, "protocol": "tcp",
        "device_name": "", "master_server_address": "127.0.0.1:50051",
        "enable_ssd_offload": True, "ssd_offload_path": "/tmp/ssd", "use_hugepage": False,
        "hugepage_size": "2MB", "populate_segment": True, "segment_location": "cpu:0"}).encode())
    write("fuzz_store_config", "env", b"\x01" + b"\x00".join([
        b"127.0.0.1:50051", b"http://127.0.0.1:8080/metadata", b"rdma", b"mlx5_0",
        b"host:1", b"1gb", b"512mb", b"tenant", b"true", b"/mnt/ssd", b"0", b"1GB", b"1", b"0",
        b"interleave"]))


if __name__ == "__main__":
    master()
    wire()
    tcp()
    handshake()
    admin()
    metadata()
    ssd()
    options()
    store_config()
