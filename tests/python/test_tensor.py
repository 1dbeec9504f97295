# SPDX-License-Identifier: Apache-2.0
"""The tensor methods against a real master: round trips of every dtype, upstream's stored
layout byte by byte, tensor parallelism, the parallelism classes, zero-copy forms, safetensors
files, error codes and wrong argument types.

CPU torch is enough (scripts/deps.sh installs torch when it is missing).  Runs against upstream's
wheel as well (MC_PARITY_BIN, see conftest.py); MC_UPSTREAM_PYTHON=<a python with upstream's
wheel> adds the cross-client test: tensors written by either client read back in the other.
"""
import ctypes
import json
import os
import struct
import subprocess
import sys

import pytest

from conftest import UPSTREAM, run_upstream_peer

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/deps.sh adds it)")

import mooncake.store as ms  # noqa: E402
from mooncake.store import (MooncakeDistributedStore, ParallelAxis, ReadTarget,  # noqa: E402
                            ReplicateConfig, TensorParallelism)

import tensor_wire_peer as peer  # noqa: E402

ours_only = pytest.mark.skipif(UPSTREAM, reason="our client's behaviour")
HDR = 304


@pytest.fixture
def ts(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master) == 0
    yield s
    s.close()


@pytest.fixture
def reg(ts):
    """A registered 64 KiB buffer: (ctypes buffer, address)."""
    b = ctypes.create_string_buffer(1 << 16)
    assert ts.register_buffer(ctypes.addressof(b), 1 << 16) == 0
    yield b, ctypes.addressof(b)
    ts.unregister_buffer(ctypes.addressof(b))


