#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fake vLLM OpenAI server for mooncake_proxy's tests and benchmark (asyncio, HTTP/1.1 with
keep-alive).  Roles: prefill answers one token with kv_transfer_params; decode answers --tokens
tokens, as SSE chunks (chunked transfer encoding) when the request says stream, else one JSON.

  fake_vllm.py --port P --role prefill|decode [--model M] [--tokens N] [--delay S]
               [--log FILE] [--dump DIR]

--log appends one JSON line per completion request (time, role, port, request id, body);
--dump writes the exact body bytes of each decode answer to DIR/<request id>.
POST /fake/fail and /fake/ok switch the instance to answering 500 (and failing /v1/models) and
back; POST /fake/close makes it close connections without answering.
"""
import argparse
import asyncio
import json
import os
import time

A = None
STATE = {"mode": "ok"}


def chunk(b):
    return b"%x\r\n%s\r\n" % (len(b), b)


async def answer(w, code, body, ctype="application/json"):
    w.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" %
            (code, ctype.encode(), len(body)) + body)
    await w.drain()


async def completion(w, path, hdrs, body):
    rid = hdrs.get("x-request-id", "none")
    try:
        req = json.loads(body)
    except ValueError:
        await answer(w, 400, b'{"error": {"message": "bad json"}}')
        return
    if A.log:
        with open(A.log, "a") as f:
            f.write(json.dumps({"t": time.time(), "role": A.role, "port": A.port, "rid": rid,
                                "path": path, "body": req}) + "\n")
    if req.get("fake_status"):
        await answer(w, int(req["fake_status"]), b'{"error": {"message": "refused on purpose"}}')
        return
    if STATE["mode"] == "fail":
        await answer(w, 500, b'{"error": {"message": "failing on purpose"}}')
        return
    if STATE["mode"] == "close":
        w.close()
        return
    if A.delay:
        await asyncio.sleep(A.delay)
    chat = "chat" in path
    if A.role == "prefill":
        out = {"id": rid, "object": "text_completion", "model": A.model,
               "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
               "kv_transfer_params": {"remote_engine_id": "eng-%d" % A.port,
                                      "remote_block_ids": [1, 2, 3],
                                      "remote_host": "127.0.0.1", "remote_port": A.port,
                                      "do_remote_prefill": True, "do_remote_decode": False}}
        await answer(w, 200, json.dumps(out).encode())
        return
    n = int(req.get("max_tokens") or A.tokens)
    n = min(n, A.tokens)
    words = ["tok%d" % i for i in range(n)]
    kv = json.dumps(req.get("kv_transfer_params"))
    dump = open(os.path.join(A.dump, rid), "wb") if A.dump else None
    if req.get("stream"):
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        for i, t in enumerate(words):
            if chat:
                d = {"id": rid, "object": "chat.completion.chunk", "model": A.model,
                     "choices": [{"index": 0, "delta": {"content": t + " "}}]}
            else:
                d = {"id": rid, "object": "text_completion", "model": A.model,
                     "choices": [{"index": 0, "text": t + " "}], "kv": kv if i == 0 else None}
            b = b"data: " + json.dumps(d).encode() + b"\n\n"
            if dump:
                dump.write(b)
            w.write(chunk(b))
            await w.drain()
            if A.delay:
                await asyncio.sleep(A.delay / 10)
        b = b"data: [DONE]\n\n"
        if dump:
            dump.write(b)
        w.write(chunk(b) + b"0\r\n\r\n")
        await w.drain()
    else:
        if chat:
            d = {"id": rid, "object": "chat.completion", "model": A.model,
                 "choices": [{"index": 0, "message": {"role": "assistant",
                                                      "content": " ".join(words)},
                              "finish_reason": "length"}]}
        else:
            d = {"id": rid, "object": "text_completion", "model": A.model,
                 "choices": [{"index": 0, "text": " ".join(words), "finish_reason": "length"}],
                 "kv": kv}
        b = json.dumps(d).encode()
        if dump:
            dump.write(b)
        await answer(w, 200, b)
    if dump:
        dump.close()


async def serve(r, w):
    try:
        while True:
            line = await r.readline()
            if not line:
                break
            method, path, _ = line.decode().split(" ", 2)
            hdrs = {}
            while True:
                h = await r.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, v = h.decode().split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
            body = b""
            if "content-length" in hdrs:
                body = await r.readexactly(int(hdrs["content-length"]))
            if path.startswith("/fake/"):
                STATE["mode"] = path[6:]
                await answer(w, 200, b"{}")
            elif path == "/v1/models" or path == "/health":
                if STATE["mode"] != "ok":
                    await answer(w, 500, b"{}")
                else:
                    await answer(w, 200, json.dumps(
                        {"object": "list", "data": [{"id": A.model, "object": "model"}]}).encode())
            elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                await completion(w, path, hdrs, body)
            else:
                await answer(w, 404, b"{}")
            if w.is_closing():
                break
    except (ConnectionError, ValueError, asyncio.IncompleteReadError):
        pass
    finally:
        w.close()


async def main():
    srv = await asyncio.start_server(serve, "127.0.0.1", A.port, backlog=1024)
    print("fake vllm %s on %d" % (A.role, A.port), flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--role", choices=["prefill", "decode"], required=True)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--delay", type=float, default=0)
    p.add_argument("--log")
    p.add_argument("--dump")
    A = p.parse_args()
    asyncio.run(main())
