# SPDX-License-Identifier: Apache-2.0
"""Structured objects: JSON metadata plus typed members, stored as a bundle.

The metadata holds, under "__mooncake_structured_fields__", one spec per member:
{"encoding":"ndarray","dtype":"<f4","shape":[..]} (C-order bytes), {"encoding":"torch_tensor",
"dtype":"torch.float32","shape":[..],"element_size":4} (304-byte header + data, through
put_tensor/pub_tensor where the store has them), a nested jagged tensor ("nested": true; its
values, offsets and lengths as tensor parts back to back, or torch.save bytes that are read with
weights_only), or {"encoding":"bytes"}.  Members are read whole, by row slices (axis 0) or by
row indexes, into new objects or into the caller's memory.  Single-threaded.
"""
import ctypes
from collections.abc import Mapping

import numpy as np

from mooncake._structured_bundle import (
    STRUCTURED_FIELD_SPECS_KEY, ByteParts, RawDestination, StructuredObjectResult,
    TensorObjectBuffer, TensorValue, check_policy, decode_json, encode_json, is_tensor,
    patch_tensor_header, tensor_bytes, tensor_from_bytes, torch_load_bytes, torch_save_bytes,
    validate_key_segment)
from mooncake._structured_codecs import Parts


def _normalize_metadata(metadata):
    if not isinstance(metadata, Mapping):
        raise TypeError("structured metadata must be a mapping")
    out = dict(metadata)
    if STRUCTURED_FIELD_SPECS_KEY in out:
        raise ValueError("structured metadata key %r is reserved" % STRUCTURED_FIELD_SPECS_KEY)
    if not isinstance(out.get("layout", "structured"), str):
        raise ValueError("structured metadata layout must be a string")
    out.setdefault("layout", "structured")
    return out


def _encode_nested_tensor(t):
    spec = {"encoding": "torch_tensor", "dtype": str(t.dtype), "nested": True,
            "format": "torch_save"}
    values, offsets, lengths = t.values(), t.offsets(), t.lengths()
    parts = [values, offsets] + ([lengths] if lengths is not None else [])
    if all(p.device.type == "cpu" for p in parts):
        blobs = [tensor_bytes(p) for p in parts]
        spec.update({"format": "tensor_parts", "part_bytes": [len(b) for b in blobs],
                     "has_lengths": lengths is not None,
                     "ragged_idx": int(getattr(t, "_ragged_idx", 1))})
        return spec, ByteParts(blobs)
    return spec, torch_save_bytes(t)


def encode_torch_field(t):
    if t.is_nested:
        import torch
        if t.layout != torch.jagged:
            raise ValueError("structured nested tensor fields require torch.jagged layout")
        return _encode_nested_tensor(t)
    return ({"encoding": "torch_tensor", "dtype": str(t.dtype), "shape": list(t.shape),
             "element_size": int(t.element_size())}, TensorValue(t))


def encode_field(value):
    """(field spec, what the bundle layer stores) of one member value."""
    if isinstance(value, TensorObjectBuffer):
        return {"encoding": "torch_tensor"}, value
    if isinstance(value, TensorValue):
        return encode_torch_field(value.tensor)
    if isinstance(value, Parts):
        return ({"encoding": "ndarray", "dtype": value.dtype.str, "shape": [value.total]},
                value)
    if is_tensor(value):
        return encode_torch_field(value)
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        return ({"encoding": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape)},
                a.view(np.uint8).reshape(-1))
    return {"encoding": "bytes"}, value


def encode_fields(metadata, fields):
    meta = _normalize_metadata(metadata)
    specs, values = {}, {}
    for name, value in fields.items():
        validate_key_segment(name, "buffer name")
        specs[name], values[name] = encode_field(value)
    if specs:
        meta[STRUCTURED_FIELD_SPECS_KEY] = specs
    return meta, values


def field_specs(metadata):
    specs = metadata.get(STRUCTURED_FIELD_SPECS_KEY, {})
    if not isinstance(specs, dict):
        raise ValueError("structured field specs must be a dict")
    return specs


def normalized_slice(sl, total):
    if sl.step <= 0:
        raise ValueError("structured ndarray slicing step must be positive")
    return slice(sl.start, sl.end, sl.step).indices(total)


