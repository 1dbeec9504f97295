# SPDX-License-Identifier: Apache-2.0
"""One side of the SGLang HiCache round trip (scripts/client-e2e.sh sglang runs both).

    python sglang_hicache_roundtrip.py set|get MASTER_ADDR PAGES SEED OUT.json

Drives SGLang's HiCache Mooncake backend class (sglang.srt.mem_cache.storage.mooncake_store.
mooncake_store.MooncakeStore) as SGLang's cache controller does: a host KV pool (page-first
layout, K and V entry per page, bfloat16, pinned with register_mem_pool_host), batch_set_v1 of
PAGES pages under content keys, and, in another process, batch_exists and batch_get_v1 into a
zeroed pool.  The configuration comes from the MOONCAKE_* environment, as SGLang reads it.
OUT.json gets the byte count, seconds, the pages found and a SHA-256 of the pages' bytes.
"""
import hashlib
import json
import os
import sys
import time

import torch

from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
from sglang.srt.mem_cache.storage.mooncake_store.mooncake_store import MooncakeStore

PAGE_ELEMS = 64 * 1024          # bfloat16 elements per K (or V) entry of a page: 128 KiB


class HostKVPool:
    """The part of SGLang's HostKVCache the Mooncake backend uses (page-first layout)."""

    layout = "page_first"
    page_size = 1
    entries_per_page = 2

    def __init__(self, pages):
        self.kv_buffer = torch.zeros(pages * 2 * PAGE_ELEMS, dtype=torch.bfloat16)

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        for idx in indices:
            base = int(idx) * 2 * PAGE_ELEMS
            for e in range(2):
                ptrs.append(self.kv_buffer[base + e * PAGE_ELEMS:].data_ptr())
                sizes.append(PAGE_ELEMS * self.kv_buffer.element_size())
        return ptrs, sizes

    def get_ksize_per_token(self):
        return 2 * PAGE_ELEMS * self.kv_buffer.element_size()


def main(role, master, pages, seed, out):
    pages, seed = int(pages), int(seed)
    os.environ.update({"MOONCAKE_MASTER": master, "MOONCAKE_PROTOCOL": "tcp",
                       "MOONCAKE_TE_META_DATA_SERVER": "P2PHANDSHAKE",
                       "MOONCAKE_LOCAL_HOSTNAME": "127.0.0.1",
                       "MOONCAKE_GLOBAL_SEGMENT_SIZE": "0"})
    cfg = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0,
                               attn_cp_size=1, is_mla_model=False, enable_storage_metrics=False,
                               is_page_first_layout=True, model_name="synthetic/model")
    store = MooncakeStore(cfg)
    pool = HostKVPool(pages)
    store.register_mem_pool_host(pool)
    keys = ["page-%d-%d" % (seed, i) for i in range(pages)]
    indices = torch.arange(pages)
    result = {"role": role, "pages": pages, "bytes": pool.kv_buffer.numel() * 2}
    if role == "set":
        g = torch.Generator().manual_seed(seed)
        pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.numel(), generator=g))
        t0 = time.perf_counter()
        ok = store.batch_set_v1(keys, indices)
        result["seconds"] = time.perf_counter() - t0
        result["stored"] = sum(bool(x) for x in ok)
    else:
        result["found"] = store.batch_exists(keys)
        t0 = time.perf_counter()
        ok = store.batch_get_v1(keys, indices)
        result["seconds"] = time.perf_counter() - t0
        result["read"] = sum(bool(x) for x in ok)
    result["sha256"] = hashlib.sha256(
        pool.kv_buffer.view(torch.uint8).numpy().tobytes()).hexdigest()
    with open(out, "w") as f:
        json.dump(result, f)
    store.close()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:6])
