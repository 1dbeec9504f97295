#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Dynamic MEMORY replication of hot keys against real daemons (test_dyn_replication.sh).

A master with --dynamic_replication_mode=enforce, two mooncake_clients (B, C) and this process
(A): a key read past the threshold gets one more MEMORY replica, through a copy task, up to
--dynamic_replication_max_memory_replicas; a cold key keeps its one replica; a master in observe
mode only counts hot keys.
"""
import os
import sys

import mc_cluster
from mc_cluster import ok, wait_for

from mooncake.store import ReplicateConfig  # noqa: E402

c = mc_cluster.Cluster()
try:
    ok(c.start_master("--dynamic_replication_mode=enforce",
                      "--dynamic_replication_heat_window_seconds=5",
                      "--dynamic_replication_admission_qps_threshold=2",
                      "--dynamic_replication_max_memory_replicas=2"), "master up (enforce)")
    B = c.start_client("B")
    C = c.start_client("C")
    ok(B and C, "two mooncake_clients up")
    a = mc_cluster.store(c)
    A = a.get_hostname()

    def on(key):
        return sorted(r.segment_name for r in a.get_replica_desc(key))

    cfg = ReplicateConfig()
    cfg.preferred_segment = A
    hot, cold = os.urandom(256 << 10), os.urandom(256 << 10)
    ok(a.put("hot", hot, cfg) == 0 and a.put("cold", cold, cfg) == 0, "two keys on A")
    ok(a.get("cold") == cold, "the cold key is read once")
    for _ in range(12):     # past 2 reads/s over 5 s
        a.get("hot")
    ok(wait_for("a second replica of the hot key", lambda: len(on("hot")) == 2),
       "the hot key got a second MEMORY replica: %r" % (on("hot"),))
    ok(a.get("hot") == hot, "it reads back intact")
    for _ in range(30):
        a.get("hot")
    ok(len(on("hot")) == 2, "no more than --dynamic_replication_max_memory_replicas: %r" %
       (on("hot"),))
    ok(on("cold") == [A], "the cold key kept its one replica")
    ok((c.metric("master_dynamic_replication_tasks_total") or 0) >= 1 and
       (c.metric("master_dynamic_replication_hot_keys_total") or 0) >= 1,
       "master_dynamic_replication_* count it")
    a.close()
    c.kill("B")
    c.kill("C")
    c.kill("master")
    ok(c.start_master("--dynamic_replication_mode=observe",
                      "--dynamic_replication_admission_qps_threshold=1"), "master up (observe)")
    a = mc_cluster.store(c)
    B = c.start_client("B")
    ok(B, "a mooncake_client up")
    ok(a.put("hot2", hot, cfg) == 0, "a key on A")
    for _ in range(30):
        a.get("hot2")
    ok(wait_for("the hot key to be counted",
                lambda: (c.metric("master_dynamic_replication_hot_keys_total") or 0) >= 1),
       "observe counts the hot key")
    ok(on("hot2") == [A] and (c.metric("master_dynamic_replication_tasks_total") or 0) == 0,
       "observe makes no copy")
    a.close()
finally:
    c.stop()
print("1..%d" % mc_cluster.count)
sys.exit(1 if mc_cluster.failures else 0)
