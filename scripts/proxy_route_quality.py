#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Routing quality of mooncake_proxy's policies on a request trace with prefix block ids
(the FAST'25 conversation trace): each request becomes a prompt of fixed-size text blocks, one
per block id, so equal id prefixes are equal prompt prefixes.  Four fake prefill instances each
keep an LRU cache of --lru-blocks blocks and count, per request, the leading blocks found (a
prefix hit) before inserting the prompt's blocks; a miss costs --miss-delay seconds per block, so
the busy instances are slower and least_loaded has something to see.  One fake decode answers.

With --pool-blocks P (> 0) a simulated Mooncake store stands behind the instances, as a
connector that offloads to it (LMCache's Mooncake backend, a store connector) would use it: an
LRU of P blocks shared by all instances.  An instance loads from the pool the leading blocks it
lacks locally (--load-delay per block instead of --miss-delay), computes the rest and puts them
into the pool; the pool publishes "stored"/"removed" events over ZeroMQ in the master's format
(msgpack [ts, [events], dp_rank], seq_hashes = the proxy's block hashes).  The decode instance
does the same when a request reaches it without a prefill.  Extra policies then:
  kv_aware+pool       kv_aware subscribed to the pool's events (--kv_events_endpoint)
  kv_aware+pool+skip  ... and --kv_pool_skip_prefill (a prompt wholly in the pool goes straight
                      to decode, whose connector loads it)

  scripts/proxy_route_quality.py BUILD_DIR TRACE [--requests N] [--concurrency C]
      [--lru-blocks B] [--pool-blocks P] [--policies round_robin,least_loaded,kv_aware,...]

Prints, per policy: the aggregate prefix hit rate (blocks found in the instance's own cache /
blocks looked up), the load imbalance (most requests on one instance / mean - 1, and the same
for missed blocks), and with a pool: blocks loaded from the pool, prefill tokens saved (blocks
not computed / blocks looked up, own cache and pool together), prefill requests skipped.
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


def block_hashes(prompt):
    """The proxy's hashes of the prompt's whole blocks: FNV-1a chained over blocks 0..i."""
    data, out, h = prompt.encode(), [], 0
    for i in range(len(data) // BLOCK):
        h ^= 0xcbf29ce484222325
        for c in data[i * BLOCK:(i + 1) * BLOCK]:
            h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
        out.append(h or 1)
    return out


class Pool:
    """The simulated store: an LRU of block hashes that publishes KV events."""

    def __init__(self, cap, port):
        import msgpack
        import zmq
        self.msgpack = msgpack
        self.cap, self.lru, self.seq = cap, collections.OrderedDict(), 0
        self.pub = zmq.Context.instance().socket(zmq.PUB)
        self.pub.bind("tcp://127.0.0.1:%d" % port)

    def has(self, h):
        return h in self.lru

    def touch(self, h):
        self.lru.move_to_end(h)

    def publish(self, kind, hs):
        if not hs:
            return
        self.seq += 1
        ev = [{"event_type": kind, "seq_hashes": hs, "object_key": str(h)} for h in hs]
        self.pub.send_multipart([b"", self.seq.to_bytes(8, "big"),
                                 self.msgpack.packb([int(time.time() * 1000), ev, 0])])

    def put(self, hs):
        new = [h for h in hs if h not in self.lru]
        for h in hs:
            self.lru[h] = True
            self.lru.move_to_end(h)
        gone = []
        while len(self.lru) > self.cap:
            gone.append(self.lru.popitem(last=False)[0])
        self.publish("stored", [h for h in new if h in self.lru])
        self.publish("removed", gone)

    def close(self):
        self.pub.close(0)


class Prefill:
    def __init__(self, cap, delay, pool=None, load_delay=0.0):
        self.cap, self.delay, self.pool, self.load_delay = cap, delay, pool, load_delay
        self.lru = collections.OrderedDict()
        self.hits = self.looked = self.requests = self.missed = self.loaded = 0

    def serve(self, prompt):
        """Returns the time the request costs: blocks computed and blocks loaded."""
        blocks = block_hashes(prompt)
        n = 0
        for b in blocks:
            if b not in self.lru:
                break
            n += 1
        avail = n
        if self.pool is not None:
            while avail < len(blocks) and self.pool.has(blocks[avail]):
                self.pool.touch(blocks[avail])
                avail += 1
        self.hits += n
        self.loaded += avail - n
        self.looked += len(blocks)
        self.requests += 1
        self.missed += len(blocks) - avail
        for b in blocks:
            self.lru[b] = True
            self.lru.move_to_end(b)
        while len(self.lru) > self.cap:
            self.lru.popitem(last=False)
        if self.pool is not None:
            self.pool.put(blocks[avail:])
        return self.delay * (len(blocks) - avail) + self.load_delay * (avail - n)


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
                elif inst.decode:
                    # The decode computes (or loads) only what no prefill prepared for it.
                    req = json.loads(body)
                    if "kv_transfer_params" not in req:
                        cost = inst.serve(req["prompt"])
                        if cost:
                            await asyncio.sleep(cost)
                    reply(w, b'{"choices":[{"text":"x"}]}')
                else:
                    cost = inst.serve(json.loads(body)["prompt"])
                    if cost:
                        await asyncio.sleep(cost)
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


async def metric(port, name):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /metrics HTTP/1.0\r\n\r\n")
    data = (await r.read()).decode()
    w.close()
    for line in data.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


async def run_policy(a, policy, prompts):
    # Connections still open when the servers close are cancelled: not worth a traceback.
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: None)
    pool = Pool(a.pool_blocks, free_port()) if a.pool_blocks else None
    insts = [Prefill(a.lru_blocks, a.miss_delay, pool, a.load_delay) for _ in range(5)]
    for i, inst in enumerate(insts):
        inst.decode = i == 4
    ports = [free_port() for _ in range(5)]
    servers = [await asyncio.start_server(server(i), "127.0.0.1", p, backlog=512)
               for i, p in zip(insts, ports)]
    xp = free_port()
    base, _, extra = policy.partition("+")
    cmd = [os.path.join(a.build, "mooncake_proxy"), "--host", "127.0.0.1", "--port", str(xp),
           "--log-level", "ERROR", "--scheduling", base, "--kv_block_bytes", str(BLOCK),
           "--kv_cache_blocks", str(a.proxy_blocks or a.lru_blocks), "--prefill"]
    cmd += ["127.0.0.1:%d" % p for p in ports[:4]] + ["--decode", "127.0.0.1:%d" % ports[4]]
    if "pool" in extra:
        ep = pool.pub.getsockopt_string(__import__("zmq").LAST_ENDPOINT)
        cmd += ["--kv_events_endpoint", ep, "--kv_pool_blocks", str(2 * a.pool_blocks)]
    if "skip" in extra:
        cmd += ["--kv_pool_skip_prefill"]
    cmd += a.proxy_args.split()
    px = subprocess.Popen(cmd)
    for _ in range(100):
        try:
            _, w = await asyncio.open_connection("127.0.0.1", xp)
            w.close()
            break
        except OSError:
            await asyncio.sleep(0.05)
    for _ in range(100):
        if "pool" not in extra or await metric(xp, "mooncake_proxy_kv_events_connected") == 1:
            break
        await asyncio.sleep(0.05)
    t0 = time.time()
    errors = await client(xp, prompts, a.concurrency)
    dt = time.time() - t0
    skipped = await metric(xp, "mooncake_proxy_kv_pool_prefill_skipped_total") or 0
    px.terminate()
    px.wait()
    for s in servers:
        s.close()
    if pool:
        pool.close()
    pre = insts[:4]
    hits = sum(i.hits for i in insts)
    looked = sum(i.looked for i in insts)
    reqs = [i.requests for i in pre]
    miss = [i.missed for i in pre]
    imb = max(reqs) / (sum(reqs) / 4) - 1
    imb_m = max(miss) / (sum(miss) / 4) - 1 if sum(miss) else 0
    line = ("%-18s hit rate %5.1f%%  requests per instance %s (imbalance %4.1f%%), missed blocks "
            "imbalance %4.1f%%, %d errors, %.1fs" % (policy, 100.0 * hits / looked, reqs,
                                                      100 * imb, 100 * imb_m, errors, dt))
    if pool:
        loaded = sum(i.loaded for i in insts)
        computed = sum(i.missed for i in insts)
        line += ("\n%-18s   pool loads %5.1f%%, prefill tokens saved %5.1f%% (computed %d of %d "
                 "blocks), prefill requests skipped %d" %
                 ("", 100.0 * loaded / looked, 100.0 * (looked - computed) / looked, computed,
                  looked, skipped))
    print(line, flush=True)
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
    p.add_argument("--pool-blocks", type=int, default=0,
                   help="blocks of the simulated store's pool (0: no pool)")
    p.add_argument("--load-delay", type=float, default=0.00001,
                   help="seconds to load one block from the pool")
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
          "concurrency %d%s" % (len(prompts), sum(len(x) // BLOCK for x in prompts),
                                a.lru_blocks, a.concurrency,
                                ", a pool of %d blocks" % a.pool_blocks if a.pool_blocks else ""))
    if a.pool_blocks == 0 and "pool" in a.policies:
        p.error("the +pool policies need --pool-blocks")
    res = {}
    for pol in a.policies.split(","):
        res[pol] = asyncio.run(run_policy(a, pol, prompts))
    if "kv_aware" in res and res.get("round_robin"):
        print("kv_aware / round_robin hit rate: %.2fx" % (res["kv_aware"] / res["round_robin"]))


if __name__ == "__main__":
    sys.exit(main())
