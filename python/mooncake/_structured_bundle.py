# SPDX-License-Identifier: Apache-2.0
"""Bundles and structured objects in Mooncake, in upstream 0.3.13's on-store layout.

A bundle is a JSON manifest plus payloads.  Keys, under the transfer's key prefix P:
  P/<partition>/<32 hex>/manifest        {"version":1,"layout":"bundle","object_id":
                                          "<partition>/<hex>","meta":SPEC,"buffers":{name:SPEC}}
  P/<partition>/<hex>/meta               the metadata bytes
  P/<partition>/<hex>/buffer/<name>      one payload; above chunk_bytes it is split into
                                         .../buffer/<name>/chunk/<i>
A payload SPEC is {"key":K,"bytes":N,"chunks":[{"key":..,"bytes":..}]} (an empty payload has
no chunks and no object).  A tensor put through put_tensor/pub_tensor adds "kind":"tensor",
"dtype", "shape" and "metadata_bytes" (its 304-byte header).  An appended DataProto stage's
manifest may point at payloads of earlier bundles ("buffer_object_ids") and lists the keys
that go with it ("cleanup_keys").  JSON is written compactly (separators "," and ":").

Structured objects (_structured_members) are bundles whose meta is JSON metadata.

Everything read back is checked against the manifest (keys inside the bundle's namespace,
chunk sizes adding up) before use.  Single-threaded: a transfer object is used by one thread.
"""
import ctypes
import io
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np

from mooncake._structured_codecs import Parts, loaded_torch

DEFAULT_BUNDLE_CHUNK_BYTES = 64 * 1024 ** 2
AUTO_PARALLEL_MIN_BYTES = DEFAULT_BUNDLE_CHUNK_BYTES
AUTO_PARALLEL_MIN_CHUNKS = 8
MISSING_OBJECT_ERROR = -704
STRUCTURED_FIELD_SPECS_KEY = "__mooncake_structured_fields__"
TENSOR_HEADER_BYTES = 304


@dataclass(frozen=True)
class BundleTransferPolicy:
    """How puts are issued.  Every put here goes out in one batch per payload, so the modes
    only validate (zero_copy still refuses what it cannot do without copying)."""

    max_inflight_put: int = 1
    put_mode: str = "auto"
    copy_mode: str = "auto"


@dataclass
class RemoteBundleRef:
    """A stored bundle: its manifest key and (when known) the manifest."""

    manifest_key: str
    manifest: dict


@dataclass(frozen=True, init=False)
class StructuredObjectPayload:
    """An object to store: JSON metadata plus named members."""

    metadata: Mapping
    buffers: Mapping

    def __init__(self, metadata=None, buffers=None):
        if buffers is None:
            raise TypeError("StructuredObjectPayload requires buffers")
        object.__setattr__(self, "metadata", {} if metadata is None else metadata)
        object.__setattr__(self, "buffers", buffers)


@dataclass
class StructuredObjectResult:
    metadata: dict
    objects: dict


@dataclass(frozen=True)
class StructuredMemberSlice:
    axis: int
    start: int
    end: int
    step: int = 1


@dataclass(frozen=True)
class StructuredObjectReadSpec:
    """What materialize reads: which members, and row slices of some."""

    ref: Any
    member_names: Optional[tuple] = None
    member_slices: tuple = ()

    def select_members(self, names):
        return StructuredObjectReadSpec(self.ref, None if names is None else tuple(names),
                                        self.member_slices)

    def slice_member(self, name, axis, start, end, step=1):
        slices = dict(self.member_slices)
        slices[name] = StructuredMemberSlice(axis=axis, start=start, end=end, step=step)
        return StructuredObjectReadSpec(self.ref, self.member_names, tuple(slices.items()))

    def member_slice(self, name):
        return dict(self.member_slices).get(name)


@dataclass(frozen=True)
class TensorObjectBuffer:
    """Memory holding [tensor header][data] (a member to put), or room to read one into."""

    ptr: int
    size: int
    owner: Any
    batch_size: Optional[int] = None

    def __len__(self):
        if self.batch_size is None:
            raise TypeError("tensor object buffer requires batch_size for DataProto use")
        return self.batch_size


