# SPDX-License-Identifier: Apache-2.0
"""One side of the LMCache round trip (scripts/client-e2e.sh lmcache runs both).

    python lmcache_kv_roundtrip.py store|retrieve MASTER_ADDR MODE TOKENS SEED OUT.json

Builds LMCache's own cache engine (LMCacheEngineBuilder) with its Mooncake store backend
(remote_url mooncakestore://MASTER_ADDR/) and a CPU "GPU connector" that copies between
LMCache's memory objects and a synthetic KV cache tensor [2, layers, tokens, heads*head_size]
(bfloat16, filled from SEED).  MODE is "zero_copy" (save_chunk_meta False: LMCache uses
batch_put_from / batch_get_into on its registered CPU buffer) or "chunk_meta" (save_chunk_meta
True: put_parts with LMCache's chunk header / batch_get_buffer).

store: engine.store(tokens, kvcaches=kv) of TOKENS tokens; retrieve (another process): lookup,
then engine.retrieve into a zeroed KV cache, and checks every token came back (full hit) and
the bytes equal the ones the writer made.  OUT.json gets the byte count, seconds, the hit count
and a SHA-256 of the KV bytes.
"""
import hashlib
import json
import os
import sys
import time

import torch

from lmcache.utils import mock_up_broadcast_fn, mock_up_broadcast_object_fn
from lmcache.v1.cache_engine import LMCacheEngineBuilder
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.gpu_connector import GPUConnectorInterface
from lmcache.v1.metadata import LMCacheMetadata

LAYERS, HEADS, HEAD_SIZE, CHUNK = 16, 8, 128, 256
DTYPE = torch.bfloat16


class CPUKVConnector(GPUConnectorInterface):
    """Copies between LMCache's memory objects (KV_2LTD) and a CPU KV cache tensor."""

    def __init__(self):
        self.kvcaches = None

    def get_shape(self, num_tokens):
        return torch.Size([2, LAYERS, num_tokens, HEADS * HEAD_SIZE])

    def from_gpu(self, memory_obj, start, end, **kwargs):
        memory_obj.tensor.copy_(kwargs["kvcaches"][:, :, start:end])

    def to_gpu(self, memory_obj, start, end, **kwargs):
        kwargs["kvcaches"][:, :, start:end].copy_(memory_obj.tensor)

    def batched_from_gpu(self, memory_objs, starts, ends, **kwargs):
        for m, s, e in zip(memory_objs, starts, ends):
            self.from_gpu(m, s, e, **kwargs)

    def batched_to_gpu(self, memory_objs=None, starts=None, ends=None, **kwargs):
        for m, s, e in zip(memory_objs, starts, ends):
            self.to_gpu(m, s, e, **kwargs)


def synthetic_kv(tokens, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, LAYERS, tokens, HEADS * HEAD_SIZE, generator=g).to(DTYPE)


def kv_digest(kv):
    return hashlib.sha256(kv.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def build_engine(master, mode, tokens, instance):
    nbytes = 2 * LAYERS * tokens * HEADS * HEAD_SIZE * 2
    cfg = LMCacheEngineConfig.from_defaults(
        chunk_size=CHUNK, local_cpu=False, max_local_cpu_size=nbytes / (1 << 30) + 0.5,
        remote_url="mooncakestore://%s/" % master, remote_serde="naive",
        save_unfull_chunk=False,
        # LMCache forwards mooncake_<key> to setup(dict) as <key>.
        extra_config={"mooncake_local_hostname": "127.0.0.1",
                      "mooncake_metadata_server": "P2PHANDSHAKE", "mooncake_protocol": "tcp",
                      "mooncake_master_server_addr": master, "mooncake_global_segment_size": 0,
                      "mooncake_local_buffer_size": 1 << 30, "transfer_timeout": 5,
                      "save_chunk_meta": mode == "chunk_meta"})
    meta = LMCacheMetadata(model_name="synthetic-kv", world_size=1, local_world_size=1,
                           worker_id=0, local_worker_id=0, kv_dtype=DTYPE,
                           kv_shape=(LAYERS, 2, CHUNK, HEADS, HEAD_SIZE), chunk_size=CHUNK)
    engine = LMCacheEngineBuilder.get_or_create(instance, cfg, meta, CPUKVConnector(),
                                                mock_up_broadcast_fn, mock_up_broadcast_object_fn)
    engine.post_init()        # what the serving engine's connector does: the storage manager
    return engine


def main(role, master, mode, tokens, seed, out):
    tokens, seed = int(tokens), int(seed)
    ids = torch.arange(tokens, dtype=torch.long) + seed * 100003
    engine = build_engine(master, mode, tokens, "e2e-%s-%s" % (role, mode))
    result = {"role": role, "mode": mode, "tokens": tokens}
    if role == "store":
        kv = synthetic_kv(tokens, seed)
        t0 = time.perf_counter()
        engine.store(ids, kvcaches=kv)
        # Wait until every chunk reached the store: the lookup answers from the backend.
        deadline = time.time() + 120
        while engine.lookup(ids) < tokens:
            if time.time() > deadline:
                raise SystemExit("stored chunks never became visible")
            time.sleep(0.01)
        result["seconds"] = time.perf_counter() - t0
        result["sha256"] = kv_digest(kv)
    else:
        kv = torch.zeros(2, LAYERS, tokens, HEADS * HEAD_SIZE, dtype=DTYPE)
        hit = engine.lookup(ids)
        t0 = time.perf_counter()
        got = engine.retrieve(ids, kvcaches=kv)
        result["seconds"] = time.perf_counter() - t0
        result["hit_tokens"] = int(hit)
        result["retrieved_tokens"] = int(got.sum())
        result["sha256"] = kv_digest(kv)
    result["bytes"] = kv.numel() * kv.element_size()
    LMCacheEngineBuilder.destroy("e2e-%s-%s" % (role, mode))
    with open(out, "w") as f:
        json.dump(result, f)
    os._exit(0)           # LMCache's background threads need not linger


if __name__ == "__main__":
    main(*sys.argv[1:7])
