#!/usr/bin/env python3
"""Write a synthetic multi-turn conversation trace in the FAST'25 format (JSON lines with
timestamp, input_length, output_length, hash_ids; 512-token blocks) to stdout.

    gen_conv_trace.py [SEED [CONVERSATIONS [SINGLE]]]

Each conversation starts with a system prompt shared by all (block 0) and its own first blocks;
every turn re-sends the previous prompt's full blocks and adds new ones; the last block of each
prompt is partial, so it gets an id of its own that the next turn does not reuse.  SINGLE (0..1)
is the share of conversations of one turn, whose blocks are used once (without it, a quarter, from
a fixed mix of lengths).  Deterministic (seeded) so that test figures are stable."""
import json
import random
import sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
nconv = int(sys.argv[2]) if len(sys.argv) > 2 else 400
single = float(sys.argv[3]) if len(sys.argv) > 3 else None
next_id = [1]


def new_ids(n):
    ids = list(range(next_id[0], next_id[0] + n))
    next_id[0] += n
    return ids


events = []
for c in range(nconv):
    t = rng.uniform(0, 600_000)
    full = [0] + new_ids(rng.randint(1, 6))
    if single is None:
        turns = rng.choice([1, 1, 2, 2, 3, 4, 6, 8])
    else:
        turns = 1 if rng.random() < single else rng.choice([2, 2, 3, 4, 6, 8])
    for turn in range(turns):
        tail = new_ids(1)
        ids = full + tail
        events.append((int(t), ids))
        full = full + tail[:0] + new_ids(rng.randint(1, 4))
        t += rng.expovariate(1 / 60_000)
events.sort(key=lambda e: e[0])
for ts, ids in events:
    print(json.dumps({"timestamp": ts, "input_length": 512 * len(ids) - 100,
                      "output_length": 200, "hash_ids": ids}))
