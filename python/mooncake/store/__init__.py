# SPDX-License-Identifier: Apache-2.0
"""mooncake.store: upstream-compatible store API over the C extension mooncake._store.

A package, as upstream 0.3.14 lays it out (mooncake/store/__init__.py over the native
mooncake._store).  The methods that move data are implemented in C (mooncake/_store); this
module adds what is naturally Python: the dict form of setup(), ReplicateConfig and the enums,
replica descriptor objects, NUMA binding and the host-memory allocator.

MOONCAKE_STORE_BACKEND selects the implementation as upstream's does: "cpp" (the default) is
this one; upstream's Rust store ("rs") is not part of this build and is refused on import.
"""
import ctypes
import logging
import os
import re
import threading
from enum import IntEnum

_BACKEND = os.environ.get("MOONCAKE_STORE_BACKEND", "cpp")
if _BACKEND == "rs":
    raise ImportError("MOONCAKE_STORE_BACKEND='rs': upstream's Rust store backend is not part "
                      "of this build; unset it or use 'cpp'")
if _BACKEND != "cpp":
    raise ValueError("MOONCAKE_STORE_BACKEND must be exactly 'cpp' or 'rs'; got %r" % _BACKEND)

from mooncake import _store  # noqa: E402
from mooncake.buffer_pool import (BufferPool, RegisteredBufferPool, BufferLease,  # noqa: E402
                                  RegisteredBufferLease)
from mooncake.store_tensor import (TensorMethods, ParallelAxis, TensorParallelism, ReadTarget,
                                   _serialize_tensor, _deserialize_tensor,
                                   _tensor_metadata_size, _check_key)

BufferHandle = _store.BufferHandle
RangedReadSnapshot = _store.RangedReadSnapshot
_log = logging.getLogger(__name__)

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "ExistOptions", "RangedReadSnapshot",
           "SoftPinAction", "ObjectDataType",
           "ReplicaStatus", "ReplicaDescriptor", "MemoryDescriptor", "BufferDescriptor",
           "Descriptor",
           "DiskDescriptor", "BufferHandle", "MooncakeHostMemAllocator", "bind_to_numa_node",
           "BufferPool", "RegisteredBufferPool", "BufferLease", "RegisteredBufferLease",
           "TaskType", "TaskStatus", "QueryTaskResponse",
           "ParallelAxis", "TensorParallelism", "ReadTarget"]


# ReplicateConfig.eviction_hint flags (ours): the last key of the put holds a partial block,
# which no later request shares (the master's --eviction_policy=prefix evicts it first).
EVICTION_HINT_LAST_PARTIAL = 1


class SoftPinAction(IntEnum):
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ObjectDataType(IntEnum):
    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class ReplicaStatus(IntEnum):
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class TaskType(IntEnum):
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(IntEnum):
    PENDING = 0
    PROCESSING = 1
    SUCCESS = 3
    FAILED = 2


# Upstream's module exports every enum value by name too; where two enums share a name
# (FAILED, PROCESSING) the task status wins, as there.
for _enum in (ObjectDataType, ReplicaStatus, TaskType, TaskStatus):
    globals().update(_enum.__members__)
del _enum


class QueryTaskResponse:
    """Response structure for QueryTask operation (upstream's fields; ids are (first, second)
    tuples)."""

    def __init__(self, raw=None):
        if raw is None:
            raw = ((0, 0), 0, 0, 0, 0, (0, 0), "")
        (self.id, typ, status, self.created_at_ms_epoch, self.last_updated_at_ms_epoch,
         self.assigned_client, self.message) = raw
        self.type = TaskType(typ)
        self.status = TaskStatus(status)

    def __repr__(self):
        return ("QueryTaskResponse(id=%d-%d, type=%d, status=%d, created_at=%d, "
                "last_updated_at=%d, assigned_client=%d-%d, message=\"%s\")"
                % (self.id[0], self.id[1], self.type, self.status, self.created_at_ms_epoch,
                   self.last_updated_at_ms_epoch, self.assigned_client[0],
                   self.assigned_client[1], self.message))


