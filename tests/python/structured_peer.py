# SPDX-License-Identifier: Apache-2.0
"""The structured objects of the cross-package test, and its other side.

Imported by test_structured_wire.py (our package) and run as a script by a Python that has
upstream's wheel:

    python structured_peer.py MASTER_ADDR IN.json OUT.json

The script writes every case with upstream's MooncakeBundleTransfer and records every stored
object (hex) and each case's reference (manifest key or DataProto handle); then it stores the
objects our package wrote (IN.json) and reads our references back with upstream's API, and
records what it read (describe()) for both its own and our cases.
"""
import json
import sys

import numpy as np


class DataProto:
    def __init__(self, batch, non_tensor_batch, meta_info):
        self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch, meta_info


def _col(values):
    a = np.empty(len(values), dtype=object)
    a[:] = values
    return a


def cases():
    """[(name, how, args)]: how is "object", "structured", "bundle", "dataproto", "schema",
    "append" or "dict"."""
    import torch
    from mooncake.structured_object_store import FieldSchema
    n = 6
    nested = torch.nested.nested_tensor([torch.arange(3.0), torch.arange(5.0),
                                         torch.arange(1.0)], layout=torch.jagged)
    non_tensor = {
        "text": _col(["row %d" % i for i in range(n)]),
        "nums": _col([1, None, 3, 4, 5, 6]),
        "floats": _col([0.5 * i for i in range(n)]),
        "raw": _col([bytes([i, 255 - i]) * i for i in range(n)]),
        "lists": _col([list(range(i)) for i in range(n)]),
        "arrs": _col([np.arange(i * 2, dtype=np.float32).reshape(i, 2) for i in range(n)]),
        "reg": _col([np.full(3, i, dtype=np.int32) for i in range(n)]),
        "tens": _col([torch.arange(i, dtype=torch.int64) for i in range(n)]),
        "dicts": _col([{"a": i, "b": "x" * i} for i in range(n)]),
        "dict_bytes": _col([{"k": bytes([i]) * 3, "v": i} if i % 2 else None
                            for i in range(n)]),
        "media": _col([[b"img%d" % i, b"z"] for i in range(n)]),
    }
    dp = DataProto({"input_ids": torch.arange(n * 4, dtype=torch.int64).reshape(n, 4),
                    "scores": np.linspace(0, 1, n * 2, dtype=np.float32).reshape(n, 2)},
                   non_tensor, {"step": 3, "tag": "rollout"})
    schema_data = {"batch": {}, "non_tensor_batch": {
        "j": _col([{"q": i} for i in range(n)]),
        "m": _col([[i, "s", None] for i in range(n)]),
        "rtd": _col([{"x": torch.ones(i), "y": torch.zeros(2, i)} if i != 2 else None
                     for i in range(n)]),
        "auto": _col([{"p": np.arange(i, dtype=np.int16)} for i in range(n)]),
        "nd": _col([float(i) for i in range(n)]),
        "tr": _col([[i, i + 1] for i in range(n)]),
        "u": _col(["ü%d" % i if i % 3 else None for i in range(n)]),
    }, "meta_info": {"m": [1, 2]}}
    schemas = {"j": FieldSchema("json_ragged"), "m": FieldSchema("msgpack_ragged"),
               "rtd": FieldSchema("ragged_tensor_dict"), "auto": FieldSchema("auto"),
               "nd": FieldSchema("ndarray", metadata={"dtype": "float64"}),
               "tr": FieldSchema("typed_ragged", metadata={"dtype": "int32"}),
               "u": FieldSchema("utf8_ragged")}
    return [
        ("obj_mixed", "object", {"t": torch.arange(35, dtype=torch.float32).reshape(5, 7),
                                 "a": np.arange(12, dtype=np.int16).reshape(3, 4),
                                 "b": b"hello\x00world"}),
        ("obj_single", "object", torch.arange(10, dtype=torch.bfloat16)),
        ("obj_nested", "object", {"nt": nested}),
        ("obj_chunked", "structured", ({"k": "v", "n": 3},
                                       {"a": np.arange(4000, dtype=np.int64).reshape(1000, 4),
                                        "t": torch.arange(3000.0).reshape(1000, 3)}, 1000)),
        ("bundle", "bundle", (b"{\"kind\":\"raw\"}", {"x": b"abc", "y": b"", "z": b"q" * 50})),
        ("dp", "dataproto", dp),
        ("dp_schema", "schema", (schema_data, schemas)),
        ("dp_append", "append", dp),
        ("flat", "dict", {"ids": torch.arange(8).reshape(4, 2), "names": ["a", "b", "c", "d"],
                          "lr": 0.1}),
    ]


