# SPDX-License-Identifier: Apache-2.0
"""Codec choice for the structured object store's non_tensor_batch columns.

infer_structure() expands a column of dicts and short lists into interior nodes and leaf
columns; choose_leaf_codec() picks a leaf's codec from its values, as upstream 0.3.13's writer
does, so the same column encodes the same way with either package.  encode_inferred() is the
default path of a DataProto put, encode_with_schema() the path of a FieldSchema (its "auto"
codec falls back from the inferred codec to msgpack_ragged, then json_ragged), and decode()
reads any of them back, structured_recursive columns included.  Pure functions; no state.
"""
from collections.abc import Mapping

import numpy as np

from mooncake import _msgpack
from mooncake._structured_codecs import (
    FALLBACK_ERRORS, INFER_MAX_DEPTH, INFER_MAX_LIST_LEN, INFER_MAX_STRUCT_KEYS, MISSING, CodecDecision, EncodedLeaf,
    InferredLeaf, InferredNode, _Missing, decode_leaf, decode_ragged_tensor_dict,
    encode_bytes_like, encode_media_list, encode_msgpack_ragged, encode_numeric_scalar,
    encode_ragged_tensor, encode_ragged_tensor_dict, encode_typed_ragged, is_bytes_like, is_pil_image, json_bytes,
    loaded_torch)


# ---------------------------------------------------------------- inference

def _non_null(values):
    return [v for v in values if v is not None and not isinstance(v, _Missing)]


def _is_media_list(value):
    return isinstance(value, (list, tuple)) and all(is_pil_image(i) or is_bytes_like(i)
                                                    for i in value)


def choose_leaf_codec(values):
    """The codec for one column of leaf values."""
    nn = _non_null(values)
    if not nn:
        return CodecDecision(False, "msgpack_ragged", "all rows are null", "msgpack")
    torch = loaded_torch()
    if torch is not None and all(isinstance(v, torch.Tensor) for v in nn):
        dtypes = {v.dtype for v in nn}
        if len(dtypes) != 1:
            return CodecDecision(False, "ragged_tensor", "mixed tensor dtype: %s"
                                 % sorted(str(d) for d in dtypes), "torch.Tensor")
        return CodecDecision(True, "ragged_tensor", "all non-null rows are Tensor",
                             "torch.Tensor", {"dtype": str(nn[0].dtype)})
    if all(_is_media_list(v) for v in nn):
        return CodecDecision(True, "media_list_ragged", "all rows are media lists", "media list")
    if all(isinstance(v, np.ndarray) for v in nn):
        if all(np.issubdtype(v.dtype, np.number) for v in nn):
            return CodecDecision(True, "typed_ragged", "all rows are numeric ndarray",
                                 "numeric sequence", {"recursive_source": "ndarray"})
        return CodecDecision(False, "msgpack_ragged", "object ndarray rows", "python object")
    if all(isinstance(v, (list, tuple)) for v in nn):
        try:
            dtype = np.result_type(*[np.asarray(v).dtype for v in nn])
        except (TypeError, ValueError, OverflowError):
            dtype = None
        if dtype is not None and np.issubdtype(dtype, np.number):
            return CodecDecision(True, "typed_ragged", "all rows are numeric sequences",
                                 "numeric sequence", {"dtype": str(dtype)})
    if all(isinstance(v, (bool, int, float, np.number)) for v in nn):
        return CodecDecision(True, "ndarray", "all rows are numeric scalar", "numeric scalar",
                             {"dtype": str(np.result_type(*nn))})
    if all(is_bytes_like(v) for v in nn):
        return CodecDecision(True, "bytes_ragged", "all rows are bytes-like", "bytes-like")
    if all(is_pil_image(v) for v in nn):
        return CodecDecision(True, "media_bytes", "all rows are media", "media")
    if all(isinstance(v, str) for v in nn):
        return CodecDecision(True, "utf8_ragged", "all rows are str", "str")
    if all(isinstance(v, (dict, list, tuple)) for v in nn):
        return CodecDecision(True, "msgpack_ragged", "all rows are msgpack-like", "msgpack")
    return CodecDecision(False, "msgpack_ragged", "no codec matched", "python object")