class ReplicateConfig:
    """Replication and pinning of an object (upstream's ReplicateConfig)."""

    replica_num = 1
    nof_replica_num = 0
    dfs_replica_num = 0
    soft_pin_action = SoftPinAction.PRESERVE
    soft_pin_ttl_ms = None
    with_hard_pin = False
    preferred_segment = ""
    prefer_alloc_in_same_node = False
    data_type = ObjectDataType.UNKNOWN
    host_id = ""
    group_ids = None
    # Ours, not upstream's: what the writer knows about a put's keys, for the master's
    # --eviction_policy=prefix (None: nothing said; else EVICTION_HINT_* flags, or 0).
    eviction_hint = None

    # Fields 0.3.14 added.  preferred_hca_names / per_key_preferred_hca_names (the latter one
    # list per key of a batch put): over rdma the first name is the local NIC this client moves
    # the put's bytes through first.  residency_affinity_ids and session_ids hold one id per key
    # of the put (another count is -600, as upstream's); nothing here places by them (see
    # libmooncake(3)).
    _LIST_FIELDS = ("preferred_hca_names", "residency_affinity_ids", "session_ids")

    def __setattr__(self, name, value):
        if name in ReplicateConfig._LIST_FIELDS:
            value = _str_list(name, value)
        elif name == "per_key_preferred_hca_names" and value is not None:
            if not isinstance(value, (list, tuple)):
                raise TypeError("per_key_preferred_hca_names must be a list of lists of str "
                                "or None")
            value = [_str_list(name, v) for v in value]
        object.__setattr__(self, name, value)

    def __init__(self):
        self.replica_num = 1
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.soft_pin_action = SoftPinAction.PRESERVE
        self._soft_pin_ttl_ms = None
        self.with_hard_pin = False
        self.preferred_segments = []
        self.preferred_segment = ""
        self.preferred_nof_segments = []
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.host_id = ""
        self.group_ids = None
        self.preferred_hca_names = None
        self.per_key_preferred_hca_names = None
        self.residency_affinity_ids = None
        self.session_ids = None
        self.eviction_hint = None

    @property
    def soft_pin_ttl_ms(self):
        return self._soft_pin_ttl_ms

    @soft_pin_ttl_ms.setter
    def soft_pin_ttl_ms(self, value):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError("soft_pin_ttl_ms must be an int or None")
            if value < 0 or value >= 1 << 64:
                raise TypeError("soft_pin_ttl_ms must fit in an unsigned 64-bit integer")
        self._soft_pin_ttl_ms = value

    @property
    def with_soft_pin(self):
        """Older spelling: True when the soft-pin action is ENABLE."""
        return self.soft_pin_action == SoftPinAction.ENABLE

    @with_soft_pin.setter
    def with_soft_pin(self, value):
        self.soft_pin_action = SoftPinAction.ENABLE if value else SoftPinAction.PRESERVE

    def __repr__(self):
        return ("ReplicateConfig(replica_num=%d, with_hard_pin=%s, soft_pin_action=%s, "
                "soft_pin_ttl_ms=%s, preferred_segments=%r, preferred_segment=%r, data_type=%s)"
                % (self.replica_num, self.with_hard_pin, SoftPinAction(self.soft_pin_action).name,
                   self.soft_pin_ttl_ms, self.preferred_segments, self.preferred_segment,
                   ObjectDataType(self.data_type).name))

    __str__ = __repr__


# ReplicateConfig.soft_pin_ttl_ms is a property; keep the class-level default visible too.
ReplicateConfig.group_ids = None


