# SPDX-License-Identifier: Apache-2.0
"""mooncake.structured_object_store: objects made of named members, and DataProto-like
batches built from them, stored in Mooncake with upstream 0.3.13's API and on-store layout, so
objects written by upstream's wheel read back here and the other way round.

MooncakeBundleTransfer(store, key_prefix="bundle", default_chunk_bytes=64 MiB):
  put_bundle / remove_bundle             raw metadata bytes plus named byte buffers
  put_structured_object / put_object     JSON metadata plus members: torch tensors (nested
  read_spec / materialize[_into]         jagged ones too), numpy arrays, bytes,
  get_object                             tensor_object_buffer memory
  put / get (type="dataproto"|"dict")    DataProto batches: one structured object per stage;
  put_dataproto / get_dataproto          non_tensor_batch columns encoded by codec (see
  append_dataproto_fields                _structured_infer), rows and fields selectable,
  cleanup_dataproto[_append]             references exportable as JSON-safe handles
  dataproto_manifest_view
The layout is described in _structured_bundle and _structured_members.  numpy is required;
torch only for tensor members and tensor columns.  A transfer object is used by one thread.
"""
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import numpy as np

from mooncake import _structured_infer as infer
from mooncake._structured_bundle import (
    AUTO_PARALLEL_MIN_BYTES, AUTO_PARALLEL_MIN_CHUNKS, DEFAULT_BUNDLE_CHUNK_BYTES,
    MISSING_OBJECT_ERROR, STRUCTURED_FIELD_SPECS_KEY, BundleStoreLayer, BundleTransferPolicy,
    RawDestination, RemoteBundleRef, StructuredMemberSlice, StructuredObjectPayload,
    StructuredObjectReadSpec, StructuredObjectResult, TensorObjectBuffer, config_with_group,
    encode_json, normalize_key_prefix, validate_chunk_bytes)
from mooncake._structured_codecs import MISSING
from mooncake._structured_dataproto import (
    FieldSchema, build_result, check_schema_sections, coerce_schema_column,
    envelope_to_flat_dict, flat_dict_to_envelope, object_column, row_selection, schema_for,
    select_fields, selection_indices, split_dataproto, batch_size as _batch_size)
from mooncake._structured_infer import infer_structure
from mooncake._structured_members import StructuredLayer, field_specs

__all__ = ["AUTO_PARALLEL_MIN_BYTES", "AUTO_PARALLEL_MIN_CHUNKS", "BundleStore",
           "BundleTransferPolicy", "DATAPROTO_REF_HANDLE_TYPE", "DATAPROTO_REF_HANDLE_VERSION",
           "DEFAULT_BUNDLE_CHUNK_BYTES", "DataProtoRefLike", "FieldSchema", "MISSING",
           "MISSING_OBJECT_ERROR", "MooncakeBundleTransfer", "MooncakeDataProtoRef",
           "RemoteBundleRef", "STORAGE_GROUP_ID", "STRUCTURED_FIELD_SPECS_KEY",
           "StructuredFieldLocation", "StructuredMemberSlice", "StructuredObjectPayload",
           "StructuredObjectReadSpec", "StructuredObjectResult", "export_dataproto_ref",
           "export_ref", "import_dataproto_ref", "import_ref", "infer_structure",
           "is_dataproto_ref_handle", "raw_destination", "tensor_object_buffer"]

DATAPROTO_REF_HANDLE_TYPE = "mooncake_dataproto_ref"
DATAPROTO_REF_HANDLE_VERSION = 1
STORAGE_GROUP_ID = "storage_group_id"


class BundleStore(Protocol):
    """What MooncakeBundleTransfer needs of a store (MooncakeDistributedStore has it all)."""

    def put(self, key: str, value: Any, config: Any = None) -> int: ...

    def get(self, key: str) -> bytes: ...

    def remove(self, key: str, force: bool = False) -> int: ...

    def is_exist(self, key: str) -> int: ...


@dataclass(frozen=True)
class StructuredFieldLocation:
    """Where a DataProto field lives: stage object, member, section."""

    stage: str
    member: str
    section: str