def write_case(xfer, name, how, args):
    """Store one case; returns its reference (JSON-safe)."""
    from mooncake.structured_object_store import StructuredObjectPayload, export_dataproto_ref
    if how == "object":
        return {"manifest_key": xfer.put_object(args, partition=name).manifest_key}
    if how == "structured":
        meta, members, chunk = args
        ref = xfer.put_structured_object(StructuredObjectPayload(meta, members), partition=name,
                                         chunk_bytes=chunk)
        return {"manifest_key": ref.manifest_key}
    if how == "bundle":
        return {"manifest_key": xfer.put_bundle(args[0], args[1], partition=name).manifest_key}
    if how == "dataproto":
        return export_dataproto_ref(xfer.put_dataproto(args, partition=name, stage="rollout"))
    if how == "schema":
        return export_dataproto_ref(xfer.put_dataproto(args[0], partition=name,
                                                       field_schemas=args[1]))
    if how == "append":
        ref = xfer.put_dataproto(args, partition=name, stage="rollout")
        ref = xfer.append_dataproto_fields(ref, {"non_tensor_batch": {
            "reward": _col([float(i) for i in range(ref.batch_size)])}}, stage="reward")
        ref = xfer.append_dataproto_fields(ref, {"batch": {
            "extra": np.ones((ref.batch_size, 2), dtype=np.uint8)}}, stage="rollout")
        return export_dataproto_ref(ref)
    if how == "dict":
        return export_dataproto_ref(xfer.put(args, type="dict", partition=name))
    raise ValueError(how)


def read_case(xfer, how, ref):
    """What a case reads back as."""
    from mooncake.structured_object_store import StructuredMemberSlice
    if how in ("object", "structured"):
        if how == "structured":
            spec = xfer.read_spec(ref).slice_member("a", 0, 10, 400, 7) \
                .slice_member("t", 0, 990, 1000)
            return {"whole": xfer.get_object(ref), "sliced": xfer.materialize(spec).objects}
        return xfer.get_object(ref)
    if how == "bundle":
        return xfer.materialize(xfer.read_spec(ref)).objects
    if how == "dict":
        return xfer.get(ref, type="dict")
    whole = xfer.get_dataproto(ref)
    rows = xfer.get_dataproto(ref, rows=StructuredMemberSlice(0, 1, 5, 1))
    picked = xfer.get_dataproto(ref, rows=[4, 0, 5])
    return {"whole": whole, "rows": rows, "picked": picked}


def describe(v):
    """v as JSON-safe data that tells apart types, dtypes, shapes and bytes."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        if v.is_nested:
            return {"nested": str(v.dtype), "rows": [describe(r) for r in v.unbind()]}
        t = v.detach().cpu().contiguous()
        return {"tensor": str(t.dtype), "shape": list(t.shape),
                "hex": "" if t.numel() == 0 else
                t.reshape(-1).view(torch.uint8).numpy().tobytes().hex()}
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return {"objects": [describe(x) for x in v.tolist()], "shape": list(v.shape)}
        return {"nd": v.dtype.str, "shape": list(v.shape),
                "hex": np.ascontiguousarray(v).tobytes().hex()}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"bytes": bytes(v).hex()}
    if isinstance(v, dict):
        return {"dict": {str(k): describe(x) for k, x in v.items()}}
    if isinstance(v, (list, tuple)):
        return {"list": [describe(x) for x in v]}
    if isinstance(v, np.generic):
        return {"np": type(v).__name__, "v": v.item()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"py": type(v).__name__, "v": v}
    if hasattr(v, "batch"):
        return describe({"batch": v.batch, "non_tensor_batch": v.non_tensor_batch,
                         "meta_info": v.meta_info})
    return {"other": type(v).__name__}


def stored_objects(store, xfer, ref):
    """{key: hex} of every object a reference's bundles hold."""
    from mooncake.structured_object_store import import_dataproto_ref
    if "manifest_key" in ref:
        keys = [ref["manifest_key"]]
    else:
        keys = [r.manifest_key for r in import_dataproto_ref(ref).stage_refs.values()]
    out = {}
    for mk in keys:
        raw = store.get(mk)
        out[mk] = raw.hex()
        m = json.loads(raw)
        for spec in [m["meta"], *m["buffers"].values()]:
            for c in spec["chunks"]:
                out[c["key"]] = store.get(c["key"]).hex()
        for k in m.get("cleanup_keys", []):
            got = store.get(k)
            if got:
                out[k] = got.hex()
    return out


def main(master, inp, outp):
    import torch  # noqa: F401  (tensor cases)
    from mooncake.store import MooncakeDistributedStore
    from mooncake.structured_object_store import MooncakeBundleTransfer
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 256 << 20, 64 << 20, "tcp", "", master) == 0
    xfer = MooncakeBundleTransfer(s, key_prefix="up")
    refs, objects, reads = {}, {}, {}
    for name, how, args in cases():
        refs[name] = write_case(xfer, name, how, args)
        objects.update(stored_objects(s, xfer, refs[name]))
        reads[name] = describe(read_case(xfer, how, refs[name]))
    ours = json.load(open(inp))
    ours_reads = {}
    for k, hexbytes in ours["objects"].items():
        assert s.put(k, bytes.fromhex(hexbytes)) == 0, k
    theirs = MooncakeBundleTransfer(s, key_prefix="ours")
    for name, how, _args in cases():
        try:
            ours_reads[name] = describe(read_case(theirs, how, ours["refs"][name]))
        except Exception as e:  # reported, compared by the test
            ours_reads[name] = {"error": "%s: %s" % (type(e).__name__, e)}
    json.dump({"refs": refs, "objects": objects, "reads": reads, "ours_reads": ours_reads},
              open(outp, "w"))
    s.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
