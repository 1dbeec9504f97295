# SPDX-License-Identifier: Apache-2.0
"""The cost of a batch of small transfers through mooncake.engine, list form against the
0.3.14 arrays form, in the same run: 1024 transfers of 4 KiB between two engines of this
process (same host, so the bytes move through shared memory and the call's own overhead shows).

    bench_engine_arrays.py [ITERATIONS]

Prints the median time per call of batch_transfer_sync_write (lists) and
batch_transfer_sync_write_arrays (array.array, and NumPy arrays when NumPy is there), moving
4 KiB per request, and again with 0-byte requests, which the engine completes without moving
anything: the cost of the call itself (arguments, 1024 requests built and checked)."""
import array
import ctypes
import statistics
import sys
import time

from mooncake.engine import TransferEngine

N, SIZE = 1024, 4096


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    tgt, ini = TransferEngine(), TransferEngine()
    for e in (tgt, ini):
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    name = "127.0.0.1:%d" % tgt.get_rpc_port()
    tb, ib = ctypes.create_string_buffer(N * SIZE), ctypes.create_string_buffer(N * SIZE)
    t, i = ctypes.addressof(tb), ctypes.addressof(ib)
    assert tgt.register_memory(t, N * SIZE) == 0 and ini.register_memory(i, N * SIZE) == 0
    bufs = [i + k * SIZE for k in range(N)]
    peers = [t + k * SIZE for k in range(N)]
    try:
        import numpy as np
    except ImportError:
        np = None
    for size in (SIZE, 0):
        lens = [size] * N
        forms = {"lists": lambda: ini.batch_transfer_sync_write(name, bufs, peers, lens)}
        ab, ap, al = array.array("Q", bufs), array.array("Q", peers), array.array("Q", lens)
        forms["arrays (array.array)"] = \
            lambda: ini.batch_transfer_sync_write_arrays(name, ab, ap, al)
        if np is not None:
            nb, npr = np.array(bufs, np.uint64), np.array(peers, np.uint64)
            nl = np.array(lens, np.uint64)
            forms["arrays (numpy)"] = \
                lambda: ini.batch_transfer_sync_write_arrays(name, nb, npr, nl)
        for f in forms.values():
            assert f() == 0                   # warm up: segment opened, memory mapped
        times = {k: [] for k in forms}
        for _ in range(iters):
            for k, f in forms.items():       # interleaved, so drift hits every form alike
                t0 = time.perf_counter()
                assert f() == 0
                times[k].append(time.perf_counter() - t0)
        print("# %d transfers of %d bytes per call, %d calls each, median per call" %
              (N, size, iters))
        for k, v in times.items():
            print("%-22s %8.1f us" % (k, statistics.median(v) * 1e6))


if __name__ == "__main__":
    main()
