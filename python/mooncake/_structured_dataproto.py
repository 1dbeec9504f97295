# SPDX-License-Identifier: Apache-2.0
"""DataProto-shaped data for the structured object store: splitting an object or a flat dict
into batch / non_tensor_batch / meta_info, the batch size, field and row selections, schema
sections, and building the result a get returns.  The rules are upstream 0.3.13's, so the same
input lands in the same sections with either package.  Pure functions; no state.
"""
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from mooncake._structured_bundle import StructuredMemberSlice
from mooncake._structured_codecs import loaded_torch
from mooncake._structured_infer import schema_dtype
from mooncake._structured_members import normalized_slice

SCHEMA_SECTIONS = frozenset({"batch", "non_tensor_batch", "meta_info"})


@dataclass(frozen=True)
class FieldSchema:
    """A DataProto field's codec hint.  metadata["section"] may pin the field to "batch",
    "non_tensor_batch" or "meta_info"; metadata["dtype"] types ndarray/typed_ragged."""

    codec: str
    nullable: bool = True
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RowSelection:
    count: int
    member_slice: Optional[StructuredMemberSlice] = None
    indices: Optional[tuple] = None


def mapping_to_dict(value):
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    items = getattr(value, "items", None)
    if callable(items):
        return dict(items())
    raise TypeError("expected mapping-like value, got %s" % type(value).__name__)


def _is_envelope(data):
    if not data or not set(data) <= SCHEMA_SECTIONS:
        return False
    return all(v is None or isinstance(v, Mapping) or callable(getattr(v, "items", None))
               for v in data.values())


def split_dataproto(data):
    """(batch, non_tensor_batch, meta_info) of a DataProto-like object or mapping."""
    if isinstance(data, Mapping):
        if _is_envelope(data):
            return (mapping_to_dict(data.get("batch")),
                    mapping_to_dict(data.get("non_tensor_batch")),
                    mapping_to_dict(data.get("meta_info")))
        return dict(data), {}, {}
    return (mapping_to_dict(getattr(data, "batch", None)),
            mapping_to_dict(getattr(data, "non_tensor_batch", None)),
            mapping_to_dict(getattr(data, "meta_info", None)))


def batch_size(batch, non_tensor):
    sizes = {len(v) for sec in (batch, non_tensor) for v in sec.values()}
    if not sizes:
        return 0
    if len(sizes) != 1:
        raise ValueError("DataProto fields have inconsistent batch sizes: %s" % sorted(sizes))
    return sizes.pop()


def schema_section(name, schema):
    sec = schema.metadata.get("section")
    if sec is None:
        return None
    if sec not in SCHEMA_SECTIONS:
        raise ValueError("FieldSchema for %r metadata['section'] must be one of %s"
                         % (name, sorted(SCHEMA_SECTIONS)))
    return sec


def schema_for(schemas, name, section):
    if not schemas or schemas.get(name) is None:
        return None
    schema = schemas[name]
    declared = schema_section(name, schema)
    return schema if declared is None or declared == section else None


def check_schema_sections(batch, non_tensor, meta, schemas):
    if not schemas:
        return
    where = {}
    for sec, fields in (("batch", batch), ("non_tensor_batch", non_tensor),
                        ("meta_info", meta)):
        for name in fields:
            where.setdefault(name, set()).add(sec)
    for name, schema in schemas.items():
        declared = schema_section(name, schema)
        if declared is None or not where.get(name) or declared in where[name]:
            continue
        raise ValueError("FieldSchema for %r declares section %r, but data contains it in %s"
                         % (name, declared, ", ".join(repr(s) for s in sorted(where[name]))))


def coerce_schema_column(name, value):
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        out = np.empty(len(value), dtype=object)
        out[:] = list(value)
        return out
    raise TypeError("non_tensor_batch field %r with FieldSchema must be an ndarray or "
                    "non-string sequence" % name)


# ---------------------------------------------------------------- flat dicts

