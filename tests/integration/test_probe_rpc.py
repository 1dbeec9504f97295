# SPDX-License-Identifier: Apache-2.0
"""The master's 0.3.14 surface at the protocol level: ProbeKey and BatchProbeKey (no lease,
LastHitOnly), RegisterPrefetchTask on a master without SSD areas, the admin soft pin routes,
/version, and the metrics 0.3.14 added.  Usage: test_probe_rpc.py RPC_ADDR METRICS_ADDR."""
import json
import struct
import sys
import urllib.error
import urllib.request

sys.path.insert(0, __import__("os").path.dirname(__file__))
from mcrpc import Client, config, keys, s, segment, wait_until  # noqa: E402

ADDR, HTTP = sys.argv[1], sys.argv[2]
n_checks = n_failed = 0


def ok(cond, what):
    global n_checks, n_failed
    n_checks += 1
    n_failed += not cond
    print(("ok" if cond else "not ok") + " %d - %s" % (n_checks, what), flush=True)


def put(c, names, size=1000):
    body = c.client_id + config() + struct.pack("<I", len(names))
    for n in names:
        body += s(n) + struct.pack("<Q", size)
    c.call("BATCH_PUT_START", body)
    st, r = c.call("BATCH_PUT_END", c.client_id + b"\x04" + keys(names))
    return r.codes()


def probe(c, names, policy=None, cs=1):
    if policy is None:
        st, r = c.call("PROBE_KEY", keys(names))
    else:
        st, r = c.call("BATCH_PROBE_KEY", struct.pack("<BI", policy, cs) + keys(names))
    return st, (r.codes() if st == 0 else None)