class RawDestination:
    """Caller memory a member's bytes are read into."""

    __slots__ = ("ptr", "size", "owner", "pre_registered")

    def __init__(self, ptr, size, owner=None, pre_registered=False):
        self.ptr, self.size, self.owner, self.pre_registered = ptr, size, owner, pre_registered


class TensorValue:
    """A tensor member (wrapped so the bundle layer knows to put it as a tensor)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


class ByteParts:
    """Several byte buffers stored back to back as one payload (nested tensor parts)."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = [memoryview(p).cast("B") for p in parts]


# ---------------------------------------------------------------- validation helpers

def validate_chunk_bytes(n):
    if n <= 0:
        raise ValueError("chunk_bytes must be positive")
    return n


def normalize_key_prefix(prefix):
    p = prefix.strip("/")
    if not p or any(ord(c) < 32 for c in p):
        raise ValueError("key_prefix must be a non-empty key prefix")
    return p


def validate_key_segment(value, what):
    if not isinstance(value, str) or not value or "/" in value or \
            any(ord(c) < 32 for c in value):
        raise ValueError("invalid bundle %s: %r" % (what, value))


def encode_json(value, label):
    try:
        return json.dumps(value, separators=(",", ":")).encode("utf-8")
    except TypeError as e:
        raise TypeError("%s must be JSON-serializable" % label) from e


