#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A cluster with a cluster secret on 127.0.0.1: a master (with its embedded metadata service),
# a standalone metadata service and two mooncake_client daemons.  On every port (master RPC,
# the engines' TCP data and handshake ports, the shm and dummy-client sockets, admin and
# metadata HTTP writes) a peer without the handshake and a peer with a wrong secret are
# refused, logged and counted, and the right secret is served; the cluster works end to end
# from Python (puts and gets over tcp and shm, a dummy client), and a store with a wrong or no
# secret cannot join.  mooncake_ctl signs its requests.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
grep -q "define HAVE_OPENSSL 1" "$MC_BIN/config.h" 2>/dev/null ||
	{ echo "# SKIP: built without OpenSSL (--with-openssl)"; exit 77; }

rc=0
check() {	# check COND-EXIT-STATUS WHAT
	if [ "$1" -eq 0 ]; then echo "ok - $2"; else echo "not ok - $2"; rc=1; fi
}

(umask 077
 head -c 32 /dev/urandom | base64 >"$MC_TMP/secret"
 head -c 32 /dev/urandom | base64 >"$MC_TMP/wrong")
META_PORT=$(mc_free_port)
EMETA_PORT=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --host=127.0.0.1 --port="$META_PORT" \
	--cluster_secret_file="$MC_TMP/secret"
mc_wait_port "$META_PORT" || { mc_dump_logs; exit 1; }
mc_start_master --cluster_secret_file="$MC_TMP/secret" --enable_http_metadata_server=true \
	--http_metadata_server_host=127.0.0.1 --http_metadata_server_port="$EMETA_PORT" ||
	{ mc_dump_logs; exit 1; }
export MOONCAKE_CLUSTER_SECRET_FILE=$MC_TMP/secret
CHTTP_PORT=$(mc_free_port)
mc_start_client client1 128MB --enable_http_server --http_port="$CHTTP_PORT" ||
	{ mc_dump_logs; exit 1; }
pid1=$MC_LAST_PID
mc_start_client client2 128MB --cluster_secret_file="$MC_TMP/secret" \
	--metadata_server="http://127.0.0.1:$META_PORT/metadata" || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 client2 || { mc_dump_logs; exit 1; }

grep -q "cluster secret from .*every connection is authenticated" "$MC_TMP/master.log" &&
	grep -q "cluster secret from .*every connection is authenticated" "$MC_TMP/meta.log"
check $? "the master says its connections are authenticated"
grep -q "the cluster is open" "$MC_TMP/master.log" "$MC_TMP/client1.log"
check $((!$?)) "no open-cluster warning with a secret"

seg=$(mc_segment_of client1)
data=$(grep -o "serving segment [^ ]* ([0-9]* bytes) at [0-9.:]*" "$MC_TMP/client1.log" |
	awk '{print $NF}')
