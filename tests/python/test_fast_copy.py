# SPDX-License-Identifier: Apache-2.0
"""mooncake._fast_copy.concat_arrays_into, as upstream's: bytes copied back to back, the slice
start/count, several threads, and its errors.  Runs against upstream's wheel too (MC_PARITY_BIN)."""
import ctypes

import pytest

np = pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh adds it)")
from mooncake import _fast_copy  # noqa: E402


def arrays():
    return [np.arange(n, dtype=np.int32) * (i + 1) for i, n in enumerate((5, 0, 17, 1000, 3))]


@pytest.mark.parametrize("nthreads", [1, 2, 4, 16])
def test_concat_copies_back_to_back(nthreads):
    a = arrays()
    want = b"".join(x.tobytes() for x in a)
    buf = ctypes.create_string_buffer(len(want) + 8)
    n = _fast_copy.concat_arrays_into(a, ctypes.addressof(buf), len(want) + 8, 0, -1, nthreads)
    assert n == len(want) and buf.raw[:n] == want and buf.raw[n:] == b"\0" * 8


def test_start_and_count_pick_a_slice():
    a = arrays()
    want = a[2].tobytes() + a[3].tobytes()
    buf = ctypes.create_string_buffer(len(want))
    assert _fast_copy.concat_arrays_into(a, ctypes.addressof(buf), len(want), 2, 2) == len(want)
    assert buf.raw == want
    assert _fast_copy.concat_arrays_into(a, ctypes.addressof(buf), len(want), 9) == 0
    assert _fast_copy.concat_arrays_into([], 0, 0) == 0


def test_errors():
    buf = ctypes.create_string_buffer(64)
    p = ctypes.addressof(buf)
    with pytest.raises(ValueError):
        _fast_copy.concat_arrays_into([np.zeros(100, np.uint8)], p, 64)
    with pytest.raises(ValueError):
        _fast_copy.concat_arrays_into([np.zeros((4, 4), np.uint8)[:, 1]], p, 64)
    with pytest.raises(TypeError):
        _fast_copy.concat_arrays_into([1, 2], p, 64)
    with pytest.raises(TypeError):
        _fast_copy.concat_arrays_into((np.zeros(4),), p, 64)
    assert buf.raw == b"\0" * 64
