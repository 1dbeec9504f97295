# SPDX-License-Identifier: Apache-2.0
"""mooncake.store_tensor: the tensor methods of MooncakeDistributedStore (upstream 0.3.13's).

Objects are written in upstream's format (mooncake.tensor_io), so a tensor put by upstream's
client reads back here and the other way.  Every method takes and returns what upstream's does:
puts return 0 or a negative code (-600 for something that is not a tensor, a dtype upstream's
format lacks, more than 8 dimensions, lists of different lengths, a split that is not uniform),
gets return a CPU tensor or None.  A key that is not a str raises TypeError.

Tensor-parallel shards are stored as `<key>_tp_<rank>`; the parallelism forms add
`<key>__<axis>_<rank>of<size>[_sd<dim>][_eid<id>][_sid<id>]` for multi-axis shards,
`<key>__writer_<rank>of<size>_sd<dim>` for writer partitions, and a manifest object per sharded
key.  torch is imported by the first tensor call, not by `import mooncake.store`.
"""
import ctypes
import json
import logging
import os

from mooncake import tensor_io as tio

_log = logging.getLogger("mooncake.store")
_INVALID = -600
_FILE_NOT_FOUND = -1100

__all__ = ["TensorMethods", "ParallelAxis", "TensorParallelism", "ReadTarget",
           "_serialize_tensor", "_deserialize_tensor", "_tensor_metadata_size"]


class ParallelAxis:
    """One axis of a shard's identity: kind "tp", "dp", "ep" or "pp", rank of size, and
    split_dim (tp), expert_id (ep) or stage_id (pp)."""

    def __init__(self, kind="", rank=0, size=1, split_dim=None, expert_id=None, stage_id=None):
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    def __repr__(self):
        return ("ParallelAxis(kind=%r, rank=%r, size=%r, split_dim=%r, expert_id=%r, "
                "stage_id=%r)" % (self.kind, self.rank, self.size, self.split_dim,
                                  self.expert_id, self.stage_id))


class TensorParallelism:
    """A shard's identity: a list of ParallelAxis, at most one per kind."""

    def __init__(self, axes=None):
        self.axes = list(axes) if axes is not None else []

    def __repr__(self):
        return "TensorParallelism(axes=%r)" % (self.axes,)


class ReadTarget:
    """What a parallelism read returns: mode "as_stored" (the object under the key), "shard"
    (the shard that parallelism names) or "full" (the whole tensor, rebuilt from its shards)."""

    _MODES = ("as_stored", "shard", "full")

    def __init__(self, mode="as_stored", parallelism=None):
        self.mode = mode
        self.parallelism = parallelism

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, value):
        m = str(value).lower() if isinstance(value, str) else None
        if m not in self._MODES:
            _log.error("Unsupported ReadTarget mode: %s", value)
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = m

    def __repr__(self):
        return "ReadTarget(mode=%r, parallelism=%r)" % (self._mode, self.parallelism)


# ---------------------------------------------------------------- helpers

def _torch():
    import torch
    return torch


def _check_key(key):
    if not isinstance(key, str):
        raise TypeError("a key must be a str, not %s" % type(key).__name__)


def _check_keys(keys):
    if not isinstance(keys, (list, tuple)):
        raise TypeError("keys must be a list of str, not %s" % type(keys).__name__)
    for k in keys:
        _check_key(k)
    return list(keys)


def _check_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s must be an int, not %s" % (name, type(v).__name__))
    return v


def _check_ints(vs, name):
    if not isinstance(vs, (list, tuple)):
        raise TypeError("%s must be a list of int" % name)
    for v in vs:
        _check_int(v, name)
    return list(vs)


class _Blob:
    """A tensor ready to store: header bytes and its contiguous CPU data (kept alive here)."""

    __slots__ = ("header", "tensor", "addr", "nbytes")

    def __init__(self, header, tensor):
        self.header = tio.encode_header(header)
        self.tensor = tensor
        self.addr = tensor.data_ptr()
        self.nbytes = header.data_bytes


def _contiguous(tensor):
    """tensor as a contiguous CPU tensor with its header code, or None (not a tensor, a dtype
    upstream's format has no code for, more than 8 dimensions)."""
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        _log.error("not a torch.Tensor: %s", type(tensor).__name__)
        return None, -1
    code = tio.dtype_code(tensor.dtype)
    if code < 0 or tensor.dim() > tio.MAX_DIMS:
        _log.error("unsupported tensor: dtype %s, %d dimensions", tensor.dtype, tensor.dim())
        return None, -1
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous(), code