def nested_from_parts(values, offsets, lengths, ragged_idx):
    import torch
    seq = lengths if lengths is not None else offsets.diff()
    lo, hi = (int(seq.min().item()), int(seq.max().item())) if seq.numel() else (0, 0)
    return torch.nested.nested_tensor_from_jagged(values, offsets=offsets, lengths=lengths,
                                                  jagged_dim=ragged_idx, min_seqlen=lo,
                                                  max_seqlen=hi)


def decode_nested(data, spec):
    fmt = spec.get("format", "torch_save")
    if fmt == "torch_save":
        v = torch_load_bytes(data)
        return nested_from_parts(v.values(), v.offsets(), v.lengths(),
                                 int(getattr(v, "_ragged_idx", 1)))
    if fmt != "tensor_parts":
        raise ValueError("unsupported nested tensor payload format: %s" % fmt)
    sizes = spec.get("part_bytes")
    want = 3 if spec.get("has_lengths") else 2
    if not isinstance(sizes, list) or len(sizes) != want:
        raise ValueError("nested tensor payload has invalid part metadata")
    parts, off = [], 0
    for n in sizes:
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise ValueError("nested tensor payload has invalid part size")
        if off + n > len(data):
            raise ValueError("nested tensor payload is truncated")
        parts.append(tensor_from_bytes(data[off:off + n]))
        off += n
    if off != len(data):
        raise ValueError("nested tensor payload has trailing bytes")
    return nested_from_parts(parts[0], parts[1], parts[2] if want == 3 else None,
                             int(spec.get("ragged_idx", 1)))


def select_nested_rows(value, indices):
    import torch
    rows = value.unbind()
    picked = [rows[int(i)] for i in indices]
    if picked:
        out = torch.nested.as_nested_tensor(picked, layout=value.layout)
    else:
        offsets = torch.zeros(1, dtype=value.offsets().dtype)
        out = torch.nested.nested_tensor_from_jagged(value.values()[:0], offsets=offsets)
    if hasattr(value, "_ragged_idx"):
        out._ragged_idx = value._ragged_idx
    return out


def ndarray_target(name, dest, dtype, shape):
    """Where an ndarray member's rows go: a new array, the caller's raw memory, or the
    caller's array (same dtype and shape, C-contiguous, writable)."""
    if dest is None:
        return np.empty(shape, dtype=dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if isinstance(dest, RawDestination):
        if dest.size < nbytes:
            raise ValueError("raw destination has %d bytes, expected at least %d"
                             % (dest.size, nbytes))
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(dest.ptr)) \
            .view(dtype).reshape(shape)
    if not isinstance(dest, np.ndarray):
        raise TypeError("structured ndarray field %s destination must be a numpy.ndarray or "
                        "raw_destination" % name)
    if dest.dtype != dtype:
        raise ValueError("structured ndarray field %s destination dtype mismatch: expected %s, "
                         "got %s" % (name, dtype.str, dest.dtype.str))
    if tuple(dest.shape) != tuple(shape):
        raise ValueError("structured ndarray field %s destination shape mismatch: expected %s, "
                         "got %s" % (name, tuple(shape), tuple(dest.shape)))
    if not dest.flags["C_CONTIGUOUS"]:
        raise ValueError("structured ndarray field %s destination must be C-contiguous" % name)
    if not dest.flags["WRITEABLE"]:
        raise ValueError("structured ndarray field %s destination must be writeable" % name)
    return dest


