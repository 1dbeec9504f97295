# SPDX-License-Identifier: Apache-2.0
"""Helpers of the connection-limit tests (test_limits.sh, test_limits_daemons.sh): connections
from a chosen loopback address, and whether the server still holds one open."""
import socket
import time


def conn(src, port):
    """A connection to 127.0.0.1:port from address src (127.0.0.2 and so on)."""
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(3)
    s.connect(("127.0.0.1", int(port)))
    return s


def alive(s):
    """The server has not closed s (a refused connection reads EOF at once)."""
    s.settimeout(0.2)
    try:
        return s.recv(1) != b""
    except socket.timeout:
        return True
    except OSError:
        return False


def dribble(s, data, gap=0.25):
    """Send all but the last byte of data on s, one byte every gap seconds, until the server
    closes s.  Returns the seconds until it did, or None if it never did."""
    t0 = time.time()
    for b in data[:-1]:
        try:
            s.send(bytes([b]))
        except OSError:
            return time.time() - t0
        time.sleep(gap)
        if not alive(s):
            return time.time() - t0
    return None
