# SPDX-License-Identifier: Apache-2.0
"""mooncake.structured_object_store: objects made of named members (tensors, arrays, rows of
plain values) stored in Mooncake, and DataProto-like batches built from them, with upstream
0.3.13's API: MooncakeBundleTransfer (put_object / get_object, put_structured_object,
read_spec / materialize / materialize_into, put_bundle / remove_bundle, put_dataproto /
append_dataproto_fields / get_dataproto / cleanup_dataproto, put / get), the reference classes,
export_dataproto_ref / import_dataproto_ref, tensor_object_buffer and raw_destination.

Layout (this package's own; upstream's wheel keeps its manifests in another encoding, so the two
do not read each other's structured objects): an object is a JSON manifest under
`<prefix>/<namespace>/<partition>/<id>/manifest` and each member's bytes in chunks of at most
chunk_bytes under `.../m<index>/c<chunk>`.  Member codecs: "tensor" (a torch tensor or a
tensor_object_buffer: dtype in upstream's tensor codes, shape, C-order bytes), "ndarray"
(numeric numpy arrays), "bytes", "json" (a plain value) and "rows" (a list or object array of
plain values: str, bytes, numbers, None, lists and dicts of them).  Nothing is unpickled: what
comes back from the store is decoded as data only.  Row selections read only the chunks that
hold the rows asked for.  numpy is required; torch only for tensor members.
"""
import base64
import ctypes
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from mooncake import tensor_io as tio

__all__ = ["BundleTransferPolicy", "RemoteBundleRef", "StructuredObjectPayload",
           "StructuredObjectResult", "StructuredFieldLocation", "MooncakeDataProtoRef",
           "StructuredMemberSlice", "StructuredObjectReadSpec", "FieldSchema",
           "MooncakeBundleTransfer", "export_dataproto_ref", "import_dataproto_ref",
           "is_dataproto_ref_handle", "tensor_object_buffer", "raw_destination"]

DATAPROTO_REF_HANDLE_TYPE = "mooncake_dataproto_ref"
_FORMAT = "mooncake-c-structured-1"
_WRAPPED = "__mooncake_wrapped_object__"
_SECTIONS = ("batch", "non_tensor_batch")


@dataclass(frozen=True)
class BundleTransferPolicy:
    """How puts are issued (accepted for upstream's signature: every put here is one batch)."""

    max_inflight_put: int = 1
    put_mode: str = "auto"
    copy_mode: str = "auto"

    def __post_init__(self):
        if isinstance(self.max_inflight_put, bool) or not isinstance(self.max_inflight_put, int) \
                or self.max_inflight_put < 1:
            raise ValueError("max_inflight_put must be a positive int")
        if self.put_mode not in ("auto", "batch", "parallel"):
            raise ValueError("unsupported put_mode: %s" % self.put_mode)
        if self.copy_mode not in ("auto", "zero_copy", "copy"):
            raise ValueError("unsupported copy_mode: %s" % self.copy_mode)


@dataclass
class RemoteBundleRef:
    """A stored object: its manifest's key and the manifest."""

    manifest_key: str
    manifest: dict


class StructuredObjectPayload:
    """An object to store: plain JSON-able metadata and named member buffers."""

    __slots__ = ("metadata", "buffers")

    def __init__(self, metadata=None, buffers=None):
        if buffers is None:
            raise TypeError("StructuredObjectPayload requires buffers")
        self.metadata = {} if metadata is None else metadata
        self.buffers = buffers


@dataclass
class StructuredObjectResult:
    metadata: dict
    objects: dict


@dataclass(frozen=True)
class StructuredFieldLocation:
    stage: str
    member: str
    section: str


@dataclass
class MooncakeDataProtoRef:
    """A DataProto-like batch: per stage one stored object, and where each field lives."""

    batch_size: int
    stage_refs: dict
    field_index: dict
    meta_info: dict
    namespace: str = "default"
    partition: str = "default"
    global_indexes: Optional[list] = None
    encoded_non_tensor: dict = field(default_factory=dict)
    _storage_group_id: Optional[str] = field(default=None, repr=False)


@dataclass(frozen=True)
class StructuredMemberSlice:
    axis: int
    start: int
    end: int
    step: int = 1