class StructuredLayer:
    """Structured objects (JSON metadata + typed members) on a BundleStoreLayer."""

    def __init__(self, bundles):
        self.bundles = bundles

    def put(self, payload, partition, chunk_bytes, policy, max_inflight_put, config=None):
        meta, values = encode_fields(payload.metadata, payload.buffers)
        policy = check_policy(policy, max_inflight_put)
        return self.bundles.put_bundle(encode_json(meta, "structured metadata"), values,
                                       partition, chunk_bytes, policy, None, config)

    def read_metadata(self, manifest):
        return decode_json(self.bundles.read_payload(manifest["meta"]), "structured metadata")

    def materialize_into(self, spec, destinations):
        if spec.member_names is not None and not spec.member_names:
            raise ValueError("structured read spec selected no members")
        manifest = self.bundles.resolve_manifest(spec.ref)
        meta = self.read_metadata(manifest)
        buffers = manifest["buffers"]
        names = list(buffers) if spec.member_names is None else list(spec.member_names)
        missing = [n for n in names if n not in buffers]
        if missing:
            raise KeyError("unknown bundle buffers: %s" % missing)
        specs = field_specs(meta)
        dests = destinations or {}
        slices = dict(spec.member_slices)
        objects = {n: self.read_member(n, buffers[n], specs.get(n, {"encoding": "bytes"}),
                                       slices.get(n), dests.get(n)) for n in names}
        return StructuredObjectResult(metadata=dict(meta), objects=objects)

    def read_member(self, name, pspec, fspec, sl, dest):
        enc = fspec.get("encoding", "bytes")
        if enc == "bytes":
            if sl is not None:
                raise ValueError("structured bytes member %s does not support slicing" % name)
            if dest is not None:
                raise ValueError("structured bytes member %s does not support materialize_into"
                                 % name)
            data = self.bundles.read_payload(pspec)
            if data and callable(getattr(self.bundles.store, "register_buffer", None)):
                # A Mooncake store's reads land in registered memory, which upstream's
                # package hands back as a uint8 array; plain stores give bytes.
                return np.frombuffer(bytearray(data), dtype=np.uint8)
            return data
        if enc == "torch_tensor":
            return self._read_tensor(name, pspec, fspec, sl, dest)
        if enc != "ndarray":
            raise ValueError("unsupported structured field encoding: %s" % enc)
        return self._read_ndarray(name, pspec, fspec, sl, dest)

    def _read_ndarray(self, name, pspec, fspec, sl, dest):
        dtype, shape = fspec.get("dtype"), fspec.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list):
            raise ValueError("structured ndarray field %s is missing dtype or shape" % name)
        dtype, shape = np.dtype(dtype), tuple(int(d) for d in shape)
        if sl is None:
            target = ndarray_target(name, dest, dtype, shape)
            self.bundles.read_into(pspec, target.view(np.uint8).reshape(-1), 0)
            return target
        if sl.axis != 0:
            raise ValueError("structured ndarray slicing currently supports axis=0 only")
        if not shape:
            raise ValueError("structured ndarray slicing requires at least one dimension")
        start, end, step = normalized_slice(sl, shape[0])
        width = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        count = 0 if start >= end else 1 + (end - 1 - start) // step
        target = ndarray_target(name, dest, dtype, (count,) + shape[1:])
        if count == 0:
            return target
        cover = (count - 1) * step + 1
        if step == 1:
            self.bundles.read_into(pspec, target.view(np.uint8).reshape(-1), start * width)
            return target
        tmp = np.empty((cover,) + shape[1:], dtype=dtype)
        self.bundles.read_into(pspec, tmp.view(np.uint8).reshape(-1), start * width)
        target[...] = tmp[::step]
        return target

    def read_rows(self, name, pspec, fspec, indices, dest):
        """Rows at indices of an ndarray or tensor member."""
        enc = fspec.get("encoding", "bytes")
        if enc == "torch_tensor" and fspec.get("nested"):
            value = self._read_tensor(name, pspec, fspec, None, dest)
            return select_nested_rows(value, indices)
        if enc not in ("ndarray", "torch_tensor"):
            raise ValueError("structured member %s does not support indexed rows" % name)
        if enc == "torch_tensor":
            whole = self._read_tensor(name, pspec, fspec, None, None)
            picked = whole[list(indices)].contiguous()
            if dest is None:
                return picked
            return self._tensor_into_dest(name, picked, dest)
        dtype, shape = np.dtype(fspec["dtype"]), tuple(int(d) for d in fspec["shape"])
        if not shape:
            raise ValueError("structured ndarray indexed read requires at least one dimension")
        target = ndarray_target(name, dest, dtype, (len(indices),) + shape[1:])
        width = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        out = target.view(np.uint8).reshape(-1)
        for i, row in enumerate(indices):
            self.bundles.read_into(pspec, out[i * width:(i + 1) * width], row * width)
        return target

    def _tensor_into_dest(self, name, tensor, dest):
        if not isinstance(dest, (TensorObjectBuffer, RawDestination)):
            raise ValueError("structured tensor member %s only supports tensor_object_buffer or "
                             "raw_destination destinations" % name)
        data = tensor_bytes(tensor)
        if dest.size < len(data):
            raise ValueError("tensor destination has %d bytes, expected at least %d"
                             % (dest.size, len(data)))
        ctypes.memmove(dest.ptr, data, len(data))
        return dest

    def _read_tensor(self, name, pspec, fspec, sl, dest):
        if fspec.get("nested"):
            if dest is not None:
                raise ValueError("structured nested tensor member %s does not support "
                                 "destinations" % name)
            value = decode_nested(self.bundles.read_payload(pspec), fspec)
            if sl is None:
                return value
            if sl.axis != 0:
                raise ValueError("structured nested tensor slicing currently supports axis=0 "
                                 "only")
            return select_nested_rows(value, range(*normalized_slice(sl, value.size(0))))
        if sl is not None:
            return self._read_tensor_rows(name, pspec, fspec, sl, dest)
        if dest is not None:
            if not isinstance(dest, (TensorObjectBuffer, RawDestination)):
                raise ValueError("structured tensor member %s only supports tensor_object_buffer "
                                 "or raw_destination destinations" % name)
            if pspec.get("kind") == "tensor" and callable(getattr(self.bundles.store,
                                                                  "get_tensor_into", None)):
                got = self.bundles.store.get_tensor_into(pspec["key"], dest.ptr, dest.size)
                return dest if got is None else got
            want = int(pspec["bytes"])
            if dest.size < want:
                raise ValueError("tensor destination has %d bytes, expected at least %d"
                                 % (dest.size, want))
            data = self.bundles.read_payload(pspec)
            ctypes.memmove(dest.ptr, data, want)
            return dest
        if pspec.get("kind") == "tensor" and callable(getattr(self.bundles.store, "get_tensor",
                                                              None)):
            t = self.bundles.store.get_tensor(pspec["key"])
            if t is None:
                raise RuntimeError("get_tensor failed for %s" % pspec["key"])
            return t
        if pspec.get("format") == "torch_save":
            return torch_load_bytes(self.bundles.read_payload(pspec))
        return tensor_from_bytes(self.bundles.read_payload(pspec))

    def _read_tensor_rows(self, name, pspec, fspec, sl, dest):
        if pspec.get("format") == "torch_save":
            if dest is not None:
                raise ValueError("structured torch_save tensor member %s does not support "
                                 "destinations" % name)
            if sl.axis != 0:
                raise ValueError("structured tensor slicing currently supports axis=0 only")
            v = torch_load_bytes(self.bundles.read_payload(pspec))
            start, end, step = normalized_slice(sl, len(v))
            return v[start:end:step]
        hdr = int(pspec.get("metadata_bytes", -1))
        shape, esize = fspec.get("shape"), int(fspec.get("element_size", 0))
        if hdr < 0 or not isinstance(shape, list) or esize <= 0:
            raise ValueError("structured tensor field %s is missing slice metadata" % name)
        if sl.axis != 0:
            raise ValueError("structured tensor slicing currently supports axis=0 only")
        if not shape:
            raise ValueError("structured tensor slicing requires at least one dimension")
        start, end, step = normalized_slice(sl, int(shape[0]))
        if step != 1:
            raise ValueError("structured tensor slicing currently requires step=1")
        end = max(start, end)
        width = esize * int(np.prod(shape[1:], dtype=np.int64))
        length = (end - start) * width
        header = patch_tensor_header(self.bundles.read_range(pspec, 0, hdr),
                                     [end - start] + list(shape[1:]), length)
        data = self.bundles.read_range(pspec, hdr + start * width, length)
        if dest is None:
            return tensor_from_bytes(header + data)
        if not isinstance(dest, (TensorObjectBuffer, RawDestination)):
            raise ValueError("structured tensor member %s only supports tensor_object_buffer or "
                             "raw_destination destinations" % name)
        if dest.size < hdr + length:
            raise ValueError("tensor destination has %d bytes, expected at least %d"
                             % (dest.size, hdr + length))
        ctypes.memmove(dest.ptr, header + data, hdr + length)
        return dest
