# SPDX-License-Identifier: Apache-2.0
"""Column codecs of the structured object store's non_tensor_batch fields.

A non_tensor_batch field is a column of Python values, one per row.  Each codec here turns a
column into named payloads (numpy arrays, bytes, or Parts) that the store keeps as members of
the stage object, plus JSON metadata; decoding takes the payloads read back (numpy arrays for
array members, bytes or uint8 arrays for byte members) and gives the list of row values.  Which
codec a column gets is decided in _structured_infer.

Codecs and their payloads:
  ndarray            numeric scalars: data (typed), nulls (bool)
  typed_ragged       numeric rows of any shape: data (flat, typed), offsets (int64, rows+1),
                     shapes (int64, rows x max_ndim), ndims (int16), nulls (bool)
  ragged_tensor      torch tensors: typed_ragged of their numpy view, metadata dtype "torch.*"
  ragged_tensor_dict dicts of tensors: null_mask, then "<key>.<payload>" per key
  bytes_ragged, media_bytes, utf8_ragged, json_ragged, msgpack_ragged
                     one byte string per row: data, offsets (int64), nulls (bool)
  media_list_ragged  lists of byte strings: data, row_offsets, byte_offsets, nulls
  structured_recursive  dicts/lists expanded into node masks and one leaf column per path
Nothing is unpickled; msgpack rows decode as data only (see _msgpack).  numpy is required,
torch only for the tensor codecs.  Pure functions; no state.
"""
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from mooncake import _msgpack

TYPED_RAGGED_DEFAULT_DTYPE = "int64"
RAGGED_TENSOR_DEFAULT_DTYPE = "torch.float32"
FALLBACK_ERRORS = (TypeError, ValueError, OverflowError, RuntimeError, RecursionError)
RAGGED_TENSOR_PAYLOAD_NAMES = frozenset({"data", "offsets", "shapes", "ndims", "nulls"})

INFER_MAX_STRUCT_KEYS = 64
INFER_MAX_LIST_LEN = 8
INFER_MAX_SAMPLE_ROWS = 128
INFER_MAX_JSON_BYTES = 1 << 20
INFER_MAX_DEPTH = 32


def loaded_torch():
    """torch if the process has imported it (a value can only be a tensor then), else None."""
    return sys.modules.get("torch")


def need_torch(what):
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("torch is required to %s" % what) from e
    return torch


class Parts:
    """Flat typed arrays stored back to back as one ndarray member.  The store groups whole
    arrays into chunks of at most chunk_bytes (as upstream's pool-backed put does)."""

    __slots__ = ("arrays", "dtype", "total")

    def __init__(self, arrays, dtype, total):
        self.arrays, self.dtype, self.total = arrays, np.dtype(dtype), total

    @property
    def nbytes(self):
        return sum(a.nbytes for a in self.arrays)


@dataclass
class CodecDecision:
    accepted: bool
    codec: str
    reason: str
    normalized_type: str
    metadata: dict = field(default_factory=dict)


@dataclass
class InferredLeaf:
    path: str
    values: list
    decision: CodecDecision


@dataclass
class InferredNode:
    path: str
    node_type: str
    children: list
    lengths: Optional[list] = None
    row_mask: Optional[list] = None


@dataclass
class EncodedLeaf:
    codec: str
    rows: int
    payload: dict
    metadata: dict


def is_pil_image(value):
    mod = getattr(value.__class__, "__module__", None) or ""
    return mod.startswith("PIL.") and hasattr(value, "save")


def is_bytes_like(value):
    return isinstance(value, (bytes, bytearray, memoryview))


