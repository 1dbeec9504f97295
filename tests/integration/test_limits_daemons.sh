#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Connection limits of the daemons other than the master, on 127.0.0.1: a mooncake_client's
# engine data port, its handshake port and its HTTP server, the HTTP metadata service and
# mooncake_proxy.  Against each port, a flood of connections from one address stops at its
# per-peer limit, and slowloris connections (silent, or dribbling a request a byte at a time)
# are closed after its request timeout, while a legitimate peer from another address keeps
# being served (puts and gets through the data port, a handshake probe, HTTP GETs); each
# refusal and cut-off is counted on the daemon's /metrics with the port's name and logged with
# the peer's address.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

rc=0
check() {	# check EXIT-STATUS WHAT
	if [ "$1" -eq 0 ]; then echo "ok - $2"; else echo "not ok - $2"; rc=1; fi
}

LIM=(--max_connections_per_peer=8)
mc_start_master || { mc_dump_logs; exit 1; }
CHTTP=$(mc_free_port)
mc_start_client client1 64MB --enable_http_server --http_port="$CHTTP" "${LIM[@]}" \
	--request_timeout_ms=1500 || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 || { mc_dump_logs; exit 1; }
META=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --host=127.0.0.1 --port="$META" \
	"${LIM[@]}" --request_timeout_ms=1500
mc_wait_port "$META" || { mc_dump_logs; exit 1; }
PXP=$(mc_free_port)
mc_start proxy "$MC_BIN/mooncake_proxy" --host=127.0.0.1 --port="$PXP" --model m \
	--prefill 127.0.0.1:1 --decode 127.0.0.1:1 "${LIM[@]}" --request_timeout=1500ms
mc_wait_port "$PXP" || { mc_dump_logs; exit 1; }

seg=$(mc_segment_of client1)
data=$(grep -o "serving segment [^ ]* ([0-9]* bytes) at [0-9.:]*" "$MC_TMP/client1.log" |
	awk '{print $NF}')
echo "# segment (handshake) $seg, data $data"

MC_FORCE_TCP=1 MC_STORE_SHM=0 mc_python - "$MC_TOP_SRCDIR" "$MC_MASTER_PORT" "${data##*:}" "${seg##*:}" \
	"$CHTTP" "$META" "$PXP" <<'PY' || rc=1
import os, socket, struct, sys, time, urllib.request
from mooncake.store import MooncakeDistributedStore
sys.path.insert(0, sys.argv[1] + "/tests/integration")
from flood import alive, conn, dribble
master, dport, hport, chttp, meta, pxp = sys.argv[2:]
fails = 0

def ok(c, what):
    global fails
    print(("ok - " if c else "not ok - ") + what, flush=True)
    fails += 0 if c else 1

st = MooncakeDistributedStore()
ok(st.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", "127.0.0.1:" + master) == 0,
   "a store client joins from 127.0.0.1")
n = [0]

def put_get():
    n[0] += 1
    v = os.urandom(65536)
    k = "lim/%d" % n[0]
    return st.put(k, v) == 0 and st.get(k) == v

def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=3) as r:
            return r.status == 200
    except Exception as e:
        print("# GET %s:%s: %s" % (port, path, e))
        return False

def probe():
    try:
        s = conn("127.0.0.1", hport)
        s.sendall(struct.pack("<Q", 3) + bytes([3]) + b"{}")
        hdr = s.recv(9)
        s.close()
        return len(hdr) == 9 and hdr[8] == 3
    except OSError as e:
        print("# handshake probe: %s" % e)
        return False

targets = [
    # name, port, what a legitimate peer does, a request to dribble
    ("engine data", dport, put_get, struct.pack("<QQB7x", 8, 0, 0x80)),
    ("engine handshake", hport, probe, struct.pack("<Q", 3) + bytes([3]) + b"{}"),
    ("client HTTP", chttp, lambda: http_get(chttp, "/metrics"),
     b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("metadata HTTP", meta, lambda: http_get(meta, "/health"),
     b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("proxy HTTP", pxp, lambda: http_get(pxp, "/metrics"),
     b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
]
for name, port, legit, req in targets:
    ok(legit(), "%s: served before" % name)
    flood = [conn("127.0.0.2", port) for _ in range(40)]
    time.sleep(0.3)
    n_open = sum(alive(s) for s in flood)
    ok(n_open <= 8, "%s: a flood of 40 connections from one address keeps at most 8 (%d)"
       % (name, n_open))
    ok(legit(), "%s: a peer from another address is served during the flood" % name)
    for s in flood:
        s.close()
    silent = [conn("127.0.0.3", port) for _ in range(4)]
    drip = conn("127.0.0.3", port)
    closed_at = dribble(drip, req)
    ok(closed_at is not None and closed_at < 4,
       "%s: a request dribbled a byte at a time is cut off (after %s s)" % (name, closed_at))
    ok(legit(), "%s: served while slow connections hold on" % name)
    deadline = time.time() + 5
    while time.time() < deadline and any(alive(s) for s in silent):
        time.sleep(0.2)
    ok(not any(alive(s) for s in silent), "%s: silent connections are closed in time" % name)
    for s in silent + [drip]:
        s.close()
    ok(legit(), "%s: served afterwards" % name)
st.close()
sys.exit(1 if fails else 0)
PY

# metric DAEMON-HTTP-PORT SERIES: its value (labels included in SERIES).
metric() {
	curl -sf "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}
for pp in "$CHTTP engine_tcp" "$CHTTP engine_handshake" "$CHTTP client_http" \
	"$META metadata_http" "$PXP proxy_http"; do
	set -- $pp
	f=$(metric "$1" "mooncake_connections_refused_total{port=\"$2\",reason=\"max_connections_per_peer\"}")
	[ "${f:-0}" -ge 30 ]
	check $? "$2: refusals per peer are counted ($f)"
	f=$(metric "$1" "mooncake_connections_closed_slow_total{port=\"$2\"}")
	[ "${f:-0}" -ge 5 ]
	check $? "$2: slow connections closed are counted ($f)"
	f=$(metric "$1" "mooncake_connections_open{port=\"$2\"}")
	[ -n "$f" ] && [ "$f" -le 3 ]
	check $? "$2: the open connections are given back ($f)"
done
for lp in "client1 engine_tcp" "client1 engine_handshake" "client1 client_http" \
	"meta metadata_http" "proxy proxy_http"; do
	set -- $lp
	grep -q "refusing connection from 127.0.0.2:[0-9]* on the $2 port: max_connections_per_peer" \
		"$MC_TMP/$1.log"
	check $? "$2: the flood's address is logged"
	[ "$(grep -c "connection from .* on the $2 port" "$MC_TMP/$1.log")" -lt 20 ]
	check $? "$2: not every refused connection is logged"
done
kill -0 "$MC_MASTER_PID" 2>/dev/null
check $? "the daemons are still serving"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