def _full_blob(tensor):
    t, code = _contiguous(tensor)
    if t is None:
        return None
    return _Blob(tio.Header(code, list(t.shape)), t)


def _axis(kind, index, rank, size, split_dim=-1, tag=0, extent=0):
    return {"kind": tio.AXIS_KINDS[kind], "index": index, "rank": rank, "size": size,
            "split_dim": split_dim, "tag": tag, "extent": extent}


def _uniform(shape, split_dim, count):
    """The extent of one of count uniform shards along split_dim, or None."""
    if not 0 <= split_dim < len(shape) or count <= 0 or shape[split_dim] % count:
        _log.error("only uniform sharding is supported (shape %s, dim %d, %d shards)",
                   list(shape), split_dim, count)
        return None
    return shape[split_dim] // count


def _shard_blob(t, code, rank, size, split_dim, extra_axes=None):
    """The blob of rank's uniform shard of contiguous t; extra_axes: the request's axes (in
    order, with the TP axis at its place) when the shard belongs to a multi-axis layout."""
    ext = _uniform(list(t.shape), split_dim, size)
    if ext is None:
        return None
    piece = t.narrow(split_dim, rank * ext, ext).contiguous()
    axes = extra_axes or [_axis("tp", 0, rank, size, split_dim, 0, ext)]
    return _Blob(tio.Header(code, list(t.shape), list(piece.shape), axes), piece)


def _tp_key(key, rank):
    return "%s_tp_%d" % (key, rank)


def _writer_key(key, rank, size, split_dim):
    return "%s__writer_%dof%d_sd%d" % (key, rank, size, split_dim)


_ORDER = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}


def _parse_parallelism(obj):
    """[(kind, rank, size, split_dim, expert_id, stage_id)] from a TensorParallelism, checked as
    upstream checks it, or None (logged)."""
    axes = getattr(obj, "axes", None)
    if not isinstance(axes, (list, tuple)) or not axes or len(axes) > tio.MAX_AXES:
        _log.error("parallelism needs 1 to %d axes", tio.MAX_AXES)
        return None
    out, seen = [], set()
    for a in axes:
        try:
            kind = str(a.kind).lower()
            rank, size = int(a.rank), int(a.size)
            sd, eid, sid = a.split_dim, a.expert_id, a.stage_id
        except (AttributeError, TypeError, ValueError):
            _log.error("parallelism axes must be ParallelAxis objects")
            return None
        if kind not in _ORDER or kind in seen:
            _log.error("unsupported or repeated axis kind %r", a.kind)
            return None
        seen.add(kind)
        if size <= 0 or not 0 <= rank < size:
            _log.error("invalid rank/size for axis %s", kind)
            return None
        if (kind == "tp") != (sd is not None):
            _log.error("split_dim is required for a tp axis and refused for %s", kind)
            return None
        if (kind == "ep" and eid is None) or (kind == "pp" and sid is None):
            _log.error("%s axis requires %s", kind, "expert_id" if kind == "ep" else "stage_id")
            return None
        out.append((kind, rank, size, sd, eid, sid))
    return out


def _parallelism_key(key, axes):
    if len(axes) == 1 and axes[0][0] == "tp":
        return _tp_key(key, axes[0][1])
    parts = [key]
    for kind, rank, size, sd, eid, sid in sorted(axes, key=lambda a: _ORDER[a[0]]):
        s = "%s_%dof%d" % (kind, rank, size)
        if sd is not None:
            s += "_sd%d" % sd
        if eid is not None:
            s += "_eid%d" % eid
        if sid is not None:
            s += "_sid%d" % sid
        parts.append(s)
    return "__".join(parts)


def _writer_partition(obj):
    try:
        rank, size, sd = int(obj.rank), int(obj.size), int(obj.split_dim)
    except (AttributeError, TypeError, ValueError):
        _log.error("writer_partition must provide rank, size, and split_dim")
        return None
    if size <= 0 or not 0 <= rank < size:
        _log.error("writer_partition: invalid rank/size")
        return None
    return rank, size, sd


