# SPDX-License-Identifier: Apache-2.0
"""Random requests against a TCP data port (headers with odd sizes, opcodes and padding, and
plain garbage).

    fuzz_data.py PORT SECONDS
"""
import os, random, socket, struct, sys, time
host, port = "127.0.0.1", int(sys.argv[1])
random.seed(3)
end = time.time() + float(sys.argv[2])
n = 0
while time.time() < end:
    s = socket.create_connection((host, port), timeout=2)
    try:
        for _ in range(20):
            kind = random.random()
            if kind < 0.4:
                hdr = struct.pack("<QQB7s", random.choice([0, 1, 8, 4096, 1 << 20, 1 << 41, random.getrandbits(64)]),
                                  random.getrandbits(64), random.choice([0x80, 0x81, 0, 1, 0x82, 0xff]), b"\0" * 7)
                s.sendall(hdr + os.urandom(random.randint(0, 64)))
            else:
                s.sendall(os.urandom(random.randint(1, 200)))
            n += 1
            try:
                s.settimeout(0.01)
                s.recv(4096)
            except socket.timeout:
                pass
    except OSError:
        pass
    s.close()
print("# sent %d fuzz messages" % n)
