#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""KV events against a real master (test_kv_events.sh): a ZeroMQ SUB socket (pyzmq) reads what
the master publishes, msgpack decodes it.

argv: master RPC address, metrics address, the PUB endpoint.  A writer that moves no bytes
(mcrpc) puts keys into the one mounted segment:
- "stored" events, one message per batch, three frames (empty topic, 8-byte big-endian
  sequence numbers counting up by one, [timestamp_ms, [events], dp_rank]), with upstream's
  fields: the configured model_name and block_size, backend_id, tenant_id, medium, object_key,
  seq_hashes for keys that are u64 hashes (decimal or 0x-hex), [] (and skipped_unparsed_keys)
  for the others; "removed" events when an object goes;
- GET /kv_events/status counts them;
- a burst larger than --kv_events_queue_capacity loses its oldest events (dropped_events), and
  subscribers see the loss as a jump of the sequence numbers, while the master keeps
  answering.
Prints TAP lines; exit 0 on pass.
"""
import json
import struct
import sys
import time
import urllib.request

import msgpack
import zmq

from mcrpc import Client, config, keys, s

ADDR, METRICS, EP = sys.argv[1], sys.argv[2], sys.argv[3]
failed = 0
n = 0


def ok(cond, what):
    global failed, n
    n += 1
    failed += 0 if cond else 1
    print(("ok %d" if cond else "not ok %d") % n + " - " + what, flush=True)


def status():
    with urllib.request.urlopen("http://%s/kv_events/status" % METRICS, timeout=5) as r:
        return json.loads(r.read())


c = Client(ADDR)


def put(names):
    body = c.client_id + config() + struct.pack("<I", len(names))
    for name in names:
        body += s(name) + struct.pack("<Q", 4096)
    st, r = c.call("BATCH_PUT_START", body)
    st2, r2 = c.call("BATCH_PUT_END", c.client_id + struct.pack("<B", 4) + keys(names))
    return st == 0 and st2 == 0 and r2.codes() == [0] * len(names)


ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.setsockopt(zmq.RCVHWM, 100000)
sub.connect(EP)
poller = zmq.Poller()
poller.register(sub, zmq.POLLIN)


def recv(timeout_ms=5000):
    if not poller.poll(timeout_ms):
        return None
    frames = sub.recv_multipart()
    return frames


# A subscriber joins a PUB socket asynchronously: put probes until one arrives.
first = None
for i in range(100):
    put(["probe-%d" % i])
    first = recv(100)
    if first:
        break
ok(first is not None and len(first) == 3 and first[0] == b"" and len(first[1]) == 8,
   "messages have three frames: empty topic, 8-byte sequence number, payload")
while recv(200):    # the other probes
    pass

def collect(k, secs=10):
    """Read messages until k events came: [(seq, payload)] (fewer at the deadline)."""
    out, have, end = [], 0, time.time() + secs
    while have < k and time.time() < end:
        m = recv(300)
        if m:
            p = msgpack.unpackb(m[2], raw=False)
            out.append((struct.unpack(">Q", m[1])[0], p))
            have += len(p[1])
    return out


ok(put(["0x10", "123", "plain-key"]), "three objects put in one batch")
msgs = collect(3)
events = [e for _, p in msgs for e in p[1]]
ok(msgs and all(isinstance(p, list) and len(p) == 3 and isinstance(p[0], int) and p[2] == 0
                for _, p in msgs), "payloads are [timestamp_ms, events, dp_rank]")
ok([q for q, _ in msgs] == list(range(msgs[0][0], msgs[0][0] + len(msgs))) if msgs else False,
   "sequence numbers count up by one per message")
ok(len(events) == 3 and all(e["event_type"] == "stored" and e["type"] == "BlockStored"
                            for e in events), "three stored events")
byk = {e.get("object_key"): e for e in events}
e = byk.get("0x10", {})
ok(e.get("seq_hashes") == [16] and e.get("block_hashes") == [16] and e.get("medium") == "cpu"
   and e.get("backend_id") == "test-backend" and e.get("model_name") == "m1" and
   e.get("block_size") == 16 and e.get("tenant_id") == "default" and e.get("dp_rank") == 0 and
   e.get("base_block_idx") == 0 and e.get("parent_hash") is None and
   "token_ids" in e and e.get("lora_name") is None and e.get("additional_salt") is None and
   isinstance(e.get("event_id"), int), "a stored event has upstream's fields: %r" % (e,))
ok(byk.get("123", {}).get("seq_hashes") == [123], "a decimal key is its own seq hash")
ok(byk.get("plain-key", {}).get("seq_hashes") == [], "a key that is no hash has none")
ids = sorted(x["event_id"] for x in events)
ok(ids and ids == list(range(ids[0], ids[0] + 3)), "event ids count up")
last_seq = msgs[-1][0] if msgs else 0

st, r = c.call("REMOVE", struct.pack("<B", 1) + keys(["123"]))
msgs = collect(1)
rem = msgs[0][1][1] if msgs else []
ok(msgs and msgs[0][0] == last_seq + 1 and len(rem) == 1 and
   rem[0]["event_type"] == "removed" and rem[0]["type"] == "BlockRemoved" and
   rem[0]["object_key"] == "123" and rem[0]["base_block_idx"] is None and
   rem[0]["medium"] == "cpu", "Remove publishes a removed event, the next sequence number: %r"
   % (rem,))

st = status()
ok(st["enabled"] is True and st["published_events"] >= 4 and
   st["skipped_unparsed_keys"] >= 1 and st["dropped_events"] == 0,
   "GET /kv_events/status: %r" % (st,))

# A burst past the queue's capacity (100): the oldest are dropped, the sequence jumps.
total = 0
seqs = []
got = 0
t0 = time.time()
for b in range(10):
    names = ["0x%x" % (1000 + b * 1000 + i) for i in range(1000)]
    ok(put(names), "burst batch %d of 1000 puts answered" % b) if b == 0 else put(names)
    total += 1000
print("# burst of %d puts in %.2f s" % (total, time.time() - t0))
deadline = time.time() + 10
while time.time() < deadline:
    msg = recv(300)
    if msg is None:
        if status()["published_events"] + status()["dropped_events"] >= st["published_events"] + total:
            break
        continue
    seqs.append(struct.unpack(">Q", msg[1])[0])
    got += len(msgpack.unpackb(msg[2], raw=False)[1])
st2 = status()
dropped = st2["dropped_events"]
ok(dropped > 0, "events past the queue's capacity were dropped: %d of %d" % (dropped, total))
ok(got + dropped == total, "every event was either received or counted dropped: %d + %d"
   % (got, dropped))
ok(seqs == sorted(seqs) and seqs and seqs[-1] - seqs[0] + 1 > len(seqs),
   "the sequence numbers jump where events were dropped")
ok(put(["after-burst"]), "the master still answers")
sys.exit(1 if failed else 0)
