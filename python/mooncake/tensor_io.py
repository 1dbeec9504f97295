# SPDX-License-Identifier: Apache-2.0
"""mooncake.tensor_io: the stored form of a tensor, as upstream's 0.3.13 client writes it.

A tensor object is a 304-byte little-endian header followed by the tensor's bytes (C order):

    offset  field
         0  u32 magic 0x4d4f4f4e ("NOOM")     4  u16 version 1     6  u16 header size 304
         8  i32 dtype (DTYPE_NAMES index)     12 i32 ndim (0..8)   16 u32 layout 0 full, 1 shard
        20  u32 flags 0                       24 u64 data offset (304)   32 u64 data bytes
        40  i64[8] global shape              104 i64[8] local shape (unused dims -1)
       168  u32 axis count (0..4)            172 u32 0
       176  4 axes of 32 bytes: i32 kind (0 dp, 1 tp, 2 ep, 3 pp), i32 index in the request,
            i32 shard rank, i32 shard count, i32 split dim (-1: none), i32 expert or stage id,
            i64 the shard's extent along the split dim (0: none)

A sharded tensor written through the parallelism API also leaves a 96-byte manifest
(`<key>__parallelism_manifest` or `<key>__writer_manifest`): u32 magic 0x574d414e, u16 1,
u16 96, i32 dtype, i32 ndim, i32 split dim, i32 shard count, i32 0, i64[8] global shape.

torch is imported only when a tensor is converted; everything else here is plain Python.
"""
import struct

__all__ = ["HEADER_SIZE", "MANIFEST_SIZE", "DTYPE_NAMES", "Header", "encode_header",
           "decode_header", "encode_manifest", "decode_manifest", "dtype_code", "torch_dtype",
           "tensor_view", "AXIS_KINDS"]

HEADER_SIZE = 304
MANIFEST_SIZE = 96
MAGIC = 0x4D4F4F4E
MANIFEST_MAGIC = 0x574D414E
VERSION = 1
MAX_DIMS = 8
MAX_AXES = 4
LAYOUT_FULL, LAYOUT_SHARD = 0, 1

# Upstream's dtype numbering: the index in this tuple is the code written in the header.
DTYPE_NAMES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
               "int64", "uint64", "bool", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
_ELEM_SIZE = (4, 8, 1, 1, 2, 2, 4, 4, 8, 8, 1, 2, 2, 1, 1)

# Axis kinds as the header numbers them, and the order their key suffixes are written in.
AXIS_KINDS = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}
_KIND_NAMES = {v: k for k, v in AXIS_KINDS.items()}

_HDR = struct.Struct("<IHHiiIIQQ")          # 40 bytes
_SHAPE = struct.Struct("<8q")               # 64 bytes
_AXES_HDR = struct.Struct("<II")
_AXIS = struct.Struct("<iiiiiiq")           # 32 bytes
_MAN = struct.Struct("<IHHiiiii")           # 32 bytes, then a shape


def _torch():
    import torch
    return torch


def dtype_code(dtype):
    """The header's code for a torch dtype, or -1 when upstream's format has none."""
    torch = _torch()
    for code, name in enumerate(DTYPE_NAMES):
        if getattr(torch, name, None) == dtype:
            return code
    return -1


def torch_dtype(code):
    """The torch dtype for a header code (None when this torch lacks it)."""
    if not 0 <= code < len(DTYPE_NAMES):
        return None
    return getattr(_torch(), DTYPE_NAMES[code], None)


class Header:
    """A decoded tensor header.  axes: list of dicts (kind, index, rank, size, split_dim, tag,
    extent) in the order they were written."""

    __slots__ = ("dtype", "ndim", "layout", "data_offset", "data_bytes", "global_shape",
                 "local_shape", "axes")

    def __init__(self, dtype, global_shape, local_shape=None, axes=(), layout=None):
        self.dtype = dtype
        self.ndim = len(global_shape)
        self.global_shape = list(global_shape)
        self.local_shape = list(local_shape if local_shape is not None else global_shape)
        self.axes = list(axes)
        self.layout = layout if layout is not None else (LAYOUT_SHARD if axes else LAYOUT_FULL)
        self.data_offset = HEADER_SIZE
        numel = 1
        for d in self.local_shape:
            numel *= d
        self.data_bytes = numel * _ELEM_SIZE[dtype]

    def parallelism(self):
        """The stored axes as (kind name, rank, size, split_dim or None, expert_id, stage_id)."""
        out = []
        for a in self.axes:
            kind = _KIND_NAMES.get(a["kind"], "unknown")
            out.append((kind, a["rank"], a["size"],
                        a["split_dim"] if a["split_dim"] >= 0 else None,
                        a["tag"] if kind == "ep" else None, a["tag"] if kind == "pp" else None))
        return out