def _str_list(name, value):
    """None or a list of str (a tuple is taken too), as upstream's Optional[list[str]]."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError("%s must be a list of str or None" % name)
    return list(value)


class ExistOptions:
    """Options of is_exist / batch_is_exist.  prefetch_to_memory: with the client's
    enable_ssd_prefetch, keys only an SSD holds are asked back into memory (best effort, in
    the background) so that the get that follows a lookup reads memory."""

    def __init__(self):
        self.prefetch_to_memory = False

    def __setattr__(self, name, value):
        if name != "prefetch_to_memory":
            raise AttributeError("ExistOptions has no attribute %r" % name)
        if not isinstance(value, bool):
            raise TypeError("prefetch_to_memory must be a bool")
        object.__setattr__(self, name, value)

    def __str__(self):
        return "ExistOptions: { prefetch_to_memory: %d }" % self.prefetch_to_memory

    __repr__ = __str__


class BufferDescriptor:
    """Where a memory replica's bytes are: upstream's store.Descriptor (the alias below), which
    a program may also make empty, Descriptor(), and fill in."""

    def __init__(self, size=0, buffer_address=0, transport_endpoint="", protocol="tcp"):
        self.size = size
        self.size_ = size
        self.buffer_address = buffer_address
        self.buffer_address_ = buffer_address
        self.transport_endpoint = transport_endpoint
        self.transport_endpoint_ = transport_endpoint
        self.protocol = protocol

    def __repr__(self):
        return "BufferDescriptor(size=%d, buffer_address=0x%x, transport_endpoint=%r)" % (
            self.size, self.buffer_address, self.transport_endpoint)


Descriptor = BufferDescriptor


class MemoryDescriptor:
    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor

    def __repr__(self):
        return "MemoryDescriptor(%r)" % (self.buffer_descriptor,)


class DiskDescriptor:
    def __init__(self, file_path, object_size):
        self.file_path = file_path
        self.object_size = object_size


class ReplicaDescriptor:
    """One replica of an object, as the master describes it.  Its fields are read from the
    master's answer when asked for: batch lookups of many keys build one of these per
    replica and most callers look at few fields.  _raw is the tuple (id, type, status, size,
    addr, segment, endpoint, protocol); the extension makes instances directly with _raw set
    and _memd None, which is all __init__ does."""

    __slots__ = ("_raw", "_memd")

    def __init__(self, raw):
        self._raw = raw
        self._memd = None

    @property
    def id(self):
        return self._raw[0]

    @property
    def status(self):
        return ReplicaStatus(self._raw[2])

    @property
    def _type(self):
        return self._raw[1]

    @property
    def segment_name(self):
        return self._raw[5]

    @property
    def _mem(self):
        if self._memd is None:
            raw = self._raw
            self._memd = MemoryDescriptor(BufferDescriptor(raw[3], raw[4], raw[6],
                                                           raw[7]))
        return self._memd

    def is_memory_replica(self):
        return self._raw[1] == 0

    def is_disk_replica(self):
        return self._raw[1] == 1

    def is_local_disk_replica(self):
        return self._raw[1] == 2

    def get_memory_descriptor(self):
        if not self.is_memory_replica():
            raise RuntimeError("not a memory replica")
        return self._mem

    def get_disk_descriptor(self):
        raise RuntimeError("not a disk replica")

    def __repr__(self):
        return "ReplicaDescriptor(status=%s, %r)" % (self.status.name, self._mem)


_SETUP_DEFAULTS = {"global_segment_size": "16MB", "local_buffer_size": "16MB", "protocol": "tcp",
                   "rdma_devices": "", "master_server_addr": "127.0.0.1:50051"}

# Protocol names a store client accepts (exact, lower case).  Ours moves bytes over tcp or rdma;
# the other transports' names are accepted and served over tcp, with a warning.
_PROTOCOLS = frozenset(("tcp", "rdma", "efa", "nvmeof", "nvlink", "nvlink_intra", "musa", "hip",
                        "barex", "cxl", "ascend", "ub", "ubshmem", "maca", "sunrise_link",
                        "rpc_only"))

# The positional order of setup()'s parameters.
_SETUP_PARAMS = ("local_hostname", "metadata_server", "global_segment_size", "local_buffer_size",
                 "protocol", "rdma_devices", "master_server_addr", "engine", "enable_ssd_offload",
                 "ssd_offload_path", "tenant_id", "enable_client_http_server", "client_http_port",
                 "enable_embedded_master")

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}
_SIZE_RE = re.compile(r"([+]?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)")


def _auth_handshake(sk, path):
    """Prove the cluster secret in path on a connected socket, as every port of the cluster
    asks (doc/protocol.md, "Authentication").  True when the peer proved it knows it too."""
    import hashlib
    import hmac
    try:
        with open(path, "rb") as f:
            key = f.read(4096).rstrip(b" \t\r\n")
    except OSError as e:
        _log.error("cluster secret %s: %s", path, e.strerror)
        return False
    nc = os.urandom(32)
    sk.sendall(b"MCAUTH1\n" + nc)
    ch = b""
    while len(ch) < 72:
        chunk = sk.recv(72 - len(ch))
        if not chunk:
            _log.error("the peer closed the connection during the authentication handshake")
            return False
        ch += chunk
    ns = ch[8:40]
    want = hmac.new(key, b"mooncake-auth-v1 server" + nc + ns, hashlib.sha256).digest()
    if ch[:8] != b"MCAUTH1\n" or not hmac.compare_digest(ch[40:72], want):
        _log.error("the peer does not know our cluster secret")
        return False
    sk.sendall(hmac.new(key, b"mooncake-auth-v1 client" + nc + ns, hashlib.sha256).digest())
    return True

def _size(value):
    """Bytes from a setup(dict) size: 16777216, "16MB", "16 mb", "1.5g", "0x1000000".

    Binary units k/m/g/t with or without b; a negative, empty or otherwise malformed value
    (a percentage, "16 M B", "16mib") raises ValueError.
    """
    text = str(value).strip().lower()
    if text.startswith("0x"):
        return int(text, 16)
    m = _SIZE_RE.fullmatch(text)
    if m is None or m.group(2) not in _SIZE_UNITS:
        raise ValueError("invalid size %r" % (value,))
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


def _seconds(value):
    """A setup(dict) duration in seconds: a non-negative int or float (or its text)."""
    if isinstance(value, bool):
        raise ValueError("invalid number of seconds %r" % (value,))
    v = float(str(value).strip())
    if not 0 <= v <= 365 * 86400:
        raise ValueError("invalid number of seconds %r" % (value,))
    return v


def _flag(value):
    """A setup(dict) boolean: true for True, 1, "true", "yes", "on", "enable" (any case)."""
    return str(value).strip().lower() in ("1", "true", "yes", "on", "enable")


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def _ssd_area_problem(enabled, path):
    """Why an SSD area at path (or at MOONCAKE_OFFLOAD_FILE_STORAGE_PATH) cannot be opened, or
    None.  Checked before setup mounts anything, so a refused setup leaves nothing behind."""
    if not (enabled or _env_flag("MOONCAKE_ENABLE_SSD_OFFLOAD")
            or _env_flag("MOONCAKE_OFFLOAD_ENABLED")):
        return None
    path = path or os.environ.get("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "")
    if not path:
        return "SSD offload enabled without a path (ssd_offload_path / " \
               "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH)"
    if os.path.exists(path):
        if not os.path.isdir(path):
            return "SSD area %s is not a directory" % path
        where = path
    else:
        where = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(where):
            return "SSD area %s: its parent directory does not exist" % path
    if not os.access(where, os.W_OK | os.X_OK):
        return "SSD area %s: %s is not writable" % (path, where)
    return None


def _check_list(value):
    if not isinstance(value, (list, tuple)):
        raise TypeError("expected a list, not %s" % type(value).__name__)


def _copy_ranges(sess, ptrs, sizes, offs, into_object):
    """Copy ranges between caller memory and a put session's staging block; bytes or -600."""
    for lst in (ptrs, sizes, offs):
        _check_list(lst)
    if sess is None or not len(ptrs) == len(sizes) == len(offs):
        return -600
    lease, total = sess[0], sess[1]
    for ptr, size, off in zip(ptrs, sizes, offs):
        for v in (ptr, size, off):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError("buffer pointers, sizes and offsets must be ints")
        if size < 0 or off < 0 or off + size > total or (size and ptr == 0):
            return -600
    done = 0
    for ptr, size, off in zip(ptrs, sizes, offs):
        if into_object:
            ctypes.memmove(lease.ptr + off, ptr, size)
        else:
            ctypes.memmove(ptr, lease.ptr + off, size)
        done += size
    return done