def _is_sequence(value):
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def _is_dense(value):
    torch = loaded_torch()
    return (torch is not None and isinstance(value, torch.Tensor) and value.ndim > 0) or \
        (isinstance(value, np.ndarray) and value.dtype != object and value.ndim > 0)


def _row_aligned_dense(value, rows):
    if rows == 0:
        return False
    torch = loaded_torch()
    if torch is not None and isinstance(value, torch.Tensor):
        return value.shape[:1] == (rows,)
    return isinstance(value, np.ndarray) and value.dtype != object and value.shape[:1] == (rows,)


def _schema_rows(data, schemas):
    sizes = set()
    for name, schema in schemas.items():
        if name in data and schema_section(name, schema) in ("batch", "non_tensor_batch"):
            try:
                sizes.add(len(data[name]))
            except TypeError as e:
                raise ValueError("flat dict row-aligned field %r must be sized" % name) from e
    if not sizes:
        return 0
    if len(sizes) != 1:
        raise ValueError("flat dict fields have inconsistent batch sizes: %s" % sorted(sizes))
    return sizes.pop()


def _auto_rows(data, exclude):
    dense = {len(v) for k, v in data.items() if k not in exclude and _is_dense(v)}
    if len(dense) > 1:
        raise ValueError("flat dict dense fields have ambiguous batch sizes: %s" % sorted(dense))
    if dense:
        return dense.pop()
    sizes = {len(v) for k, v in data.items() if k not in exclude and
             ((isinstance(v, np.ndarray) and v.ndim > 0) or _is_sequence(v))}
    if not sizes:
        return 0
    if len(sizes) != 1:
        raise ValueError("flat dict fields have ambiguous batch sizes: %s; pass FieldSchema "
                         "metadata['section'] for list-valued metadata fields" % sorted(sizes))
    return sizes.pop()


def _flat_column(name, value, rows, schema=None):
    if isinstance(value, np.ndarray):
        if len(value) != rows:
            raise ValueError("flat dict non_tensor_batch field %r has batch size %d, expected %d"
                             % (name, len(value), rows))
        dt = schema_dtype(schema.metadata) if schema is not None else None
        if schema is not None and schema.codec == "ndarray" and dt is not None and \
                (value.dtype != object or all(v is not None for v in value)):
            return np.asarray(value, dtype=dt)
        return value
    if _is_sequence(value):
        if len(value) != rows:
            raise ValueError("flat dict non_tensor_batch field %r has batch size %d, expected %d"
                             % (name, len(value), rows))
        out = np.empty(rows, dtype=object)
        out[:] = list(value)
        return out
    raise TypeError("flat dict non_tensor_batch field %r must be an ndarray or non-string "
                    "sequence" % name)


def flat_dict_to_envelope(data, schemas=None):
    """A flat dict's fields sorted into sections: row-aligned tensors and arrays are batch,
    other row-aligned sequences non_tensor_batch, the rest meta_info (schemas may pin)."""
    if not isinstance(data, Mapping):
        raise TypeError("flat dict payload must be a mapping")
    schemas = schemas or {}
    fixed = _schema_rows(data, schemas)
    rows = fixed
    if rows == 0:
        rows = _auto_rows(data, {n for n, s in schemas.items()
                                 if n in data and schema_section(n, s) == "meta_info"})
    batch, non_tensor, meta = {}, {}, {}
    for key, value in data.items():
        schema = schemas.get(key)
        sec = None if schema is None else schema_section(key, schema)
        if sec is None:
            if _row_aligned_dense(value, rows):
                batch[key] = value
            elif fixed == 0 and _is_sequence(value) and len(value) == rows:
                non_tensor[key] = _flat_column(key, value, rows, schema)
            else:
                meta[key] = value
        elif sec == "batch":
            batch[key] = value
        elif sec == "non_tensor_batch":
            non_tensor[key] = _flat_column(key, value, rows, schema)
        else:
            meta[key] = value
    return {"batch": batch, "non_tensor_batch": non_tensor, "meta_info": meta}