def _shape_bytes(dims):
    return _SHAPE.pack(*(list(dims) + [-1] * (MAX_DIMS - len(dims))))


def encode_header(h):
    """The 304 header bytes of Header h."""
    out = bytearray(HEADER_SIZE)
    _HDR.pack_into(out, 0, MAGIC, VERSION, HEADER_SIZE, h.dtype, h.ndim, h.layout, 0,
                   HEADER_SIZE, h.data_bytes)
    out[40:104] = _shape_bytes(h.global_shape)
    out[104:168] = _shape_bytes(h.local_shape)
    _AXES_HDR.pack_into(out, 168, len(h.axes), 0)
    for i, a in enumerate(h.axes):
        _AXIS.pack_into(out, 176 + 32 * i, a["kind"], a["index"], a["rank"], a["size"],
                        a["split_dim"], a["tag"], a["extent"])
    return bytes(out)


def decode_header(buf, total):
    """The Header at the start of buf (any buffer) for an object of total bytes, or None when
    it is not a valid tensor header: upstream's checks (magic, version, size, dtype, dims, axes,
    data bytes matching the shape and the object's length)."""
    if total < HEADER_SIZE or len(buf) < HEADER_SIZE:
        return None
    magic, ver, hsize, dtype, ndim, layout, _flags, off, nbytes = _HDR.unpack_from(buf, 0)
    if magic != MAGIC or ver != VERSION or hsize != HEADER_SIZE:
        return None
    if not 0 <= dtype < len(DTYPE_NAMES) or not 0 <= ndim <= MAX_DIMS or layout > LAYOUT_SHARD:
        return None
    if off < HEADER_SIZE or off > total or nbytes != total - off:
        return None
    gshape = _SHAPE.unpack_from(buf, 40)
    lshape = _SHAPE.unpack_from(buf, 104)
    if any(d < 0 for d in gshape[:ndim] + lshape[:ndim]):
        return None
    if any(d != -1 for d in gshape[ndim:] + lshape[ndim:]):
        return None
    naxes = _AXES_HDR.unpack_from(buf, 168)[0]
    if naxes > MAX_AXES:
        return None
    axes = []
    for i in range(naxes):
        kind, index, rank, size, sd, tag, extent = _AXIS.unpack_from(buf, 176 + 32 * i)
        if not 0 <= kind <= 4 or size <= 0 or not 0 <= rank < size or not -1 <= sd < ndim:
            return None
        axes.append({"kind": kind, "index": index, "rank": rank, "size": size, "split_dim": sd,
                     "tag": tag, "extent": extent})
    h = Header(dtype, gshape[:ndim], lshape[:ndim], axes, layout)
    if h.data_bytes != nbytes:
        return None
    h.data_offset = off
    return h


def encode_manifest(dtype, shape, split_dim, shard_count):
    out = bytearray(MANIFEST_SIZE)
    _MAN.pack_into(out, 0, MANIFEST_MAGIC, VERSION, MANIFEST_SIZE, dtype, len(shape), split_dim,
                   shard_count, 0)
    out[32:96] = _shape_bytes(shape)
    return bytes(out)


def decode_manifest(buf):
    """(dtype, shape, split_dim, shard_count) from a manifest, or None."""
    if buf is None or len(buf) < MANIFEST_SIZE:
        return None
    magic, ver, size, dtype, ndim, sd, count, _ = _MAN.unpack_from(buf, 0)
    if magic != MANIFEST_MAGIC or ver != VERSION or size != MANIFEST_SIZE:
        return None
    if not 0 <= ndim <= MAX_DIMS or not 0 <= sd < max(ndim, 1) or count <= 0:
        return None
    if not 0 <= dtype < len(DTYPE_NAMES):
        return None
    shape = _SHAPE.unpack_from(buf, 32)[:ndim]
    if any(d < 0 for d in shape):
        return None
    return dtype, list(shape), sd, count


def tensor_view(h, address):
    """A new CPU tensor holding a copy of the data at address described by Header h (upstream
    returns a 0-dimensional tensor's single element as a 1-element vector)."""
    torch = _torch()
    dt = torch_dtype(h.dtype)
    shape = h.local_shape if h.ndim else [h.data_bytes // _ELEM_SIZE[h.dtype]]
    out = torch.empty(shape, dtype=dt)
    if h.data_bytes:
        import ctypes
        ctypes.memmove(out.data_ptr(), address + h.data_offset, h.data_bytes)
    return out
