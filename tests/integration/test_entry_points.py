#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Upstream's entry points against real daemons (test_entry_points.sh).

- `python -m mooncake.http_metadata_server` runs the C server (the same process) or, with
  --python, serves the same protocol itself: both answer the same to the same requests;
- `python -m mooncake.mooncake_store_service` (mc_store_rest_server) sets a store up from a
  mooncake.json and serves upstream's REST endpoints with upstream's bodies and status codes,
  bad input included; mounted segments reach the master and go again;
- `transfer_engine_topology_dump` with upstream's flags; the cli modules run the programs.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import mc_cluster
from mc_cluster import BUILD, free_port, ok, wait_for, wait_port

PY = sys.executable


def req(port, path, method="GET", body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method)
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def jreq(port, path, method="GET", body=None, raw=None):
    status, text, _ = req(port, path, method, body, raw)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def req_fails(port):
    try:
        req(port, "/health")
        return False
    except OSError:
        return True


c = mc_cluster.Cluster()
env = dict(os.environ, MOONCAKE_BIN_DIR=BUILD)
procs = []


def spawn(name, argv, extra_env=None):
    f = open(c.log(name), "a")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                         env=dict(env, **(extra_env or {})))
    procs.append(p)
    return p


try:
    # ---- the metadata server, C and Python ----
    answers = {}
    for mode in ("c", "python"):
        port = free_port()
        argv = [PY, "-m", "mooncake.http_metadata_server", "--port", str(port),
                "--host", "127.0.0.1", "--log-level", "WARNING"]
        if mode == "python":
            argv.append("--python")
        p = spawn("meta-" + mode, argv, {"LD_PRELOAD": ""} if mode == "c" else None)
        ok(wait_port(port), "python -m mooncake.http_metadata_server (%s) listens" % mode)
        if mode == "c":
            exe = os.path.realpath("/proc/%d/exe" % p.pid)
            ok(exe.endswith("mooncake_http_metadata_server"),
               "it is the C server, in the same process: %s" % exe)
        seq = [req(port, "/metadata?key=a", "PUT", raw=b'{"x":1}')[:2],
               req(port, "/metadata?key=a")[:2],
               req(port, "/metadata?key=nope")[:2],
               req(port, "/metadata?key=x/rpc_meta", "PUT", raw=b"v1")[:2],
               req(port, "/metadata?key=x/rpc_meta", "PUT", raw=b"v1")[:2],
               req(port, "/metadata?key=x/rpc_meta", "PUT", raw=b"v2")[:2],
               req(port, "/metadata?key=a", "DELETE")[:2],
               req(port, "/metadata?key=a", "DELETE")[:2],
               req(port, "/metadata")[:2],
               req(port, "/metadata?key=a", "POST", raw=b"")[0],
               req(port, "/health")[:2],
               req(port, "/other")[0]]
        answers[mode] = seq
        ok(seq[0] == (200, b"metadata updated") and seq[1] == (200, b'{"x":1}') and
           seq[2] == (404, b"metadata not found") and seq[4] == (200, b"metadata unchanged") and
           seq[5] == (400, b"Duplicate rpc_meta key not allowed") and
           seq[6] == (200, b"metadata deleted") and seq[7][0] == 404 and seq[8][0] == 400 and
           seq[9] == 405 and seq[10] == (200, b"OK") and seq[11] == 404,
           "the %s server speaks the protocol: %r" % (mode, seq))
        p.send_signal(signal.SIGTERM)
        ok(p.wait(10) is not None, "the %s server stops on SIGTERM" % mode)
    ok(answers["c"] == answers["python"], "the Python server answers as the C server does")

    # ---- mc_store_rest_server ----
    ok(c.start_master("--default_kv_lease_ttl=50"), "master up")
    conf = os.path.join(c.tmp, "mooncake.json")
    with open(conf, "w") as f:
        json.dump({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                   "global_segment_size": "32MB", "local_buffer_size": "16MB",
                   "protocol": "tcp", "master_server_address": c.master}, f)
    rport = free_port()
    rest = spawn("rest", [PY, "-m", "mooncake.mooncake_store_service", "--config", conf,
                          "--port", str(rport), "-Dlocal_buffer_size=32MB"])
    ok(wait_port(rport, 60), "mc_store_rest_server serves on --port")

    def capacity():
        return c.metric("master_total_capacity_bytes") or 0

    ok(wait_for("the service's segment", lambda: capacity() == 32 << 20),
       "its segment is mounted at the master: %r" % (capacity(),))
    ok(jreq(rport, "/api/put", "PUT", {"key": "k1", "value": "hello"}) ==
       (200, {"status": "success"}), "PUT /api/put")
    status, body, ctype = req(rport, "/api/get/k1")
    ok(status == 200 and body == b"hello" and ctype.startswith("application/octet-stream"),
       "GET /api/get/k1 gives the bytes: %r %r %r" % (status, body, ctype))
    ok(jreq(rport, "/api/exist/k1") == (200, {"exists": True}), "GET /api/exist of a key")
    ok(jreq(rport, "/api/exist/nope") == (200, {"exists": False}), "GET /api/exist of none")
    ok(jreq(rport, "/api/get/nope") == (404, {"error": "Key not found"}),
       "GET /api/get of a missing key is 404")
    ok(jreq(rport, "/api/put", "PUT", {"key": "k2"}) == (400, {"error": "Missing key or value"}),
       "PUT without a value is 400")
    status, body = jreq(rport, "/api/put", "PUT", raw=b"{not json")
    ok(status == 500 and "error" in body, "PUT with a body that is not JSON is 500: %r" % (body,))
    ok(jreq(rport, "/api/put", "PUT", {"key": "a%2Fb", "value": "x"})[0] == 200 and
       req(rport, "/api/get/a%252Fb")[:2] == (200, b"x"), "a key is URL-decoded from the path")
    ok(req(rport, "/api/nope")[0] == 404 and req(rport, "/api/put", "GET")[0] == 405,
       "an unknown path is 404, another method 405")
    time.sleep(0.2)     # the read lease (50 ms)
    ok(jreq(rport, "/api/remove/k1", "DELETE") == (200, {"status": "success"}) and
       jreq(rport, "/api/exist/k1") == (200, {"exists": False}), "DELETE /api/remove/k1")
    ok(jreq(rport, "/api/remove/k1", "DELETE") ==
       (500, {"error": "Remove operation failed"}), "removing a missing key is 500, as upstream")
    for i in range(3):
        jreq(rport, "/api/put", "PUT", {"key": "m%d" % i, "value": "v"})
    time.sleep(0.2)     # the read lease (50 ms)
    ok(jreq(rport, "/api/remove_all", "DELETE") ==
       (200, {"status": "success removed 4 keys"}), "DELETE /api/remove_all counts the keys")

    # Segments: allocated, from /dev/shm, and reconfigure.
    # Upstream allocates run-time segments in slabs of 16 MiB: 8 MiB asked, 16 MiB mounted.
    status, body = jreq(rport, "/api/mount", "POST", {"size": 8 << 20})
    ok(status == 200 and body.get("status") == "success" and len(body["segment_ids"]) == 1 and
       body["allocated_size"] == 16 << 20, "POST /api/mount allocates a segment: %r" % (body,))
    ok(wait_for("capacity + 16 MiB", lambda: capacity() == 48 << 20),
       "the master counts it: %r" % (capacity(),))
    sid = body["segment_ids"][0] if status == 200 else "0-0"
    ok(jreq(rport, "/api/mount", "POST", {"size": -1}) ==
       (400, {"error": "Invalid size, must be a positive integer"}), "a bad size is 400")
    ok(jreq(rport, "/api/mount", "POST", {"size": 1, "location": "cpu:99999"}) ==
       (500, {"error": "Allocate and mount failed, ret=-1"}),
       "a location that is not one is refused, not ignored")
    status, body2 = jreq(rport, "/api/mount", "POST", {"size": 1, "location": "cpu:0"})
    ok(status == 200 and len(body2.get("segment_ids", [])) == 1,
       "POST /api/mount with a location mounts there: %r" % (body2,))
    ok(wait_for("capacity + 16 MiB more", lambda: capacity() == 64 << 20),
       "the master counts it too: %r" % (capacity(),))
    ok(status == 200 and jreq(rport, "/api/unmount", "POST",
                              {"segment_ids": body2["segment_ids"]})[0] == 200,
       "and unmounts it")
    ok(wait_for("capacity - 16 MiB", lambda: capacity() == 48 << 20),
       "the master forgot it: %r" % (capacity(),))
    ok(jreq(rport, "/api/unmount_shm", "POST", {"segment_ids": [sid]})[0] == 500,
       "unmount_shm refuses an allocated segment's id")
    ok(jreq(rport, "/api/unmount", "POST", {"segment_ids": sid}) ==
       (200, {"status": "success"}), "POST /api/unmount frees it")
    ok(wait_for("capacity back", lambda: capacity() == 32 << 20), "the master forgot it")
    ok(jreq(rport, "/api/unmount", "POST", {"segment_ids": [sid]})[0] == 500,
       "unmounting it again is 500")
    ok(jreq(rport, "/api/unmount", "POST", {}) == (400, {"error": "Missing segment_ids"}),
       "unmount without ids is 400")
    shm = "mc-test-%d" % os.getpid()
    with open("/dev/shm/" + shm, "wb") as f:
        f.truncate(4 << 20)
    try:
        status, body = jreq(rport, "/api/mount_shm", "POST", {"name": shm, "size": 4 << 20})
        ok(status == 200 and len(body.get("segment_ids", [])) == 1,
           "POST /api/mount_shm maps /dev/shm/<name>: %r" % (body,))
        ok(wait_for("capacity + 4 MiB", lambda: capacity() == 36 << 20), "the master counts it")
        ok(jreq(rport, "/api/mount_shm", "POST", {"name": "../etc", "size": 1})[0] == 400,
           "a name that leaves /dev/shm is 400")
        ok(jreq(rport, "/api/mount_shm", "POST", {"name": shm, "size": 8 << 20})[0] == 500,
           "a size past the file is 500")
        ok(jreq(rport, "/api/mount_shm", "POST", {"name": shm, "size": 4 << 20,
                                                  "location": "nowhere"})[0] == 500,
           "a location that is not one is 500")
        status, body2 = jreq(rport, "/api/unmount_shm", "POST",
                             {"segment_ids": body["segment_ids"] + ["1-2"]})
        ok(status == 500 and body2.get("failed_segment_ids") == ["1-2"],
           "unmount_shm names the ids that failed: %r" % (body2,))
        ok(wait_for("capacity back", lambda: capacity() == 32 << 20), "the shm segment is gone")
        ok(jreq(rport, "/api/reconfigure", "POST", {"mode": "decode", "path": "/dev/shm/" + shm,
                                                    "size": 4 << 20})[1].get("mode") == "decode",
           "reconfigure to decode mounts the file")
        status, body = jreq(rport, "/api/reconfigure", "POST",
                            {"mode": "decode", "path": "/dev/shm/" + shm, "size": 2 << 20})
        ok(status == 200 and wait_for("make-before-break", lambda: capacity() == 34 << 20),
           "a second decode replaces the first: %r %r" % (body, capacity()))
        ok(jreq(rport, "/api/reconfigure", "POST", {"mode": "prefill"}) ==
           (200, {"status": "success", "mode": "prefill"}) and
           wait_for("capacity back", lambda: capacity() == 32 << 20),
           "reconfigure to prefill unmounts it")
        ok(jreq(rport, "/api/reconfigure", "POST", {"mode": "x"})[0] == 400 and
           jreq(rport, "/api/reconfigure", "POST", {"mode": "decode"})[0] == 400,
           "a bad mode, or decode without a path, is 400")
    finally:
        os.unlink("/dev/shm/" + shm)
    ok(jreq(rport, "/api/unmount_local_disk", "POST", {}) == (200, {"status": "success"}),
       "unmount_local_disk without an SSD area succeeds")
    ok(jreq(rport, "/api/unmount_local_disk", "POST", {"grace_period_seconds": 4000})[0] == 400
       and jreq(rport, "/api/unmount_local_disk", "POST", raw=b"[")[1] ==
       {"error": "Malformed JSON body"}, "unmount_local_disk: a bad period or body is 400")
    rest.send_signal(signal.SIGTERM)
    ok(rest.wait(20) == 0, "mc_store_rest_server stops on SIGTERM")
    ok(wait_for("the segment to go", lambda: capacity() == 0), "and unmounts its segment")

    # ---- the client HTTP server: mooncake_client and the Python store ----
    hport = free_port()
    ok(c.start_client("H", "16MB", "--enable_http_server", "--http_port=%d" % hport),
       "mooncake_client --enable_http_server up")
    ok(wait_port(hport), "its HTTP server listens on --http_port")
    status, body = jreq(hport, "/health")
    ok(status == 200 and body == {"status": "healthy", "code": 0}, "its /health: %r" % (body,))
    status, text, ctype = req(hport, "/metrics")
    ok(status == 200 and b"mooncake_transfer_read_bytes 0" in text and
       b'mooncake_transfer_put_latency_bucket{le="+Inf"}' in text, "its /metrics")
    ok(req(hport, "/nope")[0] == 404 and req(hport, "/health", "POST", raw=b"")[0] == 405,
       "an unknown path is 404, a POST 405")
    c.pause("master")
    ok(wait_for("master_unreachable", lambda: jreq(hport, "/health") ==
                (503, {"status": "master_unreachable", "code": 2}), 30),
       "/health is 503 master_unreachable while the master does not answer")
    c.resume("master")
    from mooncake.store import MooncakeDistributedStore
    pport = free_port()
    s = MooncakeDistributedStore()
    ok(s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                "global_segment_size": 16 << 20, "local_buffer_size": 16 << 20,
                "protocol": "tcp", "rdma_devices": "", "master_server_addr": c.master,
                "enable_client_http_server": True, "client_http_port": pport}) == 0,
       "a Python store with enable_client_http_server")
    ok(wait_port(pport), "its HTTP server listens on client_http_port")
    ok(s.put("hk", b"x" * 1000) == 0 and s.get("hk") == b"x" * 1000 and
       s.put_batch(["hb1", "hb2"], [b"y" * 10, b"z" * 10]) == 0, "puts and gets")
    text = req(pport, "/metrics")[1].decode()
    ok("mooncake_transfer_write_bytes 1020" in text and
       "mooncake_transfer_read_bytes 1000" in text and
       "mooncake_transfer_put_latency_count 1" in text and
       "mooncake_transfer_batch_put_latency_count 1" in text,
       "/metrics counts its bytes and calls: %r" % (text[:400],))
    text = req(pport, "/metrics/summary")[1].decode()
    ok(text.startswith("=== Transfer Metrics Summary ===") and "Put: count=1" in text and
       "Batch Get: No data" in text, "/metrics/summary is upstream's text: %r" % (text,))
    s.close()
    ok(wait_for("the port to close", lambda: req_fails(pport)), "close() stops the server")

    # ---- transfer_engine_topology_dump and the cli modules ----
    out = subprocess.run([PY, "-m", "mooncake.transfer_engine_topology_dump"], env=env,
                         capture_output=True, text=True, timeout=60)
    ok(out.returncode == 0 and out.stdout.startswith("Local topology [te/discover]: {"),
       "transfer_engine_topology_dump discovers: %r %r" % (out.stdout, out.stderr[-300:]))
    topo = os.path.join(c.tmp, "topo.json")
    with open(topo, "w") as f:
        f.write('{"cpu:0": [["mlx5_7"], []]}')
    out = subprocess.run([PY, "-m", "mooncake.transfer_engine_topology_dump",
                          "--custom-topo-json", topo], env=env, capture_output=True, text=True,
                         timeout=60)
    ok(out.returncode == 0 and "[te/custom (%s)]" % topo in out.stdout and "mlx5_7" in out.stdout,
       "--custom-topo-json loads the matrix: %r" % (out.stdout,))
    out = subprocess.run([PY, "-m", "mooncake.transfer_engine_topology_dump", "--backend",
                          "tent"], env=env, capture_output=True, text=True, timeout=60)
    ok(out.returncode == 1 and "TENT" in out.stderr, "--backend tent is refused, naming TENT")
    for mod, prog in (("cli", "mooncake_master"), ("cli_client", "mooncake_client"),
                      ("cli_bench", "transfer_engine_bench")):
        out = subprocess.run([PY, "-m", "mooncake." + mod, "--help"], capture_output=True,
                             text=True, timeout=60, env=dict(env, LD_PRELOAD=""))
        ok(out.returncode == 0 and prog in (out.stdout + out.stderr),
           "python -m mooncake.%s runs %s" % (mod, prog))
    out = subprocess.run([PY, "-m", "mooncake.cli", "--help"], capture_output=True, text=True,
                         timeout=60, env=dict(env, MOONCAKE_BIN_DIR="/nonexistent", PATH="/none",
                                              LD_PRELOAD=""))
    ok(out.returncode == 127 and "MOONCAKE_BIN_DIR" in out.stderr or out.returncode == 0,
       "a program that cannot be found is named: %r" % (out.stderr,))
finally:
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    c.stop()
print("1..%d" % mc_cluster.count)
sys.exit(1 if mc_cluster.failures else 0)