@dataclass(frozen=True)
class StructuredObjectReadSpec:
    ref: Any
    member_names: Optional[tuple] = None
    member_slices: tuple = ()

    def select_members(self, names):
        return replace(self, member_names=None if names is None else tuple(names))

    def slice_member(self, name, axis, start, end, step=1):
        if axis != 0:
            raise ValueError("structured member slices support axis 0 only")
        keep = tuple(s for s in self.member_slices if s[0] != name)
        return replace(self, member_slices=keep + ((name, StructuredMemberSlice(
            axis, start, end, step)),))

    def member_slice(self, name):
        for n, s in self.member_slices:
            if n == name:
                return s
        return None


@dataclass(frozen=True)
class FieldSchema:
    """A field's codec ("tensor", "ndarray", "bytes", "json" or "rows") and nullability."""

    codec: str
    nullable: bool = True
    metadata: dict = field(default_factory=dict)


class _TensorObjectBuffer:
    """Memory holding [304-byte tensor header][data], as get_tensor_into leaves it."""

    __slots__ = ("ptr", "size", "owner", "batch_size")

    def __init__(self, ptr, size, owner, batch_size):
        self.ptr, self.size, self.owner, self.batch_size = ptr, size, owner, batch_size


class _RawDestination:
    __slots__ = ("ptr", "size", "owner", "pre_registered")

    def __init__(self, ptr, size, owner, pre_registered):
        self.ptr, self.size, self.owner, self.pre_registered = ptr, size, owner, pre_registered