def escape_key(key):
    return key.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[")


def _dict_keys(values):
    nn = _non_null(values)
    if not nn or not all(isinstance(v, dict) for v in nn):
        return None
    keys = {k for v in nn for k in v}
    if not all(isinstance(k, str) for k in keys) or len(keys) > INFER_MAX_STRUCT_KEYS:
        return None
    return sorted(keys)


def _list_shape(values):
    nn = _non_null(values)
    if not nn or not all(isinstance(v, (list, tuple)) for v in nn):
        return None
    longest = max(len(v) for v in nn)
    if longest > INFER_MAX_LIST_LEN:
        return None
    if not all(i is None or isinstance(i, (dict, list, tuple)) for v in nn for i in v):
        return None
    return longest, [len(v) if isinstance(v, (list, tuple)) else 0 for v in values]


def infer_structure(path, values, leaves, nodes, *, _depth=0):
    """Expand values (one per row) into interior nodes (dicts with string keys, short lists of
    containers) and leaf columns, appended to nodes and leaves.  A key a row lacks is MISSING
    in the child column; a row whose value is not a container is None there."""
    if _depth > INFER_MAX_DEPTH:
        raise ValueError("infer_structure exceeded max depth %d at %r" % (INFER_MAX_DEPTH, path))
    keys = _dict_keys(values)
    if keys is not None:
        nodes.append(InferredNode(path, "dict", keys,
                                  row_mask=[isinstance(v, dict) for v in values]))
        for k in keys:
            child = [v.get(k, MISSING) if isinstance(v, dict) else None for v in values]
            infer_structure("%s.%s" % (path, escape_key(k)), child, leaves, nodes,
                            _depth=_depth + 1)
        return
    shape = _list_shape(values)
    if shape is not None:
        longest, lengths = shape
        nodes.append(InferredNode(path, "list", list(range(longest)), lengths,
                                  row_mask=[isinstance(v, (list, tuple)) for v in values]))
        for i in range(longest):
            child = []
            for v in values:
                if isinstance(v, (list, tuple)):
                    child.append(v[i] if i < len(v) else MISSING)
                else:
                    child.append(None)
            infer_structure("%s[%d]" % (path, i), child, leaves, nodes, _depth=_depth + 1)
        return
    leaves.append(InferredLeaf(path, values, choose_leaf_codec(values)))

# ---------------------------------------------------------------- leaf and field encoders

def encode_leaf(values, decision):
    """EncodedLeaf of one column under an accepted decision (inference's path)."""
    if not decision.accepted:
        raise ValueError("unsupported structured non-tensor field: %s" % decision.reason)
    codec = decision.codec
    if codec == "ragged_tensor":
        payload, meta = encode_ragged_tensor(values)
    elif codec == "typed_ragged":
        payload, meta = encode_typed_ragged(values)
    elif codec == "media_list_ragged":
        payload, meta = encode_media_list(values)
    elif codec == "ndarray":
        payload, meta = encode_numeric_scalar(values, decision.metadata["dtype"])
    elif codec in ("bytes_ragged", "media_bytes"):
        payload, meta = encode_bytes_like(values)
    elif codec == "utf8_ragged":
        payload, meta = encode_bytes_like([None if v is None else v.encode("utf-8")
                                           for v in values])
    elif codec == "msgpack_ragged":
        payload, meta = encode_bytes_like([None if v is None else _msgpack.packb(v)
                                           for v in values])
    elif codec == "json_ragged":
        payload, meta = encode_bytes_like([None if v is None else json_bytes(v)
                                           for v in values])
    else:
        raise ValueError("unsupported structured non-tensor codec: %s" % codec)
    meta.update({"schema_source": "inferred_from_runtime_values",
                 "decision_reason": decision.reason,
                 "normalized_type": decision.normalized_type, **decision.metadata})
    return EncodedLeaf(codec, len(values), payload, meta)


def schema_dtype(schema_metadata, required=False):
    name = schema_metadata.get("dtype")
    if name is None:
        if required:
            raise ValueError("FieldSchema metadata['dtype'] is required")
        return None
    try:
        dt = np.dtype(name)
    except (TypeError, ValueError) as e:
        raise ValueError("invalid FieldSchema metadata['dtype']: %r" % (name,)) from e
    if dt.kind not in "biufc":
        raise ValueError("FieldSchema metadata['dtype'] must be numeric or bool, got %s" % dt)
    return dt


def check_nullable(path, values, nullable):
    if not nullable and any(v is None for v in values):
        raise ValueError("FieldSchema for %r is not nullable" % path)


def encode_with_schema(path, value, codec, schema_metadata, nullable=True):
    """EncodedLeaf of the column value (an object ndarray) under the codec a schema names."""
    values = list(value)
    check_nullable(path, values, nullable)
    if codec == "auto":
        return encode_with_fallback(path, value)
    if codec == "ragged_tensor_dict":
        return encode_ragged_tensor_dict(values, schema_metadata)
    if codec == "ragged_tensor":
        payload, meta = encode_ragged_tensor(values)
    elif codec == "typed_ragged":
        payload, meta = encode_typed_ragged(values, schema_dtype(schema_metadata))
    elif codec == "ndarray":
        dt = schema_dtype(schema_metadata)
        if dt is None:
            return encode_with_fallback(path, value)
        payload, meta = encode_numeric_scalar(values, str(dt))
    elif codec in ("bytes_ragged", "media_bytes"):
        payload, meta = encode_bytes_like(values)
    elif codec == "media_list_ragged":
        payload, meta = encode_media_list(values)
    elif codec == "utf8_ragged":
        payload, meta = encode_bytes_like([None if v is None else v.encode("utf-8")
                                           for v in values])
    elif codec == "msgpack_ragged":
        payload, meta = encode_msgpack_ragged(path, values)
    elif codec == "json_ragged":
        payload, meta = encode_bytes_like([None if v is None else json_bytes(v)
                                           for v in values])
    else:
        raise ValueError("unsupported schema codec: %r" % (codec,))
    return EncodedLeaf(codec, len(values), payload, meta)


def _plain_scalar(v):
    """v with numpy values turned into Python ones (for the msgpack and JSON fallbacks)."""
    if isinstance(v, np.ndarray):
        return _plain_scalar(v.tolist()) if v.dtype == object else v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Mapping):
        return {k: _plain_scalar(i) for k, i in v.items()}
    if isinstance(v, (tuple, list)):
        return [_plain_scalar(i) for i in v]
    return v