def ax(kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
    return peer.axis(ms, kind, rank, size, split_dim, expert_id, stage_id)


def par(*axes):
    p = TensorParallelism()
    p.axes = list(axes)
    return p


def target(mode, p=None):
    r = ReadTarget()
    r.mode = mode
    r.parallelism = p
    return r


def full():
    return torch.arange(48, dtype=torch.float32).reshape(6, 8)


def test_every_dtype_round_trips_with_upstream_codes(ts):
    for code, (key, how, t, _) in enumerate(c for c in peer.cases() if c[1] == "put"):
        assert ts.put_tensor(key, t) == 0
        raw = ts.get(key)
        magic, ver, hsize, dtype, ndim, layout, flags, off, nbytes = struct.unpack_from(
            "<IHHiiIIQQ", raw, 0)
        assert (magic, ver, hsize, off, layout, flags) == (0x4D4F4F4E, 1, HDR, HDR, 0, 0)
        assert ndim == t.dim() and nbytes == t.numel() * t.element_size() == len(raw) - HDR
        if code < 15:
            assert dtype == code, key
        dims = list(t.shape) + [-1] * (8 - t.dim())
        assert list(struct.unpack_from("<8q", raw, 40)) == dims
        assert list(struct.unpack_from("<8q", raw, 104)) == dims
        assert struct.unpack_from("<II", raw, 168) == (0, 0)
        got = ts.get_tensor(key)
        assert peer.same(got, t if t.dim() else t.reshape(1)), key
    assert ms._tensor_metadata_size() == HDR


def test_get_tensor_misses_and_non_tensors(ts):
    assert ts.get_tensor("no-such-key") is None
    assert ts.put("plain-bytes", b"x" * 400) == 0
    assert ts.get_tensor("plain-bytes") is None
    assert ts.batch_get_tensor(["plain-bytes", "nope"]) == [None, None]


def test_put_tensor_refuses_what_upstream_refuses(ts):
    assert ts.put_tensor("c", torch.zeros(2, dtype=torch.complex64)) == -600
    assert ts.put_tensor("n", [1, 2, 3]) == -600
    assert ts.put_tensor("d9", torch.zeros([1] * 9)) == -600
    with pytest.raises(TypeError):
        ts.put_tensor(5, full())
    with pytest.raises(TypeError):
        ts.get_tensor(None)
    with pytest.raises(TypeError):
        ts.batch_put_tensor("k", [full()])


def test_noncontiguous_and_views_store_their_values(ts):
    t = full().t()
    assert ts.put_tensor("nc", t) == 0
    assert torch.equal(ts.get_tensor("nc"), t)
    assert ts.put_tensor("slice", full()[2:4, 1:3]) == 0
    assert torch.equal(ts.get_tensor("slice"), full()[2:4, 1:3])


def test_batch_put_get_upsert_pub(ts):
    t = full()
    assert ts.batch_put_tensor(["b1", "b2"], [t, t + 1]) == [0, 0]
    got = ts.batch_get_tensor(["b1", "missing", "b2"])
    assert torch.equal(got[0], t) and got[1] is None and torch.equal(got[2], t + 1)
    assert ts.batch_put_tensor(["x1", "x2"], [t]) == [-600, -600]
    assert ts.batch_put_tensor(["y1", "y2"], [t, "no"]) == [0, -600]
    assert ts.upsert_tensor("b1", t * 2) == 0
    assert torch.equal(ts.get_tensor("b1"), t * 2)
    assert ts.batch_upsert_tensor(["b2", "b3"], [t * 3, t]) == [0, 0]
    assert torch.equal(ts.get_tensor("b2"), t * 3)
    cfg = ReplicateConfig()
    cfg.replica_num = 1
    assert ts.pub_tensor("p1", t, cfg) == 0 and ts.pub_tensor("p2", t) == 0
    assert ts.batch_pub_tensor(["p3"], [t], cfg) == [0]
    assert ts.upsert_pub_tensor("p1", t + 7, cfg) == 0
    assert ts.batch_upsert_pub_tensor(["p2"], [t + 8], cfg) == [0]
    assert torch.equal(ts.get_tensor("p1"), t + 7) and torch.equal(ts.get_tensor("p2"), t + 8)


def test_get_tensor_into_shares_the_buffer(ts, reg):
    buf, p = reg
    t = full()
    assert ts.put_tensor("i1", t) == 0
    x = ts.get_tensor_into("i1", p, 1 << 16)
    assert torch.equal(x, t) and x.data_ptr() == p + HDR
    assert ts.get_tensor_into("i1", p, 100) is None
    assert ts.get_tensor_into("missing", p, 1 << 16) is None
    assert ts.get_tensor_into("i1", 0, 1 << 16) is None
    got = ts.batch_get_tensor_into(["i1", "missing"], [p, p + 32768], [32768, 32768])
    assert torch.equal(got[0], t) and got[1] is None
    assert ts.batch_get_tensor_into(["i1", "x"], [p], [4096]) == [-600, -600]
    assert ts.batch_get_tensor_into(["i1"], [0], [4096]) == [-600]
    with pytest.raises(TypeError):
        ts.get_tensor_into("i1", "addr", 10)


def staged(ts, reg, key):
    """full() stored under key and read back into the registered buffer: (t, address, bytes
    of [header][data] there)."""
    t = full()
    assert ts.put_tensor(key, t) == 0
    assert ts.get_tensor_into(key, reg[1], 1 << 16) is not None
    return t, reg[1], HDR + t.numel() * 4


def test_put_tensor_from_checks_the_header(ts, reg):
    t, p, n = staged(ts, reg, "src")
    assert ts.put_tensor_from("f1", p, n) == 0
    assert torch.equal(ts.get_tensor("f1"), t)
    assert ts.put_tensor_from("f2", p, n - 1) == -600
    assert ts.put_tensor_from("f3", p + 8, 300) == -600
    assert ts.upsert_tensor_from("f1", p, n) == 0
    assert ts.batch_put_tensor_from(["f4", "f5"], [p, p], [n, n]) == [0, 0]
    assert ts.batch_put_tensor_from(["f6", "f7"], [p, p + 8], [n, n]) == [-600, -600]
    assert ts.batch_upsert_tensor_from(["f4"], [p], [n]) == [0]
    assert ts.batch_put_tensor_from(["f8"], [p, p], [n]) == [-600]


def test_tensor_parallel_shards(ts):
    t = full()
    assert ts.put_tensor_with_tp("w", t, tp_rank=0, tp_size=2, split_dim=1) == 0
    assert ts.is_exist("w") == 0
    for r in range(2):
        raw = ts.get("w_tp_%d" % r)
        assert struct.unpack_from("<I", raw, 16)[0] == 1            # a shard
        assert struct.unpack_from("<2q", raw, 40) == (6, 8)         # global shape
        assert struct.unpack_from("<2q", raw, 104) == (6, 4)        # local shape
        assert struct.unpack_from("<II", raw, 168) == (1, 0)
        assert struct.unpack_from("<6iq", raw, 176) == (1, 0, r, 2, 1, 0, 4)
        assert torch.equal(ts.get_tensor_with_tp("w", tp_rank=r, tp_size=2, split_dim=1),
                           t[:, 4 * r:4 * r + 4])
    assert ts.get_tensor_with_tp("w", tp_rank=0, tp_size=1) is None   # reads key "w"
    assert ts.put_tensor_with_tp("odd", torch.arange(10.), tp_size=3) == -600
    assert ts.put_tensor_with_tp("baddim", t, tp_size=2, split_dim=2) == -600
    assert ts.put_tensor_with_tp("one", t, tp_size=1) == 0
    assert torch.equal(ts.get_tensor("one"), t)
    assert ts.batch_put_tensor_with_tp(["b1", "b2"], [t, t + 1], tp_size=3) == [0, 0]
    got = ts.batch_get_tensor_with_tp(["b1", "b2", "none"], tp_rank=2, tp_size=3)
    assert torch.equal(got[0], t[4:]) and torch.equal(got[1], t[4:] + 1) and got[2] is None
    assert ts.pub_tensor_with_tp("pt", t, ReplicateConfig(), tp_rank=0, tp_size=2) == 0
    assert ts.batch_pub_tensor_with_tp(["bp"], [t], ReplicateConfig(), tp_size=2) == [0]
    assert torch.equal(ts.get_tensor("bp_tp_1"), t[3:])
    with pytest.raises(TypeError):
        ts.put_tensor_with_tp("w", t, tp_rank="0", tp_size=2)


def test_tensor_parallel_into_and_from(ts, reg):
    t, p, n = staged(ts, reg, "whole")
    assert ts.put_tensor_with_tp_from("tf", p, n, tp_rank=0, tp_size=2, split_dim=1) == 0
    assert torch.equal(ts.get_tensor("tf_tp_1"), t[:, 4:])
    assert ts.batch_put_tensor_with_tp_from(["tf2"], [p], [n], tp_size=2) == [0]
    assert ts.put_tensor_with_tp_from("bad", p + 8, n, tp_size=2) == -600
    x = ts.get_tensor_with_tp_into("tf", p + 32768, 32768, tp_rank=1, tp_size=2, split_dim=1)
    assert torch.equal(x, t[:, 4:]) and x.data_ptr() == p + 32768 + HDR
    got = ts.batch_get_tensor_with_tp_into(["tf2"], [p + 32768], [32768], tp_rank=0, tp_size=2)
    assert torch.equal(got[0], t[:3])


def test_parallelism_classes():
    a = ParallelAxis()
    assert (a.kind, a.rank, a.size, a.split_dim, a.expert_id, a.stage_id) == \
        ("", 0, 1, None, None, None)
    assert TensorParallelism().axes == []
    r = ReadTarget()
    assert r.mode == "as_stored" and r.parallelism is None
    for m in ("shard", "full", "FULL"):
        r.mode = m
        assert r.mode == m.lower()
    with pytest.raises(RuntimeError):
        r.mode = "bad"


def test_parallelism_writes_and_reads(ts):
    t = full()
    assert ts.put_tensor_with_parallelism("n", t) == 0
    assert torch.equal(ts.get_tensor_with_parallelism("n"), t)
    assert torch.equal(ts.get_tensor_with_parallelism("n", target("full")), t)
    # One tp axis: the tensor given is the shard.
    assert ts.put_tensor_with_parallelism("s", t[:, 4:].contiguous(), par(ax("tp", 1, 2, 1))) == 0
    assert ts.is_exist("s_tp_1") == 1 and ts.is_exist("s__parallelism_manifest") == 1
    assert ts.get_tensor_with_parallelism("s") is None
    assert torch.equal(ts.get_tensor_with_parallelism(
        "s", target("shard", par(ax("tp", 1, 2, 1)))), t[:, 4:])
    assert ts.get_tensor_with_parallelism("s", target("shard")) is None
    # Several axes with tp: the shard is cut from the full tensor.
    assert ts.put_tensor_with_parallelism("m", t, par(ax("pp", 0, 2, stage_id=1),
                                                      ax("tp", 1, 2, 0))) == 0
    raw = ts.get("m__tp_1of2_sd0__pp_0of2_sid1")
    assert struct.unpack_from("<II", raw, 168) == (2, 0)
    assert struct.unpack_from("<6iq", raw, 176) == (3, 0, 0, 2, -1, 1, 0)
    assert struct.unpack_from("<6iq", raw, 208) == (1, 1, 1, 2, 0, 0, 3)
    assert torch.equal(ts.get_tensor_with_parallelism(
        "m", target("shard", par(ax("tp", 1, 2, 0), ax("pp", 0, 2, stage_id=1)))), t[3:])
    # No tp axis: the whole tensor, tagged with its axes.
    assert ts.put_tensor_with_parallelism("e", t, par(ax("ep", 1, 4, expert_id=3))) == 0
    raw = ts.get("e__ep_1of4_eid3")
    assert struct.unpack_from("<6iq", raw, 176) == (2, 0, 1, 4, -1, 3, 0)
    assert torch.equal(ts.get_tensor_with_parallelism(
        "e", target("shard", par(ax("ep", 1, 4, expert_id=3)))), t)
    # Writer partitions: shards of a full tensor, and the whole rebuilt from them.
    w = type("W", (), {})()
    for rank in (0, 1):
        w.rank, w.size, w.split_dim = rank, 2, 0
        assert ts.put_tensor_with_parallelism("wp", t, writer_partition=w) == 0
    assert torch.equal(ts.get_tensor_with_parallelism("wp", target("full")), t)
    assert torch.equal(ts.get_tensor_with_parallelism(
        "wp", target("shard", par(ax("tp", 1, 2, 0)))), t[3:])


@pytest.mark.parametrize("p", [
    lambda: par(ax("zz", 0, 2, 0)), lambda: par(ax("tp", 3, 2, 0)), lambda: par(ax("tp", 0, 2)),
    lambda: par(ax("dp", 0, 2, 0)), lambda: par(ax("ep", 0, 2, 0, expert_id=1)),
    lambda: par(ax("ep", 0, 2)), lambda: par(ax("pp", 0, 2)), lambda: par(),
    lambda: par(ax("tp", 0, 2, 0), ax("tp", 1, 2, 0)),
    lambda: par(ax("dp", 0, 2), ax("tp", 0, 5, 0))])
def test_parallelism_refused(ts, p):
    assert ts.put_tensor_with_parallelism("r", full(), p()) == -600


def test_parallelism_batches_and_buffers(ts, reg):
    buf, p = reg
    t = full()
    assert ts.batch_put_tensor_with_parallelism(
        ["a", "b"], [t, t[:, :4].contiguous()], [None, par(ax("tp", 0, 2, 1))]) == [0, 0]
    assert ts.batch_put_tensor_with_parallelism(["a", "b"], [t, t], [None]) == [-600, -600]
    got = ts.batch_get_tensor_with_parallelism(
        ["a", "b", "none"], [None, target("shard", par(ax("tp", 0, 2, 1))), None])
    assert torch.equal(got[0], t) and torch.equal(got[1], t[:, :4]) and got[2] is None
    assert ts.upsert_tensor_with_parallelism("a", t * 2) == 0
    assert ts.batch_upsert_tensor_with_parallelism(["a"], [t * 3]) == [0]
    assert torch.equal(ts.get_tensor("a"), t * 3)
    x = ts.get_tensor_with_parallelism_into("a", p, 1 << 16, target("full"))
    assert torch.equal(x, t * 3) and x.data_ptr() == p + HDR
    n = HDR + t.numel() * 4
    assert ts.put_tensor_with_parallelism_from("c", p, n, par(ax("tp", 1, 2, 0))) == 0
    assert ts.upsert_tensor_with_parallelism_from("c", p, n, par(ax("tp", 1, 2, 0))) == 0
    assert ts.batch_put_tensor_with_parallelism_from(["d"], [p], [n]) == [0]
    assert ts.batch_upsert_tensor_with_parallelism_from(["d"], [p], [n]) == [0]
    assert torch.equal(ts.get_tensor("c_tp_1"), t[3:] * 3)      # cut from the full tensor
    assert ts.get_tensor_with_parallelism_into("a", p, 100) is None
    got = ts.batch_get_tensor_with_parallelism_into(["a"], [p], [1 << 16], [None])
    assert torch.equal(got[0], t * 3)


def test_safetensors_files(ts, tmp_path):
    t = full()
    assert ts.put_tensor("st", t) == 0
    path = str(tmp_path / "x.safetensors")
    assert ts.save_tensor_to_safetensor("st", path) == 0
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n))
    assert meta["st"] == {"dtype": "F32", "shape": [6, 8], "data_offsets": [0, 192]}
    assert ts.save_tensor_to_safetensor("missing", path + "2") == -1100
    got = ts.load_tensor_from_safetensor("loaded", path)      # no "loaded": the first tensor
    assert torch.equal(got, t) and torch.equal(ts.get_tensor("loaded"), t)
    assert torch.equal(ts.load_tensor_from_safetensor(file_name=path), t)
    assert torch.equal(ts.get_tensor(path), t)
    assert ts.load_tensor_from_safetensor("k", str(tmp_path / "none")) is None
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff" * 16)
    assert ts.load_tensor_from_safetensor("k", str(bad)) is None
    try:
        from safetensors.torch import load_file
    except ImportError:
        return
    assert torch.equal(load_file(path)["st"], t)