def _bad_ranges(keys, dst):
    """-600 for every range of one buffer whose lists disagree: one per destination offset
    given for a key, one for a key without offsets, one key for a buffer without keys."""
    if keys is None:
        return [[-600]]
    _check_list(keys)
    out = []
    for j in range(len(keys)):
        ranges = dst[j] if dst is not None and j < len(dst) else None
        out.append([-600] * len(ranges) if isinstance(ranges, (list, tuple)) else [-600])
    return out


# setup(dict) keys for the store's memory (see _memory_options).
_MEMORY_KEYS = ("use_hugepage", "hugepage_size", "hugepage_fallback", "populate_segment",
                "segment_location")


class MooncakeDistributedStore(TensorMethods, _store.MooncakeDistributedStore):
    """Upstream-compatible Mooncake store client."""

    def setup(self, *args, **kwargs):
        """setup(local_hostname, metadata_server, global_segment_size, local_buffer_size,
        protocol, rdma_devices, master_server_addr, engine=None, enable_ssd_offload=False,
        ssd_offload_path="", tenant_id="default", enable_client_http_server=False,
        client_http_port=9300, enable_embedded_master=False), or setup(config: dict).
        0 on success, else an error code; a dict with a missing or malformed value gives -600
        (INVALID_PARAMS) and an unknown protocol -1, as upstream's client does.

        enable_embedded_master (or MOONCAKE_ENABLE_EMBEDDED_MASTER=1) starts a master on this
        client's own loop, listening on master_server_addr, so that one process is a whole
        store.  The dict form also takes enable_ssd_prefetch, ssd_prefetch_cooldown_sec (5)
        and ssd_prefetch_dedup_ttl_sec (30) for ExistOptions.prefetch_to_memory."""
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            return self._setup_dict(args[0])
        named = dict(zip(_SETUP_PARAMS, args))
        named.update(kwargs)
        proto = named.get("protocol")
        if isinstance(proto, str) and proto not in _PROTOCOLS:
            _log.error("setup: unsupported protocol %r", proto)
            return -1
        problem = _ssd_area_problem(named.get("enable_ssd_offload", False),
                                    named.get("ssd_offload_path", ""))
        if problem and isinstance(named.get("ssd_offload_path", ""), str):
            _log.error("setup: %s", problem)
            return -600
        self._drop_no_buffer_methods()
        rc = super().setup(*args, **kwargs)
        if rc == 0:
            self._local_buffer_size = named.get("local_buffer_size")
            if self._local_buffer_size == 0:
                self._install_no_buffer_methods()
        return rc

    # Without a local buffer (local_buffer_size=0) the methods that stage bytes in it fail as
    # upstream's do: puts give -600, gets find nothing.  Only the zero-copy forms (put_from,
    # get_into, ... on registered memory) move data.  Bound as instance attributes, so a store
    # with a buffer calls the C methods with nothing in between.
    _NO_BUFFER = ("put", "upsert", "put_parts", "upsert_parts", "put_batch", "upsert_batch",
                  "get", "get_buffer", "get_batch", "batch_get_buffer")

    def _install_no_buffer_methods(self):
        self._drop_no_buffer_methods()
        def put(key, value, config=None):
            _check_key(key)
            memoryview(value)
            _log.error("put %s: no local buffer (local_buffer_size=0)", key)
            return -600

        def put_parts(key, *parts, config=None):
            _check_key(key)
            if sum(memoryview(part).nbytes for part in parts) == 0:
                return 0                # nothing to stage: a no-op, as upstream's
            _log.error("put_parts %s: no local buffer (local_buffer_size=0)", key)
            return -600

        def put_batch(keys, values, config=None):
            for key in keys:
                _check_key(key)
            for value in values:
                memoryview(value)
            _log.error("put_batch: no local buffer (local_buffer_size=0)")
            return -600

        def get(key):
            _check_key(key)
            return b""

        def get_buffer(key):
            _check_key(key)
            return None

        def get_batch(keys):
            for key in keys:
                _check_key(key)
            return [b""] * len(keys)

        def batch_get_buffer(keys):
            for key in keys:
                _check_key(key)
            return [None] * len(keys)

        self.put = self.upsert = put
        self.put_parts = self.upsert_parts = put_parts
        self.put_batch = self.upsert_batch = put_batch
        self.get, self.get_buffer = get, get_buffer
        self.get_batch, self.batch_get_buffer = get_batch, batch_get_buffer

    def _drop_no_buffer_methods(self):
        for name in self._NO_BUFFER:
            self.__dict__.pop(name, None)
            self.__dict__.pop("async_" + name, None)     # mooncake.async_store's, bound to it

    def close(self):
        self._drop_no_buffer_methods()
        put = self.__dict__.get("_put_sessions")
        if put:
            for lease, _, _ in put.values():
                lease.release()
            put.clear()
        get = self.__dict__.get("_get_sessions")
        if get:
            get.clear()
        staging = self.__dict__.pop("_staging", None)
        if staging is not None:
            staging.close()
        return super().close()

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                        all_sizes):
        """Byte ranges of objects into buffers: for buffer i, key j, range r, copy
        all_sizes[i][j][r] bytes at all_src_offsets[i][j][r] of the object into buffer_ptrs[i]
        + all_dst_offsets[i][j][r].  Returns the same nesting of byte counts or error codes.

        Lists whose lengths disagree give -600 (INVALID_PARAMS) for what they describe (every
        range when the outer lists disagree, else the ranges of the keys concerned), while the
        consistent rest is still read."""
        return self._ranges(super().get_into_ranges, buffer_ptrs, all_keys, all_dst_offsets,
                            all_src_offsets, all_sizes)

    def get_into_ranges_from_snapshot(self, snapshot, buffer_ptrs, all_keys, all_dst_offsets,
                                      all_src_offsets, all_sizes):
        """get_into_ranges for keys of a RangedReadSnapshot (prepare_get_into_ranges_snapshot),
        without asking the master for their replicas each time: the snapshot's replica lists
        are renewed once half their read lease has passed, before a read is submitted.  A key
        the snapshot does not hold gives -600 for its ranges, one it found missing -704."""
        if not isinstance(snapshot, RangedReadSnapshot):
            raise TypeError("snapshot must be a RangedReadSnapshot")
        read = lambda *a: super(MooncakeDistributedStore, self).get_into_ranges_from_snapshot(
            snapshot, *a)
        return self._ranges(read, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                            all_sizes)

    def _ranges(self, read, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                all_sizes):
        """get_into_ranges' checks around read (the C reader of consistent lists)."""
        outer = (buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes)
        for lst in outer:
            _check_list(lst)
        n = len(buffer_ptrs)
        if any(len(lst) != n for lst in outer):
            _log.error("get_into_ranges: %d buffers but %d key lists, %d/%d/%d range lists", n,
                       len(all_keys), len(all_dst_offsets), len(all_src_offsets), len(all_sizes))
            return [_bad_ranges(all_keys[i] if i < len(all_keys) else None,
                                all_dst_offsets[i] if i < len(all_dst_offsets) else None)
                    for i in range(n)]
        # Keep what is consistent, read it, and put the -600s back where the rest was.
        sel = []
        keep = ([], [], [], [], [])
        for i in range(n):
            keys, dst, src, sizes = (all_keys[i], all_dst_offsets[i], all_src_offsets[i],
                                     all_sizes[i])
            for lst in (keys, dst, src, sizes):
                _check_list(lst)
            if not len(keys) == len(dst) == len(src) == len(sizes):
                sel.append(None)
                continue
            good = []
            for j in range(len(keys)):
                for lst in (dst[j], src[j], sizes[j]):
                    _check_list(lst)
                good.append(len(dst[j]) == len(src[j]) == len(sizes[j]))
            sel.append(good)
            keep[0].append(buffer_ptrs[i])
            keep[1].append([k for k, g in zip(keys, good) if g])
            keep[2].append([r for r, g in zip(dst, good) if g])
            keep[3].append([r for r, g in zip(src, good) if g])
            keep[4].append([r for r, g in zip(sizes, good) if g])
        if all(g is not None and all(g) for g in sel):
            return read(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes)
        _log.error("get_into_ranges: range lists of different lengths")
        done = iter(read(*keep) if keep[0] else [])
        out = []
        for i, good in enumerate(sel):
            if good is None:
                out.append(_bad_ranges(all_keys[i], all_dst_offsets[i]))
                continue
            got = iter(next(done))
            out.append([next(got) if g else [-600] * len(all_dst_offsets[i][j])
                        for j, g in enumerate(good)])
        return out

    def _setup_dict(self, config):
        cfg = {str(k): v for k, v in config.items()}
        if cfg.get("cluster_secret_file"):
            # The store reads the secret from the environment at setup (libmooncake(3)).
            os.environ["MOONCAKE_CLUSTER_SECRET_FILE"] = str(cfg["cluster_secret_file"])
        for req in ("local_hostname", "metadata_server"):
            if req not in cfg:
                _log.error("setup(dict): required key %r is missing", req)
                return -600
        get = lambda k: str(cfg.get(k, _SETUP_DEFAULTS.get(k, "")))
        try:
            gsize = _size(get("global_segment_size"))
            lsize = _size(get("local_buffer_size"))
            port = int(get("client_http_port") if "client_http_port" in cfg else 9300)
            cooldown = _seconds(cfg.get("ssd_prefetch_cooldown_sec", 5))
            dedup = _seconds(cfg.get("ssd_prefetch_dedup_ttl_sec", 30))
        except (ValueError, OverflowError) as e:
            _log.error("setup(dict): %s", e)
            return -600
        if 0 < gsize < 1024:
            _log.error("setup(dict): global_segment_size %d must be 0 or at least 1024", gsize)
            return -600
        if _flag(cfg.get("enable_egm_store_pool", False)):
            # EGM DRAM is reached over NVLink-C2C, which no transport of this build drives.
            _log.error("setup(dict): enable_egm_store_pool needs protocol 'nvlink' and EGM "
                       "memory, which this build does not support")
            return -600
        self._configure_prefetch(_flag(cfg.get("enable_ssd_prefetch", False)), cooldown, dedup)
        # The memory behind the segment and the local buffer (ours, as mooncake.json's keys and
        # the MC_STORE_* variables): huge pages, background population, NUMA placement.
        mem = {k: cfg[k] for k in _MEMORY_KEYS if cfg.get(k) is not None}
        if mem:
            for k in ("use_hugepage", "hugepage_fallback", "populate_segment"):
                if k in mem:
                    mem[k] = _flag(mem[k])
            for k in ("hugepage_size", "segment_location"):
                if k in mem:
                    mem[k] = str(mem[k])
            if self._memory_options(**mem) != 0:
                return -600
        return self.setup(get("local_hostname"), get("metadata_server"), gsize, lsize,
                          get("protocol"), get("rdma_devices"), get("master_server_addr"),
                          enable_ssd_offload=_flag(cfg.get("enable_ssd_offload", False)),
                          ssd_offload_path=str(cfg.get("ssd_offload_path", "")),
                          tenant_id=str(cfg.get("tenant_id", "default")),
                          enable_client_http_server=_flag(cfg.get("enable_client_http_server",
                                                                  False)),
                          client_http_port=port,
                          enable_embedded_master=_flag(cfg.get("enable_embedded_master",
                                                               False)))

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address):
        """Attach to a mooncake_client on this host, which owns the pool memory.

        The daemon answers on upstream's abstract socket @mooncake_client_<port>.sock (same uid
        only) with the cluster's addresses; this process then joins as a client without memory
        of its own, and its puts and gets reach the daemon's segment through shared memory.
        With a daemon on protocol rdma it uses rdma (the daemon's NICs) for remote segments.
        mem_pool_size bytes are set aside for alloc_from_mem_pool() (registered, zero-copy).
        """
        import json
        import socket
        try:
            port = int(str(server_address).rsplit(":", 1)[1])
        except (IndexError, ValueError):
            return -600
        sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sk.settimeout(5)
        try:
            sk.connect("\0mooncake_client_%d.sock" % port)
            secret = os.environ.get("MOONCAKE_CLUSTER_SECRET_FILE")
            if secret and not _auth_handshake(sk, secret):
                return -601
            data = b""
            while not data.endswith(b"\n"):
                chunk = sk.recv(4096)
                if not chunk:
                    break
                data += chunk
            info = json.loads(data)
        except (OSError, ValueError):
            return -900
        finally:
            sk.close()
        host = str(server_address).rsplit(":", 1)[0] or "127.0.0.1"
        if host in ("0.0.0.0", "localhost"):
            host = "127.0.0.1"
        # The daemon says "rdma" only when its transfer engine runs; this process then runs
        # its own on the same NICs, and its local buffer and pool are registered with it.
        proto = info.get("protocol", "tcp")
        if proto not in ("tcp", "rdma"):
            proto = "tcp"
        devices = str(info.get("rdma_devices", "")) if proto == "rdma" else ""
        rc = super().setup(host, info.get("metadata_server", "P2PHANDSHAKE"), 0,
                           int(local_buffer_size), proto, devices,
                           info["master_server_address"])
        if rc != 0:
            return rc
        self._local_buffer_size = int(local_buffer_size)
        self._pool = None
        if mem_pool_size:
            base = _store.host_alloc(int(mem_pool_size))
            if base == 0 or self.register_buffer(base, int(mem_pool_size)) != 0:
                if base:
                    _store.host_free(base)
                self.close()
                return -600
            self._pool = [base, int(mem_pool_size), 0]
        return 0

    def _in_pool(self, ptr, size=1):
        pool = self.__dict__.get("_pool")
        return (bool(pool) and isinstance(ptr, int) and isinstance(size, int)
                and pool[0] <= ptr and ptr + size <= pool[0] + pool[1])

    def register_buffer(self, buffer_ptr, size):
        """Make [buffer_ptr, buffer_ptr + size) usable for zero-copy transfers.  0 on success.
        Memory from alloc_from_mem_pool() is registered already: 0, nothing to do."""
        if self._in_pool(buffer_ptr, size):
            return 0
        return super().register_buffer(buffer_ptr, size)

    def unregister_buffer(self, buffer_ptr):
        """Undo register_buffer().  The setup_dummy pool stays registered until close()."""
        if self._in_pool(buffer_ptr):
            return 0
        return super().unregister_buffer(buffer_ptr)

    def alloc_from_mem_pool(self, size):
        """A registered buffer of size bytes from the setup_dummy pool (0 when exhausted)."""
        pool = getattr(self, "_pool", None)
        if not pool or size <= 0:
            return 0
        off = (pool[2] + 63) & ~63
        if off + size > pool[1]:
            return 0
        pool[2] = off + size
        return pool[0] + off

    # ---------------------------------------------------------------- sessions
    # A put session stages each object in registered memory of this client: the ranged puts
    # fill it, batch_put_session_end stores it (batch_put_from) and makes it readable, revoke
    # drops it.  A get session remembers which keys exist, for the ranged gets that follow.

    def _sessions(self):
        d = self.__dict__
        if "_put_sessions" not in d:
            d["_put_sessions"] = {}
            d["_get_sessions"] = set()
            d["_session_lock"] = threading.Lock()
        return d["_put_sessions"], d["_get_sessions"], d["_session_lock"]

    def _session_pool(self):
        pool = self.__dict__.get("_staging")
        if pool is None:
            pool = BufferPool(self, max_bytes=1 << 62, block_on_exhaustion=False)
            self._staging = pool
        return pool

    def batch_put_session_start(self, keys, sizes, config=None):
        """Open a put session per key for an object of sizes[i] bytes: 0, -705 when the key
        exists (or repeats in keys), -600 for a size of 0 or lists of different lengths.  The
        object is not visible until batch_put_session_end."""
        keys, sizes = list(keys), list(sizes)
        for key in keys:
            _check_key(key)
        for size in sizes:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise TypeError("sizes must be non-negative ints")
        if len(keys) != len(sizes):
            _log.error("batch_put_session_start: %d keys, %d sizes", len(keys), len(sizes))
            return [-600] * len(keys)
        if not keys:
            return []
        put, _, lock = self._sessions()
        exist = self.batch_is_exist(keys)
        out = []
        with lock:
            for key, size, there in zip(keys, sizes, exist):
                if there < 0 and there != -704:
                    out.append(there)
                elif there == 1 or key in put:
                    out.append(-705)
                elif size == 0:
                    out.append(-600)
                else:
                    try:
                        lease = self._session_pool().acquire(size)
                    except RuntimeError as e:
                        _log.error("batch_put_session_start %s: %s", key, e)
                        out.append(-600)
                        continue
                    put[key] = (lease, size, config)
                    out.append(0)
        return out

    def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_dst_offsets):
        """Fill open put sessions: for key i, all_sizes[i][r] bytes from all_buffer_ptrs[i][r]
        land at all_dst_offsets[i][r] of the object.  Per key the bytes written, or -600 (no
        session, a range past the object's end, lists of different lengths)."""
        keys = list(keys)
        for key in keys:
            _check_key(key)
        for lst in (all_buffer_ptrs, all_sizes, all_dst_offsets):
            _check_list(lst)
        if not len(keys) == len(all_buffer_ptrs) == len(all_sizes) == len(all_dst_offsets):
            _log.error("batch_put_from_multi_buffer_ranges: lists of different lengths")
            return [-600] * len(keys)
        put, _, lock = self._sessions()
        out = []
        for key, ptrs, sizes, offs in zip(keys, all_buffer_ptrs, all_sizes, all_dst_offsets):
            with lock:
                sess = put.get(key)
            out.append(_copy_ranges(sess, ptrs, sizes, offs, into_object=True))
        return out

    def batch_put_session_end(self, keys):
        """Store the staged objects: per key 0 or an error code (-600: no open session)."""
        keys = list(keys)
        for key in keys:
            _check_key(key)
        put, _, lock = self._sessions()
        with lock:
            sess = [put.pop(key, None) for key in keys]
        out = [-600] * len(keys)
        todo = [i for i, x in enumerate(sess) if x is not None]
        # One batch per distinct ReplicateConfig given at the start.
        while todo:
            cfg = sess[todo[0]][2]
            same = [i for i in todo if sess[i][2] is cfg]
            todo = [i for i in todo if sess[i][2] is not cfg]
            args = ([keys[i] for i in same], [sess[i][0].ptr for i in same],
                    [sess[i][1] for i in same])
            codes = (self.batch_put_from(*args) if cfg is None
                     else self.batch_put_from(*args, cfg))
            for i, code in zip(same, codes):
                out[i] = code
        for x in sess:
            if x is not None:
                x[0].release()
        return out

    def batch_put_session_revoke(self, keys):
        """Drop open put sessions: per key 0, or -600 when none is open."""
        keys = list(keys)
        for key in keys:
            _check_key(key)
        put, _, lock = self._sessions()
        out = []
        for key in keys:
            with lock:
                sess = put.pop(key, None)
            if sess is None:
                out.append(-600)
            else:
                sess[0].release()
                out.append(0)
        return out

    def batch_get_session_start(self, keys):
        """Open a get session per key: 0, or -704 (no such object) or another error code."""
        keys = list(keys)
        for key in keys:
            _check_key(key)
        if not keys:
            return []
        raw = self._query(keys)
        _, get, lock = self._sessions()
        out = []
        with lock:
            for key in keys:
                code = raw[key][0]
                if code == 0:
                    get.add(key)
                out.append(code)
        return out

    def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_src_offsets):
        """Ranged gets for keys with an open get session: for key i, all_sizes[i][r] bytes at
        all_src_offsets[i][r] of the object into all_buffer_ptrs[i][r] (registered memory).
        Per key the bytes read, or -600 (no session, a range past the object's end, lists of
        different lengths) or the read's error code."""
        keys = list(keys)
        for key in keys:
            _check_key(key)
        for lst in (all_buffer_ptrs, all_sizes, all_src_offsets):
            _check_list(lst)
        if not len(keys) == len(all_buffer_ptrs) == len(all_sizes) == len(all_src_offsets):
            _log.error("batch_get_into_multi_buffer_ranges: lists of different lengths")
            return [-600] * len(keys)
        _, get, lock = self._sessions()
        out = [-600] * len(keys)
        flat = ([], [], [], [], [])
        owner = []
        for i, (key, ptrs, sizes, offs) in enumerate(zip(keys, all_buffer_ptrs, all_sizes,
                                                         all_src_offsets)):
            for lst in (ptrs, sizes, offs):
                _check_list(lst)
            with lock:
                open_ = key in get
            if not open_ or not len(ptrs) == len(sizes) == len(offs):
                continue
            out[i] = 0
            for ptr, size, off in zip(ptrs, sizes, offs):
                flat[0].append(ptr)
                flat[1].append([key])
                flat[2].append([[0]])
                flat[3].append([[off]])
                flat[4].append([[size]])
                owner.append(i)
        if owner:
            res = self.get_into_ranges(*flat)
            for i, r in zip(owner, res):
                n = r[0][0]
                if out[i] >= 0:
                    out[i] = out[i] + n if n >= 0 else n
        return out

    def batch_get_session_end(self, keys):
        """Close get sessions; 0."""
        keys = list(keys)
        for key in keys:
            _check_key(key)
        _, get, lock = self._sessions()
        with lock:
            for key in keys:
                get.discard(key)
        return 0

    def query_task(self, task_id):
        """Query the status of a task: (QueryTaskResponse or None, error code)."""
        raw, code = self._query_task(tuple(task_id))
        return (QueryTaskResponse(raw) if raw is not None else None), code

    def get_replica_desc(self, key):
        return self._replica_descs([key], ReplicaDescriptor)[key]

    def batch_get_replica_desc(self, keys):
        """{key: [ReplicaDescriptor, ...]} for the keys found; a key that is missing (or whose
        lookup failed) is left out of the dict, as upstream's answer leaves it out."""
        return self._replica_descs(list(keys), ReplicaDescriptor, True)


class MooncakeHostMemAllocator:
    """Page-aligned host memory for zero-copy buffers (register it with register_buffer)."""

    def alloc(self, size):
        return _store.host_alloc(size)

    def free(self, ptr):
        _store.host_free(ptr)


def bind_to_numa_node(node):
    """Run the calling process on the CPUs of NUMA node `node` (from sysfs)."""
    path = "/sys/devices/system/node/node%d/cpulist" % int(node)
    try:
        with open(path) as f:
            spec = f.read().strip()
    except OSError:
        return
    cpus = set()
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    if cpus:
        os.sched_setaffinity(0, cpus)