cport=${seg##*:}
shm=$(grep -o "@mooncake_te_${pid1}_[0-9a-f]*" /proc/net/unix | head -1 | cut -c2-)
echo "# segment $seg, data $data, shm $shm"

# client2 published its descriptor to the metadata service: its writes were signed.
seg2=$(mc_segment_of client2)
curl -sf "http://127.0.0.1:$META_PORT/metadata?key=mooncake/rpc_meta/$seg2" >/dev/null
check $? "an engine's signed PUT to the metadata service is accepted ($seg2)"

# Every port, three kinds of peer.
python3 "$MC_TOP_SRCDIR/tests/integration/auth_probe.py" "$MC_TMP/secret" "$MC_TMP/wrong" \
	master=127.0.0.1:"$MC_MASTER_PORT" data="$data" hs="$seg" shm="$shm" \
	dummy="mooncake_client_$cport.sock" admin=127.0.0.1:"$MC_METRICS_PORT" \
	meta=127.0.0.1:"$META_PORT" || rc=1
python3 "$MC_TOP_SRCDIR/tests/integration/auth_probe.py" "$MC_TMP/secret" "$MC_TMP/wrong" \
	meta=127.0.0.1:"$EMETA_PORT" >"$MC_TMP/emeta.tap" || rc=1
sed -n 's/^\(not \)\?ok [0-9]* - /&(embedded in the master) /p' "$MC_TMP/emeta.tap"

# Refusals are logged with the peer's address and counted.
for what in "master RPC" "admin HTTP"; do
	grep -q "refused $what peer 127.0.0.1:[0-9]*: " "$MC_TMP/master.log"
	check $? "master logs refused $what peers with their address"
done
for what in "engine TCP data" "engine handshake" "engine shm socket" "dummy client socket"; do
	grep -q "refused $what peer " "$MC_TMP/client1.log"
	check $? "mooncake_client logs refused $what peers"
done
f=$(mc_metric mooncake_auth_failures_total)
[ "${f:-0}" -ge 5 ]
check $? "the master counts its refusals (mooncake_auth_failures_total $f >= 5)"
f=$(mc_metric mooncake_auth_failures_total "$META_PORT")
[ "${f:-0}" -ge 3 ]
check $? "the metadata service counts its refusals (mooncake_auth_failures_total $f >= 3)"
curl -sf "http://127.0.0.1:$MC_METRICS_PORT/health" >/dev/null
check $? "/health stays open"
f=$(mc_metric mooncake_auth_failures_total "$CHTTP_PORT")
[ "${f:-0}" -ge 4 ]
check $? "mooncake_client counts its refusals on its /metrics (mooncake_auth_failures_total $f >= 4)"
for what in "engine TCP data" "engine handshake"; do
	grep -q "refused $what peer 127.0.0.1:[0-9]*: " "$MC_TMP/client1.log"
	check $? "mooncake_client logs the address of refused $what peers"
done
grep -q "refused .* peer 127.0.0.1:[0-9]*: " "$MC_TMP/meta.log"
check $? "the metadata service logs the address of refused peers"

# mooncake_ctl: refused without the secret, served with it.
env -u MOONCAKE_CLUSTER_SECRET_FILE "$MC_BIN/mooncake_ctl" --master \
	"http://127.0.0.1:$MC_METRICS_PORT" remove-all >/dev/null 2>&1
check $((!$?)) "mooncake_ctl remove-all without the secret fails"
"$MC_BIN/mooncake_ctl" --master "http://127.0.0.1:$MC_METRICS_PORT" status >/dev/null
check $? "mooncake_ctl status with the secret works"

# The cluster end to end from Python, and stores that do not know the secret.
mc_python - "$MC_MASTER_PORT" "$MC_TMP" "$cport" <<'PY' || rc=1
import os, subprocess, sys
from mooncake.store import MooncakeDistributedStore
port, tmp, cport = sys.argv[1], sys.argv[2], sys.argv[3]
master = "127.0.0.1:" + port
fails = 0

def ok(c, what):
    global fails
    print(("ok - " if c else "not ok - ") + what, flush=True)
    fails += 0 if c else 1

for shm in ("0", "1"):
    os.environ["MC_STORE_SHM"] = shm
    s = MooncakeDistributedStore()
    ok(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 << 20, "tcp", "", master) == 0,
       "a Python store with the secret joins (MC_STORE_SHM=%s)" % shm)
    vals = {"auth/%s/%d" % (shm, i): os.urandom(4096 if i % 2 else 1 << 20) for i in range(16)}
    ok(all(s.put(k, v) == 0 for k, v in vals.items()), "puts of 4 KiB and 1 MiB values")
    ok(all(s.get(k) == v for k, v in vals.items()), "gets return the same bytes")
    s.close()

def joins(env):
    code = ("import sys\nfrom mooncake.store import MooncakeDistributedStore\n"
            "s = MooncakeDistributedStore()\n"
            "sys.exit(0 if s.setup('127.0.0.1', 'P2PHANDSHAKE', 0, 16 << 20, 'tcp', '', %r) == 0"
            " and s.put('auth/x', b'y') == 0 else 3)\n" % master)
    e = dict(os.environ)
    e.update(env)
    for k in [k for k, v in env.items() if v is None]:
        e.pop(k)
    return subprocess.run([sys.executable, "-c", code], env=e, timeout=60,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0

ok(not joins({"MOONCAKE_CLUSTER_SECRET_FILE": tmp + "/wrong", "MC_RPC_TIMEOUT_MS": "2000"}),
   "a store with a wrong secret cannot join")
ok(not joins({"MOONCAKE_CLUSTER_SECRET_FILE": None, "MC_RPC_TIMEOUT_MS": "2000"}),
   "a store without a secret cannot join")
d = MooncakeDistributedStore()
ok(d.setup_dummy(16 << 20, 16 << 20, "127.0.0.1:" + cport) == 0,
   "a dummy client with the secret attaches to mooncake_client")
ok(d.put("auth/dummy", b"z" * 5000) == 0 and d.get("auth/dummy") == b"z" * 5000,
   "and puts and gets through it")
d.close()
sys.exit(1 if fails else 0)
PY

kill -0 "$MC_MASTER_PID" 2>/dev/null
check $? "the master is still serving"

# Without a secret: one warning line at start-up says the cluster is open.
OPEN_PORT=$(mc_free_port)
mc_start open "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$OPEN_PORT" \
	--metrics_port=0
mc_wait_log open "listening for RPC" || rc=1
n=$(grep -c "the cluster is open" "$MC_TMP/open.log")
[ "$n" -eq 1 ]
check $? "a master without a secret warns once that the cluster is open ($n lines)"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
