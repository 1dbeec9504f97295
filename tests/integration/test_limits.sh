#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The master's connection limits on 127.0.0.1: a flood of connections from one address stops at
# --max_connections_per_peer, slowloris connections (silent, or dribbling a request a byte at a
# time) are closed after --rpc_request_timeout_ms, and meanwhile a store client from another
# address keeps its puts and gets working; each limit is counted on /metrics.  The admin port
# binds 127.0.0.1 unless told otherwise.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

rc=0
check() {	# check EXIT-STATUS WHAT
	if [ "$1" -eq 0 ]; then echo "ok - $2"; else echo "not ok - $2"; rc=1; fi
}

mc_start_master --max_connections_per_peer=16 --rpc_request_timeout_ms=1500 ||
	{ mc_dump_logs; exit 1; }
mc_start_client client1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 || { mc_dump_logs; exit 1; }

grep -q "admin and metrics HTTP on 127.0.0.1:" "$MC_TMP/master.log"
check $? "the admin port binds 127.0.0.1 by default"

mc_python - "$MC_MASTER_PORT" "$MC_TOP_SRCDIR" <<'PY' || rc=1
import os, socket, struct, sys, threading, time
from mooncake.store import MooncakeDistributedStore
port = int(sys.argv[1])
sys.path.insert(0, sys.argv[2] + "/tests/integration")
from flood import alive, conn as conn_from, dribble
master = "127.0.0.1:%d" % port
fails = 0

def ok(c, what):
    global fails
    print(("ok - " if c else "not ok - ") + what, flush=True)
    fails += 0 if c else 1

def conn(src):
    return conn_from(src, port)

st = MooncakeDistributedStore()
ok(st.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0,
   "a store client joins from 127.0.0.1")

def works(tag):
    v = os.urandom(4096)
    return st.put("lim/" + tag, v) == 0 and st.get("lim/" + tag) == v

# A flood from 127.0.0.2: only max_connections_per_peer stay open.
flood = [conn("127.0.0.2") for _ in range(60)]
time.sleep(0.5)
open_ = sum(alive(s) for s in flood)
ok(open_ <= 16, "a flood of 60 connections from one address keeps at most 16 (%d)" % open_)
ok(works("flood"), "the store client is served during the flood")

# Slowloris from 127.0.0.3: silent connections and a request dribbled a byte at a time.
silent = [conn("127.0.0.3") for _ in range(8)]
drip = conn("127.0.0.3")
hdr = struct.pack("<IBBHIIQ", 0x5052434D, 1, 0, 1, 0, 0, 9)
closed_at = dribble(drip, hdr)
ok(closed_at is not None and closed_at < 4,
   "a request dribbled a byte at a time is cut off (after %s s)" % closed_at)
ok(works("slow"), "the store client is served while slow connections hold on")
deadline = time.time() + 5
while time.time() < deadline and any(alive(s) for s in silent):
    time.sleep(0.2)
ok(not any(alive(s) for s in silent), "silent connections are closed within the timeout")
for s in flood + silent + [drip]:
    s.close()
ok(works("after"), "the store client is served afterwards")
st.close()
sys.exit(1 if fails else 0)
PY

f=$(mc_metric master_rpc_connections_refused_per_peer_total)
[ "${f:-0}" -ge 40 ]
check $? "refusals per peer are counted ($f)"
f=$(mc_metric master_rpc_slow_requests_closed_total)
[ "${f:-0}" -ge 9 ]
check $? "slow requests closed are counted ($f)"
grep -q "refusing connection from 127.0.0.2:.*max_connections_per_peer" "$MC_TMP/master.log"
check $? "the master logs the flood's address"
[ "$(grep -c 'refusing connection from' "$MC_TMP/master.log")" -lt 20 ]
check $? "and does not log every refused connection"
kill -0 "$MC_MASTER_PID" 2>/dev/null
check $? "the master is still serving"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