@dataclass
class MooncakeDataProtoRef:
    """A stored DataProto batch: per stage one structured object, and where each field is."""

    batch_size: int
    stage_refs: dict
    field_index: dict
    meta_info: dict
    namespace: str = "default"
    partition: str = "default"
    global_indexes: Optional[list] = None
    encoded_non_tensor: dict = field(default_factory=dict)
    _storage_group_id: Optional[str] = field(default=None, repr=False)


DataProtoRefLike = Any


def tensor_object_buffer(ptr, size, owner=None, batch_size=None):
    """Memory holding [tensor header][data]: a tensor member to put, or room to read one into
    (owner is kept alive with it)."""
    return TensorObjectBuffer(ptr=int(ptr), size=int(size), owner=owner, batch_size=batch_size)


def raw_destination(ptr, size, owner=None, *, pre_registered=False):
    """Caller memory materialize_into copies a member's bytes into."""
    return RawDestination(int(ptr), int(size), owner, pre_registered)


# ---------------------------------------------------------------- handles

def is_dataproto_ref_handle(value):
    return isinstance(value, Mapping) and value.get("type") == DATAPROTO_REF_HANDLE_TYPE


def _json_safe(value):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    raise TypeError("DataProto ref handles support only JSON-safe values, got %s"
                    % type(value).__name__)


def export_dataproto_ref(ref):
    """A JSON-safe handle of ref (what import_dataproto_ref takes, in any process)."""
    if not isinstance(ref, MooncakeDataProtoRef):
        raise TypeError("expected MooncakeDataProtoRef, got %s" % type(ref).__name__)
    handle = {"type": DATAPROTO_REF_HANDLE_TYPE, "version": DATAPROTO_REF_HANDLE_VERSION,
              "kind": "bundle_stages", "batch_size": int(ref.batch_size),
              "namespace": ref.namespace, "partition": ref.partition,
              "global_indexes": _json_safe(ref.global_indexes),
              "stage_refs": {s: {"manifest_key": r.manifest_key}
                             for s, r in ref.stage_refs.items()},
              "field_index": {n: {"stage": loc.stage, "member": loc.member,
                                  "section": loc.section} for n, loc in ref.field_index.items()},
              "meta_info": _json_safe(ref.meta_info),
              "encoded_non_tensor": _json_safe(ref.encoded_non_tensor)}
    if ref._storage_group_id is not None:
        handle[STORAGE_GROUP_ID] = ref._storage_group_id
    json.dumps(handle, ensure_ascii=False)
    return handle


def _mapping(value, name):
    if not isinstance(value, Mapping):
        raise ValueError("DataProto ref handle %s must be a mapping" % name)
    return value


def _nonempty_str(v):
    return isinstance(v, str) and bool(v)


def import_dataproto_ref(handle):
    """The MooncakeDataProtoRef of a handle export_dataproto_ref made (ValueError if not)."""
    if not is_dataproto_ref_handle(handle):
        raise ValueError("not a Mooncake DataProto ref handle")
    version = int(handle.get("version", -1))
    if version not in (DATAPROTO_REF_HANDLE_VERSION, 2):
        raise ValueError("unsupported DataProto ref handle version: %r" % (handle.get("version"),))
    if handle.get("kind") != "bundle_stages":
        raise ValueError("unsupported DataProto ref handle kind: %r" % (handle.get("kind"),))
    stages = {}
    for stage, sref in _mapping(handle.get("stage_refs"), "stage_refs").items():
        key = _mapping(sref, "stage_refs[%r]" % (stage,)).get("manifest_key")
        if not _nonempty_str(stage) or not _nonempty_str(key):
            raise ValueError("DataProto ref handle stage refs must contain non-empty string "
                             "names and manifest_key values")
        stages[stage] = RemoteBundleRef(manifest_key=key, manifest={})
    index = {}
    for name, raw in _mapping(handle.get("field_index"), "field_index").items():
        loc = _mapping(raw, "field_index[%r]" % (name,))
        if loc.get("section") not in ("batch", "non_tensor_batch"):
            raise ValueError("invalid DataProto field section: %r" % (loc.get("section"),))
        if not all(_nonempty_str(v) for v in (name, loc.get("stage"), loc.get("member"))):
            raise ValueError("DataProto ref handle field locations must be non-empty strings")
        if loc["stage"] not in stages:
            raise ValueError("DataProto ref handle field %r references unknown stage %r"
                             % (name, loc["stage"]))
        index[name] = StructuredFieldLocation(loc["stage"], loc["member"], loc["section"])
    group = handle.get(STORAGE_GROUP_ID)
    if (version == 2 and group is None) or (group is not None and not _nonempty_str(group)):
        raise ValueError("DataProto ref handle has invalid storage_group_id")
    gidx = handle.get("global_indexes")
    if gidx is not None:
        if not isinstance(gidx, list):
            raise ValueError("DataProto ref handle global_indexes must be a list or null")
        if any(isinstance(i, bool) or not isinstance(i, int) for i in gidx):
            raise ValueError("DataProto ref handle global_indexes must contain integers")
        gidx = list(gidx)
    return MooncakeDataProtoRef(
        batch_size=int(handle["batch_size"]), stage_refs=stages, field_index=index,
        meta_info=dict(_mapping(handle.get("meta_info", {}), "meta_info")),
        namespace=str(handle.get("namespace", "default")),
        partition=str(handle.get("partition", "default")), global_indexes=gidx,
        encoded_non_tensor=dict(_mapping(handle.get("encoded_non_tensor", {}),
                                         "encoded_non_tensor")),
        _storage_group_id=group)