def _for_codec(values, codec):
    return [_plain_scalar(v) for v in values] if codec in ("msgpack_ragged",
                                                           "json_ragged") else values


def _lookup(value, root, target):
    """The value at target (a path under root) inside one row's value, or MISSING."""
    suffix = target[len(root):]
    if suffix.startswith("."):
        suffix = suffix[1:]
    cur = value
    for tok in path_tokens(suffix):
        if isinstance(cur, _Missing):
            return MISSING
        if isinstance(tok, str):
            if not isinstance(cur, dict) or tok not in cur:
                return MISSING
        elif not isinstance(cur, (list, tuple)) or tok >= len(cur):
            return MISSING
        cur = cur[tok]
    return cur


def path_tokens(path):
    """The keys (str) and list indexes (int) of an escaped path like a\\.b.c[2]."""
    toks, cur, i = [], [], 0
    while i < len(path):
        c = path[i]
        if c == "\\" and i + 1 < len(path):
            cur.append(path[i + 1])
            i += 2
        elif c == ".":
            if cur:
                toks.append("".join(cur))
                cur = []
            i += 1
        elif c == "[":
            if cur:
                toks.append("".join(cur))
                cur = []
            end = path.index("]", i)
            toks.append(int(path[i + 1:end]))
            i = end + 1
        else:
            cur.append(c)
            i += 1
    if cur:
        toks.append("".join(cur))
    return toks


def _encode_recursive(path, values, leaves, nodes, leaf_encoder):
    payload, node_specs, leaf_specs = {}, [], []
    for nid, node in enumerate(nodes):
        spec = {"id": nid, "path": node.path, "node_type": node.node_type,
                "children": list(node.children)}
        name = "node.%d.missing" % nid
        payload[name] = np.asarray([_lookup(v, path, node.path) is MISSING for v in values],
                                   dtype=np.bool_)
        spec["missing_payload"] = name
        if node.row_mask is not None:
            payload["node.%d.row_mask" % nid] = np.asarray(node.row_mask, dtype=np.bool_)
            spec["row_mask_payload"] = "node.%d.row_mask" % nid
        if node.lengths is not None:
            payload["node.%d.lengths" % nid] = np.asarray(node.lengths, dtype=np.int64)
            spec["lengths_payload"] = "node.%d.lengths" % nid
        node_specs.append(spec)
    for lid, leaf in enumerate(leaves):
        missing = np.asarray([isinstance(v, _Missing) for v in leaf.values], dtype=np.bool_)
        column = [None if m else v for m, v in zip(missing, leaf.values)]
        decision = leaf.decision
        if not decision.accepted and all(v is None or isinstance(v, _Missing)
                                         for v in leaf.values):
            decision = CodecDecision(True, "json_ragged", "all rows are null or missing",
                                     "json")
        enc = leaf_encoder(leaf.path, column, decision)
        members = {}
        for pname, pvalue in enc.payload.items():
            payload["leaf.%d.%s" % (lid, pname)] = pvalue
            members[pname] = "leaf.%d.%s" % (lid, pname)
        payload["leaf.%d.missing" % lid] = missing
        members["missing"] = "leaf.%d.missing" % lid
        leaf_specs.append({"id": lid, "path": leaf.path, "codec": enc.codec, "rows": enc.rows,
                           "metadata": enc.metadata, "payload_members": members})
    return EncodedLeaf("structured_recursive", len(values), payload,
                       {"schema_source": "inferred_from_runtime_values",
                        "structure_version": 1, "root_path": path, "nodes": node_specs,
                        "leaves": leaf_specs})


