# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a real master and mooncake_client on 127.0.0.1 with free ports."""
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
import mc_ports  # noqa: E402

BUILD = os.environ.get("MC_TOP_BUILDDIR", os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                                       "..", "..")))


def free_port():
    """A port on 127.0.0.1 nothing listens on, reserved machine-wide for this process (the
    shell tests and other suites running side by side do not pick it; see mc_ports)."""
    return mc_ports.reserve()


def wait_port(port, secs=20, proc=None):
    """Until port accepts a connection; raises after secs, or at once when proc (the daemon
    that should listen there) has exited."""
    end = time.time() + secs
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError("port %d: the daemon exited (status %s) before it listened"
                                   % (port, proc.returncode))
            time.sleep(0.05)
    raise RuntimeError("port %d did not open" % port)


class Cluster:
    def __init__(self, master_args=()):
        self.tmp = tempfile.mkdtemp(prefix="mc-py-")
        self.procs = []
        self.port = free_port()
        self.master = "127.0.0.1:%d" % self.port
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)     # the daemons are not Python
        self.env = env
        self.start("master", [os.path.join(BUILD, "mooncake_master"), "--rpc_address=127.0.0.1",
                              "--rpc_port=%d" % self.port, "--metrics_port=0",
                              "--default_kv_lease_ttl=500"] + list(master_args))
        wait_port(self.port, proc=self.procs[-1])
        cport = free_port()
        self.client_port = cport
        log = self.start("client", [os.path.join(BUILD, "mooncake_client"), "--host=127.0.0.1",
                                    "--port=%d" % cport, "--master_server_address=" + self.master,
                                    "--metadata_server=P2PHANDSHAKE",
                                    "--global_segment_size=256MB"])
        # Up once its first ping was answered NEED_REMOUNT and it re-mounted its segment, and
        # it answers setup_dummy (it starts listening for that after its set-up).
        end = time.time() + 20
        while not all(line in open(log).read()
                      for line in ("segments re-mounted", "serving dummy clients")):
            if time.time() > end:
                raise RuntimeError("mooncake_client did not start (see %s)" % log)
            time.sleep(0.05)

    def start(self, name, argv):
        log = os.path.join(self.tmp, name + ".log")
        self.procs.append(subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                           env=self.env))
        return log

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        if os.environ.get("MC_TEST_KEEP") == "1":
            print("# MC_TEST_KEEP=1: temporary files kept in %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    yield c
    c.stop()


@pytest.fixture
def store(cluster):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 1 << 20, "tcp", "", cluster.master)
    assert rc == 0
    yield s
    s.remove_all(force=True)
    s.close()


# MC_PARITY_BIN=<dir of upstream's mooncake_master>: the tests that take the `master` fixture run
# against upstream's daemon (and, with upstream's package first on PYTHONPATH, its wheel).
PARITY_BIN = os.environ.get("MC_PARITY_BIN") or BUILD
UPSTREAM = bool(os.environ.get("MC_PARITY_BIN"))


@contextlib.contextmanager
def own_master(tmp_path, flags=()):
    """A master of its own (PARITY_BIN's), with extra flags; yields (its address, its admin
    port) once both listen, and stops it.  A master that exits before it listens (a port
    taken meanwhile by something outside the reservations) is started once more on other
    ports; its log is kept as master.log.N."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for attempt in range(3):
        port, admin = free_port(), free_port()
        name = str(tmp_path / "master.log") + (".%d" % attempt if attempt else "")
        log = open(name, "w")
        p = subprocess.Popen([os.path.join(PARITY_BIN, "mooncake_master"),
                              "--rpc_address=127.0.0.1", "--rpc_port=%d" % port,
                              "--metrics_port=%d" % admin] + list(flags),
                             stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_port(port, proc=p)
        except RuntimeError:
            exited = p.poll() is not None
            stop_proc(p)
            log.close()
            if not exited or attempt == 2:
                raise
            continue
        break
    try:
        yield "127.0.0.1:%d" % port, admin
    finally:
        stop_proc(p)
        log.close()


def stop_proc(p):
    if p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_upstream_peer(upstream_py, script, inp, outp, timeout=300):
    """Run script (a peer of a cross-package test) with upstream's Python against a master of
    upstream's wheel (next to upstream_py): script MASTER_ADDR inp outp.  Asserts it succeeded."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH")}
    m = subprocess.Popen([os.path.join(os.path.dirname(upstream_py), "mooncake_master"),
                          "--rpc_port=%d" % port, "--rpc_address=127.0.0.1",
                          "--metrics_port=%d" % free_port()],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_port(port)
        r = subprocess.run([upstream_py, script, "127.0.0.1:%d" % port, str(inp), str(outp)],
                           env=env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        m.terminate()
        m.wait(10)


@pytest.fixture
def master(tmp_path):
    """A master of its own for one test; yields its address."""
    with own_master(tmp_path) as (addr, _):
        yield addr