def envelope_to_flat_dict(data):
    meta = mapping_to_dict(data.get("meta_info"))
    batch = mapping_to_dict(data.get("batch"))
    non_tensor = mapping_to_dict(data.get("non_tensor_batch"))
    overlap = (set(meta) & set(batch)) | (set(meta) & set(non_tensor)) | \
        (set(batch) & set(non_tensor))
    if overlap:
        raise ValueError("Duplicate keys found across DataProto sections: %s" % sorted(overlap))
    out = dict(meta)
    out.update(batch)
    for k, v in non_tensor.items():
        out[k] = v.tolist() if isinstance(v, np.ndarray) and v.dtype == object else v
    return out


def build_result(batch, non_tensor, meta, data_cls):
    if data_cls is None or data_cls is dict:
        return {"batch": batch, "non_tensor_batch": non_tensor, "meta_info": meta}
    from_dict = getattr(data_cls, "from_dict", None)
    try:
        if callable(from_dict):
            return from_dict(batch, non_tensor, meta_info=meta)
        return data_cls(batch=batch, non_tensor_batch=non_tensor, meta_info=meta)
    except TypeError as e:
        raise TypeError("%r cannot be constructed from batch, non_tensor_batch, and meta_info"
                        % getattr(data_cls, "__name__", data_cls)) from e


# ---------------------------------------------------------------- selections

def select_fields(ref, fields, batch_fields, non_tensor_fields):
    """(batch names, non_tensor names) a get asks for; KeyError for unknown ones."""
    if fields is not None and (batch_fields is not None or non_tensor_fields is not None):
        raise ValueError("fields cannot be combined with batch_fields or non_tensor_fields")
    if fields is not None:
        names = list(fields)
        _check_known(ref, names)
        return ([n for n in names if ref.field_index[n].section == "batch"],
                [n for n in names if ref.field_index[n].section == "non_tensor_batch"])
    if batch_fields is None and non_tensor_fields is None:
        b = [n for n, loc in ref.field_index.items() if loc.section == "batch"]
        nt = [n for n, loc in ref.field_index.items() if loc.section == "non_tensor_batch"]
    else:
        b = [] if batch_fields is None else list(batch_fields)
        nt = [] if non_tensor_fields is None else list(non_tensor_fields)
    _check_known(ref, b + nt)
    return b, nt


def _check_known(ref, names):
    missing = [n for n in names if n not in ref.field_index]
    if missing:
        raise KeyError("unknown DataProto fields: %s" % missing)


def slice_count(sl, total):
    start, end, step = normalized_slice(sl, total)
    return 0 if start >= end else 1 + (end - 1 - start) // step


def row_selection(rows, total):
    """A get's rows argument as a RowSelection (None: every row)."""
    if rows is None:
        return None
    if isinstance(rows, StructuredMemberSlice):
        if rows.axis != 0:
            raise ValueError("DataProto row slicing currently supports axis=0 only")
        return RowSelection(slice_count(rows, total), member_slice=rows)
    if isinstance(rows, slice):
        start, end, step = rows.indices(total)
        if step <= 0:
            raise ValueError("DataProto row slicing step must be positive")
        sl = StructuredMemberSlice(axis=0, start=start, end=end, step=step)
        return RowSelection(slice_count(sl, total), member_slice=sl)
    if isinstance(rows, Sequence) and not isinstance(rows, (str, bytes, bytearray)):
        picked = []
        for i in rows:
            if not isinstance(i, (int, np.integer)):
                raise TypeError("DataProto row indices must be integers")
            j = int(i) + (total if int(i) < 0 else 0)
            if not 0 <= j < total:
                raise IndexError("DataProto row index %s out of range for %d rows" % (i, total))
            picked.append(j)
        return RowSelection(len(picked), indices=tuple(picked))
    raise TypeError("DataProto rows must be a slice, StructuredMemberSlice, or row index "
                    "sequence")


def selection_indices(sel, total):
    if sel.indices is not None:
        return list(sel.indices)
    return list(range(*normalized_slice(sel.member_slice, total)))


def object_column(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
