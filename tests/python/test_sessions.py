# SPDX-License-Identifier: Apache-2.0
"""Put and get sessions with the *_multi_buffer_ranges forms, against a live master.

Runs against upstream's wheel as well (MC_PARITY_BIN, see conftest.py).
"""
import ctypes

import pytest

from mooncake.store import MooncakeDistributedStore, ReplicateConfig


@pytest.fixture
def st(master):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 16 << 20, "tcp", "", master) == 0
    src = ctypes.create_string_buffer(b"A" * 100 + b"B" * 100, 4096)
    dst = ctypes.create_string_buffer(4096)
    assert s.register_buffer(ctypes.addressof(src), 4096) == 0
    assert s.register_buffer(ctypes.addressof(dst), 4096) == 0
    yield s, ctypes.addressof(src), dst, ctypes.addressof(dst)
    s.remove_all()
    s.close()


def test_put_session_round_trip(st):
    s, a, _, _ = st
    assert s.batch_put_from_multi_buffer_ranges(["ps/1"], [[a]], [[10]], [[0]]) == [-600]
    assert s.batch_put_session_start(["ps/1", "ps/2"], [20, 30]) == [0, 0]
    assert s.batch_is_exist(["ps/1", "ps/2"]) == [0, 0]      # not visible yet
    assert s.get("ps/1") == b""
    assert s.batch_put_from_multi_buffer_ranges(
        ["ps/1", "ps/2"], [[a, a + 100], [a]], [[10, 10], [30]], [[0, 10], [0]]) == [20, 30]
    assert s.batch_put_session_end(["ps/1", "ps/2"]) == [0, 0]
    assert s.batch_put_session_end(["ps/1"]) == [-600]       # already ended
    assert s.get("ps/1") == b"A" * 10 + b"B" * 10
    assert s.get("ps/2") == b"A" * 30


def test_put_session_start_codes(st):
    s, _, _, _ = st
    assert s.put("ps/there", b"x") == 0
    assert s.batch_put_session_start(["ps/there", "ps/new"], [20, 5]) == [-705, 0]
    assert s.batch_put_session_start(["ps/dup", "ps/dup"], [4, 4]) == [0, -705]
    assert s.batch_put_session_start(["ps/z"], [0]) == [-600]
    assert s.batch_put_session_start(["ps/m"], [1, 2]) == [-600]
    assert s.batch_put_session_start([], []) == []
    assert s.batch_put_session_revoke(["ps/new", "ps/dup"]) == [0, 0]
    assert s.batch_put_session_revoke(["ps/none"]) == [-600]
    assert s.batch_put_session_end(["ps/new"]) == [-600]
    assert s.get("ps/new") == b""
    with pytest.raises(TypeError):
        s.batch_put_session_start([1], [4])


def test_put_session_bad_ranges(st):
    s, a, _, _ = st
    assert s.batch_put_session_start(["pr/1"], [20]) == [0]
    assert s.batch_put_from_multi_buffer_ranges(["pr/1"], [[a]], [[10]], [[15]]) == [-600]
    assert s.batch_put_from_multi_buffer_ranges(["pr/1", "pr/2"], [[a]], [[10]],
                                                [[0]]) == [-600, -600]
    assert s.batch_put_from_multi_buffer_ranges(["pr/1"], [[a, a]], [[10]], [[0]]) == [-600]
    with pytest.raises(TypeError):
        s.batch_put_from_multi_buffer_ranges(["pr/1"], [a], [[10]], [[0]])
    assert s.batch_put_session_revoke(["pr/1"]) == [0]


def test_get_session_ranges(st):
    s, a, dst, b = st
    assert s.put_from("gs/1", a, 200) == 0
    assert s.batch_get_into_multi_buffer_ranges(["gs/1"], [[b]], [[5]], [[98]]) == [-600]
    assert s.batch_get_session_start(["gs/1", "gs/none"]) == [0, -704]
    assert s.batch_get_into_multi_buffer_ranges(["gs/1"], [[b, b + 100]], [[5, 3]],
                                                [[98, 0]]) == [8]
    assert dst.raw[:5] == b"AABBB" and dst.raw[100:103] == b"AAA"
    assert s.batch_get_into_multi_buffer_ranges(["gs/1", "gs/x"], [[b]], [[5]],
                                                [[0]]) == [-600, -600]
    assert s.batch_get_into_multi_buffer_ranges(["gs/1"], [[b]], [[5]], [[198]]) == [-600]
    assert s.batch_get_into_multi_buffer_ranges(["gs/none"], [[b]], [[5]], [[0]]) == [-600]
    assert s.batch_get_session_end(["gs/1", "gs/none"]) == 0
    assert s.batch_get_session_end(["gs/1"]) == 0
    assert s.batch_get_into_multi_buffer_ranges(["gs/1"], [[b]], [[5]], [[0]]) == [-600]


def test_put_session_with_config(st):
    s, a, _, _ = st
    cfg = ReplicateConfig()
    cfg.with_hard_pin = True
    assert s.batch_put_session_start(["pc/1"], [100], cfg) == [0]
    assert s.batch_put_from_multi_buffer_ranges(["pc/1"], [[a]], [[100]], [[0]]) == [100]
    assert s.batch_put_session_end(["pc/1"]) == [0]
    assert s.get("pc/1") == b"A" * 100
