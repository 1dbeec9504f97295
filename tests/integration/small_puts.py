# SPDX-License-Identifier: Apache-2.0
"""Small puts over tcp, as scripts/bench-scale.sh makes them, checked byte for byte: batches of
128 values of 64 bytes under 48-byte keys, one batch with a 1 MiB value among small ones (too
large for the writer's own connections: the loop's lanes carry it), read back with get_batch
and get.  Prints TAP lines; exits 1 on a failure.  Usage: small_puts.py MASTER PREFIX"""
import sys

from mooncake.store import MooncakeDistributedStore

master, prefix = sys.argv[1], sys.argv[2]
st = MooncakeDistributedStore()
fails = 0


def check(cond, what):
    global fails
    print(("ok" if cond else "not ok") + " - " + what)
    fails += 0 if cond else 1


check(st.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0, "setup")
keys, vals = [], []
for b in range(3):
    ks = [("%s-%d-%05d-" % (prefix, b, i)).ljust(48, "k") for i in range(128)]
    vs = [bytes([(b * 128 + i + j) % 251 for j in range(64)]) for i in range(128)]
    check(st.put_batch(ks, vs) == 0, "put_batch %d: 128 values of 64 bytes" % b)
    keys += ks
    vals += vs
big = bytes(range(256)) * 4096
ks = [prefix + "-mixed-%d" % i for i in range(8)]
vs = [b"s%d" % i * 20 for i in range(7)] + [big]
check(st.put_batch(ks, vs) == 0, "put_batch with a 1 MiB value among small ones")
keys += ks
vals += vs
got = st.get_batch(keys)
check(len(got) == len(keys) and all(g == v for g, v in zip(got, vals)),
      "get_batch returns every value byte for byte")
check(st.get(keys[5]) == vals[5] and st.get(ks[-1]) == big, "get returns them too")
check(st.batch_is_exist(keys) == [1] * len(keys), "batch_is_exist finds every key")
desc = st.batch_get_replica_desc(keys[:4])
check(all(len(desc[k]) == 1 and desc[k][0].is_memory_replica() and
          desc[k][0].get_memory_descriptor().buffer_descriptor.size_ == 64 for k in keys[:4]),
      "batch_get_replica_desc describes one 64-byte memory replica per key")
st.close()
sys.exit(1 if fails else 0)
