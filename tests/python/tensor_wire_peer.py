# SPDX-License-Identifier: Apache-2.0
"""The tensors of the wire-format test, and its other side.

Imported by test_tensor.py (our client) and run as a script by a Python that has upstream's wheel:

    python tensor_wire_peer.py MASTER_ADDR IN.json OUT.json

The script writes every case with upstream's client and records the stored bytes (hex), then
stores the bytes our client wrote (IN.json) under fresh keys and reads them back with upstream's
get methods, recording whether each equals the expected tensor.
"""
import json
import sys


def cases():
    """[(key, how, tensor, arg)]: how is "put", "tp" (arg tp_size; split_dim 1 for 2 shards, else 0),
    "par" (arg: list of axis tuples) or "writer" (arg (rank, size, split_dim))."""
    import torch
    out = []
    names = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
             "int64", "uint64", "bool", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
    for i, name in enumerate(names):
        dt = getattr(torch, name)
        base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) - 5
        if name == "bool":
            t = base > 0
        elif name.startswith("uint"):
            t = (base + 5).to(torch.int64).to(dt)
        else:
            t = base.to(dt)
        out.append(("dt_%s" % name, "put", t, None))
    full = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    out.append(("scalar", "put", torch.tensor(2.5), None))
    out.append(("empty", "put", torch.zeros(0, 3, dtype=torch.int32), None))
    out.append(("eightdims", "put", torch.ones([1, 2, 1, 2, 1, 2, 1, 2]), None))
    out.append(("tp2", "tp", full, 2))
    out.append(("tp3", "tp", full, 3))
    out.append(("par_tp", "par", full[:, 4:].contiguous(), [("tp", 1, 2, 1, None, None)]))
    out.append(("par_dptp", "par", full, [("dp", 1, 2, None, None, None),
                                          ("tp", 0, 4, 1, None, None)]))
    out.append(("par_pptp", "par", full, [("pp", 0, 2, None, None, 1),
                                          ("tp", 1, 2, 0, None, None)]))
    out.append(("par_ep", "par", full, [("ep", 0, 2, None, 7, None)]))
    out.append(("writer", "writer", full, (1, 2, 0)))
    return out


def axis(mod, kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
    """A mod.ParallelAxis (mod: our mooncake.store or upstream's), optional fields unset."""
    a = mod.ParallelAxis()
    a.kind, a.rank, a.size = kind, rank, size
    for name, v in (("split_dim", split_dim), ("expert_id", expert_id), ("stage_id", stage_id)):
        if v is not None:
            setattr(a, name, v)
    return a


def write_case(store, mod, key, how, tensor, arg):
    """Store one case; returns the keys it wrote."""
    if how == "put":
        assert store.put_tensor(key, tensor) == 0
        return [key]
    if how == "tp":
        sd = 1 if arg == 2 else 0
        assert store.put_tensor_with_tp(key, tensor, tp_rank=0, tp_size=arg, split_dim=sd) == 0
        return ["%s_tp_%d" % (key, r) for r in range(arg)]
    par = mod.TensorParallelism()
    if how == "par":
        par.axes = [axis(mod, *a) for a in arg]
        assert store.put_tensor_with_parallelism(key, tensor, par) == 0
        return None
    w = type("W", (), {})()
    w.rank, w.size, w.split_dim = arg
    assert store.put_tensor_with_parallelism(key, tensor, writer_partition=w) == 0
    return ["%s__writer_%dof%d_sd%d" % (key, arg[0], arg[1], arg[2]), key + "__writer_manifest"]


def stored_keys(key, how, arg, written):
    """The object keys a case leaves (the parallelism forms name theirs by their axes)."""
    if written is not None:
        return written
    order = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}
    if len(arg) == 1 and arg[0][0] == "tp":
        return ["%s_tp_%d" % (key, arg[0][1]), key + "__parallelism_manifest"]
    parts = [key]
    for kind, rank, size, sd, eid, sid in sorted(arg, key=lambda a: order[a[0]]):
        s = "%s_%dof%d" % (kind, rank, size)
        s += "_sd%d" % sd if sd is not None else ""
        s += "_eid%d" % eid if eid is not None else ""
        s += "_sid%d" % sid if sid is not None else ""
        parts.append(s)
    keys = ["__".join(parts)]
    if any(a[0] == "tp" for a in arg):
        keys.append(key + "__parallelism_manifest")
    return keys


def same(a, b):
    import torch
    return (a is not None and b is not None and a.dtype == b.dtype and a.shape == b.shape and
            torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 and a.dtype != torch.bool
                        else a, b.view(torch.uint8) if b.dtype.itemsize == 1 and
                        b.dtype != torch.bool else b))


def main(master, inp, outp):
    import mooncake.store as mod
    s = mod.MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master) == 0
    raw = {}
    for key, how, t, arg in cases():
        for k in stored_keys(key, how, arg, write_case(s, mod, key, how, t, arg)):
            raw[k] = s.get(k).hex()
    ours = json.load(open(inp))
    read = {}
    for k, hexbytes in ours.items():
        assert s.put("ours/" + k, bytes.fromhex(hexbytes)) == 0
    for key, how, t, arg in cases():
        if how == "put":
            read[key] = same(s.get_tensor("ours/" + key), t if t.dim() else t.reshape(1))
        elif how == "tp":
            sd = 1 if arg == 2 else 0
            shards = t.chunk(arg, dim=sd)
            read[key] = all(same(s.get_tensor_with_tp("ours/" + key, r, arg, sd), shards[r])
                            for r in range(arg))
    json.dump({"raw": raw, "read": read}, open(outp, "w"))
    s.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
