# SPDX-License-Identifier: Apache-2.0
"""setup(dict)'s keys for the store's own memory (ours: mooncake.json's keys and the MC_STORE_*
variables): population in the background, huge pages with and without a fallback, NUMA
placement, and bad values refused with -600 before anything is mounted."""
import time

import pytest

from conftest import UPSTREAM
from mooncake.store import MooncakeDistributedStore

pytestmark = pytest.mark.skipif(UPSTREAM, reason="our setup(dict) keys")

SEG = 64 << 20


def cfg(master, **extra):
    d = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
         "master_server_addr": master, "global_segment_size": SEG,
         "local_buffer_size": 1 << 20, "protocol": "tcp"}
    d.update(extra)
    return d


def segment_rss():
    """Resident bytes of this process's segment memory (its memfd mappings)."""
    rss, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
                inside = "mooncake-segment" in line
            elif inside and line.startswith("Rss:"):
                rss += int(line.split()[1]) * 1024
    return rss


def hugepages_free():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("HugePages_Free:"):
                return int(line.split()[1])
    return 0


def test_population_on_and_off(master):
    on = MooncakeDistributedStore()
    assert on.setup(cfg(master, populate_segment=True)) == 0
    end = time.time() + 10
    while segment_rss() < SEG and time.time() < end:
        time.sleep(0.05)
    assert segment_rss() >= SEG, "populate_segment=true: the segment is populated"
    on.close()
    off = MooncakeDistributedStore()
    assert off.setup(cfg(master, populate_segment="false")) == 0
    time.sleep(0.5)
    assert segment_rss() < SEG // 4, "populate_segment=false: pages wait for their first write"
    off.close()


@pytest.mark.parametrize("extra", [{"hugepage_size": "3MB"}, {"segment_location": "cpu:999"},
                                   {"segment_location": "gpu:0"}])
def test_bad_values_are_refused(master, extra):
    s = MooncakeDistributedStore()
    assert s.setup(cfg(master, **extra)) == -600
    s.close()


def test_hugepages_without_a_pool(master):
    if hugepages_free() * 2 * 1024 * 1024 >= SEG + (1 << 20):
        pytest.skip("a huge page pool is reserved here: the shortfall cannot be shown")
    s = MooncakeDistributedStore()
    assert s.setup(cfg(master, use_hugepage=True)) == -600, "no pool, no fallback: refused"
    s.close()
    s = MooncakeDistributedStore()
    assert s.setup(cfg(master, use_hugepage="true", hugepage_fallback=True)) == 0, \
        "with the fallback: normal pages"
    assert s.put("hp/k", b"x" * 4096) == 0 and s.get("hp/k") == b"x" * 4096
    s.close()