@ours_only
def test_serialize_helpers():
    hdr, addr, nbytes, keep = ms._serialize_tensor(full())
    data = hdr + ctypes.string_at(addr, nbytes)
    assert len(hdr) == HDR and torch.equal(ms._deserialize_tensor(data), full())
    assert ms._deserialize_tensor(b"short") is None


@ours_only
def test_torch_is_optional_at_import(tmp_path):
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'torch': raise ImportError('no torch here')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import mooncake, mooncake.store\n"
            "s = mooncake.store.MooncakeDistributedStore()\n"
            "try:\n"
            "    s.put_tensor('k', None)\n"
            "except ImportError:\n"
            "    print('import-error')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "import-error"


UPSTREAM_PY = os.environ.get("MC_UPSTREAM_PYTHON", "")


@ours_only
@pytest.mark.skipif(not UPSTREAM_PY, reason="MC_UPSTREAM_PYTHON (upstream's wheel) not set")
def test_tensors_cross_between_clients(ts, tmp_path):
    """Every case written by our client is byte-identical to upstream's, and each client reads
    the other's objects."""
    ours = {}
    for key, how, t, arg in peer.cases():
        for k in peer.stored_keys(key, how, arg, peer.write_case(ts, ms, key, how, t, arg)):
            raw = ts.get(k)
            assert raw, k
            ours[k] = raw.hex()
    inp, outp = tmp_path / "ours.json", tmp_path / "up.json"
    inp.write_text(json.dumps(ours))
    run_upstream_peer(UPSTREAM_PY, peer.__file__, inp, outp, timeout=120)
    up = json.loads(outp.read_text())
    assert sorted(up["raw"]) == sorted(ours)
    for k in ours:
        assert up["raw"][k] == ours[k], k
    assert up["read"] and all(up["read"].values()), up["read"]
    for k, hexbytes in up["raw"].items():
        assert ts.put("up/" + k, bytes.fromhex(hexbytes)) == 0
    for key, how, t, arg in peer.cases():
        if how == "put":
            assert peer.same(ts.get_tensor("up/" + key), t if t.dim() else t.reshape(1)), key
        elif how == "tp":
            sd = 1 if arg == 2 else 0
            for r, shard in enumerate(t.chunk(arg, dim=sd)):
                assert peer.same(ts.get_tensor_with_tp("up/" + key, r, arg, sd), shard)
