# SPDX-License-Identifier: Apache-2.0
"""A put batch in a pipeline of parts (MC_PUT_PIPELINE=1: a batch of n keys goes in up to four
parts of at least 64): each part's keys are decided by that part's own answers.  A part whose
writes fail takes only its keys with it (revoked, tried once more, then failed), the other
parts' keys are written and readable; nothing reported 0 is missing or wrong, nothing reported failed
exists.  The test hook MC_TEST_FAULT=put_write:EIO:COUNT:SKIP fails every write of the SKIP+1-th
to SKIP+COUNT-th PutStart's part in the process (the child's two single puts first take two);
it is read when the library loads, so each case runs in a child process."""
import json
import os
import subprocess
import sys

import pytest

from conftest import Cluster


@pytest.fixture
def own_cluster():
    """A cluster of its own: a segment written to in vain is backed off for a while after the
    failure is reported, which would refuse the next test's puts."""
    c = Cluster()
    yield c
    c.stop()

CHILD = r'''
import ctypes, json, sys
from mooncake.store import MooncakeDistributedStore
master, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master) == 0
keys = ["%s/%d" % (prefix, i) for i in range(n)]
vals = [(b"%s:%d:" % (prefix.encode(), i)) * (1 + i % 7) for i in range(n)]
# Keys 3 and n-2 exist already, with other bytes: "exists" is success and keeps them.
pre = [s.put(keys[3], b"old3"), s.put(keys[n - 2], b"oldlast")]
assert pre == [0, 0], pre
bufs = [ctypes.create_string_buffer(v, len(v)) for v in vals]
res = s.batch_put_from(keys, [ctypes.addressof(b) for b in bufs], [len(v) for v in vals])
got = s.get_batch(keys)
print(json.dumps({"res": res, "exist": s.batch_is_exist(keys),
                  "right": [g == v for g, v in zip(got, vals)],
                  "old": [got[3] == b"old3", got[n - 2] == b"oldlast"]}))
s.close()
'''


def run_child(cluster, prefix, n, pipeline, fault=None):
    env = dict(os.environ)
    env["MC_PUT_PIPELINE"] = pipeline
    env.pop("MC_TEST_FAULT", None)
    if fault:
        env["MC_TEST_FAULT"] = fault
    out = subprocess.run([sys.executable, "-c", CHILD, cluster.master, prefix, str(n)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def check(r, n, failed, maybe=()):
    """failed: the indices whose put must have failed; maybe: those that failed once and were
    tried again, which either succeeded or failed whole; keys 3 and n-2 existed.  A failed
    key's code is -800, or -200 when its second try found no segment to go to (those it failed
    on are backed off once the failure is reported)."""
    for i in range(n):
        if i in (3, n - 2):
            assert r["res"][i] == 0 and r["exist"][i] == 1, (i, r["res"][i])
        elif i in failed or (i in maybe and r["res"][i] != 0):
            assert r["res"][i] in (-800, -200) and r["exist"][i] == 0, (i, r["res"][i])
        else:
            assert r["res"][i] == 0 and r["exist"][i] == 1 and r["right"][i], (i, r["res"][i])
    assert r["old"] == [True, True]


@pytest.mark.parametrize("pipeline", ["1", "0"])
def test_batch_in_parts_all_written(cluster, pipeline):
    n = 256
    check(run_child(cluster, "pp-ok" + pipeline, n, pipeline), n, ())


def test_second_part_failing_takes_only_its_keys(own_cluster):
    # Two parts of 64: the first is written, the second's writes fail, and fail again when
    # tried once more (on the other segment); only the second part's keys fail, and are absent.
    n = 128
    check(run_child(own_cluster, "pp-fail2", n, "1", "put_write:EIO:2:3"), n, range(64, n))


def test_first_part_failing_is_tried_again(own_cluster):
    # The first part's writes fail once: revoked and tried once more (written, or refused
    # when every segment it went to is backed off), while the second part went through.
    n = 128
    check(run_child(own_cluster, "pp-fail1", n, "1", "put_write:EIO:1:2"), n, (), range(64))


def test_last_parts_of_four_failing_once(own_cluster):
    # Parts 3 and 4 of four fail once, the first two are written.
    n = 256
    check(run_child(own_cluster, "pp-fail4", n, "1", "put_write:EIO:2:4"), n, (),
          range(128, n))


def test_last_part_of_four_failing(own_cluster):
    n = 256
    r = run_child(own_cluster, "pp-fail4l", n, "1", "put_write:EIO:2:5")
    check(r, n, range(192, n))


def test_one_part_batch_failing_fails_all(own_cluster):
    n = 128
    check(run_child(own_cluster, "pp-fail0", n, "0", "put_write:EIO:2:2"), n, range(n))
