# SPDX-License-Identifier: Apache-2.0
"""Free TCP ports on 127.0.0.1 for tests, reserved machine-wide until their holder exits.

A port is picked below the kernel's ephemeral range (32768 and up here): a port from there may
be taken by any outgoing connection before the daemon it is given to binds it.  A port handed
out is recorded as a file named after it in the registry directory (TMPDIR/mc-test-ports),
holding the pid of the process it was reserved for, made under a lock: a daemon started later
may not have bound it yet, and the shell tests (lib.sh), the pytest suites and the Python
drivers running side by side must not pick it meanwhile.  A reservation whose holder has exited
is free again.

As a script (lib.sh's mc_free_port): mc_ports.py RECORD_FILE REGISTRY_DIR OWNER_PID prints one
port and appends it to RECORD_FILE."""
import atexit
import fcntl
import os
import random
import socket
import sys

LOW, HIGH = 20000, 32767
REGISTRY = os.path.join(os.environ.get("TMPDIR") or "/tmp", "mc-test-ports")
_mine = []


def _holder_alive(path):
    try:
        with open(path) as f:
            pid = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def reserve(owner=None, registry=None, record=None):
    """A port nothing listens on and no live test holds; reserved for pid owner (this process
    when None).  record: a file the port is appended to (the shell tests release from it)."""
    owner = os.getpid() if owner is None else int(owner)
    registry = registry or REGISTRY
    os.makedirs(registry, exist_ok=True)
    with open(os.path.join(registry, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for _ in range(400):
            p = random.randint(LOW, HIGH)
            path = os.path.join(registry, str(p))
            if os.path.exists(path) and _holder_alive(path):
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    continue
            with open(path, "w") as f:
                f.write("%d\n" % owner)
            if record:
                with open(record, "a") as f:
                    f.write("%d\n" % p)
            if owner == os.getpid():
                _mine.append(path)
            return p
    raise RuntimeError("no free port in %d-%d" % (LOW, HIGH))


@atexit.register
def _release():
    """This process's reservations go back when it exits (a killed one's are freed by the
    liveness check of the next reserve)."""
    me = "%d" % os.getpid()
    for path in _mine:
        try:
            with open(path) as f:
                if f.read().strip() == me:
                    os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: mc_ports.py RECORD_FILE REGISTRY_DIR OWNER_PID")
    print(reserve(owner=sys.argv[3], registry=sys.argv[2], record=sys.argv[1]))
