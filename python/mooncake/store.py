# SPDX-License-Identifier: Apache-2.0
"""mooncake.store: upstream-compatible store API over the C extension mooncake._store.

The methods that move data are implemented in C (mooncake/_store); this module adds what is
naturally Python: the dict form of setup(), ReplicateConfig and the enums, replica descriptor
objects, NUMA binding and the host-memory allocator.
"""
import os
from enum import IntEnum

from mooncake import _store

BufferHandle = _store.BufferHandle

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "SoftPinAction", "ObjectDataType",
           "ReplicaStatus", "ReplicaDescriptor", "MemoryDescriptor", "BufferDescriptor",
           "DiskDescriptor", "BufferHandle", "MooncakeHostMemAllocator", "bind_to_numa_node"]


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


class BufferDescriptor:
    def __init__(self, size, buffer_address, transport_endpoint, protocol="tcp"):
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
    """One replica of an object, as the master describes it."""

    def __init__(self, raw):
        self.id = raw["id"]
        self.status = ReplicaStatus(raw["status"])
        self._type = raw["type"]
        self.segment_name = raw.get("segment", "")
        self._mem = MemoryDescriptor(BufferDescriptor(raw["size"], raw["addr"], raw["endpoint"],
                                                      raw.get("protocol", "tcp")))

    def is_memory_replica(self):
        return self._type == 0

    def is_disk_replica(self):
        return self._type == 1

    def is_local_disk_replica(self):
        return self._type == 2

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


def _size(value):
    """Upstream's size strings: 16MB, 16 MB, 4gb, 1.5k, plain ints."""
    s = str(value).strip().lower().replace(" ", "")
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
             "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
             "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):]
    if unit not in units or not num:
        raise ValueError("invalid size %r" % (value,))
    return int(float(num) * units[unit])


class MooncakeDistributedStore(_store.MooncakeDistributedStore):
    """Upstream-compatible Mooncake store client."""

    def setup(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            cfg = {k: str(v) for k, v in args[0].items()}
            for req in ("local_hostname", "metadata_server"):
                if req not in cfg:
                    raise ValueError("setup(dict): %r is required" % req)
            get = lambda k: cfg.get(k, _SETUP_DEFAULTS.get(k, ""))
            ssd = cfg.get("enable_ssd_offload", "").lower() in ("1", "true", "yes")
            return super().setup(cfg["local_hostname"], cfg["metadata_server"],
                                 _size(get("global_segment_size")),
                                 _size(get("local_buffer_size")), get("protocol"),
                                 get("rdma_devices"), get("master_server_addr"),
                                 enable_ssd_offload=ssd,
                                 ssd_offload_path=cfg.get("ssd_offload_path", ""))
        return super().setup(*args, **kwargs)

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

    def get_replica_desc(self, key):
        code, reps = self._query([key])[key]
        return [ReplicaDescriptor(r) for r in reps] if code == 0 else []

    def batch_get_replica_desc(self, keys):
        raw = self._query(list(keys))
        return {k: [ReplicaDescriptor(r) for r in raw[k][1]] if raw[k][0] == 0 else []
                for k in keys}


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
