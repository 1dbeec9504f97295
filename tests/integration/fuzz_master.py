# SPDX-License-Identifier: Apache-2.0
"""Random and mutated RPC frames against a master: it must keep answering a well-behaved client.

    fuzz_master.py HOST:PORT SEED SECONDS
"""
import os, random, socket, struct, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcrpc import *
addr = sys.argv[1]
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
ops = list(OP.values()) + [0, 99, 65535]
good = Client(addr)
seg = os.urandom(16)
good.call("MOUNT_SEGMENT", good.client_id + segment(seg, "f:1", 0x10000000, 1 << 30, "127.0.0.1:1"))
good.call("REMOUNT_SEGMENT", good.client_id + struct.pack("<I", 1) + segment(seg, "f:1", 0x10000000, 1 << 30, "127.0.0.1:1"))
samples = [good.client_id + config() + struct.pack("<I", 2) + s("k1") + struct.pack("<Q", 100) + s("k2") + struct.pack("<Q", 5000),
           keys(["k1", "k2", "zz"]), b"\x01" + keys(["k1"]), good.client_id + b"\x04" + keys(["k1", "k2"]),
           s("^k"), b"\x01" + s("k.*"), good.client_id + segment(os.urandom(16), "g:1", 0x50000000, 1 << 20, "x:1")]
end = time.time() + float(sys.argv[3]) if len(sys.argv) > 3 else time.time() + 20
n = 0
while time.time() < end:
    c = Client(addr)
    for _ in range(50):
        op = random.choice(ops)
        if random.random() < 0.5:
            body = bytearray(random.choice(samples))
            for _ in range(random.randint(1, 6)):
                if body:
                    body[random.randrange(len(body))] = random.randrange(256)
            if random.random() < 0.3:
                body = body[:random.randrange(len(body) + 1)]
        else:
            body = os.urandom(random.randint(0, 300))
        try:
            c.call(op, bytes(body))
        except (ConnectionError, AssertionError, OSError):
            c = Client(addr)
        n += 1
    c.close()
st, r = good.call("SERVICE_READY")
print("# fuzzed %d frames" % n)
sys.exit(0 if st == 0 else 1)