_RECURSIVE_CODECS = ("ragged_tensor", "bytes_ragged", "media_bytes", "media_list_ragged")


def encode_inferred(path, value):
    """EncodedLeaf of an object ndarray column, codec chosen from its values."""
    values = list(value)
    leaves, nodes = [], []
    infer_structure(path, values, leaves, nodes)
    if nodes and any(lf.decision.codec in _RECURSIVE_CODECS or
                     (lf.decision.codec == "typed_ragged" and
                      any(isinstance(v, np.ndarray) for v in _non_null(lf.values)))
                     for lf in leaves):
        return _encode_recursive(path, values, leaves, nodes,
                                 lambda _p, col, d: encode_leaf(col, d))
    return encode_leaf(values, choose_leaf_codec(values))


def _schema_leaf(p, col, d):
    # np.asarray, not a 1-D object array: rows that are equal-length lists become a 2-D
    # array here, as upstream's writer makes them, so the codec that accepts them matches.
    return encode_with_schema(p, np.asarray(_for_codec(col, d.codec), dtype=object), d.codec,
                              d.metadata)


def encode_with_fallback(path, value):
    """The "auto" schema codec: recursive expansion where it helps, else the inferred codec,
    then msgpack_ragged, then json_ragged, whichever first encodes."""
    values = list(value)
    errors = []
    try:
        leaves, nodes = [], []
        infer_structure(path, values, leaves, nodes)
        if nodes and any((lf.decision.codec == "typed_ragged" and
                          lf.decision.metadata.get("recursive_source") == "ndarray") or
                         lf.decision.codec in _RECURSIVE_CODECS for lf in leaves):
            return _encode_recursive(path, values, leaves, nodes, _schema_leaf)
    except FALLBACK_ERRORS as e:
        errors.append("structured_recursive: %s" % e)
    decision = choose_leaf_codec(values)
    codecs = [decision.codec] + [c for c in ("msgpack_ragged", "json_ragged")
                                 if c != decision.codec]
    for codec in codecs:
        meta = dict(decision.metadata or {}) if codec == decision.codec else {}
        try:
            return encode_with_schema(path, np.asarray(_for_codec(values, codec), dtype=object),
                                      codec, meta)
        except FALLBACK_ERRORS as e:
            errors.append("%s: %s" % (codec, e))
    raise ValueError("unable to infer a safe codec for structured non-tensor field %r; tried %s"
                     % (path, errors))

def _child_path(node, child):
    if node["node_type"] == "dict":
        return "%s.%s" % (node["path"], escape_key(str(child)))
    return "%s[%d]" % (node["path"], int(child))


def _decode_recursive(metadata, payload, rows):
    by_path = {}
    for leaf in metadata.get("leaves", []):
        members = leaf["payload_members"]
        sub = {n: payload[g] for n, g in members.items() if n != "missing"}
        column = decode_leaf(leaf["codec"], sub, rows, leaf.get("metadata"))
        missing = payload[members["missing"]]
        by_path[leaf["path"]] = [MISSING if missing[r] else column[r] for r in range(rows)]
    depth = (lambda n: n["path"].count(".") + n["path"].count("["))
    for node in sorted(metadata.get("nodes", []), key=depth, reverse=True):
        missing = payload[node["missing_payload"]] if node.get("missing_payload") else None
        mask = payload[node["row_mask_payload"]] if node.get("row_mask_payload") else None
        lengths = payload[node["lengths_payload"]] if node.get("lengths_payload") else None
        column = []
        for r in range(rows):
            if missing is not None and missing[r]:
                column.append(MISSING)
            elif mask is not None and not mask[r]:
                column.append(None)
            elif node["node_type"] == "dict":
                item = {}
                for child in node["children"]:
                    v = by_path[_child_path(node, child)][r]
                    if not isinstance(v, _Missing):
                        item[child] = v
                column.append(item)
            else:
                n = int(lengths[r]) if lengths is not None else len(node["children"])
                item = [None] * n
                for child in node["children"]:
                    if int(child) < n:
                        v = by_path[_child_path(node, child)][r]
                        if not isinstance(v, _Missing):
                            item[int(child)] = v
                column.append(item)
        by_path[node["path"]] = column
    return by_path[metadata["root_path"]]


def decode(encoded, payload, rows, metadata=None):
    """The row values of an encoded field (its ref entry: codec, metadata, ...) from its
    payloads."""
    codec = encoded.get("codec")
    meta = metadata if metadata is not None else encoded.get("metadata")
    if codec == "ragged_tensor_dict":
        return decode_ragged_tensor_dict(payload, rows, meta or {})
    if codec == "structured_recursive":
        return _decode_recursive(meta or {}, payload, rows)
    return decode_leaf(codec, payload, rows, meta)