def decode_json(payload, label):
    value = json.loads(bytes(payload).decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError("%s must decode to a dict" % label)
    return value


def check_policy(policy, max_inflight_put=None):
    p = policy or BundleTransferPolicy()
    if max_inflight_put is not None:
        p = BundleTransferPolicy(max_inflight_put, p.put_mode, p.copy_mode)
    if p.max_inflight_put < 1:
        raise ValueError("max_inflight_put must be positive")
    if p.put_mode not in ("auto", "batch", "parallel"):
        raise ValueError("unsupported put_mode: %s" % p.put_mode)
    if p.copy_mode not in ("auto", "zero_copy", "copy"):
        raise ValueError("unsupported copy_mode: %s" % p.copy_mode)
    return p


def _bytes_view(value, name):
    try:
        v = memoryview(value)
    except TypeError as e:
        raise TypeError("%s must be bytes-like, got %s" % (name, type(value).__name__)) from e
    if not v.contiguous:
        v = memoryview(v.tobytes())
    return v.cast("B")


def check_status(status, op, key):
    if status not in (None, 0):
        raise RuntimeError("%s failed for %s: %s" % (op, key, status))


# ---------------------------------------------------------------- write configs

_CONFIG_FIELDS = ("data_type", "group_ids", "nof_replica_num", "prefer_alloc_in_same_node",
                  "preferred_nof_segments", "preferred_segment", "preferred_segments",
                  "replica_num", "with_hard_pin", "with_soft_pin")


def copy_config(config):
    import copy
    try:
        return copy.copy(config)
    except TypeError:
        pass
    try:
        out = type(config)()
    except Exception as e:
        raise TypeError("structured object store config must be copyable or "
                        "default-constructible") from e
    for name in _CONFIG_FIELDS:
        if hasattr(config, name):
            v = getattr(config, name)
            setattr(out, name, list(v) if isinstance(v, list) else v)
    return out


def config_for_keys(config, count):
    """config with its one logical group id repeated once per physical key."""
    if config is None or count <= 0:
        return config
    ids = getattr(config, "group_ids", None)
    if ids is None:
        return config
    as_list = isinstance(ids, str)
    ids = [ids] if as_list else list(ids)
    if not ids:
        out = copy_config(config)
        out.group_ids = None
        return out
    if len(ids) != 1:
        raise ValueError("structured object store config.group_ids must contain exactly one "
                         "logical group id; it is expanded across internal Mooncake keys")
    if count == 1 and not as_list:
        return config
    out = copy_config(config)
    out.group_ids = [ids[0]] * count
    return out


def config_with_group(config, group_id):
    have = getattr(config_for_keys(config, 1), "group_ids", None)
    if have and have[0] and have[0] != group_id:
        raise ValueError("config.group_ids conflicts with the DataProto storage group")
    if config is None:
        try:
            from mooncake.store import ReplicateConfig
            out = ReplicateConfig()
        except ImportError:
            out = SimpleNamespace()
    else:
        out = copy_config(config)
    out.group_ids = [group_id]
    return out


def cleanup_keys(store, keys, strict):
    """Remove keys (already-missing ones are fine); strict raises on the first failure."""
    pending = list(dict.fromkeys(keys))
    batch_remove = getattr(store, "batch_remove", None)
    if callable(batch_remove) and pending:
        try:
            try:
                codes = batch_remove(pending, True)
            except TypeError:
                codes = batch_remove(pending)
            if len(codes) != len(pending):
                raise RuntimeError("batch_remove returned %d results for %d keys"
                                   % (len(codes), len(pending)))
            pending = [k for k, c in zip(pending, codes)
                       if c not in (None, 0, MISSING_OBJECT_ERROR)]
            if not pending:
                return
        except Exception:
            if strict:
                raise
    failed = []
    for k in pending:
        try:
            c = store.remove(k, True)
        except KeyError:
            continue
        except Exception:
            if strict:
                raise
            continue
        if c not in (None, 0, MISSING_OBJECT_ERROR):
            failed.append((k, c))
    if failed and strict:
        raise RuntimeError("failed to remove %d Mooncake keys: %s" % (len(failed), failed[:3]))


# ---------------------------------------------------------------- payload chunking

def _split(view, chunk_bytes):
    return [view[i:i + chunk_bytes] for i in range(0, len(view), chunk_bytes)] or [view]


def _split_parts(parts, chunk_bytes):
    """Byte buffers cut into groups of exactly chunk_bytes (the last may be shorter)."""
    groups, cur, have = [], [], 0
    for p in parts:
        off = 0
        while off < len(p):
            piece = p[off:off + chunk_bytes - have]
            cur.append(piece)
            have += len(piece)
            off += len(piece)
            if have == chunk_bytes:
                groups.append(cur)
                cur, have = [], 0
    if cur:
        groups.append(cur)
    return groups


def _group_arrays(arrays, chunk_bytes):
    """Whole arrays grouped so no group passes chunk_bytes; None if one array alone does."""
    groups, cur, have = [], [], 0
    for a in arrays:
        n = a.nbytes
        if n > chunk_bytes:
            return None
        if have + n > chunk_bytes and have > 0:
            groups.append(cur)
            cur, have = [], 0
        cur.append(memoryview(a).cast("B"))
        have += n
    if have > 0:
        groups.append(cur)
    return groups


def chunk_keys(key, count):
    return [key] if count == 1 else ["%s/chunk/%d" % (key, i) for i in range(count)]


def payload_fragments(chunks, offset, length):
    """[(chunk key, chunk bytes, offset in the read, offset in the chunk, length)] of the
    chunks a byte range of a payload covers."""
    out, pos, end = [], 0, offset + length
    for c in chunks:
        size = int(c["bytes"])
        lo, hi = max(offset, pos), min(end, pos + size)
        if lo < hi:
            out.append((c["key"], size, lo - offset, lo - pos, hi - lo))
        pos += size
    return out


class BundleStoreLayer:
    """Bundles (manifest + payloads) over a store with put/get/remove/is_exist."""

    def __init__(self, store, key_prefix, default_chunk_bytes):
        self.store, self.prefix, self.chunk_bytes = store, key_prefix, default_chunk_bytes

    # -------------------------------------------------------- writes

    def _put_groups(self, keys, groups, config):
        """Store each group of buffers (concatenated) under its key."""
        one = config_for_keys(config, 1)
        put_parts = getattr(self.store, "put_parts", None)
        for k, g in zip(keys, groups):
            if len(g) > 1 and callable(put_parts):
                rc = put_parts(k, *g) if one is None else put_parts(k, *g, config=one)
                check_status(rc, "put_parts", k)
                continue
            data = g[0] if len(g) == 1 else b"".join(bytes(x) for x in g)
            rc = self.store.put(k, data) if one is None else self.store.put(k, data, config=one)
            check_status(rc, "put", k)

    def put_payload(self, key, view, chunk_bytes, config):
        if len(view) == 0:
            return {"key": key, "bytes": 0, "chunks": []}, []
        chunks = _split(view, chunk_bytes)
        keys = chunk_keys(key, len(chunks))
        self._put_groups(keys, [[c] for c in chunks], config)
        return ({"key": key, "bytes": len(view),
                 "chunks": [{"key": k, "bytes": len(c)} for k, c in zip(keys, chunks)]}, keys)

    def _put_grouped(self, key, groups, total, config):
        keys = chunk_keys(key, len(groups))
        self._put_groups(keys, groups, config)
        return ({"key": key, "bytes": total,
                 "chunks": [{"key": k, "bytes": sum(len(p) for p in g)}
                            for k, g in zip(keys, groups)]}, keys)

    def put_parts_payload(self, key, value, chunk_bytes, policy, config):
        """Parts (whole arrays per chunk) or ByteParts (cut at chunk_bytes)."""
        if isinstance(value, Parts):
            if policy.copy_mode == "zero_copy":
                raise RuntimeError("zero-copy put requires tensor-object buffers")
            total = value.nbytes
            if total == 0:
                return {"key": key, "bytes": 0, "chunks": []}, []
            if len(value.arrays) == 1:
                return self.put_payload(key, memoryview(value.arrays[0]).cast("B"),
                                        chunk_bytes, config)
            groups = _group_arrays(value.arrays, chunk_bytes)
            if groups is None:
                whole = np.concatenate([a.view(np.uint8).reshape(-1) for a in value.arrays])
                return self.put_payload(key, memoryview(whole).cast("B"), chunk_bytes, config)
            return self._put_grouped(key, groups, total, config)
        total = sum(len(p) for p in value.parts)
        if total == 0:
            return {"key": key, "bytes": 0, "chunks": []}, []
        if len(value.parts) == 1:
            return self.put_payload(key, value.parts[0], chunk_bytes, config)
        return self._put_grouped(key, _split_parts(value.parts, chunk_bytes), total, config)

    def put_tensor_payload(self, key, value, policy, config):
        """A tensor member: put_tensor/pub_tensor where the store has them (the object is
        header + data), else its header + data bytes as a plain payload."""
        if isinstance(value, TensorObjectBuffer):
            put_from = getattr(self.store, "put_from", None)
            put_tensor_from = getattr(self.store, "put_tensor_from", None)
            cfg = config_for_keys(config, 1)
            if cfg is None and callable(put_tensor_from):
                rc = put_tensor_from(key, value.ptr, value.size)
            elif callable(put_from):
                rc = put_from(key, value.ptr, value.size) if cfg is None else \
                    put_from(key, value.ptr, value.size, config=cfg)
            else:
                raise RuntimeError("put_from is unavailable")
            check_status(rc, "put_from", key)
            return ({"key": key, "bytes": value.size,
                     "chunks": [{"key": key, "bytes": value.size}]}, [key])
        tensor = value.tensor
        if policy.copy_mode == "zero_copy":
            raise ValueError("zero-copy structured tensor fields require a BufferPool "
                             "tensor-object buffer")
        if policy.copy_mode != "copy":
            put = getattr(self.store, "put_tensor" if config is None else "pub_tensor", None)
            if callable(put):
                nbytes = int(getattr(tensor, "nbytes", 0))
                cfg = config_for_keys(config, 1)
                rc = put(key, tensor) if cfg is None else put(key, tensor, config=cfg)
                check_status(rc, "put_tensor", key)
                total = TENSOR_HEADER_BYTES + nbytes
                return ({"key": key, "kind": "tensor", "bytes": total,
                         "dtype": str(getattr(tensor, "dtype", "")),
                         "shape": list(getattr(tensor, "shape", ())),
                         "chunks": [{"key": key, "bytes": total}],
                         "metadata_bytes": TENSOR_HEADER_BYTES}, [key])
        if tensor.dim() == 0:
            data = torch_save_bytes(tensor)
            spec, keys = self.put_payload(key, memoryview(data), len(data) or 1, config)
            spec["format"] = "torch_save"
            return spec, keys
        data = tensor_bytes(tensor)
        spec, keys = self.put_payload(key, memoryview(data), len(data) or 1, config)
        spec["metadata_bytes"] = TENSOR_HEADER_BYTES
        return spec, keys

    def put_member(self, key, value, chunk_bytes, policy, config):
        if isinstance(value, (TensorValue, TensorObjectBuffer)):
            return self.put_tensor_payload(key, value, policy, config)
        if isinstance(value, (Parts, ByteParts)):
            return self.put_parts_payload(key, value, chunk_bytes, policy, config)
        if policy.copy_mode == "zero_copy":
            raise RuntimeError("zero-copy put requires tensor-object buffers")
        return self.put_payload(key, _bytes_view(value, key.rsplit("/", 1)[-1]), chunk_bytes,
                                config)

    def _new_object(self, partition, chunk_bytes):
        validate_key_segment(partition, "partition")
        chunk = validate_chunk_bytes(self.chunk_bytes if chunk_bytes is None else chunk_bytes)
        oid = "%s/%s" % (partition, uuid.uuid4().hex)
        return oid, "%s/%s" % (self.prefix, oid), chunk

    def _put_manifest(self, key, manifest, config, written):
        rc = self.store.put(key, encode_json(manifest, "bundle manifest")) if \
            config_for_keys(config, 1) is None else \
            self.store.put(key, encode_json(manifest, "bundle manifest"),
                           config=config_for_keys(config, 1))
        check_status(rc, "put", key)
        written.append(key)

    def put_bundle(self, meta, buffers, partition, chunk_bytes, policy, max_inflight_put,
                   config=None):
        meta_view = _bytes_view(meta, "meta")
        oid, base, chunk = self._new_object(partition, chunk_bytes)
        policy = check_policy(policy, max_inflight_put)
        written, specs = [], {}
        try:
            meta_spec, keys = self.put_payload(base + "/meta", meta_view, chunk, config)
            written += keys
            for name, value in buffers.items():
                validate_key_segment(name, "buffer name")
                specs[name], keys = self.put_member("%s/buffer/%s" % (base, name), value, chunk,
                                                    policy, config)
                written += keys
            manifest = {"version": 1, "layout": "bundle", "object_id": oid, "meta": meta_spec,
                        "buffers": specs}
            self._put_manifest(base + "/manifest", manifest, config, written)
        except Exception:
            cleanup_keys(self.store, written, strict=False)
            raise
        return RemoteBundleRef(manifest_key=base + "/manifest", manifest=manifest)

    def put_bundle_manifest(self, meta, buffers, partition, chunk_bytes, cleanup, config=None):
        """A bundle whose buffers are payloads already stored (by earlier bundles)."""
        meta_view = _bytes_view(meta, "meta")
        oid, base, chunk = self._new_object(partition, chunk_bytes)
        written = []
        try:
            meta_spec, keys = self.put_payload(base + "/meta", meta_view, chunk, config)
            written += keys
            cleanup = list(dict.fromkeys(cleanup or []))
            owners = {self.object_id_of(str(s["key"])) for s in buffers.values()}
            owners.update(self.object_id_of(k) for k in cleanup)
            manifest = {"version": 1, "layout": "bundle", "object_id": oid, "meta": meta_spec,
                        "buffers": dict(buffers),
                        "buffer_object_ids": sorted(o for o in owners if o)}
            if cleanup:
                manifest["cleanup_keys"] = cleanup
            self.validate_manifest(manifest)
            self._put_manifest(base + "/manifest", manifest, config, written)
        except Exception:
            cleanup_keys(self.store, written, strict=False)
            raise
        return RemoteBundleRef(manifest_key=base + "/manifest", manifest=manifest)

    # -------------------------------------------------------- manifests

    def object_id_of(self, key):
        head = self.prefix + "/"
        if not key.startswith(head):
            return None
        rest = key[len(head):]
        for tail in ("/manifest", "/meta"):
            if rest.endswith(tail):
                return rest[:-len(tail)]
        for mark in ("/meta/", "/buffer/"):
            i = rest.find(mark)
            if i > 0:
                return rest[:i]
        return None

    def _check_payload(self, spec, bases):
        if not isinstance(spec, dict):
            raise ValueError("bundle payload spec must be a dict")
        key = spec.get("key")
        if not isinstance(key, str) or (bases is not None and
                                        not any(key.startswith(b + "/") for b in bases)):
            raise ValueError("bundle payload key is outside the bundle namespace")
        want = int(spec.get("bytes", -1))
        if want < 0:
            raise ValueError("bundle payload bytes must be non-negative")
        chunks = spec.get("chunks")
        if not isinstance(chunks, list) or (want and not chunks):
            raise ValueError("bundle payload chunks are invalid")
        seen, total = set(), 0
        for c in chunks:
            if not isinstance(c, dict):
                raise ValueError("bundle chunk must be a dict")
            ck, n = c.get("key"), int(c.get("bytes", -1))
            if not isinstance(ck, str) or (ck != key and not ck.startswith(key + "/")):
                raise ValueError("bundle chunk key is outside the payload namespace")
            if ck in seen:
                raise ValueError("bundle chunk keys must be unique")
            if n < 0:
                raise ValueError("bundle chunk bytes must be non-negative")
            seen.add(ck)
            total += n
        if total != want:
            raise ValueError("bundle payload chunks total %d bytes, expected %d" % (total, want))

    def validate_manifest(self, m):
        if m.get("version") != 1 or m.get("layout") != "bundle":
            raise ValueError("invalid bundle manifest")
        oid = m.get("object_id")
        if not isinstance(oid, str):
            raise ValueError("bundle manifest object_id must be a string")
        owners = m.get("buffer_object_ids", [oid])
        if not isinstance(owners, list) or not all(isinstance(o, str) for o in owners):
            raise ValueError("bundle manifest buffer_object_ids must be a list of strings")
        bases = ["%s/%s" % (self.prefix, o) for o in owners]
        self._check_payload(m.get("meta"), ["%s/%s" % (self.prefix, oid)])
        cleanup = m.get("cleanup_keys", [])
        if not isinstance(cleanup, list) or not all(
                isinstance(k, str) and any(k == b + "/manifest" or k.startswith(b + "/")
                                           for b in bases) for k in cleanup):
            raise ValueError("bundle manifest cleanup_keys are outside the bundle namespace")
        buffers = m.get("buffers")
        if not isinstance(buffers, dict):
            raise ValueError("bundle manifest buffers must be a dict")
        for name, spec in buffers.items():
            validate_key_segment(name, "buffer name")
            self._check_payload(spec, bases)

    def _fetch_manifest(self, key):
        if not isinstance(key, str):
            raise ValueError("bundle ref must include manifest_key")
        data = self.store.get(key)
        if not data:
            raise RuntimeError("get failed for %s: object not found" % key)
        return decode_json(data, "bundle manifest")

    def resolve_manifest(self, ref):
        if isinstance(ref, RemoteBundleRef):
            m = ref.manifest or self._fetch_manifest(ref.manifest_key)
        else:
            m = ref.get("manifest")
            if m is None:
                m = self._fetch_manifest(ref.get("manifest_key"))
        self.validate_manifest(m)
        return m

    def manifest_key(self, ref, manifest=None):
        manifest = manifest or self.resolve_manifest(ref)
        want = "%s/%s/manifest" % (self.prefix, manifest["object_id"])
        have = ref.manifest_key if isinstance(ref, RemoteBundleRef) else ref.get("manifest_key")
        if have is None:
            return want
        if have != want:
            raise ValueError("bundle manifest_key does not match manifest object_id")
        return have

    @staticmethod
    def payload_keys(spec):
        return [c["key"] for c in spec["chunks"]]

    def remove_bundle(self, ref):
        key = ref.manifest_key if isinstance(ref, RemoteBundleRef) else ref.get("manifest_key")
        embedded = ref.manifest if isinstance(ref, RemoteBundleRef) else ref.get("manifest")
        is_exist = getattr(self.store, "is_exist", None)
        if not embedded and isinstance(key, str) and callable(is_exist):
            st = is_exist(key)
            if st == 0:
                return
            if st != 1:
                raise RuntimeError("is_exist failed for %s: %s" % (key, st))
        try:
            m = self.resolve_manifest(ref)
        except Exception:
            if isinstance(key, str) and callable(is_exist) and is_exist(key) == 0:
                return
            raise
        keys = [c["key"] for s in [m["meta"], *m["buffers"].values()] for c in s["chunks"]]
        keys += m.get("cleanup_keys", [])
        cleanup_keys(self.store, keys, strict=True)
        cleanup_keys(self.store, [self.manifest_key(ref, m)], strict=True)

    # -------------------------------------------------------- reads

    def _chunk(self, key, size):
        data = self.store.get(key)
        if data is None or len(data) != size:
            raise RuntimeError("get failed for %s: expected %d bytes, got %d"
                               % (key, size, 0 if data is None else len(data)))
        return data

    def read_payload(self, spec):
        want = int(spec["bytes"])
        if want == 0:
            return b""
        return self.read_range(spec, 0, want)

    def read_range(self, spec, offset, length):
        """length bytes of a payload from offset, reading only the chunks they are in."""
        if length == 0:
            return b""
        if offset < 0 or offset + length > int(spec["bytes"]):
            raise ValueError("payload range %d+%d is outside its %s bytes"
                             % (offset, length, spec["bytes"]))
        frags = payload_fragments(spec["chunks"], offset, length)
        if len(frags) == 1 and frags[0][3] == 0 and frags[0][4] == frags[0][1]:
            return bytes(self._chunk(frags[0][0], frags[0][1]))
        out = bytearray(length)
        for key, size, dst, src, n in frags:
            out[dst:dst + n] = memoryview(self._chunk(key, size))[src:src + n]
        return bytes(out)

    def read_into(self, spec, dest_view, offset):
        """Fill dest_view (a writable byte view) with the payload's bytes from offset."""
        n = len(dest_view)
        if n:
            memoryview(dest_view).cast("B")[:] = self.read_range(spec, offset, n)


def torch_save_bytes(value):
    import torch
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


def torch_load_bytes(data):
    """A tensor saved with torch.save, loaded with weights_only (tensors and plain data
    only: nothing else is unpickled)."""
    import torch
    return torch.load(io.BytesIO(bytes(data)), weights_only=True)


def tensor_bytes(tensor):
    from mooncake.store import _serialize_tensor
    header, addr, nbytes, _keep = _serialize_tensor(tensor)
    return bytes(header) + (ctypes.string_at(addr, nbytes) if nbytes else b"")


def tensor_from_bytes(data):
    from mooncake.store import _deserialize_tensor
    t = _deserialize_tensor(bytes(data))
    if t is None:
        raise ValueError("stored bytes are not a tensor object")
    return t


def patch_tensor_header(header, shape, data_bytes):
    """A tensor header for rows of the tensor it describes: data size and both shapes set."""
    h = bytearray(header)
    ctypes.c_uint64.from_buffer(h, 32).value = int(data_bytes)
    for i, d in enumerate(shape):
        ctypes.c_int64.from_buffer(h, 40 + 8 * i).value = int(d)
        ctypes.c_int64.from_buffer(h, 104 + 8 * i).value = int(d)
    return bytes(h)


def is_tensor(value):
    torch = loaded_torch()
    return torch is not None and isinstance(value, torch.Tensor)
