# SPDX-License-Identifier: Apache-2.0
"""Real daemons for Python-driven integration tests (test_tasks.py, test_drain.py, ...).

Starts mooncake_master and mooncake_client processes on 127.0.0.1 with free ports in a temporary
directory, restarts and pauses them, and waits for conditions with deadlines (never blind
sleeps).  TAP output through ok(); the process exit status is the number of failures.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mc_ports  # noqa: E402

BUILD = os.environ.get("MC_TOP_BUILDDIR", os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                                       "..", "..")))
failures = 0
count = 0


def ok(cond, what):
    global failures, count
    count += 1
    if not cond:
        failures += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", count, what), flush=True)
    return cond


def free_port():
    """A port on 127.0.0.1 nothing listens on, reserved machine-wide for this process (the
    shell tests and other suites running side by side do not pick it; see mc_ports)."""
    return mc_ports.reserve()


def wait_for(what, cond, secs=20, step=0.05):
    """Poll cond() until it returns a true value (returned) or secs pass (None, with a line)."""
    end = time.time() + secs
    while True:
        v = cond()
        if v:
            return v
        if time.time() > end:
            print("# timed out after %ss waiting for %s" % (secs, what), flush=True)
            return None
        time.sleep(step)


def wait_port(port, secs=20):
    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False
    return wait_for("port %d" % port, up, secs)


class Cluster:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="mc-py-")
        self.procs = {}
        self.env = dict(os.environ)
        self.env.pop("LD_PRELOAD", None)    # the daemons are not Python
        self.master_port = free_port()
        self.metrics_port = free_port()
        self.master = "127.0.0.1:%d" % self.master_port
        self.master_args = []

    def log(self, name):
        return os.path.join(self.tmp, name + ".log")

    def start(self, name, argv, env=None):
        f = open(self.log(name), "a")
        self.procs[name] = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                            env=env or self.env)
        return self.procs[name]

    def start_master(self, *args):
        if args:
            self.master_args = list(args)
        self.start("master", [os.path.join(BUILD, "mooncake_master"), "--rpc_address=127.0.0.1",
                              "--rpc_port=%d" % self.master_port,
                              "--metrics_port=%d" % self.metrics_port] + self.master_args)
        return wait_port(self.master_port) and wait_port(self.metrics_port)

    def start_client(self, name, seg="64MB", *args):
        port = free_port()
        self.start(name, [os.path.join(BUILD, "mooncake_client"), "--host=127.0.0.1",
                          "--port=%d" % port, "--master_server_address=" + self.master,
                          "--metadata_server=P2PHANDSHAKE", "--global_segment_size=" + seg]
                   + list(args))
        if not self.wait_log(name, "segments re-mounted"):
            return None
        return "127.0.0.1:%d" % port

    def wait_log(self, name, text, count=1, secs=20):
        def seen():
            try:
                return open(self.log(name)).read().count(text) >= count
            except OSError:
                return False
        return wait_for("'%s' in %s.log" % (text, name), seen, secs)

    def kill(self, name, sig=signal.SIGKILL):
        p = self.procs[name]
        p.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            p.wait(10)

    def pause(self, name):
        self.procs[name].send_signal(signal.SIGSTOP)

    def resume(self, name):
        self.procs[name].send_signal(signal.SIGCONT)

    def http(self, path, method="GET", body=None):
        """(status, parsed JSON or text) of an admin HTTP request to the master."""
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.metrics_port, path),
                                     data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def metric(self, name):
        status, text = self.http("/metrics")
        for line in text.splitlines() if status == 200 else []:
            parts = line.split()
            if len(parts) == 2 and parts[0] == name:
                return float(parts[1])
        return None

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for name in self.procs:
                print("# ---- %s.log (last 30 lines)" % name)
                try:
                    for line in open(self.log(name)).read().splitlines()[-30:]:
                        print("# " + line)
                except OSError:
                    pass
        if os.environ.get("MC_TEST_KEEP") == "1":
            print("# MC_TEST_KEEP=1: temporary files kept in %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def store(cluster, seg_size=64 << 20, buf_size=16 << 20):
    """A MooncakeDistributedStore of this process with a segment, set up against cluster."""
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", seg_size, buf_size, "tcp", "", cluster.master)
    if rc != 0:
        raise RuntimeError("setup failed: %d" % rc)
    return s
