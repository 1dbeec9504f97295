# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a real master and mooncake_client on 127.0.0.1 with free ports."""
import contextlib
import os
import shutil
import random
import socket
import subprocess
import tempfile
import time

import pytest

BUILD = os.environ.get("MC_TOP_BUILDDIR", os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                                       "..", "..")))


def free_port():
    """A port free now, below the kernel's ephemeral range (32768 and up here): a port from
    there may be taken by an outgoing connection before the daemon we give it to binds it."""
    for _ in range(200):
        p = random.randint(20000, 32767)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return p
    raise RuntimeError("no free port in 20000-32767")


def wait_port(port, secs=20):
    end = time.time() + secs
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
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
        wait_port(self.port)
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
    port) once both listen, and stops it."""
    port, admin = free_port(), free_port()
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    log = open(str(tmp_path / "master.log"), "w")
    p = subprocess.Popen([os.path.join(PARITY_BIN, "mooncake_master"), "--rpc_address=127.0.0.1",
                          "--rpc_port=%d" % port, "--metrics_port=%d" % admin] + list(flags),
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_port(port)
        yield "127.0.0.1:%d" % port, admin
    finally:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()


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
