#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Routing quality of mooncake_proxy's policies on a request trace with prefix block ids
(the FAST'25 conversation trace): each request becomes a prompt of fixed-size text blocks, one
per block id, so equal id prefixes are equal prompt prefixes.  Four fake prefill instances each
keep an LRU cache of --lru-blocks blocks and count, per request, the leading blocks found (a
prefix hit) before inserting the prompt's blocks; a miss costs --miss-delay seconds per block, so
the busy instances are slower and least_loaded has something to see.  One fake decode answers.

  scripts/proxy_route_quality.py BUILD_DIR TRACE [--requests N] [--concurrency C]
      [--lru-blocks B] [--policies round_robin,least_loaded,kv_aware]

Prints, per policy: the aggregate prefix hit rate (blocks found / blocks looked up) and the load
imbalance (most requests on one instance / mean - 1, and the same for missed blocks).
"""
import argparse
import asyncio
import collections
import json
import os
import socket
import subprocess
import sys
import time

BLOCK = 64


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Prefill:
    def __init__(self, cap, delay):
        self.cap, self.delay = cap, delay
        self.lru = collections.OrderedDict()
        self.hits = self.looked = self.requests = self.missed = 0

    def serve(self, prompt):
        blocks = [prompt[i:i + BLOCK] for i in range(0, len(prompt) - BLOCK + 1, BLOCK)]
        n = 0
        for b in blocks:
            if b not in self.lru:
                break
            n += 1
        self.hits += n
        self.looked += len(blocks)
        self.requests += 1
        self.missed += len(blocks) - n
        for b in blocks:
            self.lru[b] = True
            self.lru.move_to_end(b)
        while len(self.lru) > self.cap:
            self.lru.popitem(last=False)
        return len(blocks) - n


async def read_request(r):
    line = await r.readline()
    if not line:
        return None, None, None
    method, path, _ = line.decode().split(" ", 2)
    hdrs = {}
    while True:
        h = await r.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, v = h.decode().split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    body = await r.readexactly(int(hdrs.get("content-length", 0)))
    return method, path, body


def reply(w, body):
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(body) + body)


def server(inst):
    async def handle(r, w):
        try:
            while True:
                method, path, body = await read_request(r)
                if method is None:
                    break
                if path == "/v1/models":
                    reply(w, b'{"object":"list","data":[{"id":"m"}]}')
                elif inst is None:
                    reply(w, b'{"choices":[{"text":"x"}]}')
                else:
                    missed = inst.serve(json.loads(body)["prompt"])
                    if inst.delay:
                        await asyncio.sleep(inst.delay * missed)
                    reply(w, b'{"choices":[{"text":"x"}],"kv_transfer_params":{"k":1}}')
                await w.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            w.close()
    return handle


async def client(port, prompts, conc):
    q = asyncio.Queue()
    for p in prompts:
        q.put_nowait(p)
    errors = 0

    async def worker():
        nonlocal errors
        r, w = await asyncio.open_connection("127.0.0.1", port)
        while not q.empty():
            p = q.get_nowait()
            body = json.dumps({"model": "m", "prompt": p, "max_tokens": 1}).encode()
            w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                    b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await w.drain()
            line = await r.readline()
            if b" 200 " not in line:
                errors += 1
            hdrs = {}
            while True:
                h = await r.readline()
                if h in (b"\r\n", b""):
                    break
                k, v = h.decode().split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
            if hdrs.get("transfer-encoding") == "chunked":
                while True:
                    n = int((await r.readline()).strip(), 16)
                    await r.readexactly(n + 2)
                    if n == 0:
                        break
            else:
                await r.readexactly(int(hdrs.get("content-length", 0)))
        w.close()

    await asyncio.gather(*(worker() for _ in range(conc)))
    return errors


async def run_policy(a, policy, prompts):
    # Connections still open when the servers close are cancelled: not worth a traceback.
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: None)
    insts = [Prefill(a.lru_blocks, a.miss_delay) for _ in range(4)]
    ports = [free_port() for _ in range(5)]
    servers = [await asyncio.start_server(server(i), "127.0.0.1", p, backlog=512)
               for i, p in zip(insts + [None], ports)]
    xp = free_port()
    cmd = [os.path.join(a.build, "mooncake_proxy"), "--host", "127.0.0.1", "--port", str(xp),
           "--log-level", "ERROR", "--scheduling", policy, "--kv_block_bytes", str(BLOCK),
           "--kv_cache_blocks", str(a.proxy_blocks or a.lru_blocks), "--prefill"]
    cmd += ["127.0.0.1:%d" % p for p in ports[:4]] + ["--decode", "127.0.0.1:%d" % ports[4]]
    cmd += a.proxy_args.split()
    px = subprocess.Popen(cmd)
    for _ in range(100):
        try:
            _, w = await asyncio.open_connection("127.0.0.1", xp)
            w.close()
            break
        except OSError:
            await asyncio.sleep(0.05)
    t0 = time.time()
    errors = await client(xp, prompts, a.concurrency)
    dt = time.time() - t0
    px.terminate()
    px.wait()
    for s in servers:
        s.close()
    hits = sum(i.hits for i in insts)
    looked = sum(i.looked for i in insts)
    reqs = [i.requests for i in insts]
    miss = [i.missed for i in insts]
    imb = max(reqs) / (sum(reqs) / 4) - 1
    imb_m = max(miss) / (sum(miss) / 4) - 1 if sum(miss) else 0
    print("%-13s hit rate %5.1f%%  requests per instance %s (imbalance %4.1f%%), missed blocks "
          "imbalance %4.1f%%, %d errors, %.1fs" % (policy, 100.0 * hits / looked, reqs,
                                                    100 * imb, 100 * imb_m, errors, dt),
          flush=True)
    return hits / looked


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("trace")
    p.add_argument("--requests", type=int, default=0, help="first N requests (0: all)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--lru-blocks", type=int, default=4096)
    p.add_argument("--proxy-blocks", type=int, default=0,
                   help="--kv_cache_blocks of the proxy (default: --lru-blocks)")
    p.add_argument("--miss-delay", type=float, default=0.0001)
    p.add_argument("--proxy-args", default="", help="more mooncake_proxy flags, blank-separated")
    p.add_argument("--policies", default="round_robin,least_loaded,kv_aware")
    a = p.parse_args()
    prompts = []
    with open(a.trace) as f:
        for line in f:
            ids = json.loads(line)["hash_ids"]
            prompts.append("".join("%063d|" % i for i in ids))
            if a.requests and len(prompts) >= a.requests:
                break
    print("# %d requests, %d block look-ups, 4 prefill instances with LRU caches of %d blocks, "
          "concurrency %d" % (len(prompts), sum(len(x) // BLOCK for x in prompts),
                              a.lru_blocks, a.concurrency))
    res = {}
    for pol in a.policies.split(","):
        res[pol] = asyncio.run(run_policy(a, pol, prompts))
    if "kv_aware" in res and res.get("round_robin"):
        print("kv_aware / round_robin hit rate: %.2fx" % (res["kv_aware"] / res["round_robin"]))


if __name__ == "__main__":
    sys.exit(main())