def tensor_object_buffer(ptr, size, owner=None, batch_size=None):
    """A tensor member given as [header][data] memory (put), or a place to read one into."""
    for v, n in ((ptr, "ptr"), (size, "size")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TypeError("%s must be a non-negative int" % n)
    return _TensorObjectBuffer(ptr, size, owner, batch_size)


def raw_destination(ptr, size, owner=None, *, pre_registered=False):
    """Caller memory a member's bytes are copied into on materialize_into."""
    for v, n in ((ptr, "ptr"), (size, "size")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TypeError("%s must be a non-negative int" % n)
    return _RawDestination(ptr, size, owner, bool(pre_registered))


# ---------------------------------------------------------------- member codecs

def _is_tensor(v):
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor)


def _plain(v, path):
    """v as a JSON value (bytes tagged as {"__b64__": ...}); TypeError for anything else."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"__b64__": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, (list, tuple)):
        return [_plain(x, path) for x in v]
    if isinstance(v, np.ndarray) and v.dtype != object:
        return {"__nd__": v.dtype.str, "shape": list(v.shape), "data": v.tolist()}
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise TypeError("%s: mapping keys must be str" % path)
            out[k] = _plain(x, path)
        return out
    raise TypeError("%s: cannot store a %s (plain values, bytes, arrays and tensors only)"
                    % (path, type(v).__name__))


def _unplain(v):
    if isinstance(v, list):
        return [_unplain(x) for x in v]
    if isinstance(v, dict):
        if set(v) == {"__b64__"}:
            return base64.b64decode(v["__b64__"])
        if "__nd__" in v and set(v) == {"__nd__", "shape", "data"}:
            return np.array(v["data"], dtype=np.dtype(v["__nd__"])).reshape(v["shape"])
        return {k: _unplain(x) for k, x in v.items()}
    return v


def _encode(name, value):
    """(member description, data as a uint8 ndarray view or bytes, keep-alive object)."""
    if isinstance(value, _TensorObjectBuffer):
        h = tio.decode_header(ctypes.string_at(value.ptr, min(value.size, tio.HEADER_SIZE)),
                              value.size) if value.size >= tio.HEADER_SIZE else None
        if h is None:
            raise ValueError("%s: tensor_object_buffer holds no valid tensor header" % name)
        data = np.ctypeslib.as_array((ctypes.c_uint8 * h.data_bytes).from_address(
            value.ptr + h.data_offset)) if h.data_bytes else b""
        return ({"codec": "tensor", "dtype": h.dtype, "shape": h.local_shape}, data, value)
    if _is_tensor(value):
        t = value.detach().cpu().contiguous()
        code = tio.dtype_code(t.dtype)
        if code < 0:
            raise ValueError("%s: unsupported tensor dtype %s" % (name, t.dtype))
        n = t.numel() * t.element_size()
        data = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(t.data_ptr())) \
            if n else b""
        return ({"codec": "tensor", "dtype": code, "shape": list(t.shape)}, data, t)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc" and \
            not value.dtype.hasobject:
        a = np.ascontiguousarray(value)
        return ({"codec": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape)},
                a.reshape(-1).view(np.uint8), a)
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        return ({"codec": "bytes"}, b, None)
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and
                                            value.dtype == object):
        rows = [_plain(x, name) for x in (value.tolist() if isinstance(value, np.ndarray)
                                          and value.ndim == 1 else list(value))]
        body = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)
        return ({"codec": "rows", "rows": len(rows), "array": isinstance(value, np.ndarray)},
                body, None)
    return ({"codec": "json"}, json.dumps(_plain(value, name)).encode(), None)


def _row_bytes(desc):
    shape = desc["shape"]
    if not shape:
        return None
    n = 1
    for d in shape[1:]:
        n *= d
    size = tio._ELEM_SIZE[desc["dtype"]] if desc["codec"] == "tensor" else \
        np.dtype(desc["dtype"]).itemsize
    return n * size


def _decode(desc, data, rows=None):
    """The member value from its bytes (rows: the selected rows, data holding exactly them)."""
    codec = desc["codec"]
    if codec in ("tensor", "ndarray"):
        shape = list(desc["shape"])
        if rows is not None:
            shape[0] = rows
        if codec == "ndarray":
            return np.frombuffer(bytes(data), dtype=np.dtype(desc["dtype"])).reshape(shape).copy()
        import torch
        t = torch.empty(shape, dtype=tio.torch_dtype(desc["dtype"]))
        if len(data):
            ctypes.memmove(t.data_ptr(), bytes(data), len(data))
        return t
    if codec == "bytes":
        return bytes(data)
    if codec == "json":
        return _unplain(json.loads(bytes(data)))
    if codec == "rows":
        out = [_unplain(json.loads(line)) for line in bytes(data).split(b"\n") if line]
        if desc.get("array"):
            arr = np.empty(len(out), dtype=object)
            arr[:] = out
            return arr
        return out
    raise ValueError("unknown structured member codec: %r" % (codec,))


# ---------------------------------------------------------------- the transfer object

class MooncakeBundleTransfer:
    """Stores structured objects and DataProto batches in a MooncakeDistributedStore (or any
    object with put / get / remove / is_exist)."""

    def __init__(self, store, key_prefix="bundle", default_chunk_bytes=64 << 20,
                 buffer_pool=None):
        if not isinstance(key_prefix, str) or not key_prefix or "\n" in key_prefix:
            raise ValueError("key_prefix must be a non-empty str")
        if isinstance(default_chunk_bytes, bool) or not isinstance(default_chunk_bytes, int) \
                or default_chunk_bytes <= 0:
            raise ValueError("default_chunk_bytes must be a positive int")
        self.store = store
        self.key_prefix = key_prefix.rstrip("/")
        self.default_chunk_bytes = default_chunk_bytes
        self.buffer_pool = buffer_pool

    # -- storage
    def _put_many(self, items, config):
        """items: [(key, bytes or uint8 ndarray)]; raises RuntimeError on any failure."""
        if not items:
            return
        keys = [k for k, _ in items]
        if hasattr(self.store, "batch_put_from_multi_buffers"):
            keep, ptrs, sizes = [], [], []
            for _, d in items:
                a = np.frombuffer(d, dtype=np.uint8) if isinstance(d, bytes) else d
                keep.append(a)
                ptrs.append([a.ctypes.data] if a.size else [])
                sizes.append([a.size] if a.size else [])
            codes = (self.store.batch_put_from_multi_buffers(keys, ptrs, sizes) if config is None
                     else self.store.batch_put_from_multi_buffers(keys, ptrs, sizes, config))
        else:
            codes = [self.store.put(k, bytes(d)) if config is None else
                     self.store.put(k, bytes(d), config) for k, d in items]
        bad = [(k, c) for k, c in zip(keys, codes) if c != 0]
        if bad or len(codes) != len(keys):
            self._remove(keys)
            raise RuntimeError("Mooncake put failed: %s" % (bad[:4] or "no result",))

    def _get_many(self, keys):
        if hasattr(self.store, "get_batch"):
            got = self.store.get_batch(list(keys))
        else:
            got = [self.store.get(k) for k in keys]
        return got

    def _remove(self, keys):
        if hasattr(self.store, "batch_remove"):
            self.store.batch_remove(list(keys), True)
        else:
            for k in keys:
                self.store.remove(k)

    def _base(self, namespace, partition):
        for v, n in ((namespace, "namespace"), (partition, "partition")):
            if not isinstance(v, str) or not v or "/" in v:
                raise ValueError("invalid bundle %s: %r" % (n, v))
        return "%s/%s/%s/%s" % (self.key_prefix, namespace, partition, uuid.uuid4().hex)

    # -- structured objects
    def put_structured_object(self, payload, partition="default", chunk_bytes=None, policy=None,
                              max_inflight_put=None, config=None, _namespace="default"):
        if not isinstance(payload, StructuredObjectPayload):
            raise TypeError("payload must be a StructuredObjectPayload")
        if not isinstance(payload.buffers, Mapping):
            raise TypeError("payload buffers must be a mapping of member names")
        chunk = chunk_bytes or self.default_chunk_bytes
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0:
            raise ValueError("chunk_bytes must be a positive int")
        base = self._base(_namespace, partition)
        members, items, keep = {}, [], []
        for i, (name, value) in enumerate(payload.buffers.items()):
            if not isinstance(name, str):
                raise TypeError("member names must be str")
            desc, data, owner = _encode(name, value)
            keep.append((data, owner))
            n = len(data)
            desc["nbytes"] = n
            desc["chunks"] = []             # an empty member has none
            for j, off in enumerate(range(0, n, chunk)):
                key = "%s/m%d/c%d" % (base, i, j)
                desc["chunks"].append(key)
                items.append((key, data[off:off + chunk]))
            desc["chunk_bytes"] = chunk
            members[name] = desc
        manifest = {"format": _FORMAT, "metadata": _plain(dict(payload.metadata), "metadata"),
                    "members": members}
        mkey = base + "/manifest"
        self._put_many(items, config)
        try:
            self._put_many([(mkey, json.dumps(manifest).encode())], config)
        except RuntimeError:
            self._remove([k for k, _ in items])
            raise
        return RemoteBundleRef(mkey, manifest)

    def put_object(self, obj, partition="default", chunk_bytes=None, policy=None,
                   max_inflight_put=None, config=None):
        """Store a mapping (its values are the members) or a single value."""
        if isinstance(obj, Mapping):
            payload = StructuredObjectPayload({}, obj)
        else:
            payload = StructuredObjectPayload({_WRAPPED: True}, {"value": obj})
        return self.put_structured_object(payload, partition, chunk_bytes, policy,
                                          max_inflight_put, config)

    def put_bundle(self, meta, buffers, partition="default", chunk_bytes=None, policy=None,
                   max_inflight_put=None, config=None):
        """Store named buffers with opaque metadata bytes (kept in the manifest)."""
        if not isinstance(meta, (bytes, bytearray, memoryview)):
            raise TypeError("meta must be bytes")
        payload = StructuredObjectPayload(
            {"__bundle_meta__": base64.b64encode(bytes(meta)).decode()},
            {k: (v if isinstance(v, (np.ndarray, _TensorObjectBuffer)) or _is_tensor(v)
                 else bytes(memoryview(v))) for k, v in buffers.items()})
        return self.put_structured_object(payload, partition, chunk_bytes, policy,
                                          max_inflight_put, config)

    def _resolve(self, ref):
        if isinstance(ref, RemoteBundleRef):
            if ref.manifest:
                return ref
            key = ref.manifest_key
        elif isinstance(ref, Mapping) and isinstance(ref.get("manifest_key"), str):
            if isinstance(ref.get("manifest"), Mapping):
                return RemoteBundleRef(ref["manifest_key"], dict(ref["manifest"]))
            key = ref["manifest_key"]
        else:
            raise TypeError("expected a RemoteBundleRef or a mapping with manifest_key")
        raw = self._get_many([key])[0]
        if not raw:
            raise KeyError("structured object manifest %s not found" % key)
        try:
            manifest = json.loads(bytes(raw))
        except ValueError as e:
            raise ValueError("manifest %s is not a structured object manifest" % key) from e
        if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT or \
                not isinstance(manifest.get("members"), dict):
            raise ValueError("manifest %s is not a structured object manifest" % key)
        return RemoteBundleRef(key, manifest)

    def remove_bundle(self, ref):
        r = self._resolve(ref)
        keys = [k for d in r.manifest["members"].values() for k in d["chunks"]]
        self._remove(keys + [r.manifest_key])

    def read_spec(self, ref):
        return StructuredObjectReadSpec(self._resolve(ref))

    def _read_member(self, desc, sl):
        """(value, rows) of one member, reading only the chunks the slice needs."""
        chunk, n = desc["chunk_bytes"], desc["nbytes"]
        lo, hi, pick = 0, n, None
        if sl is not None:
            if desc["codec"] not in ("tensor", "ndarray", "rows") or \
                    (desc["codec"] != "rows" and not desc["shape"]):
                raise ValueError("structured member does not support row slices")
            total = desc["rows"] if desc["codec"] == "rows" else desc["shape"][0]
            idx = range(total)[slice(sl.start, sl.end, sl.step)]
            if desc["codec"] == "rows":
                value = _decode(desc, self._chunks(desc, 0, n))
                return (value[idx.start:idx.stop:idx.step] if len(idx) else value[:0])
            rb = _row_bytes(desc)
            if len(idx) == 0:
                return _decode(desc, b"", rows=0)
            first, last = min(idx), max(idx)
            lo, hi = first * rb, (last + 1) * rb
            if sl.step != 1:
                pick = [i - first for i in idx]
            data = self._chunks(desc, lo, hi)
            value = _decode(desc, data, rows=last - first + 1)
            return value[pick] if pick is not None else value
        return _decode(desc, self._chunks(desc, 0, n))

    def _chunks(self, desc, lo, hi):
        chunk = desc["chunk_bytes"]
        if hi <= lo:
            return b""
        first, last = lo // chunk, (hi - 1) // chunk
        keys = desc["chunks"][first:last + 1]
        got = self._get_many(keys)
        if any(g is None or len(g) == 0 for g in got):
            raise RuntimeError("structured member chunk missing: %s" % keys)
        data = b"".join(bytes(g) for g in got)
        return data[lo - first * chunk:hi - first * chunk]

    def materialize(self, spec):
        if not isinstance(spec, StructuredObjectReadSpec):
            raise TypeError("expected a StructuredObjectReadSpec")
        r = self._resolve(spec.ref)
        members = r.manifest["members"]
        names = list(members) if spec.member_names is None else list(spec.member_names)
        missing = [n for n in names if n not in members]
        if missing:
            raise KeyError("unknown structured members: %s" % missing)
        objects = {n: self._read_member(members[n], spec.member_slice(n)) for n in names}
        return StructuredObjectResult(_unplain(r.manifest.get("metadata", {})), objects)

    def materialize_into(self, spec, destinations):
        """materialize, copying each member named in destinations into the caller's buffer (a
        numpy array, a torch tensor, a raw_destination or a tensor_object_buffer) and
        returning that buffer for it."""
        result = self.materialize(spec)
        for name, dst in (destinations or {}).items():
            if name not in result.objects:
                raise KeyError("unknown structured member: %s" % name)
            result.objects[name] = _copy_into(name, result.objects[name], dst)
        return result

    @staticmethod
    def release_result(result):
        """Results own plain copies: nothing is held for them (kept for upstream's API)."""
        return None

    def get_object(self, ref):
        result = self.materialize(self.read_spec(ref))
        if result.metadata.get(_WRAPPED):
            return result.objects["value"]
        return result.objects

    # -- DataProto batches
    def put_dataproto(self, data, *, namespace="default", partition="default", stage="default",
                      chunk_bytes=None, policy=None, field_schemas=None, config=None):
        batch, non_tensor, meta = _split_dataproto(data)
        size = _batch_size(batch, non_tensor)
        ref = MooncakeDataProtoRef(size, {}, {}, {}, namespace, partition)
        return self._write_stage(ref, batch, non_tensor, meta, stage, chunk_bytes, config,
                                 field_schemas)

    def _write_stage(self, ref, batch, non_tensor, meta, stage, chunk_bytes, config, schemas):
        if not isinstance(stage, str) or not stage or "/" in stage:
            raise ValueError("invalid DataProto stage: %r" % (stage,))
        both = set(batch) & set(non_tensor)
        if both:
            raise ValueError("DataProto field names used in batch and non_tensor_batch: %s"
                             % sorted(both))
        for name, schema in (schemas or {}).items():
            if not isinstance(schema, FieldSchema):
                raise TypeError("field_schemas values must be FieldSchema")
            v = batch.get(name, non_tensor.get(name))
            if v is None and not schema.nullable:
                raise ValueError("FieldSchema for %r is not nullable" % name)
        buffers, index = {}, {}
        for section, fields in (("batch", batch), ("non_tensor_batch", non_tensor)):
            for name, v in fields.items():
                member = "%s/%s" % (section, name)
                buffers[member] = v
                index[name] = StructuredFieldLocation(stage, member, section)
        payload = StructuredObjectPayload({"stage": stage, "batch_size": ref.batch_size},
                                          buffers)
        sref = self.put_structured_object(payload, ref.partition, chunk_bytes, None, None,
                                          config, _namespace=ref.namespace)
        out = replace(ref, stage_refs=dict(ref.stage_refs), field_index=dict(ref.field_index),
                      meta_info=dict(ref.meta_info))
        out.stage_refs[stage] = sref
        out.field_index.update(index)
        out.meta_info.update(meta)
        return out

    def append_dataproto_fields(self, ref, data, *, stage, overwrite=False, chunk_bytes=None,
                                policy=None, field_schemas=None, config=None):
        """Store more fields as a new stage; existing fields are kept (overwrite=True replaces
        the stage of that name, removing its old object once the new one is stored)."""
        ref = _resolve_ref(ref)
        batch, non_tensor, meta = _split_dataproto(data)
        if (batch or non_tensor) and _batch_size(batch, non_tensor) != ref.batch_size:
            raise ValueError("appended fields have %d rows, the DataProto %d"
                             % (_batch_size(batch, non_tensor), ref.batch_size))
        old_stage = ref.stage_refs.get(stage) if overwrite else None
        dup = sorted(n for n in list(batch) + list(non_tensor) if n in ref.field_index and
                     not (overwrite and ref.field_index[n].stage == stage))
        if dup:
            raise ValueError("DataProto fields already exist: %s" % dup)
        if stage in ref.stage_refs and not overwrite:
            raise ValueError("DataProto stage %r exists (overwrite=True replaces it)" % stage)
        base = ref
        if overwrite and old_stage is not None:
            base = replace(ref, field_index={k: v for k, v in ref.field_index.items()
                                             if v.stage != stage})
        out = self._write_stage(base, batch, non_tensor, meta, stage, chunk_bytes, config,
                                field_schemas)
        if old_stage is not None:
            self.remove_bundle(old_stage)
        return out

    def get_dataproto(self, ref, *, fields=None, batch_fields=None, non_tensor_fields=None,
                      meta_info_keys=None, data_cls=None, destinations=None, rows=None):
        ref = _resolve_ref(ref)
        names = _select_fields(ref, fields, batch_fields, non_tensor_fields)
        sl = _row_slice(rows, ref.batch_size)
        by_stage = {}
        for n in names:
            by_stage.setdefault(ref.field_index[n].stage, []).append(n)
        batch, non_tensor = {}, {}
        for stage, ns in by_stage.items():
            spec = StructuredObjectReadSpec(ref.stage_refs[stage],
                                            tuple(ref.field_index[n].member for n in ns))
            for n in ns:
                if isinstance(sl, StructuredMemberSlice):
                    spec = spec.slice_member(ref.field_index[n].member, 0, sl.start, sl.end,
                                             sl.step)
            got = self.materialize(spec).objects
            for n in ns:
                v = got[ref.field_index[n].member]
                if isinstance(sl, list):
                    v = [v[i] for i in sl] if isinstance(v, list) else v[sl]
                if destinations and n in destinations:
                    v = _copy_into(n, v, destinations[n])
                (batch if ref.field_index[n].section == "batch" else non_tensor)[n] = v
        if meta_info_keys is None:
            meta = dict(ref.meta_info)
        else:
            meta = {k: ref.meta_info[k] for k in meta_info_keys if k in ref.meta_info}
        if data_cls is None:
            return {"batch": batch, "non_tensor_batch": non_tensor, "meta_info": meta}
        if hasattr(data_cls, "from_dict"):
            try:
                return data_cls.from_dict(batch, non_tensor, meta_info=meta)
            except TypeError:
                pass
        return data_cls(batch=batch, non_tensor_batch=non_tensor, meta_info=meta)

    def cleanup_dataproto(self, ref):
        ref = _resolve_ref(ref)
        for sref in ref.stage_refs.values():
            try:
                self.remove_bundle(sref)
            except KeyError:
                pass

    def cleanup_dataproto_append(self, previous, appended):
        """Remove what appended added over previous (an append that is not wanted after all)."""
        prev, app = _resolve_ref(previous), _resolve_ref(appended)
        keep = {r.manifest_key for r in prev.stage_refs.values()}
        for sref in app.stage_refs.values():
            if sref.manifest_key not in keep:
                self.remove_bundle(sref)

    def dataproto_manifest_view(self, ref):
        ref = _resolve_ref(ref)
        fields_ = {}
        for n, loc in ref.field_index.items():
            m = self._resolve(ref.stage_refs[loc.stage]).manifest["members"][loc.member]
            fields_[n] = {"stage": loc.stage, "section": loc.section, "codec": m["codec"],
                          "dtype": m.get("dtype"), "shape": m.get("shape"),
                          "nbytes": m["nbytes"]}
        return {"batch_size": ref.batch_size, "namespace": ref.namespace,
                "partition": ref.partition, "meta_info": dict(ref.meta_info), "fields": fields_}

    def put(self, data, *, type="dataproto", namespace="default", partition="default",
            stage="default", chunk_bytes=None, policy=None, config=None, field_schemas=None):
        if type not in ("dataproto", "dict"):
            raise ValueError("unsupported Mooncake payload type: %r" % (type,))
        return self.put_dataproto(data, namespace=namespace, partition=partition, stage=stage,
                                  chunk_bytes=chunk_bytes, policy=policy,
                                  field_schemas=field_schemas, config=config)

    def get(self, ref, *, type="dataproto", fields=None, batch_fields=None,
            non_tensor_fields=None, meta_info_keys=None, data_cls=None, destinations=None,
            rows=None):
        if type not in ("dataproto", "dict"):
            raise ValueError("unsupported Mooncake payload type: %r" % (type,))
        return self.get_dataproto(ref, fields=fields, batch_fields=batch_fields,
                                  non_tensor_fields=non_tensor_fields,
                                  meta_info_keys=meta_info_keys,
                                  data_cls=None if type == "dict" else data_cls,
                                  destinations=destinations, rows=rows)


# ---------------------------------------------------------------- DataProto helpers

def _split_dataproto(data):
    """(batch, non_tensor_batch, meta_info) of a DataProto-like object, an envelope dict or a
    flat dict (tensors and numeric arrays are batch fields, other values non-tensor)."""
    if isinstance(data, Mapping):
        if data and set(data) <= {"batch", "non_tensor_batch", "meta_info"}:
            parts = (data.get("batch"), data.get("non_tensor_batch"), data.get("meta_info"))
        else:
            batch = {k: v for k, v in data.items() if _is_tensor(v) or
                     (isinstance(v, np.ndarray) and v.dtype != object)}
            return batch, {k: v for k, v in data.items() if k not in batch}, {}
    elif all(hasattr(data, a) for a in ("batch", "non_tensor_batch", "meta_info")):
        parts = (data.batch, data.non_tensor_batch, data.meta_info)
    else:
        raise TypeError("expected a DataProto-like object or a dict, not %s"
                        % type(data).__name__)
    out = []
    for p, name in zip(parts, ("batch", "non_tensor_batch", "meta_info")):
        if p is None:
            out.append({})
        elif isinstance(p, Mapping) or hasattr(p, "keys"):
            out.append({str(k): p[k] for k in p.keys()})
        else:
            raise TypeError("DataProto %s must be a mapping" % name)
    _plain(out[2], "meta_info")
    return out[0], out[1], out[2]


def _batch_size(batch, non_tensor):
    sizes = set()
    for name, v in list(batch.items()) + list(non_tensor.items()):
        if _is_tensor(v) or isinstance(v, np.ndarray):
            if v.ndim == 0:
                raise ValueError("DataProto field %r has no rows (0-dimensional)" % name)
            sizes.add(int(v.shape[0]))
        elif isinstance(v, (list, tuple)):
            sizes.add(len(v))
        else:
            raise TypeError("DataProto field %r must be a tensor, an array or a list" % name)
    if len(sizes) > 1:
        raise ValueError("DataProto fields have inconsistent batch sizes: %s" % sorted(sizes))
    return sizes.pop() if sizes else 0


def _select_fields(ref, fields, batch_fields, non_tensor_fields):
    if fields is None and batch_fields is None and non_tensor_fields is None:
        return list(ref.field_index)
    names = []
    for lst, section in ((fields, None), (batch_fields, "batch"),
                         (non_tensor_fields, "non_tensor_batch")):
        if lst is None:
            continue
        if isinstance(lst, str):
            raise TypeError("field selections must be sequences of names")
        missing = [n for n in lst if n not in ref.field_index]
        if missing:
            raise KeyError("unknown DataProto fields: %s" % missing)
        wrong = [n for n in lst if section and ref.field_index[n].section != section]
        if wrong:
            raise ValueError("fields %s are not %s fields" % (wrong, section))
        names += [n for n in lst if n not in names]
    return names


def _row_slice(rows, total):
    """None, a StructuredMemberSlice over axis 0, or a list of row indices."""
    if rows is None:
        return None
    if isinstance(rows, slice):
        start, stop, step = rows.indices(total)
        if step <= 0:
            raise ValueError("row slices need a positive step")
        return StructuredMemberSlice(0, start, stop, step)
    if isinstance(rows, StructuredMemberSlice):
        if rows.axis != 0:
            raise ValueError("row selection supports axis 0 only")
        return rows
    if isinstance(rows, Sequence) and not isinstance(rows, (str, bytes)):
        out = []
        for i in rows:
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise TypeError("row indices must be ints")
            j = int(i) + total if i < 0 else int(i)
            if not 0 <= j < total:
                raise IndexError("row index %d out of range for %d rows" % (i, total))
            out.append(j)
        return out
    raise TypeError("rows must be a slice, a StructuredMemberSlice or a sequence of ints")


def _copy_into(name, value, dst):
    if isinstance(dst, np.ndarray):
        src = value.numpy() if _is_tensor(value) else np.asarray(value)
        if dst.shape != src.shape:
            raise ValueError("destination for %s has shape %s, the data %s"
                             % (name, dst.shape, src.shape))
        np.copyto(dst, src, casting="no")
        return dst
    if _is_tensor(dst):
        dst.copy_(value if _is_tensor(value) else __import__("torch").as_tensor(value))
        return dst
    if isinstance(dst, (_RawDestination, _TensorObjectBuffer)):
        if _is_tensor(value):
            t = value.contiguous()
            n = t.numel() * t.element_size()
            addr = t.data_ptr()
        else:
            a = np.ascontiguousarray(value)
            n, addr = a.nbytes, a.ctypes.data
        if isinstance(dst, _TensorObjectBuffer):
            code = tio.dtype_code(t.dtype) if _is_tensor(value) else -1
            if code < 0:
                raise ValueError("%s: a tensor_object_buffer destination needs a tensor" % name)
            h = tio.Header(code, list(t.shape))
            if tio.HEADER_SIZE + n > dst.size:
                raise ValueError("destination for %s is %d bytes, needs %d"
                                 % (name, dst.size, tio.HEADER_SIZE + n))
            ctypes.memmove(dst.ptr, tio.encode_header(h), tio.HEADER_SIZE)
            ctypes.memmove(dst.ptr + tio.HEADER_SIZE, addr, n)
            return value
        if n > dst.size:
            raise ValueError("destination for %s is %d bytes, needs %d" % (name, dst.size, n))
        ctypes.memmove(dst.ptr, addr, n)
        return dst
    raise TypeError("unsupported destination for %s: %s" % (name, type(dst).__name__))


def is_dataproto_ref_handle(value):
    return isinstance(value, Mapping) and value.get("type") == DATAPROTO_REF_HANDLE_TYPE


def export_dataproto_ref(ref):
    """A JSON-safe handle for ref (manifest keys, not manifests) to pass between processes."""
    if not isinstance(ref, MooncakeDataProtoRef):
        raise TypeError("expected a MooncakeDataProtoRef")
    return {"type": DATAPROTO_REF_HANDLE_TYPE, "version": 1, "batch_size": ref.batch_size,
            "namespace": ref.namespace, "partition": ref.partition,
            "stage_refs": {s: r.manifest_key for s, r in ref.stage_refs.items()},
            "field_index": {n: [loc.stage, loc.member, loc.section]
                            for n, loc in ref.field_index.items()},
            "meta_info": _plain(ref.meta_info, "meta_info"),
            "global_indexes": None if ref.global_indexes is None else list(ref.global_indexes)}


def import_dataproto_ref(handle):
    """The ref an export_dataproto_ref handle describes (manifests are read when used)."""
    if not is_dataproto_ref_handle(handle):
        raise ValueError("not a DataProto ref handle")
    try:
        stages = {str(s): RemoteBundleRef(str(k), {}) for s, k in handle["stage_refs"].items()}
        index = {}
        for n, (stage, member, section) in handle["field_index"].items():
            if stage not in stages or section not in _SECTIONS:
                raise ValueError("field %s: invalid location" % n)
            index[str(n)] = StructuredFieldLocation(str(stage), str(member), section)
        size = handle["batch_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("invalid batch_size")
        meta = _unplain(handle.get("meta_info") or {})
        if not isinstance(meta, dict):
            raise ValueError("meta_info must be a mapping")
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError("malformed DataProto ref handle: %s" % e) from e
    return MooncakeDataProtoRef(size, stages, index, meta, str(handle.get("namespace",
                                                                          "default")),
                                str(handle.get("partition", "default")),
                                handle.get("global_indexes"))


def _resolve_ref(ref):
    if isinstance(ref, MooncakeDataProtoRef):
        return ref
    if is_dataproto_ref_handle(ref):
        return import_dataproto_ref(ref)
    raise TypeError("expected a MooncakeDataProtoRef or an exported handle")