def http(path, body=None, method=None):
    req = urllib.request.Request("http://%s%s" % (HTTP, path), data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(name):
    for line in http("/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def removable(c, name):
    """Remove without force: refused (-706) while a read lease holds the object."""
    st, r = c.call("REMOVE", b"\x00" + keys([name]))
    return r.codes()[0] if st == 0 else st


def main():
    c = Client(ADDR)
    c.call("MOUNT_SEGMENT", c.client_id + segment(b"\x01" * 16, "probe:1", 0x10000000, 64 << 20,
                                                   "127.0.0.1:3001"))
    c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) +
           segment(b"\x01" * 16, "probe:1", 0x10000000, 64 << 20, "127.0.0.1:3001"))
    names = ["p/%d" % i for i in range(6)]
    ok(put(c, names) == [0] * 6, "six objects put")

    st, codes = probe(c, ["p/1"])
    ok(st == 0 and codes == [1], "ProbeKey of a present key answers 1")
    ok(probe(c, ["nope"])[1] == [0], "ProbeKey of a missing key answers 0")
    ok(probe(c, ["p/0", "nope", "p/2"], 0)[1] == [1, 0, 1], "BatchProbeKey(none) answers per key")
    ok(removable(c, "p/0") == 0, "after a probe the object has no lease: Remove succeeds")

    c.call("BATCH_EXIST_KEY", keys(["p/1"]))
    ok(removable(c, "p/1") == -706, "after ExistKey the object is leased: Remove refused (-706)")

    # LastHitOnly, groups of two: [p/2 p/3] [nope p/4] [p/5 p/5] -> only the last whole group.
    st, codes = probe(c, ["p/2", "p/3", "nope", "p/4", "p/5", "p/5"], 1, 2)
    ok(st == 0 and codes == [1, 1, 0, 1, 1, 1], "LastHitOnly answers like none")
    ok(removable(c, "p/5") == -706, "LastHitOnly leased the last all-present group")
    ok(removable(c, "p/4") == 0 and removable(c, "p/2") == 0,
       "and no other group (a partial group and an earlier whole one)")
    st, _ = probe(c, ["p/3", "p/5", "p/3"], 1, 2)
    ok(st == -600, "LastHitOnly with a candidate_size that does not divide the keys: -600")
    ok(probe(c, ["p/3"], 1, 0)[0] == -600, "LastHitOnly with candidate_size 0: -600")
    ok(probe(c, ["p/3"], 7, 1)[0] == -600, "an unknown policy: -600")
    ok(probe(c, ["p/3"], 0, 0)[1] == [1], "policy none ignores candidate_size")
    ok(probe(c, [], 0, 1) == (0, []), "an empty batch answers an empty list")

    st, r = c.call("REGISTER_PREFETCH_TASK", keys(["p/3", "nope"]))
    ok(st == 0 and r.codes() == [0, -704],
       "RegisterPrefetchTask: nothing to do for an object in memory, -704 for a missing key")

    # Admin soft pin, upstream's bodies and answers.
    code, body = http("/api/v1/soft_pin", json.dumps({"keys": ["p/3", "nope"],
                                                      "ttl_ms": 60000}).encode())
    ok(code == 200 and json.loads(body) == {"results": [{"key": "p/3", "error_code": 0},
                                                        {"key": "nope", "error_code": -704}]},
       "POST /api/v1/soft_pin pins per key: " + body)
    ok(metric("master_soft_pin_key_count") == 1, "master_soft_pin_key_count counts it")
    code, body = http("/api/v1/soft_pin", json.dumps({"keys": ["p/3"],
                                                      "ttl_ms": 10 ** 12}).encode())
    ok(code == 200 and json.loads(body)["results"][0]["error_code"] == -600,
       "a ttl_ms above --max_kv_soft_pin_ttl is -600 for the key")
    for bad in ({"keys": ["p/3"]}, {"keys": [], "ttl_ms": 1}, {"keys": "p/3", "ttl_ms": 1},
                {"keys": ["p/3"], "ttl_ms": 1, "other": 1}, {"keys": ["p/3"], "ttl_ms": -1},
                {"keys": ["p/3"], "ttl_ms": 1, "tenant_id": "t9"}):
        code, body = http("/api/v1/soft_pin", json.dumps(bad).encode())
        ok(code == 400 and json.loads(body)["error_code"] == -600,
           "soft_pin refuses %s with 400/-600" % json.dumps(bad))
    code, body = http("/api/v1/soft_pin", b"not json")
    ok(code == 400 and "Invalid JSON body" in body, "a body that is not JSON: 400")
    code, body = http("/api/v1/soft_unpin", json.dumps({"keys": ["p/3"], "ttl_ms": 5}).encode())
    ok(code == 400, "soft_unpin refuses ttl_ms")
    code, body = http("/api/v1/soft_unpin", json.dumps({"keys": ["p/3", "nope"],
                                                        "tenant_id": "default"}).encode())
    ok(code == 200 and [x["error_code"] for x in json.loads(body)["results"]] == [0, -704],
       "POST /api/v1/soft_unpin clears the pin: " + body)
    ok(metric("master_soft_pin_key_count") == 0, "and the gauge goes back to 0")
    ok(http("/api/v1/soft_pin")[0] == 405, "GET /api/v1/soft_pin: 405")

    code, body = http("/version")
    v = json.loads(body) if code == 200 else {}
    ok(v.get("version") == "2.0.0" and v.get("display_version", "").startswith("0.3.14"),
       "GET /version: " + body)

    # PutStart of an existing key counts, single and batch items apart.
    c.call("PUT_START", c.client_id + config() + struct.pack("<I", 1) + s("p/3") +
           struct.pack("<Q", 10))
    body = c.client_id + config() + struct.pack("<I", 2)
    for n in ("p/3", "p/5"):
        body += s(n) + struct.pack("<Q", 10)
    c.call("BATCH_PUT_START", body)
    ok(metric("master_put_start_object_already_exists_total") == 1,
       "master_put_start_object_already_exists_total counts PutStart")
    ok(metric("master_batch_put_start_object_already_exists_total") == 2,
       "master_batch_put_start_object_already_exists_total counts BatchPutStart items")
    ok(metric("master_batch_probe_key_requests_total") == 7 and
       metric("master_probe_key_requests_total") == 2,
       "ProbeKey and BatchProbeKey have their request counters")
    for name in ("rss", "rss_anon", "rss_file", "rss_shmem", "rss_peak", "swap", "vsize"):
        v = metric("mooncake_process_%s_bytes" % name)
        ok(v is not None and (v > 0 or name in ("swap", "rss_shmem")),
           "mooncake_process_%s_bytes is exported (%s)" % (name, v))
    for name in ("enqueued", "completed", "failed", "cancelled", "enqueue_rejected"):
        ok(metric("master_offload_%s_total" % name) == 0, "master_offload_%s_total" % name)
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