export_ref = export_dataproto_ref
import_ref = import_dataproto_ref


def _resolve_ref(ref):
    if isinstance(ref, MooncakeDataProtoRef):
        return ref
    if is_dataproto_ref_handle(ref):
        return import_dataproto_ref(ref)
    raise TypeError("expected MooncakeDataProtoRef or DataProto handle, got %s"
                    % type(ref).__name__)


def _merge_stage_metadata(old, new):
    if old.get("dataproto") != new.get("dataproto"):
        raise ValueError("DataProto stage metadata mismatch during manifest merge")
    merged = dict(old)
    specs, added = dict(field_specs(old)), dict(field_specs(new))
    clash = sorted(set(specs) & set(added))
    if clash:
        raise ValueError("structured members already exist: %s" % clash)
    specs.update(added)
    if specs:
        merged[STRUCTURED_FIELD_SPECS_KEY] = specs
    return merged


class MooncakeBundleTransfer:
    """Structured objects and DataProto batches through a Mooncake store."""

    def __init__(self, store, key_prefix="bundle", default_chunk_bytes=DEFAULT_BUNDLE_CHUNK_BYTES,
                 buffer_pool=None):
        self.store = store
        self.key_prefix = normalize_key_prefix(key_prefix)
        self.default_chunk_bytes = validate_chunk_bytes(default_chunk_bytes)
        self.buffer_pool = buffer_pool
        self._bundle_store = BundleStoreLayer(store, self.key_prefix, self.default_chunk_bytes)
        self._structured_store = StructuredLayer(self._bundle_store)

    # -------------------------------------------------------- bundles and objects

    def put_bundle(self, meta, buffers, partition="default", chunk_bytes=None, policy=None,
                   max_inflight_put=None, config=None):
        """Store raw metadata bytes plus named byte buffers; returns its RemoteBundleRef."""
        return self._bundle_store.put_bundle(meta, buffers, partition, chunk_bytes, policy,
                                             max_inflight_put, config)

    def remove_bundle(self, ref):
        """Remove every object of a stored bundle (a missing manifest is no error)."""
        self._bundle_store.remove_bundle(ref)

    def put_structured_object(self, payload, partition="default", chunk_bytes=None,
                              policy=None, max_inflight_put=None, config=None):
        return self._structured_store.put(payload, partition, chunk_bytes, policy,
                                          max_inflight_put, config)

    def put_object(self, obj, partition="default", chunk_bytes=None, policy=None,
                   max_inflight_put=None, config=None):
        """A mapping of members, or one tensor/array/bytes value (read back unwrapped)."""
        if isinstance(obj, Mapping):
            payload = StructuredObjectPayload(metadata={}, buffers=obj)
        else:
            payload = StructuredObjectPayload(metadata={"__mooncake_wrapped_object__": True},
                                              buffers={"value": obj})
        return self.put_structured_object(payload, partition, chunk_bytes, policy,
                                          max_inflight_put, config)

    def get_object(self, ref):
        res = self.materialize(self.read_spec(ref))
        if res.metadata.get("__mooncake_wrapped_object__"):
            return res.objects["value"]
        return res.objects

    def read_spec(self, ref):
        return StructuredObjectReadSpec(ref=ref)

    def materialize(self, spec):
        return self._structured_store.materialize_into(spec, None)

    def materialize_into(self, spec, destinations):
        """materialize, reading members named in destinations into the caller's memory
        (numpy arrays, raw_destination, tensor_object_buffer)."""
        return self._structured_store.materialize_into(spec, destinations)

    @staticmethod
    def release_result(result):
        """Release buffer-pool leases a result holds (results here own plain memory, so
        this only releases owners attached by a caller's pool-backed destinations)."""
        released, seen = set(), set()

        def visit(v):
            owner = getattr(v, "_mooncake_pool_owner", None)
            if owner is not None:
                if id(owner) not in released:
                    released.add(id(owner))
                    owner.release()
                return
            if isinstance(v, Mapping):
                items = v.values()
            elif hasattr(v, "batch") and hasattr(v, "non_tensor_batch"):
                items = (v.batch, v.non_tensor_batch, getattr(v, "meta_info", None))
            elif isinstance(v, (list, tuple)):
                items = v
            elif isinstance(v, np.ndarray) and v.dtype == object:
                items = v.flat
            else:
                return
            if id(v) in seen:
                return
            seen.add(id(v))
            for item in items:
                visit(item)
        visit(result)

    # -------------------------------------------------------- DataProto

    def put(self, data, *, type="dataproto", namespace="default", partition="default",
            stage="default", chunk_bytes=None, policy=None, config=None, field_schemas=None):
        """Store a DataProto-like object (type="dataproto") or a flat dict (type="dict")."""
        if type == "dataproto":
            stage_data = data
        elif type == "dict":
            stage_data = flat_dict_to_envelope(data, field_schemas)
        else:
            raise ValueError("unsupported Mooncake payload type: %r" % (type,))
        return self._put_stage(None, stage_data, namespace, partition, stage, chunk_bytes,
                               policy, False, field_schemas, config)

    def get(self, ref, *, type="dataproto", fields=None, batch_fields=None,
            non_tensor_fields=None, meta_info_keys=None, data_cls=None, destinations=None,
            rows=None):
        if type not in ("dataproto", "dict"):
            raise ValueError("unsupported Mooncake payload type: %r" % (type,))
        out = self._get(ref, fields, batch_fields, non_tensor_fields, meta_info_keys,
                        dict if type == "dict" else data_cls, destinations, rows,
                        type == "dict")
        return envelope_to_flat_dict(out) if type == "dict" else out

    def put_dataproto(self, data, *, namespace="default", partition="default", stage="default",
                      chunk_bytes=None, policy=None, field_schemas=None, config=None):
        return self.put(data, type="dataproto", namespace=namespace, partition=partition,
                        stage=stage, chunk_bytes=chunk_bytes, policy=policy,
                        field_schemas=field_schemas, config=config)

    def append_dataproto_fields(self, ref, data, *, stage, overwrite=False, chunk_bytes=None,
                                policy=None, field_schemas=None, config=None):
        """Add fields (in a new or existing stage) to a stored batch; returns the new ref."""
        ref = _resolve_ref(ref)
        return self._put_stage(ref, data, ref.namespace, ref.partition, stage, chunk_bytes,
                               policy, overwrite, field_schemas, config)

    def get_dataproto(self, ref, *, fields=None, batch_fields=None, non_tensor_fields=None,
                      meta_info_keys=None, data_cls=None, destinations=None, rows=None):
        return self._get(ref, fields, batch_fields, non_tensor_fields, meta_info_keys,
                         data_cls, destinations, rows, False)

    def cleanup_dataproto(self, ref):
        """Remove every stage object a batch references."""
        ref = _resolve_ref(ref)
        seen = set()
        for sref in ref.stage_refs.values():
            if sref.manifest_key not in seen:
                seen.add(sref.manifest_key)
                self.remove_bundle(sref)

    def cleanup_dataproto_append(self, previous, appended):
        """Remove what an append stored that previous does not reference (an append that was
        never published), leaving previous readable."""
        previous, appended = _resolve_ref(previous), _resolve_ref(appended)
        bs = self._bundle_store
        for stage, sref in appended.stage_refs.items():
            old = previous.stage_refs.get(stage)
            if old is None:
                self.remove_bundle(sref)
                continue
            if sref.manifest_key == old.manifest_key:
                continue
            is_exist = getattr(self.store, "is_exist", None)
            if callable(is_exist) and is_exist(sref.manifest_key) == 0:
                continue
            m = bs.resolve_manifest(sref)
            kept = {loc.member for loc in previous.field_index.values() if loc.stage == stage}
            for name, enc in previous.encoded_non_tensor.items():
                if previous.field_index[name].stage == stage:
                    kept.update(enc["payload_members"].values())
            fresh = [p for n, p in m["buffers"].items() if n not in kept]
            owners = {bs.object_id_of(p["key"]) for p in fresh}
            keys = bs.payload_keys(m["meta"]) + [c["key"] for p in fresh for c in p["chunks"]]
            keys += [k for k in m.get("cleanup_keys", []) if bs.object_id_of(k) in owners]
            from mooncake._structured_bundle import cleanup_keys
            cleanup_keys(self.store, keys, strict=True)
            cleanup_keys(self.store, [sref.manifest_key], strict=True)

    def dataproto_manifest_view(self, ref):
        """Where each field of a batch is stored and how it is encoded."""
        ref = _resolve_ref(ref)
        bs = self._bundle_store
        metas = {s: self._structured_store.read_metadata(bs.resolve_manifest(r))
                 for s, r in ref.stage_refs.items()}
        fields = {}
        for name, loc in ref.field_index.items():
            specs = field_specs(metas[loc.stage])
            spec = dict(specs.get(loc.member, {"encoding": "bytes"}))
            enc = ref.encoded_non_tensor.get(name)
            if enc is not None:
                spec = {"encoding": "structured_non_tensor", "codec": enc["codec"],
                        "metadata": enc.get("metadata"),
                        "payload_members": dict(enc["payload_members"]),
                        "payload_specs": {p: dict(specs.get(m, {"encoding": "bytes"}))
                                          for p, m in enc["payload_members"].items()}}
            fields[name] = {"section": loc.section, "stage": loc.stage, "member": loc.member,
                            "spec": spec}
        return {"namespace": ref.namespace, "partition": ref.partition,
                "batch_size": ref.batch_size,
                "batch_fields": {n: i for n, i in fields.items() if i["section"] == "batch"},
                "non_tensor_fields": {n: i for n, i in fields.items()
                                      if i["section"] == "non_tensor_batch"},
                "meta_info_keys": list(ref.meta_info),
                "stages": {s: {"manifest_key": r.manifest_key,
                               "dataproto": metas[s].get("dataproto", {})}
                           for s, r in ref.stage_refs.items()}}

    # -------------------------------------------------------- internals

    def _new_group_id(self, config):
        raw = getattr(config, "group_ids", None)
        if raw is None:
            gid = None
        elif isinstance(raw, str):
            gid = raw
        else:
            try:
                ids = list(raw)
            except TypeError as e:
                raise ValueError("structured object store config.group_ids must contain "
                                 "strings") from e
            if len(ids) > 1:
                raise ValueError("structured object store config.group_ids must contain "
                                 "exactly one logical group id; it is expanded across internal "
                                 "Mooncake keys")
            gid = ids[0] if ids else None
        if gid is None:
            return "structured-" + uuid.uuid4().hex
        if not isinstance(gid, str):
            raise ValueError("structured object store config.group_ids must contain strings")
        return gid or None

    def _encode_column(self, name, value, schemas):
        """EncodedLeaf of a non_tensor_batch column, or None to store it as a plain member."""
        schema = schema_for(schemas, name, "non_tensor_batch")
        path = "non_tensor_batch." + name
        if schema is not None:
            try:
                column = coerce_schema_column(name, value)
                if schema.codec == "auto":
                    infer.check_nullable(path, list(column), schema.nullable)
                else:
                    return infer.encode_with_schema(path, column, schema.codec, schema.metadata,
                                                    schema.nullable)
            except (TypeError, ValueError, RuntimeError, AttributeError) as e:
                raise type(e)("failed to encode non_tensor_batch field %r with FieldSchema "
                              "codec %r: %s" % (name, schema.codec, e)) from e
        if isinstance(value, np.ndarray) and value.dtype == object:
            return infer.encode_inferred(path, value)
        return None

    def _put_stage(self, ref, data, namespace, partition, stage, chunk_bytes, policy,
                   overwrite, schemas, config):
        batch, non_tensor, meta = split_dataproto(data)
        check_schema_sections(batch, non_tensor, meta, schemas)
        size = _batch_size(batch, non_tensor)
        if ref is not None and size != ref.batch_size:
            raise ValueError("DataProto append batch size %d does not match ref batch size %d"
                             % (size, ref.batch_size))
        both = sorted(set(batch) & set(non_tensor))
        if both:
            raise ValueError("DataProto batch and non_tensor_batch fields overlap: %s" % both)
        buffers, updates, encoded = {}, {}, {}
        for name, value in batch.items():
            buffers["batch." + name] = value
            updates[name] = StructuredFieldLocation(stage, "batch." + name, "batch")
        for name, value in non_tensor.items():
            member = "non_tensor_batch." + name
            enc = self._encode_column(name, value, schemas)
            updates[name] = StructuredFieldLocation(stage, member, "non_tensor_batch")
            if enc is None:
                buffers[member] = value
                continue
            members = {}
            for pname, pvalue in enc.payload.items():
                buffers["%s.%s" % (member, pname)] = pvalue
                members[pname] = "%s.%s" % (member, pname)
            encoded[name] = {"codec": enc.codec, "rows": enc.rows, "metadata": enc.metadata,
                             "payload_members": members}
        if not buffers:
            if ref is not None:
                merged = dict(ref.meta_info)
                merged.update(meta)
                return MooncakeDataProtoRef(ref.batch_size, dict(ref.stage_refs),
                                            dict(ref.field_index), merged, ref.namespace,
                                            ref.partition, ref.global_indexes,
                                            dict(ref.encoded_non_tensor), ref._storage_group_id)
            return MooncakeDataProtoRef(size, {}, {}, dict(meta), namespace, partition,
                                        encoded_non_tensor={},
                                        _storage_group_id=self._new_group_id(config))
        dup = sorted(set(ref.field_index) & set(updates)) if ref is not None else []
        if dup and not overwrite:
            raise ValueError("DataProto fields already exist: %s" % dup)
        if ref is not None and overwrite:
            dangling = sorted(n for n, loc in ref.field_index.items()
                              if loc.stage == stage and n not in updates)
            if dangling:
                raise ValueError("DataProto overwrite for stage %r must include existing "
                                 "fields: %s" % (stage, dangling))
        group = self._new_group_id(config) if ref is None else ref._storage_group_id
        cfg = config if group is None else config_with_group(config, group)
        payload = StructuredObjectPayload(
            metadata={"layout": "dataproto_stage",
                      "dataproto": {"version": 1, "namespace": namespace,
                                    "partition": partition, "stage": stage,
                                    "batch_size": size}},
            buffers=buffers)
        existing = ref.stage_refs.get(stage) if ref is not None else None
        if existing is not None and not overwrite:
            stage_ref = self._append_stage(existing, payload, partition, chunk_bytes, policy, cfg)
        else:
            stage_ref = self.put_structured_object(payload, partition=partition,
                                                   chunk_bytes=chunk_bytes, policy=policy,
                                                   config=cfg)
            if existing is not None and existing.manifest_key != stage_ref.manifest_key:
                self.remove_bundle(existing)
        if ref is None:
            return MooncakeDataProtoRef(size, {stage: stage_ref}, dict(updates), dict(meta),
                                        namespace, partition, None, dict(encoded), group)
        stages = dict(ref.stage_refs)
        stages[stage] = stage_ref
        index = dict(ref.field_index)
        index.update(updates)
        merged = dict(ref.meta_info)
        merged.update(meta)
        enc_all = {n: e for n, e in ref.encoded_non_tensor.items() if n not in updates}
        enc_all.update(encoded)
        return MooncakeDataProtoRef(size, stages, index, merged, namespace, partition,
                                    ref.global_indexes, enc_all, group)

    def _append_stage(self, old_ref, payload, partition, chunk_bytes, policy, config):
        """A stage object holding old_ref's members and payload's: the new members are put
        as a bundle of their own, then one manifest naming both is written."""
        bs = self._bundle_store
        new_ref = self.put_structured_object(payload, partition=partition,
                                             chunk_bytes=chunk_bytes, policy=policy,
                                             config=config)
        try:
            old_m, new_m = bs.resolve_manifest(old_ref), bs.resolve_manifest(new_ref)
            merged_meta = _merge_stage_metadata(self._structured_store.read_metadata(old_m),
                                                self._structured_store.read_metadata(new_m))
            buffers = dict(old_m["buffers"])
            clash = sorted(set(buffers) & set(new_m["buffers"]))
            if clash:
                raise ValueError("structured members already exist: %s" % clash)
            buffers.update(new_m["buffers"])
            cleanup = [*old_m.get("cleanup_keys", []), bs.manifest_key(old_ref, old_m),
                       *bs.payload_keys(old_m["meta"]), bs.manifest_key(new_ref, new_m),
                       *bs.payload_keys(new_m["meta"])]
            merged = bs.put_bundle_manifest(encode_json(merged_meta, "structured metadata"),
                                            buffers, partition, chunk_bytes, cleanup, config)
        except Exception:
            self.remove_bundle(new_ref)
            raise
        from mooncake._structured_bundle import cleanup_keys
        cleanup_keys(self.store, [bs.manifest_key(new_ref, new_m),
                                  *bs.payload_keys(new_m["meta"])], strict=False)
        return merged

    def _read_indexed(self, stage_ref, member, indices, dest):
        bs = self._bundle_store
        m = bs.resolve_manifest(stage_ref)
        fspec = field_specs(self._structured_store.read_metadata(m)).get(
            member, {"encoding": "bytes"})
        return self._structured_store.read_rows(member, m["buffers"][member], fspec, indices,
                                                dest)

    def _get(self, ref, fields, batch_fields, non_tensor_fields, meta_keys, data_cls,
             destinations, rows, flat):
        ref = _resolve_ref(ref)
        sel = row_selection(rows, ref.batch_size)
        b_names, nt_names = select_fields(ref, fields, batch_fields, non_tensor_fields)
        batch, non_tensor = {}, {}
        dests = destinations or {}
        by_stage, encoded = {}, []
        for name in b_names + nt_names:
            loc = ref.field_index[name]
            if loc.section == "non_tensor_batch" and name in ref.encoded_non_tensor:
                encoded.append((name, loc))
            else:
                by_stage.setdefault(loc.stage, []).append((name, loc))
        for stage, entries in by_stage.items():
            sref = ref.stage_refs[stage]
            if sel is not None and sel.indices is not None:
                for name, loc in entries:
                    v = self._read_indexed(sref, loc.member, sel.indices, dests.get(name))
                    (batch if loc.section == "batch" else non_tensor)[name] = v
                continue
            spec = self.read_spec(sref).select_members([loc.member for _, loc in entries])
            if sel is not None:
                s = sel.member_slice
                for _, loc in entries:
                    spec = spec.slice_member(loc.member, s.axis, s.start, s.end, s.step)
            res = self.materialize_into(spec, {loc.member: dests[n] for n, loc in entries
                                               if n in dests})
            for name, loc in entries:
                (batch if loc.section == "batch" else non_tensor)[name] = res.objects[loc.member]
        by_stage_enc = {}
        for name, loc in encoded:
            by_stage_enc.setdefault(loc.stage, []).append(name)
        for stage, names in by_stage_enc.items():
            members = [m for n in names
                       for m in ref.encoded_non_tensor[n]["payload_members"].values()]
            res = self.materialize(self.read_spec(ref.stage_refs[stage]).select_members(members))
            for name in names:
                enc = ref.encoded_non_tensor[name]
                payload = {p: res.objects[m] for p, m in enc["payload_members"].items()}
                values = infer.decode(enc, payload, ref.batch_size, enc.get("metadata"))
                if sel is not None:
                    values = [values[i] for i in selection_indices(sel, ref.batch_size)]
                non_tensor[name] = values if flat else object_column(values)
        meta = dict(ref.meta_info) if meta_keys is None else \
            {k: ref.meta_info[k] for k in meta_keys if k in ref.meta_info}
        return build_result(batch, non_tensor, meta, data_cls)