def _plan_write(key, tensor, parallelism, writer_partition, from_full=False):
    """The objects a parallelism write stores: [(key, _Blob or manifest bytes)], or -600.
    from_full: the tensor came from a buffer and is the full tensor even for one tp axis."""
    if writer_partition is not None and parallelism is not None:
        _log.error("writer_partition cannot be combined with parallelism")
        return _INVALID
    t, code = _contiguous(tensor)
    if t is None:
        return _INVALID
    shape = list(t.shape)
    if writer_partition is not None:
        wp = _writer_partition(writer_partition)
        if wp is None:
            return _INVALID
        rank, size, sd = wp
        blob = _shard_blob(t, code, rank, size, sd)
        if blob is None:
            return _INVALID
        return [(_writer_key(key, rank, size, sd), blob),
                (key + "__writer_manifest", tio.encode_manifest(code, shape, sd, size))]
    if parallelism is None:
        return [(key, _Blob(tio.Header(code, shape), t))]
    axes = _parse_parallelism(parallelism)
    if axes is None:
        return _INVALID
    pkey = _parallelism_key(key, axes)
    tp = [a for a in axes if a[0] == "tp"]
    if len(axes) == 1 and tp and from_full:
        # The _from forms cut a single tp axis's shard from the full tensor in the buffer.
        _, rank, size, sd, _, _ = tp[0]
        blob = _shard_blob(t, code, rank, size, sd)
        if blob is None:
            return _INVALID
        return [(pkey, blob),
                (key + "__parallelism_manifest", tio.encode_manifest(code, shape, sd, size))]
    if len(axes) == 1 and tp:
        # A single tp axis: the tensor is the shard itself.
        _, rank, size, sd, _, _ = tp[0]
        if not 0 <= sd < len(shape):
            _log.error("split_dim %d out of range", sd)
            return _INVALID
        full = list(shape)
        full[sd] *= size
        h = tio.Header(code, full, shape, [_axis("tp", 0, rank, size, sd, 0, shape[sd])])
        return [(pkey, _Blob(h, t)),
                (key + "__parallelism_manifest", tio.encode_manifest(code, full, sd, size))]
    hdr_axes = []
    for i, (kind, rank, size, sd, eid, sid) in enumerate(axes):
        tag = eid if kind == "ep" else sid if kind == "pp" else 0
        hdr_axes.append(_axis(kind, i, rank, size, sd if sd is not None else -1, tag))
    if not tp:
        return [(pkey, _Blob(tio.Header(code, shape, shape, hdr_axes), t))]
    _, rank, size, sd, _, _ = tp[0]
    ti = [a[0] for a in axes].index("tp")
    ext = _uniform(shape, sd, size)
    if ext is None:
        return _INVALID
    hdr_axes[ti]["extent"] = ext
    blob = _shard_blob(t, code, rank, size, sd, hdr_axes)
    return [(pkey, blob),
            (key + "__parallelism_manifest", tio.encode_manifest(code, shape, sd, size))]


def _parts(item):
    """(ptrs, sizes) of one object to store: a blob's header and data, or manifest bytes."""
    if isinstance(item, _Blob):
        hb = ctypes.create_string_buffer(item.header, len(item.header))
        ptrs, sizes = [ctypes.addressof(hb)], [len(item.header)]
        if item.nbytes:
            ptrs.append(item.addr)
            sizes.append(item.nbytes)
        return ptrs, sizes, hb
    mb = ctypes.create_string_buffer(item, len(item))
    return [ctypes.addressof(mb)], [len(item)], mb


def _frombuffer(h, address):
    """A tensor over the memory at address (no copy), shaped as header h says."""
    torch = _torch()
    dt = tio.torch_dtype(h.dtype)
    if h.data_bytes == 0:
        return torch.empty(h.local_shape if h.ndim else [0], dtype=dt)
    arr = (ctypes.c_char * h.data_bytes).from_address(address + h.data_offset)
    t = torch.frombuffer(arr, dtype=dt)
    return t.reshape(h.local_shape) if h.ndim else t


# safetensors' dtype names for upstream's codes.
_ST_NAMES = ("F32", "F64", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL", "F16",
             "BF16", "F8_E4M3", "F8_E5M2")


def _serialize_tensor(tensor):
    """(header bytes, data address, data bytes, the contiguous tensor keeping them alive)."""
    blob = _full_blob(tensor)
    if blob is None:
        raise ValueError("unsupported tensor")
    return blob.header, blob.addr, blob.nbytes, blob.tensor


