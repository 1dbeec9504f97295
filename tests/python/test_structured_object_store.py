# SPDX-License-Identifier: Apache-2.0
"""mooncake.structured_object_store against a real master: objects of tensors, arrays, bytes
and plain rows; DataProto batches put, appended, read by field, row and meta key, exported to
a JSON-safe handle and back, cleaned up; errors and wrong argument types.  The API-level tests
run against upstream's wheel too (MC_PARITY_BIN, see conftest.py)."""
import json

import pytest

from conftest import UPSTREAM

np = pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh adds it)")
torch = pytest.importorskip("torch", reason="torch is not installed (scripts/deps.sh adds it)")

from mooncake.store import MooncakeDistributedStore  # noqa: E402
from mooncake.structured_object_store import (MooncakeBundleTransfer,  # noqa: E402
                                              MooncakeDataProtoRef, StructuredObjectPayload,
                                              StructuredObjectReadSpec, export_dataproto_ref,
                                              import_dataproto_ref, is_dataproto_ref_handle)

ours_only = pytest.mark.skipif(UPSTREAM, reason="our layout's behaviour")


@pytest.fixture
def xfer(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 128 << 20, 64 << 20, "tcp", "", master) == 0
    yield MooncakeBundleTransfer(s, key_prefix="t")
    s.remove_all(force=True)
    s.close()


class DataProto:
    def __init__(self, batch, non_tensor_batch, meta_info):
        self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch, meta_info


def sample(n=8):
    return DataProto(
        {"input_ids": torch.arange(n * 16, dtype=torch.int64).reshape(n, 16),
         "mask": torch.ones(n, 16, dtype=torch.bool),
         "scores": np.linspace(0, 1, n * 4, dtype=np.float32).reshape(n, 4)},
        {"text": np.array(["row %d" % i for i in range(n)], dtype=object)},
        {"step": 3, "tag": "rollout"})


def test_put_and_get_object(xfer):
    obj = {"t": torch.randn(5, 7), "a": np.arange(12, dtype=np.int16).reshape(3, 4)}
    ref = xfer.put_object(obj)
    got = xfer.get_object(ref)
    assert torch.equal(got["t"], obj["t"]) and np.array_equal(got["a"], obj["a"])
    assert got["a"].dtype == np.int16
    single = xfer.put_object(torch.arange(10, dtype=torch.bfloat16))
    assert torch.equal(xfer.get_object(single), torch.arange(10, dtype=torch.bfloat16))
    assert torch.equal(xfer.get_object({"manifest_key": ref.manifest_key})["t"], obj["t"])
    xfer.remove_bundle(ref)
    with pytest.raises(Exception):
        xfer.get_object({"manifest_key": ref.manifest_key})


def test_chunked_members_and_row_slices(xfer):
    a = np.arange(4000, dtype=np.int64).reshape(1000, 4)
    t = torch.arange(3000, dtype=torch.float32).reshape(1000, 3)
    ref = xfer.put_structured_object(StructuredObjectPayload({"k": "v"}, {"a": a, "t": t}),
                                     chunk_bytes=1000)
    spec = xfer.read_spec(ref).select_members(["a", "t"]).slice_member("a", 0, 100, 400, 3)
    spec = spec.slice_member("t", 0, 990, 1000)
    res = xfer.materialize(spec)
    assert res.metadata["k"] == "v"
    assert np.array_equal(res.objects["a"], a[100:400:3])
    assert torch.equal(res.objects["t"], t[990:1000])
    dst = np.zeros((1000, 4), dtype=np.int64)
    res = xfer.materialize_into(xfer.read_spec(ref).select_members(["a"]), {"a": dst})
    assert res.objects["a"] is dst and np.array_equal(dst, a)


def test_dataproto_round_trip(xfer):
    d = sample()
    ref = xfer.put_dataproto(d, namespace="rl", partition="step-1", stage="rollout")
    assert isinstance(ref, MooncakeDataProtoRef) and ref.batch_size == 8
    got = xfer.get_dataproto(ref)
    assert torch.equal(got["batch"]["input_ids"], d.batch["input_ids"])
    assert torch.equal(got["batch"]["mask"], d.batch["mask"])
    assert np.array_equal(got["batch"]["scores"], d.batch["scores"])
    assert list(got["non_tensor_batch"]["text"]) == list(d.non_tensor_batch["text"])
    assert got["meta_info"] == {"step": 3, "tag": "rollout"}
    sub = xfer.get_dataproto(ref, fields=["input_ids", "text"], meta_info_keys=["step"],
                             rows=slice(2, 6))
    assert set(sub["batch"]) == {"input_ids"} and set(sub["non_tensor_batch"]) == {"text"}
    assert torch.equal(sub["batch"]["input_ids"], d.batch["input_ids"][2:6])
    assert list(sub["non_tensor_batch"]["text"]) == ["row 2", "row 3", "row 4", "row 5"]
    assert sub["meta_info"] == {"step": 3}
    picked = xfer.get_dataproto(ref, batch_fields=["input_ids"], rows=[7, 3, 0])
    assert torch.equal(picked["batch"]["input_ids"], d.batch["input_ids"][[7, 3, 0]])
    with pytest.raises(KeyError):
        xfer.get_dataproto(ref, fields=["nope"])
    built = xfer.get_dataproto(ref, fields=["mask"], data_cls=DataProto)
    assert isinstance(built, DataProto) and torch.equal(built.batch["mask"], d.batch["mask"])


