#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Put (or remove) the objects a connector would store for a prompt's blocks, named the way
mooncake_proxy maps a prompt to pool keys (test_proxy_kvpool.sh): the prompt is cut in blocks of
BLOCK bytes, block i's hash is the FNV-1a chain over blocks 0..i, and its key is FORMAT with
{hash} (decimal) or {hex} (hexadecimal) replaced by it.

  proxy_pool_keys.py MASTER put|remove FORMAT BLOCK PROMPT [NBLOCKS]

NBLOCKS: only the first NBLOCKS blocks (default: every whole block).  Exit 0 when the master
took every key.
"""
import struct
import sys

from mcrpc import Client, config, keys, s


def block_hashes(prompt, block):
    data, out, h = prompt.encode(), [], 0
    for i in range(len(data) // block):
        h ^= 0xcbf29ce484222325
        for c in data[i * block:(i + 1) * block]:
            h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
        h = h or 1
        out.append(h)
    return out


def key(fmt, h):
    return fmt.replace("{hash}", str(h)).replace("{hex}", "%x" % h)


def main():
    master, op, fmt, block, prompt = sys.argv[1:6]
    hs = block_hashes(prompt, int(block))
    if len(sys.argv) > 6:
        hs = hs[:int(sys.argv[6])]
    names = [key(fmt, h) for h in hs]
    c = Client(master)
    if op == "put":
        body = c.client_id + config() + struct.pack("<I", len(names))
        for n in names:
            body += s(n) + struct.pack("<Q", 4096)
        st, _ = c.call("BATCH_PUT_START", body)
        st2, r2 = c.call("BATCH_PUT_END", c.client_id + struct.pack("<B", 4) + keys(names))
        return 0 if st == 0 and st2 == 0 and r2.codes() == [0] * len(names) else 1
    st, _ = c.call("REMOVE", struct.pack("<B", 1) + keys(names[:1]))
    for n in names[1:]:
        st |= c.call("REMOVE", struct.pack("<B", 1) + keys([n]))[0]
    return 0 if st == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