def json_bytes(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _Missing:
    """A dict key a row does not have (unlike a key whose value is None)."""

    __slots__ = ()

    def __repr__(self):
        return "<MISSING>"


MISSING = _Missing()

# ---------------------------------------------------------------- numeric codecs

def _contiguous(value, dtype):
    if isinstance(value, np.ndarray) and value.dtype == dtype and value.flags.c_contiguous:
        return value
    a = np.asarray(value, dtype=dtype)
    return a if a.flags.c_contiguous else np.array(a, dtype=dtype, order="C", copy=True)


def _flat_data(flats, dtype, total):
    """The data payload of typed rows: one array as is, several as Parts."""
    if len(flats) == 1:
        return flats[0]
    if total:
        return Parts(flats, dtype, total)
    return np.empty(0, dtype=dtype)


def _ragged_meta(dtype, max_ndim, row_format, ndarray_rows=None, contiguous=False):
    meta = {"dtype": str(dtype), "max_ndim": int(max_ndim), "shape_policy": "ragged",
            "row_format": row_format, "ndarray_rows": ndarray_rows}
    if contiguous:
        meta["physical_layout"] = "contiguous_flat"
    return meta


def _typed_regular_rows(values, dtype):
    """Two or more C-contiguous arrays of dtype and one shape; None otherwise."""
    n = len(values)
    if n < 2:
        return None
    first = values[0]
    for v in values:
        if not isinstance(v, np.ndarray) or v.dtype != dtype or not v.flags.c_contiguous \
                or v.shape != first.shape:
            return None
    width = int(first.size)
    total = n * width
    if width:
        data = Parts([v.reshape(-1) for v in values], dtype, total)
    else:
        data = np.asarray(values, dtype=dtype).reshape(-1)
    ndim = int(first.ndim)
    if ndim == 0:
        shapes = np.zeros((n, 1), dtype=np.int64)
        ndims = np.zeros(n, dtype=np.int16)
    else:
        shapes = np.empty((n, ndim), dtype=np.int64)
        shapes[:] = first.shape
        ndims = np.full(n, ndim, dtype=np.int16)
    return ({"data": data, "offsets": np.arange(n + 1, dtype=np.int64) * width,
             "shapes": shapes, "ndims": ndims, "nulls": np.zeros(n, dtype=np.bool_)},
            _ragged_meta(dtype, ndim, "ndarray", contiguous=True))


def _typed_ndarray_rows(values, dtype):
    """Rows that are all ndarrays (or None), in the contiguous layout; None otherwise."""
    regular = _typed_regular_rows(values, dtype)
    if regular is not None:
        return regular
    n = len(values)
    if n == 0:
        return None
    nulls = np.zeros(n, dtype=np.bool_)
    lengths = np.zeros(n, dtype=np.int64)
    arrays = []
    tail = row_ndim = None
    same_tail, saw_scalar, saw_array = True, False, False
    for row, v in enumerate(values):
        if v is None:
            nulls[row] = True
            continue
        if not isinstance(v, np.ndarray):
            return None
        a = _contiguous(v, dtype)
        arrays.append(a)
        lengths[row] = a.size
        if a.ndim == 0:
            saw_scalar = True
            same_tail = same_tail and not saw_array
            continue
        saw_array = True
        same_tail = same_tail and not saw_scalar
        if tail is None:
            tail, row_ndim = a.shape[1:], a.ndim
        elif a.ndim != row_ndim or a.shape[1:] != tail:
            same_tail = False
    if same_tail and tail is not None and 0 in tail:
        same_tail = False
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    data = _flat_data([a.reshape(-1) for a in arrays], dtype, total)
    if not arrays or (saw_scalar and not saw_array):
        max_ndim = 0
    elif same_tail:
        max_ndim = int(row_ndim or 1)
    else:
        max_ndim = max(a.ndim for a in arrays)
    ndims = np.zeros(n, dtype=np.int16)
    if max_ndim == 0:
        shapes = np.zeros((n, 1), dtype=np.int64)
    elif same_tail:
        shapes = np.zeros((n, max_ndim), dtype=np.int64)
        tail_elems = int(np.prod(tail, dtype=np.int64)) if tail else 1
        shapes[:, 0] = lengths // tail_elems
        if max_ndim > 1:
            shapes[:, 1:] = tail
        ndims[~nulls] = max_ndim
    else:
        shapes = np.zeros((n, max(max_ndim, 1)), dtype=np.int64)
        it = iter(arrays)
        for row in range(n):
            if nulls[row]:
                continue
            a = next(it)
            ndims[row] = a.ndim
            if a.ndim:
                shapes[row, :a.ndim] = a.shape
    return ({"data": data, "offsets": offsets, "shapes": shapes, "ndims": ndims,
             "nulls": nulls}, _ragged_meta(dtype, max_ndim, "ndarray", contiguous=True))


def encode_typed_ragged(values, dtype_hint=None):
    """(payload, metadata) of numeric rows (lists, tuples, arrays or None)."""
    if dtype_hint is None:
        arrays = [np.asarray(v) for v in values if v is not None]
        dtype = np.result_type(*arrays) if arrays else np.dtype(TYPED_RAGGED_DEFAULT_DTYPE)
    else:
        dtype = np.dtype(dtype_hint)
    if dtype.hasobject:
        raise ValueError("typed_ragged codec requires non-object dtype")
    fast = _typed_ndarray_rows(values, dtype)
    if fast is not None:
        return fast
    arrays = [np.asarray([], dtype=dtype) if v is None else _contiguous(v, dtype)
              for v in values]
    n = len(arrays)
    max_ndim = max((a.ndim for a in arrays), default=0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    ndims = np.zeros(n, dtype=np.int16)
    shapes = np.zeros((n, max(max_ndim, 1)), dtype=np.int64)
    flats = []
    for row, a in enumerate(arrays):
        flats.append(a.reshape(-1))
        offsets[row + 1] = offsets[row] + a.size
        ndims[row] = a.ndim
        if a.ndim:
            shapes[row, :a.ndim] = a.shape
    total = int(offsets[-1])
    if flats:
        data = Parts(flats, dtype, total) if len(flats) > 1 else flats[0]
    else:
        data = np.empty(0, dtype=dtype)
    is_array = [v is not None and isinstance(v, np.ndarray) for v in values]
    if all(v is None or a for v, a in zip(values, is_array)):
        row_format = "ndarray"
    elif any(is_array):
        row_format = "mixed"
    else:
        row_format = "list"
    return ({"data": data, "offsets": offsets, "shapes": shapes, "ndims": ndims,
             "nulls": np.asarray([v is None for v in values], dtype=np.bool_)},
            _ragged_meta(dtype, max_ndim, row_format,
                         is_array if row_format == "mixed" else None))


def _as_typed(raw, dtype):
    torch = loaded_torch()
    if torch is not None and isinstance(raw, torch.Tensor):
        return raw.numpy()
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return np.frombuffer(raw, dtype=dtype)
    if isinstance(raw, np.ndarray):
        return raw if raw.dtype == dtype else np.frombuffer(raw.tobytes(), dtype=dtype)
    return np.asarray(raw, dtype=dtype)


def _check_ragged(payload, rows):
    offsets, nulls = payload["offsets"], payload["nulls"]
    if len(offsets) != rows + 1 or len(nulls) != rows:
        raise ValueError("ragged payload has %d offsets and %d nulls for %d rows"
                         % (len(offsets), len(nulls), rows))


def decode_typed_ragged(payload, rows, metadata=None):
    metadata = metadata or {}
    dtype = np.dtype(metadata.get("dtype", TYPED_RAGGED_DEFAULT_DTYPE))
    data = _as_typed(payload["data"], dtype)
    _check_ragged(payload, rows)
    offsets, shapes, ndims, nulls = (payload["offsets"], payload["shapes"], payload["ndims"],
                                     payload["nulls"])
    row_format = metadata.get("row_format")
    ndarray_rows = metadata.get("ndarray_rows") or []
    out = []
    for row in range(rows):
        if nulls[row]:
            out.append(None)
            continue
        lo, hi = int(offsets[row]), int(offsets[row + 1])
        if not 0 <= lo <= hi <= data.size:
            raise ValueError("typed_ragged row %d is outside its data" % row)
        nd = int(ndims[row])
        a = data[lo:hi].reshape(tuple(int(d) for d in shapes[row, :nd]))
        if row_format == "ndarray" or (row_format == "mixed" and row < len(ndarray_rows)
                                       and ndarray_rows[row]):
            out.append(a)
        else:
            out.append(a.tolist())
    return out


def parse_torch_dtype(name):
    torch = need_torch("use tensor dtypes")
    dt = getattr(torch, name[6:] if name.startswith("torch.") else name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError("unknown torch dtype: %s" % name)
    return dt


def torch_dtype_to_numpy(name):
    torch = need_torch("use tensor dtypes")
    dt = parse_torch_dtype(name)
    if dt == torch.bfloat16:
        raise ValueError("torch.bfloat16 has no value-preserving numpy dtype")
    return torch.empty(0, dtype=dt).numpy().dtype


def encode_ragged_tensor(values):
    torch = need_torch("encode ragged tensor fields")
    tdtype = None
    rows = []
    for v in values:
        if v is None:
            rows.append(None)
            continue
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                raise ValueError("ragged tensor codec requires numeric ndarray values")
            t = torch.as_tensor(v if v.flags.writeable else v.copy())
        else:
            t = v.detach()
        if t.device.type != "cpu" or not t.is_contiguous():
            t = t.cpu().contiguous()
        if t.dtype == torch.bfloat16:
            raise ValueError("ragged tensor codec does not support torch.bfloat16")
        tdtype = t.dtype if tdtype is None else tdtype
        if t.dtype != tdtype:
            raise ValueError("mixed tensor dtype: %s vs %s" % (tdtype, t.dtype))
        rows.append(t.numpy())
    tdtype = tdtype or parse_torch_dtype(RAGGED_TENSOR_DEFAULT_DTYPE)
    payload, meta = encode_typed_ragged(rows, np.dtype(torch_dtype_to_numpy(str(tdtype))))
    meta["dtype"] = str(tdtype)
    return payload, meta


def decode_ragged_tensor(payload, rows, metadata=None):
    torch = need_torch("decode ragged tensor fields")
    name = (metadata or {}).get("dtype", RAGGED_TENSOR_DEFAULT_DTYPE)
    meta = dict(metadata or {})
    meta["dtype"] = str(torch_dtype_to_numpy(name))
    tdtype = parse_torch_dtype(name)
    out = []
    for v in decode_typed_ragged(payload, rows, meta):
        if v is None:
            out.append(None)
        elif isinstance(v, np.ndarray):
            out.append(torch.from_numpy(np.array(v)).to(tdtype))
        else:
            out.append(torch.as_tensor(v, dtype=tdtype))
    return out


def _dict_tensor_keys(keys):
    out, seen = [], set()
    for k in (keys.keys() if isinstance(keys, Mapping) else keys):
        if not isinstance(k, str):
            raise TypeError("ragged_tensor_dict keys must be strings")
        if not k:
            raise ValueError("ragged_tensor_dict keys must not be empty")
        if any(sep in k for sep in (".", "/", "\\")):
            raise ValueError("ragged_tensor_dict keys must not contain '.', '/', or '\\'")
        if k in seen:
            raise ValueError("ragged_tensor_dict keys contain duplicate key %r" % k)
        seen.add(k)
        out.append(k)
    return out


def encode_ragged_tensor_dict(values, schema_metadata):
    declared = schema_metadata.get("keys")
    keys = None if declared is None else _dict_tensor_keys(declared)
    found = set()
    for row, item in enumerate(values):
        if item is None:
            continue
        if not isinstance(item, Mapping):
            raise TypeError("ragged_tensor_dict rows must be mappings or None; row %d is %s"
                            % (row, type(item).__name__))
        nulls = sorted(k for k, v in item.items() if v is None)
        if nulls:
            raise TypeError("ragged_tensor_dict rows cannot contain explicit None tensor "
                            "values; row %d has explicit None for %s" % (row, nulls))
        row_keys = _dict_tensor_keys(item.keys())
        if keys is None:
            found.update(row_keys)
        else:
            extra = sorted(set(row_keys) - set(keys))
            if extra:
                raise ValueError("ragged_tensor_dict rows contain keys not declared in "
                                 "FieldSchema metadata['keys']; row %d has keys not "
                                 "declared: %s" % (row, extra))
    if keys is None:
        keys = _dict_tensor_keys(sorted(found))
    if keys:
        need_torch("encode ragged_tensor_dict fields")
    payload = {"null_mask": np.asarray([v is None for v in values], dtype=np.bool_)}
    key_codecs = {}
    for k in keys:
        try:
            sub, sub_meta = encode_ragged_tensor([None if v is None else v.get(k)
                                                  for v in values])
        except FALLBACK_ERRORS as e:
            raise ValueError("failed to encode ragged_tensor_dict key %r" % k) from e
        for name, value in sub.items():
            payload["%s.%s" % (k, name)] = value
        key_codecs[k] = sub_meta
    return EncodedLeaf("ragged_tensor_dict", len(values), payload,
                       {"keys": keys, "key_codecs": key_codecs})


def decode_ragged_tensor_dict(payload, rows, metadata):
    mask = payload["null_mask"]
    if isinstance(mask, (bytes, bytearray)):
        mask = np.frombuffer(mask, dtype=np.bool_)
    keys = metadata.get("keys", [])
    columns = {}
    for k in keys:
        prefix = k + "."
        sub = {n[len(prefix):]: v for n, v in payload.items() if n.startswith(prefix)}
        missing = sorted(RAGGED_TENSOR_PAYLOAD_NAMES - set(sub))
        if missing:
            raise ValueError("ragged_tensor_dict payload for key %r is missing payloads: %s"
                             % (k, missing))
        columns[k] = decode_ragged_tensor(sub, rows, metadata.get("key_codecs", {}).get(k))
    out = []
    for row in range(rows):
        if mask[row]:
            out.append(None)
        else:
            out.append({k: columns[k][row] for k in keys if columns[k][row] is not None})
    return out


def encode_numeric_scalar(values, dtype):
    dtype = np.dtype(dtype)
    fill = False if dtype == np.dtype(np.bool_) else 0
    data = np.asarray([fill if v is None else v for v in values], dtype=dtype)
    return ({"data": data, "nulls": np.asarray([v is None for v in values], dtype=np.bool_)},
            {"dtype": str(data.dtype), "shape": list(data.shape)})


def decode_numeric_scalar(payload):
    data, nulls = payload["data"], payload["nulls"]
    if not nulls.any():
        return data.tolist()
    out = data.astype(object)
    out[nulls] = None
    return out.tolist()


# ---------------------------------------------------------------- byte-string codecs

def _media_bytes(value):
    """(bytes, media type, encoding note) of one row value."""
    if value is None:
        return b"", None, {"kind": "null"}
    if is_bytes_like(value):
        return bytes(value), None, {"kind": "bytes"}
    if is_pil_image(value):
        img = value.convert(value.mode) if getattr(value, "readonly", False) else value
        return img.tobytes(), "image/raw", {"kind": "pil_raw", "mode": img.mode,
                                            "size": list(img.size),
                                            "format": getattr(value, "format", None)}
    return bytes(value), None, {"kind": "bytes"}


def _media_parts(items):
    """(bytes parts, media types, encoding notes, offsets) of a flat list of media values."""
    parts, types, encs, offsets = [], [], [], [0]
    for item in items:
        data, mtype, enc = _media_bytes(item)
        parts.append(data)
        types.append(mtype)
        encs.append(enc)
        offsets.append(offsets[-1] + len(data))
    return parts, types, encs, offsets


def encode_bytes_like(values):
    parts, types, kinds, offsets = _media_parts(values)
    meta = {}
    if any(k.get("kind") == "pil_raw" for k in kinds):
        meta["media_encodings"] = kinds
    media_types = sorted({t for t in types if t})
    if media_types:
        meta["media_types"] = media_types
        meta["encode_source"] = "raw_pixels_from_object"
    return ({"data": b"".join(parts), "offsets": np.asarray(offsets, dtype=np.int64),
             "nulls": np.asarray([v is None for v in values], dtype=np.bool_)}, meta)


def _media_value(data, enc):
    if not enc or enc.get("kind") != "pil_raw":
        return bytes(data)
    try:
        from PIL import Image
    except ImportError:
        return bytes(data)
    img = Image.frombuffer(enc["mode"], tuple(enc["size"]), bytes(data), "raw", enc["mode"],
                           0, 1)
    img.format = enc.get("format")
    return img


def _slice_bytes(data, lo, hi, row):
    if not 0 <= lo <= hi <= len(data):
        raise ValueError("row %d is outside its data" % row)
    return memoryview(data)[lo:hi]


def decode_bytes_like(payload, rows, metadata=None):
    _check_ragged(payload, rows)
    data, offsets, nulls = payload["data"], payload["offsets"], payload["nulls"]
    encs = (metadata or {}).get("media_encodings", [])
    out = []
    for row in range(rows):
        if nulls[row]:
            out.append(None)
            continue
        item = _slice_bytes(data, int(offsets[row]), int(offsets[row + 1]), row)
        out.append(_media_value(item, encs[row] if row < len(encs) else None))
    return out


def encode_media_list(values):
    rows = [[] if v is None else list(v) for v in values]
    parts, types, encs, byte_off = _media_parts([item for r in rows for item in r])
    row_off = [0]
    for r in rows:
        row_off.append(row_off[-1] + len(r))
    meta = {"encode_source": "raw_pixels_from_object", "media_encodings": encs}
    media_types = sorted({t for t in types if t})
    if media_types:
        meta["media_types"] = media_types
    return ({"data": b"".join(parts), "row_offsets": np.asarray(row_off, dtype=np.int64),
             "byte_offsets": np.asarray(byte_off, dtype=np.int64),
             "nulls": np.asarray([v is None for v in values], dtype=np.bool_)}, meta)


def decode_media_list(payload, rows, metadata=None):
    data, row_off, byte_off, nulls = (payload["data"], payload["row_offsets"],
                                      payload["byte_offsets"], payload["nulls"])
    if len(row_off) != rows + 1 or len(nulls) != rows:
        raise ValueError("media_list_ragged payload does not match %d rows" % rows)
    encs = (metadata or {}).get("media_encodings", [])
    out = []
    for row in range(rows):
        if nulls[row]:
            out.append(None)
            continue
        items = []
        for i in range(int(row_off[row]), int(row_off[row + 1])):
            if not 0 <= i < len(byte_off) - 1:
                raise ValueError("media_list_ragged row %d is outside its offsets" % row)
            item = _slice_bytes(data, int(byte_off[i]), int(byte_off[i + 1]), row)
            items.append(_media_value(item, encs[i] if i < len(encs) else None))
        out.append(items)
    return out


def encode_msgpack_ragged(path, values):
    n = len(values)
    offsets = np.zeros(n + 1, dtype=np.int64)
    nulls = np.zeros(n, dtype=np.bool_)
    buf = bytearray()
    try:
        for i, v in enumerate(values):
            if v is None:
                nulls[i] = True
            else:
                buf += _msgpack.packb(v)
            offsets[i + 1] = len(buf)
    except TypeError as e:
        raise ValueError("unsupported structured non-tensor field %s: msgpack codec cannot "
                         "encode value" % path) from e
    return {"data": bytes(buf), "offsets": offsets, "nulls": nulls}, {}


def decode_msgpack_ragged(payload, rows):
    _check_ragged(payload, rows)
    nulls = payload["nulls"]
    values = iter(_msgpack.unpack_all(payload["data"]))
    count = int(rows - np.count_nonzero(nulls))
    out = []
    try:
        for row in range(rows):
            out.append(None if nulls[row] else next(values))
    except StopIteration:
        raise ValueError("msgpack_ragged decoded fewer rows than %d" % count) from None
    if next(values, MISSING) is not MISSING:
        raise ValueError("msgpack_ragged decoded more rows than %d" % count)
    return out


# ---------------------------------------------------------------- decoding

def decode_leaf(codec, payload, rows, metadata=None):
    if codec == "ragged_tensor":
        return decode_ragged_tensor(payload, rows, metadata)
    if codec == "typed_ragged":
        return decode_typed_ragged(payload, rows, metadata)
    if codec == "media_list_ragged":
        return decode_media_list(payload, rows, metadata)
    if codec == "ndarray":
        return decode_numeric_scalar(payload)
    if codec == "media_bytes":
        return decode_bytes_like(payload, rows, metadata)
    if codec == "bytes_ragged":
        return decode_bytes_like(payload, rows)
    if codec == "utf8_ragged":
        return [None if v is None else v.decode("utf-8")
                for v in decode_bytes_like(payload, rows)]
    if codec == "msgpack_ragged":
        return decode_msgpack_ragged(payload, rows)
    if codec == "json_ragged":
        return [None if v is None else json.loads(v.decode("utf-8"))
                for v in decode_bytes_like(payload, rows)]
    raise ValueError("unknown structured non-tensor codec: %s" % codec)