def _deserialize_tensor(data):
    """The tensor from a stored object's bytes (None when they are not one)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("expected bytes")
    buf = ctypes.create_string_buffer(bytes(data), len(data))
    h = tio.decode_header(buf.raw, len(data))
    return tio.tensor_view(h, ctypes.addressof(buf)) if h else None


def _tensor_metadata_size():
    return tio.HEADER_SIZE


class TensorMethods:
    """Mixed into MooncakeDistributedStore: upstream's tensor API over the byte API."""

    # ------------------------------------------------------------ stores

    def _store_items(self, items, config, upsert):
        """Store [(key, _Blob or bytes)] in one batch; per item 0 or an error code."""
        if not items:
            return []
        keys = [k for k, _ in items]
        ptrs, sizes, keep = [], [], []
        for _, it in items:
            p, s, k = _parts(it)
            ptrs.append(p)
            sizes.append(s)
            keep.append(k)
        if upsert:
            out = (self._batch_upsert_from_multi_buffers(keys, ptrs, sizes) if config is None
                   else self._batch_upsert_from_multi_buffers(keys, ptrs, sizes, config))
        else:
            out = (self.batch_put_from_multi_buffers(keys, ptrs, sizes) if config is None
                   else self.batch_put_from_multi_buffers(keys, ptrs, sizes, config))
        if len(out) != len(keys):         # not set up
            return [-1] * len(keys)
        return out

    def _put_grouped(self, groups, config, upsert):
        """groups: per caller key a list of items or an error code; per key the first error of
        its objects, or 0."""
        flat, owner = [], []
        for i, g in enumerate(groups):
            if isinstance(g, list):
                flat.extend(g)
                owner.extend([i] * len(g))
        codes = self._store_items(flat, config, upsert)
        out = [g if isinstance(g, int) else 0 for g in groups]
        for i, c in zip(owner, codes):
            if c != 0 and out[i] == 0:
                out[i] = c
        return out

    def _put_tensors(self, keys, tensors, config, upsert):
        keys = _check_keys(keys)
        if not isinstance(tensors, (list, tuple)):
            raise TypeError("tensors_list must be a list")
        if len(keys) != len(tensors):
            _log.error("keys and tensors_list have different lengths")
            return [_INVALID] * len(keys)
        groups = []
        for k, t in zip(keys, tensors):
            b = _full_blob(t)
            groups.append([(k, b)] if b is not None else _INVALID)
        return self._put_grouped(groups, config, upsert)

    def put_tensor(self, key, tensor):
        """Store a tensor (header + data) under key: 0 or an error code."""
        _check_key(key)
        return self._put_tensors([key], [tensor], None, False)[0]

    def upsert_tensor(self, key, tensor):
        _check_key(key)
        return self._put_tensors([key], [tensor], None, True)[0]

    def pub_tensor(self, key, tensor, config=None):
        """put_tensor with a ReplicateConfig."""
        _check_key(key)
        return self._put_tensors([key], [tensor], config, False)[0]

    def upsert_pub_tensor(self, key, tensor, config=None):
        _check_key(key)
        return self._put_tensors([key], [tensor], config, True)[0]

    def batch_put_tensor(self, keys, tensors_list):
        return self._put_tensors(keys, tensors_list, None, False)

    def batch_upsert_tensor(self, keys, tensors_list):
        return self._put_tensors(keys, tensors_list, None, True)

    def batch_pub_tensor(self, keys, tensors_list, config=None):
        return self._put_tensors(keys, tensors_list, config, False)

    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        return self._put_tensors(keys, tensors_list, config, True)

    # ------------------------------------------------------------ from buffers

    def _tensor_from(self, keys, ptrs, sizes, upsert, what):
        keys = _check_keys(keys)
        ptrs, sizes = _check_ints(ptrs, "buffer_ptrs"), _check_ints(sizes, "sizes")
        if not len(keys) == len(ptrs) == len(sizes):
            _log.error("%s: keys, buffer_ptrs and sizes differ in length", what)
            return [_INVALID] * len(keys)
        for i, (p, n) in enumerate(zip(ptrs, sizes)):
            if p == 0 or n < tio.HEADER_SIZE or \
                    tio.decode_header(ctypes.string_at(p, tio.HEADER_SIZE), n) is None:
                _log.error("%s: invalid tensor metadata at index %d", what, i)
                return [_INVALID] * len(keys)
        return (self.batch_upsert_from(keys, ptrs, sizes) if upsert
                else self.batch_put_from(keys, ptrs, sizes))

    def put_tensor_from(self, key, buffer_ptr, size):
        """Store the buffer [header][data] (as get_tensor_into leaves it) under key."""
        _check_key(key)
        return self._tensor_from([key], [buffer_ptr], [size], False, "put_tensor_from")[0]

    def upsert_tensor_from(self, key, buffer_ptr, size):
        _check_key(key)
        return self._tensor_from([key], [buffer_ptr], [size], True, "upsert_tensor_from")[0]

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        return self._tensor_from(keys, buffer_ptrs, sizes, False, "batch_put_tensor_from")

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        return self._tensor_from(keys, buffer_ptrs, sizes, True, "batch_upsert_tensor_from")

    def _buffers_tensors(self, keys, ptrs, sizes):
        """(keys, the tensors held as [header][data] in the buffers), or (keys, None) when the
        lists differ in length or a buffer holds no valid tensor (logged)."""
        keys = _check_keys(keys)
        ptrs, sizes = _check_ints(ptrs, "buffer_ptrs"), _check_ints(sizes, "sizes")
        if not len(keys) == len(ptrs) == len(sizes):
            _log.error("keys, buffer_ptrs and sizes differ in length")
            return keys, None
        tensors = [self._decode_buffer(p, n) for p, n in zip(ptrs, sizes)]
        if any(t is None for t in tensors):
            _log.error("invalid tensor metadata in a source buffer")
            return keys, None
        return keys, tensors

    def _decode_buffer(self, ptr, size):
        """The tensor held as [header][data] in size bytes at ptr (a copy), or None."""
        if isinstance(ptr, bool) or not isinstance(ptr, int) or ptr == 0 or \
                size < tio.HEADER_SIZE:
            return None
        h = tio.decode_header(ctypes.string_at(ptr, tio.HEADER_SIZE), size)
        return tio.tensor_view(h, ptr) if h else None

    # ------------------------------------------------------------ gets

    def _fetch(self, keys):
        """Per key (Header, copy of the tensor) or None."""
        out = []
        for h in self.batch_get_buffer(keys):
            if h is None or h.size() < tio.HEADER_SIZE:
                out.append(None)
                continue
            hdr = tio.decode_header(ctypes.string_at(h.ptr(), tio.HEADER_SIZE), h.size())
            out.append((hdr, tio.tensor_view(hdr, h.ptr())) if hdr else None)
        return out

    def get_tensor(self, key):
        """The tensor stored under key, or None."""
        _check_key(key)
        got = self._fetch([key])[0]
        return got[1] if got else None

    def batch_get_tensor(self, keys):
        return [g[1] if g else None for g in self._fetch(_check_keys(keys))]

    def get_tensor_into_cuda(self, key, tensor):
        """Read key into a CUDA tensor through a dummy client's CUDA IPC: this package has no
        CUDA (mooncake.engine.SUPPORT_CUDA is False), so it answers -600 (INVALID_PARAMS)
        as upstream's does where such a read cannot be made."""
        _check_key(key)
        return self.batch_get_tensor_into_cuda([key], [tensor])[0]

    def batch_get_tensor_into_cuda(self, keys, tensors_list):
        """get_tensor_into_cuda of each key: -600 per key here (see there)."""
        if not isinstance(keys, (list, tuple)) or not isinstance(tensors_list, (list, tuple)):
            raise TypeError("keys and tensors_list must be lists")
        for k in keys:
            _check_key(k)
        _log.error("batch_get_tensor_into_cuda: CUDA tensor reads are not supported by this "
                   "build (no CUDA)")
        return [-600] * len(keys)

    def get_tensor_into(self, key, buffer_ptr, size):
        """Read key's object into registered memory at buffer_ptr; the tensor returned shares
        that memory (its data follows the 304-byte header there).  None on failure."""
        _check_key(key)
        if buffer_ptr == 0:
            _log.error("get_tensor_into: null buffer")
            return None
        return self.batch_get_tensor_into([key], [buffer_ptr], [size])[0]

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        keys = _check_keys(keys)
        ptrs, sizes = _check_ints(buffer_ptrs, "buffer_ptrs"), _check_ints(sizes, "sizes")
        if not len(keys) == len(ptrs) == len(sizes) or any(p == 0 for p in ptrs):
            _log.error("batch_get_tensor_into: mismatched lists or a null buffer")
            return [_INVALID] * len(keys)
        out = []
        for p, n in zip(ptrs, self.batch_get_into(keys, ptrs, sizes)):
            h = (tio.decode_header(ctypes.string_at(p, tio.HEADER_SIZE), n)
                 if n >= tio.HEADER_SIZE else None)
            out.append(_frombuffer(h, p) if h else None)
        return out

    # ------------------------------------------------------------ tensor parallelism

    def _tp_groups(self, keys, tensors, tp_size, split_dim):
        groups = []
        for k, t in zip(keys, tensors):
            if tp_size <= 1:
                b = _full_blob(t)
                groups.append([(k, b)] if b is not None else _INVALID)
                continue
            c, code = _contiguous(t)
            if c is None:
                groups.append(_INVALID)
                continue
            blobs = [_shard_blob(c, code, r, tp_size, split_dim) for r in range(tp_size)]
            groups.append(_INVALID if None in blobs else
                          [(_tp_key(k, r), b) for r, b in enumerate(blobs)])
        return groups

    def _put_tp(self, keys, tensors, config, tp_rank, tp_size, split_dim):
        keys = _check_keys(keys)
        for v, n in ((tp_rank, "tp_rank"), (tp_size, "tp_size"), (split_dim, "split_dim")):
            _check_int(v, n)
        if not isinstance(tensors, (list, tuple)):
            raise TypeError("tensors_list must be a list")
        if len(keys) != len(tensors):
            return [_INVALID] * len(keys)
        return self._put_grouped(self._tp_groups(keys, tensors, tp_size, split_dim), config,
                                 False)

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        """Split tensor into tp_size uniform shards along split_dim and store each as
        key_tp_<rank> (tp_size <= 1: put_tensor)."""
        _check_key(key)
        return self._put_tp([key], [tensor], None, tp_rank, tp_size, split_dim)[0]

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1,
                                 split_dim=0):
        return self._put_tp(base_keys, tensors_list, None, tp_rank, tp_size, split_dim)

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
        _check_key(key)
        return self._put_tp([key], [tensor], config, tp_rank, tp_size, split_dim)[0]

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0,
                                 tp_size=1, split_dim=0):
        return self._put_tp(base_keys, tensors_list, config, tp_rank, tp_size, split_dim)

    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1,
                                split_dim=0):
        """put_tensor_with_tp of the tensor held as [header][data] at buffer_ptr."""
        _check_key(key)
        return self.batch_put_tensor_with_tp_from([key], [buffer_ptr], [size], tp_rank,
                                                  tp_size, split_dim)[0]

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1, split_dim=0):
        keys, tensors = self._buffers_tensors(base_keys, buffer_ptrs, sizes)
        if tensors is None:
            return [_INVALID] * len(keys)
        return self._put_tp(keys, tensors, None, tp_rank, tp_size, split_dim)

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """The shard key_tp_<tp_rank> (tp_size <= 1: the tensor under key)."""
        _check_key(key)
        _check_int(tp_rank, "tp_rank")
        return self.get_tensor(key if tp_size <= 1 else _tp_key(key, tp_rank))

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        keys = _check_keys(base_keys)
        _check_int(tp_rank, "tp_rank")
        return self.batch_get_tensor(keys if tp_size <= 1 else
                                     [_tp_key(k, tp_rank) for k in keys])

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1,
                                split_dim=0):
        _check_key(key)
        return self.batch_get_tensor_with_tp_into([key], [buffer_ptr], [size], tp_rank,
                                                  tp_size)[0]

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1):
        keys = _check_keys(base_keys)
        _check_int(tp_rank, "tp_rank")
        return self.batch_get_tensor_into(keys if tp_size <= 1 else
                                          [_tp_key(k, tp_rank) for k in keys],
                                          buffer_ptrs, sizes)

    # ------------------------------------------------------------ unified parallelism

    def _put_par(self, keys, tensors, parallelisms, config, writer_partitions, upsert,
                 from_full=False):
        keys = _check_keys(keys)
        n = len(keys)
        if not isinstance(tensors, (list, tuple)) or len(tensors) != n:
            _log.error("keys and tensors_list must have the same length")
            return [_INVALID] * n
        reqs = []
        for lst, name in ((parallelisms, "parallelisms"), (writer_partitions,
                                                           "writer_partitions")):
            if lst is None:
                reqs.append([None] * n)
            elif not isinstance(lst, list) or len(lst) != n:
                _log.error("%s must be a list as long as keys, or None", name)
                return [_INVALID] * n
            else:
                reqs.append(lst)
        groups = []
        for k, t, p, w in zip(keys, tensors, reqs[0], reqs[1]):
            plan = _plan_write(k, t, p, w, from_full)
            groups.append(plan)
        return self._put_grouped(groups, config, upsert)

    def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                    writer_partition=None):
        """Store tensor as the object parallelism names (None: the full tensor under key; one
        tp axis: tensor is that shard; several axes with tp: the tp shard of the full tensor;
        writer_partition (rank, size, split_dim attributes): a shard of the full tensor)."""
        _check_key(key)
        return self._put_par([key], [tensor], [parallelism], config, [writer_partition],
                             False)[0]

    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                       writer_partition=None):
        _check_key(key)
        return self._put_par([key], [tensor], [parallelism], config, [writer_partition],
                             True)[0]

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                          config=None, writer_partitions=None):
        return self._put_par(keys, tensors_list, parallelisms, config, writer_partitions, False)

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                             config=None, writer_partitions=None):
        return self._put_par(keys, tensors_list, parallelisms, config, writer_partitions, True)

    def _par_from(self, keys, ptrs, sizes, parallelisms, config, writer_partitions, upsert):
        keys, tensors = self._buffers_tensors(keys, ptrs, sizes)
        if tensors is None:
            return [_INVALID] * len(keys)
        return self._put_par(keys, tensors, parallelisms, config, writer_partitions, upsert,
                             True)

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                         config=None, writer_partition=None):
        _check_key(key)
        return self._par_from([key], [buffer_ptr], [size], [parallelism], config,
                              [writer_partition], False)[0]

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                            config=None, writer_partition=None):
        _check_key(key)
        return self._par_from([key], [buffer_ptr], [size], [parallelism], config,
                              [writer_partition], True)[0]

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                               parallelisms=None, config=None,
                                               writer_partitions=None):
        return self._par_from(keys, buffer_ptrs, sizes, parallelisms, config,
                              writer_partitions, False)

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                                  parallelisms=None, config=None,
                                                  writer_partitions=None):
        return self._par_from(keys, buffer_ptrs, sizes, parallelisms, config,
                              writer_partitions, True)

    def _gather(self, keys, split_dim, shape):
        """The tensor rebuilt by concatenating the shards under keys along split_dim."""
        got = self._fetch(keys)
        if any(g is None for g in got):
            _log.error("missing shard among %s", keys)
            return None
        full = _torch().cat([g[1] for g in got], dim=split_dim)
        return full if list(full.shape) == list(shape) else None

    def _full_tensor(self, key, plain=True):
        """The whole tensor of key: the full object under key (plain), else rebuilt from the
        shards its writer or parallelism manifest lists; None when neither is complete."""
        got = self._fetch([key])[0] if plain else None
        if got is not None and got[0].layout == tio.LAYOUT_FULL:
            return got[1]
        for mk, name in ((key + "__writer_manifest", "writer"),
                         (key + "__parallelism_manifest", "tp")):
            h = self.get_buffer(mk)
            man = tio.decode_manifest(ctypes.string_at(h.ptr(), h.size())) if h else None
            if man is None:
                continue
            _, shape, sd, count = man
            keys = [_writer_key(key, r, count, sd) if name == "writer" else _tp_key(key, r)
                    for r in range(count)]
            return self._gather(keys, sd, shape)
        return None

    def _read_target(self, key, target):
        if target is None or target.mode == "as_stored":
            return self.get_tensor(key)
        if target.mode == "full":
            return self._full_tensor(key)
        if target.parallelism is None:
            _log.error("get_tensor_with_parallelism: parallelism is required")
            return None
        axes = _parse_parallelism(target.parallelism)
        if axes is None:
            return None
        want = [_parallelism_key(key, axes)]
        tp = [a for a in axes if a[0] == "tp"]
        if len(axes) == 1 and tp:
            want.append(_writer_key(key, tp[0][1], tp[0][2], tp[0][3]))
        for g in self._fetch(want):
            # A stored shard answers when it is the rank of the size asked for.
            if g is not None and (not tp or [(a["rank"], a["size"]) for a in g[0].axes
                                             if a["kind"] == 1] == [tp[0][1:3]]):
                return g[1]
        full = self._full_tensor(key, plain=False)
        if full is None or not tp:
            return full
        _, rank, size, sd, _, _ = tp[0]
        ext = _uniform(list(full.shape), sd, size)
        return None if ext is None else full.narrow(sd, rank * ext, ext).contiguous()

    def _targets(self, keys, targets):
        if targets is None:
            return [None] * len(keys)
        if not isinstance(targets, list) or len(targets) != len(keys):
            _log.error("targets must be a list as long as keys, or None")
            return None
        for t in targets:
            if t is not None and not isinstance(t, ReadTarget):
                raise TypeError("targets must be ReadTarget objects or None")
        return targets

    def get_tensor_with_parallelism(self, key, target=None):
        """The tensor target asks for (None or mode "as_stored": the object under key; "shard":
        the shard target.parallelism names; "full": the tensor rebuilt from its shards)."""
        _check_key(key)
        return self.batch_get_tensor_with_parallelism([key], [target])[0]

    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        keys = _check_keys(keys)
        ts = self._targets(keys, targets)
        if ts is None:
            return [None] * len(keys)
        return [self._read_target(k, t) for k, t in zip(keys, ts)]

    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
        _check_key(key)
        return self.batch_get_tensor_with_parallelism_into([key], [buffer_ptr], [size],
                                                           [target])[0]

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
        """As batch_get_tensor_with_parallelism, each result written as [header][data] into
        its buffer and returned as a tensor over that memory (None when it does not fit)."""
        keys = _check_keys(keys)
        ptrs, sizes = _check_ints(buffer_ptrs, "buffer_ptrs"), _check_ints(sizes, "sizes")
        ts = self._targets(keys, targets)
        if ts is None or not len(keys) == len(ptrs) == len(sizes):
            return [None] * len(keys)
        out = []
        for k, t, p, n in zip(keys, ts, ptrs, sizes):
            x = self._read_target(k, t) if p else None
            b = _full_blob(x) if x is not None else None
            if b is None or tio.HEADER_SIZE + b.nbytes > n:
                out.append(None)
                continue
            ctypes.memmove(p, b.header, tio.HEADER_SIZE)
            ctypes.memmove(p + tio.HEADER_SIZE, b.addr, b.nbytes)
            out.append(_frombuffer(tio.decode_header(b.header, tio.HEADER_SIZE + b.nbytes), p))
        return out

    # ------------------------------------------------------------ safetensors files

    def save_tensor_to_safetensor(self, key, file_name=None):
        """Write the tensor under key to a safetensors file (named key when file_name is None),
        the tensor named key in it.  0, -1100 when key holds no tensor, -600 on a write error."""
        _check_key(key)
        if file_name is not None and not isinstance(file_name, str):
            raise TypeError("file_name must be a str or None")
        got = self._fetch([key])[0]
        if got is None:
            _log.error("Failed to fetch tensor for key: %s", key)
            return _FILE_NOT_FOUND
        h, t = got
        meta = {key: {"dtype": _ST_NAMES[h.dtype], "shape": list(t.shape),
                      "data_offsets": [0, h.data_bytes]}}
        head = json.dumps(meta, separators=(",", ":")).encode()
        head += b" " * (-len(head) % 8)
        data = ctypes.string_at(t.data_ptr(), h.data_bytes) if h.data_bytes else b""
        try:
            with open(file_name if file_name is not None else key, "wb") as f:
                f.write(len(head).to_bytes(8, "little") + head + data)
        except OSError as e:
            _log.error("Failed to save tensor to safetensor file: %s", e)
            return _INVALID
        return 0

    def load_tensor_from_safetensor(self, key=None, file_name=None):
        """Read the tensor named key (or, missing, the file's first) from a safetensors file,
        store it under key (file_name when key is None) and return it; None on failure."""
        if file_name is None:
            raise TypeError("load_tensor_from_safetensor() missing argument 'file_name'")
        if not isinstance(file_name, str) or (key is not None and not isinstance(key, str)):
            raise TypeError("key and file_name must be str")
        store_key = key if key is not None else file_name
        try:
            t = _read_safetensor(file_name, store_key)
        except (OSError, ValueError, KeyError) as e:
            _log.error("Failed to load tensor from safetensor file %s: %s", file_name, e)
            return None
        if t is None or self.put_tensor(store_key, t) != 0:
            return None
        return t


def _read_safetensor(path, name):
    """The tensor called name in the safetensors file at path (the first one when there is no
    such name); raises ValueError for a malformed file."""
    torch = _torch()
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if n <= 0 or 8 + n > size or n > 100 << 20:
            raise ValueError("bad header length")
        meta = json.loads(f.read(n))
        entries = {k: v for k, v in meta.items() if k != "__metadata__"}
        if not entries:
            raise ValueError("no tensor in the file")
        if name not in entries:
            first = min(entries, key=lambda k: entries[k]["data_offsets"][0])
            _log.warning("tensor %s not in %s; using %s", name, path, first)
            name = first
        e = entries[name]
        code = _ST_NAMES.index(e["dtype"])
        start, end = (int(x) for x in e["data_offsets"])
        h = tio.Header(code, [int(d) for d in e["shape"]])
        if end - start != h.data_bytes or 8 + n + end > size:
            raise ValueError("data offsets do not match the shape")
        f.seek(8 + n + start)
        data = f.read(end - start)
    out = torch.empty(h.local_shape, dtype=tio.torch_dtype(code))
    if data:
        ctypes.memmove(out.data_ptr(), data, len(data))
    return out
