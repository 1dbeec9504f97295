# SPDX-License-Identifier: Apache-2.0
"""Segments mounted after setup: mount_segment (a file's pages), allocate_and_mount_segment,
unmount_segment, unmount_and_free_segment, their ids, errors and argument types.  Runs against
upstream's wheel as well (MC_PARITY_BIN, see conftest.py)."""
import os
import time

import pytest

from mooncake.store import MooncakeDistributedStore


@pytest.fixture
def bare(master):
    """A client that contributes no memory of its own (global_segment_size 0)."""
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0
    yield s
    s.close()


def test_mount_a_file_and_unmount_it(bare, master, tmp_path):
    path = str(tmp_path / "segment")
    with open(path, "wb") as f:
        f.truncate(32 << 20)
    assert bare.put("seg/none", b"x" * 100) == -200        # no segment anywhere yet
    r = bare.mount_segment(path, 16 << 20, 4096)
    assert r["ret"] == 0 and len(r["segment_ids"]) == 1
    sid = r["segment_ids"][0]
    hi, lo = sid.split("-")
    assert hi.isdigit() and lo.isdigit()
    value = os.urandom(100000)
    assert bare.put("seg/a", value) == 0
    with open(path, "rb") as f:
        assert value in f.read()                           # the bytes live in the file
    other = MooncakeDistributedStore()
    assert other.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0
    assert other.get("seg/a") == value
    other.close()
    assert bare.unmount_and_free_segment([sid]) == -1       # not an allocated segment
    assert bare.unmount_segment([sid]) == 0
    assert bare.is_exist("seg/a") == 0 and bare.get("seg/a") == b""
    assert bare.unmount_segment([sid]) == -1
    assert bare.put("seg/b", b"y") == -200


def test_mount_segment_refusals(bare, tmp_path):
    path = str(tmp_path / "small")
    with open(path, "wb") as f:
        f.truncate(1 << 20)
    none = {"ret": -1, "segment_ids": []}
    assert bare.mount_segment(str(tmp_path / "missing"), 4096) == none
    assert bare.mount_segment(path, 2 << 20) == none                 # past the file's end
    assert bare.mount_segment(path, 4096, (1 << 20) - 100) == none  # past the end too
    assert bare.mount_segment(path, 4096, 100) == none               # offset not page-aligned
    assert bare.mount_segment(path, 0) == {"ret": 0, "segment_ids": []}
    with pytest.raises(TypeError):
        bare.mount_segment(5, 4096)
    with pytest.raises(TypeError):
        bare.mount_segment(path, "4096")


def test_allocate_and_mount_segment(bare):
    r = bare.allocate_and_mount_segment(1)
    assert r["ret"] == 0 and r["allocated_size"] == 16 << 20 and len(r["segment_ids"]) == 1
    r2 = bare.allocate_and_mount_segment((16 << 20) + 1, "tcp", "")
    assert r2["ret"] == 0 and r2["allocated_size"] == 32 << 20
    assert bare.allocate_and_mount_segment(0) == {"ret": -1, "segment_ids": [],
                                                  "allocated_size": 0}
    assert bare.put("alloc/a", b"z" * 5000) == 0 and bare.get("alloc/a") == b"z" * 5000
    ids = r["segment_ids"] + r2["segment_ids"]
    assert bare.unmount_segment(ids) == -1                  # not mounted from a file
    assert bare.unmount_and_free_segment(ids, 1) == 0       # serves a second more
    assert bare.is_exist("alloc/a") == 1
    end = time.time() + 10
    while bare.is_exist("alloc/a") != 0:
        assert time.time() < end, "the segment was not unmounted after its grace period"
        time.sleep(0.1)
    # The two segments retire one after the other: once both are gone nothing takes a put.
    while bare.put("alloc/b", b"b") != -200:
        assert time.time() < end, "a segment was still mounted after its grace period"
        time.sleep(0.1)
    assert bare.unmount_and_free_segment(ids) != 0          # -1 here, -600 in upstream's
    assert bare.unmount_segment([]) == 0 and bare.unmount_and_free_segment([]) == 0
    assert bare.unmount_segment(["bad", "0-0"]) == -1
    with pytest.raises(TypeError):
        bare.unmount_segment(ids[0])
    with pytest.raises(TypeError):
        bare.unmount_and_free_segment([1])
    with pytest.raises(TypeError):
        bare.allocate_and_mount_segment("1MB")


def _numa_policy(addr_hex):
    """The NUMA policy of this process's mapping at addr_hex (numa_maps), or None."""
    with open("/proc/self/numa_maps") as f:
        for line in f:
            if line.split()[0] == addr_hex:
                return line.split()[1]
    return None


def test_mount_location_places_the_segment(bare, tmp_path):
    # allocate_and_mount_segment's location: the memory goes on that NUMA node (node 0 is on
    # every host), registered with the engine there; a location that is not one is refused.
    before = set(l.split()[0] for l in open("/proc/self/numa_maps"))
    r = bare.allocate_and_mount_segment(1, "tcp", "cpu:0")
    assert r["ret"] == 0 and len(r["segment_ids"]) == 1
    new = [l.split() for l in open("/proc/self/numa_maps") if l.split()[0] not in before]
    assert any(f[1] == "bind:0" and "mooncake-segment" in " ".join(f) for f in new), new
    assert bare.put("loc/a", b"l" * 3000) == 0 and bare.get("loc/a") == b"l" * 3000
    assert bare.unmount_and_free_segment(r["segment_ids"]) == 0
    none = {"ret": -1, "segment_ids": [], "allocated_size": 0}
    assert bare.allocate_and_mount_segment(1, "tcp", "gpu0") == none
    assert bare.allocate_and_mount_segment(1, "tcp", "cpu:99999") == none
    path = str(tmp_path / "segment")
    with open(path, "wb") as f:
        f.truncate(4 << 20)
    assert bare.mount_segment(path, 4 << 20, 0, "tcp", "nowhere") == {"ret": -1,
                                                                    "segment_ids": []}
    r = bare.mount_segment(path, 4 << 20, 0, "tcp", "cpu:0")
    assert r["ret"] == 0 and bare.unmount_segment(r["segment_ids"]) == 0


def test_setup_segments_are_not_unmountable_by_id(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp", "", master) == 0
    assert s.put("own/a", b"a") == 0
    r = s.allocate_and_mount_segment(1 << 20)
    assert r["ret"] == 0
    assert s.unmount_and_free_segment(r["segment_ids"]) == 0
    assert s.get("own/a") == b"a"
    s.close()