def test_dataproto_append_export_cleanup(xfer):
    d = sample()
    ref = xfer.put_dataproto(d, stage="rollout")
    logp = {"old_log_probs": torch.randn(8, 16)}
    ref2 = xfer.append_dataproto_fields(ref, logp, stage="old_log_prob")
    assert "old_log_probs" in ref2.field_index and "old_log_probs" not in ref.field_index
    with pytest.raises(ValueError):
        xfer.append_dataproto_fields(ref2, {"input_ids": torch.zeros(8, 16)}, stage="x")
    handle = export_dataproto_ref(ref2)
    assert is_dataproto_ref_handle(handle) and not is_dataproto_ref_handle({"type": "x"})
    wire = json.loads(json.dumps(handle))
    back = import_dataproto_ref(wire)
    got = xfer.get_dataproto(back, fields=["old_log_probs", "input_ids"])
    assert torch.equal(got["batch"]["old_log_probs"], logp["old_log_probs"])
    assert torch.equal(xfer.get_dataproto(wire, fields=["input_ids"])["batch"]["input_ids"],
                       d.batch["input_ids"])
    view = xfer.dataproto_manifest_view(back)
    assert isinstance(view, dict)
    xfer.cleanup_dataproto(back)
    with pytest.raises(Exception):
        xfer.get_dataproto(ref2, fields=["input_ids"])


def test_refusals_and_wrong_types(xfer):
    with pytest.raises(TypeError):
        StructuredObjectPayload({"a": 1})
    with pytest.raises(ValueError):
        xfer.put_dataproto({"a": torch.zeros(4, 2), "b": torch.zeros(5, 2)})
    with pytest.raises(TypeError):
        xfer.get_dataproto("not a ref")
    with pytest.raises(ValueError):
        import_dataproto_ref({"type": "something else"})
    with pytest.raises((TypeError, AttributeError)):    # upstream's: AttributeError
        xfer.materialize("spec")


def test_member_types_and_refusals(xfer):
    """Lists are no member type (upstream's TypeError); mixed non_tensor columns have no
    codec (ValueError); empty and 0-d members round-trip."""
    with pytest.raises(TypeError):
        xfer.put_object({"rows": [b"\x00\xff", {"a": [1, None]}, "s", 2.5]})
    mixed = np.empty(3, dtype=object)
    mixed[:] = [1, "a", object()]
    with pytest.raises(ValueError):
        xfer.put_dataproto({"non_tensor_batch": {"m": mixed}})
    assert xfer.get_object(xfer.put_object({"e": torch.zeros(0, 3)}))["e"].shape == (0, 3)
    # A 0-d tensor comes back 1-d, as upstream's get_tensor gives it.
    assert torch.equal(xfer.get_object(xfer.put_object(torch.tensor(2.5))), torch.tensor([2.5]))
    got = xfer.get_object(xfer.put_object({"b": b"xyz", "z": b""}))
    assert bytes(got["b"]) == b"xyz" and got["z"] == b""
    assert isinstance(StructuredObjectReadSpec(xfer.put_object(np.int32(1))),
                      StructuredObjectReadSpec)
    with pytest.raises(ValueError):
        xfer.put_object({"a/b": b"x"})          # member names are key segments
    with pytest.raises(ValueError):
        xfer.put_object({"a": b"x"}, partition="")
    with pytest.raises(ValueError):
        MooncakeBundleTransfer(xfer.store, key_prefix="/")


def test_codecs_round_trip(xfer):
    """Every non_tensor codec, inferred and by FieldSchema, reads back as written."""
    from mooncake.structured_object_store import FieldSchema

    def col(v):
        a = np.empty(len(v), dtype=object)
        a[:] = v
        return a
    cols = {"s": ["a", None, "ü"], "i": [1, None, 3], "f": [0.5, 1.5, None],
            "b": [b"", b"\x00", None], "l": [[1, 2], [], [3]], "d": [{"k": [1]}, {}, None],
            "n": [np.arange(2.0), None, np.ones((2, 2))],
            "r": [{"t": torch.arange(2)}, {"t": torch.arange(0)}, None]}
    schemas = {"m": FieldSchema("msgpack_ragged"), "j": FieldSchema("json_ragged"),
               "a": FieldSchema("auto"), "td": FieldSchema("ragged_tensor_dict")}
    extra = {"m": [[1, "x", None], {"k": b"v"}, None], "j": [{"q": 1}, [1], None],
             "a": [{"p": b"x"}, {"p": b""}, None],
             "td": [{"x": torch.ones(2)}, None, {"x": torch.zeros(0)}]}
    ref = xfer.put_dataproto({"non_tensor_batch": {k: col(v) for k, v in
                                                   {**cols, **extra}.items()}},
                             field_schemas=schemas)
    got = xfer.get_dataproto(ref)["non_tensor_batch"]
    for k, want in {**cols, **extra}.items():
        back = got[k].tolist()
        assert len(back) == 3, k
        for w, g in zip(want, back):
            if isinstance(w, np.ndarray):
                assert np.array_equal(w, g), k
            elif isinstance(w, dict) and any(torch.is_tensor(x) for x in w.values()):
                assert set(w) == set(g) and all(torch.equal(w[x], g[x]) for x in w), k
            else:
                assert w == g, (k, w, g)
    rows = xfer.get_dataproto(ref, non_tensor_fields=["s", "l"], rows=slice(1, 3))
    assert rows["non_tensor_batch"]["s"].tolist() == [None, "ü"]
    assert rows["non_tensor_batch"]["l"].tolist() == [[], [3]]


@ours_only
def test_stored_data_is_checked_not_trusted(xfer):
    """A manifest naming keys outside its bundle, chunks that do not add up, or a truncated
    msgpack column is refused with ValueError; nothing is unpickled."""
    from mooncake import _msgpack
    ref = xfer.put_object({"a": np.arange(4)})
    m = json.loads(xfer.store.get(ref.manifest_key))
    bad = json.loads(json.dumps(m))
    bad["buffers"]["a"]["chunks"][0]["key"] = "elsewhere"
    with pytest.raises(ValueError):
        xfer.get_object({"manifest_key": ref.manifest_key, "manifest": bad})
    bad = json.loads(json.dumps(m))
    bad["buffers"]["a"]["bytes"] = 1 << 40
    with pytest.raises(ValueError):
        xfer.get_object({"manifest_key": ref.manifest_key, "manifest": bad})
    with pytest.raises(ValueError):
        _msgpack.unpack_all(_msgpack.packb([1, 2, "abc"])[:-1])
    with pytest.raises(ValueError):
        _msgpack.unpack_all(b"\xc7\x01\x05x")      # an extension type
    with pytest.raises(TypeError):
        _msgpack.packb((1, 2))                       # strict types, as upstream's writer


def test_append_cleanup_removes_every_object(xfer):
    """An append to an existing stage writes one merged manifest; cleanup_dataproto removes
    the objects of every bundle involved, and cleanup_dataproto_append only the append's."""
    import structured_peer as peer
    d = sample(4)
    ref = xfer.put_dataproto(d, stage="rollout")
    before = set(peer.stored_objects(xfer.store, xfer, export_dataproto_ref(ref)))
    ref2 = xfer.append_dataproto_fields(ref, {"batch": {"v": torch.ones(4, 2)}}, stage="rollout")
    ref3 = xfer.append_dataproto_fields(ref2, {"non_tensor_batch": {
        "r": np.array([1.0, 2.0, 3.0, 4.0], dtype=object)}}, stage="reward")
    m = json.loads(xfer.store.get(ref2.stage_refs["rollout"].manifest_key))
    assert m["cleanup_keys"] and len(m["buffer_object_ids"]) == 2
    after = set(peer.stored_objects(xfer.store, xfer, export_dataproto_ref(ref3)))
    assert torch.equal(xfer.get_dataproto(ref3, fields=["v"])["batch"]["v"], torch.ones(4, 2))
    assert xfer.get_dataproto(ref3, fields=["r"])["non_tensor_batch"]["r"].tolist() == \
        [1.0, 2.0, 3.0, 4.0]
    xfer.cleanup_dataproto_append(ref2, ref3)
    assert xfer.get_dataproto(ref2, fields=["v"])["batch"]["v"].shape == (4, 2)
    assert xfer.store.is_exist(ref3.stage_refs["reward"].manifest_key) == 0
    xfer.cleanup_dataproto(ref2)
    assert all(xfer.store.is_exist(k) == 0 for k in before | after)
