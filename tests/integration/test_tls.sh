#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# TLS on the control plane, with a cluster secret inside it: a master serving RPC, admin HTTP
# and its embedded metadata service over TLS with client certificates required (mutual TLS),
# and a standalone metadata service over HTTPS.  A store with the CA, its certificate and the
# secret works end to end (its bulk data on the plain, authenticated data plane); a store
# without TLS, with a certificate from another CA, or without a certificate cannot join;
# mooncake_ctl and curl reach the admin port over HTTPS.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

command -v openssl >/dev/null || { echo "# SKIP: no openssl command to make certificates"; exit 77; }
grep -q "define HAVE_OPENSSL 1" "$MC_BIN/config.h" 2>/dev/null ||
	{ echo "# SKIP: built without OpenSSL (--with-openssl)"; exit 77; }

rc=0
check() {	# check EXIT-STATUS WHAT
	if [ "$1" -eq 0 ]; then echo "ok - $2"; else echo "not ok - $2"; rc=1; fi
}

# A CA, a server certificate for 127.0.0.1, a client certificate, and a stranger's CA.
cd "$MC_TMP" || exit 1
mkcert() {	# mkcert NAME CA SUBJECT [SAN]
	openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$3" -out "$1.csr" \
		2>/dev/null &&
	openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
		${4:+-extfile <(printf 'subjectAltName=%s\n' "$4")} -out "$1.crt" 2>/dev/null
}
for ca in ca other; do
	openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -subj "/CN=test $ca" -days 2 \
		-out $ca.crt 2>/dev/null || { echo "not ok - cannot make a CA"; exit 1; }
done
mkcert server ca 127.0.0.1 "IP:127.0.0.1" && mkcert client ca client &&
	mkcert stranger other stranger || { echo "not ok - cannot make certificates"; exit 1; }
chmod 600 ./*.key
(umask 077; head -c 32 /dev/urandom | base64 >secret)
cd - >/dev/null || exit 1
T=$MC_TMP

EMETA_PORT=$(mc_free_port)
mc_start_master --cluster_secret_file="$T/secret" --tls_cert_file="$T/server.crt" \
	--tls_key_file="$T/server.key" --tls_ca_file="$T/ca.crt" \
	--enable_http_metadata_server=true --http_metadata_server_host=127.0.0.1 \
	--http_metadata_server_port="$EMETA_PORT" || { mc_dump_logs; exit 1; }
META_PORT=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --host=127.0.0.1 --port="$META_PORT" \
	--tls_cert_file="$T/server.crt" --tls_key_file="$T/server.key"
mc_wait_port "$META_PORT" || { mc_dump_logs; exit 1; }
grep -q "TLS on RPC, admin and metadata HTTP" "$T/master.log"
check $? "the master serves its control plane over TLS"

export MOONCAKE_CLUSTER_SECRET_FILE=$T/secret MOONCAKE_TLS_CA_FILE=$T/ca.crt \
	MOONCAKE_TLS_CERT_FILE=$T/client.crt MOONCAKE_TLS_KEY_FILE=$T/client.key
mc_start_client client1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted client1 || { mc_dump_logs; exit 1; }
check 0 "mooncake_client joins over TLS with its certificate and the secret"

# HTTP over TLS: metrics open to anyone who passes TLS, writes need the secret too.
curl -sf --cacert "$T/ca.crt" --cert "$T/client.crt" --key "$T/client.key" \
	"https://127.0.0.1:$MC_METRICS_PORT/metrics" | grep -q mooncake_auth_failures_total
check $? "GET /metrics over HTTPS with a client certificate"
curl -s --cacert "$T/ca.crt" "https://127.0.0.1:$MC_METRICS_PORT/metrics" >/dev/null
check $((!$?)) "admin HTTPS without a client certificate fails"
curl -sf "http://127.0.0.1:$MC_METRICS_PORT/metrics" >/dev/null
check $((!$?)) "plain HTTP to the TLS admin port fails"
"$MC_BIN/mooncake_ctl" --master "https://127.0.0.1:$MC_METRICS_PORT" status >/dev/null
check $? "mooncake_ctl status over HTTPS (CA, certificate and secret from the environment)"
curl -sf --cacert "$T/ca.crt" -X PUT --data '{}' "https://127.0.0.1:$META_PORT/metadata?key=k1" \
	>/dev/null
check $? "PUT to the HTTPS metadata service (no secret on it)"
curl -sf --cacert "$T/ca.crt" "https://127.0.0.1:$META_PORT/metadata?key=k1" | grep -q '{}'
check $? "and GET it back"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$T/ca.crt" --cert "$T/client.crt" \
	--key "$T/client.key" -X PUT --data '{}' "https://127.0.0.1:$EMETA_PORT/metadata?key=k")
[ "$code" = 401 ]
check $? "the master's embedded metadata service over TLS still wants the secret ($code)"

mc_python - "$MC_MASTER_PORT" "$T" <<'PY' || rc=1
import os, subprocess, sys
from mooncake.store import MooncakeDistributedStore
master, tmp = "127.0.0.1:" + sys.argv[1], sys.argv[2]
fails = 0

def ok(c, what):
    global fails
    print(("ok - " if c else "not ok - ") + what, flush=True)
    fails += 0 if c else 1

s = MooncakeDistributedStore()
ok(s.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 32 << 20, "tcp", "", master) == 0,
   "a Python store joins over mutual TLS with the secret")
vals = {"tls/%d" % i: os.urandom(4096 if i % 2 else 1 << 20) for i in range(8)}
ok(all(s.put(k, v) == 0 for k, v in vals.items()), "puts over TLS")
ok(all(s.get(k) == v for k, v in vals.items()), "gets over TLS return the same bytes")
s.close()

def joins(env):
    code = ("import sys\nfrom mooncake.store import MooncakeDistributedStore\n"
            "s = MooncakeDistributedStore()\n"
            "sys.exit(0 if s.setup('127.0.0.1', 'P2PHANDSHAKE', 0, 16 << 20, 'tcp', '', %r) == 0"
            " else 3)\n" % master)
    e = dict(os.environ, MC_RPC_TIMEOUT_MS="2000")
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, "-c", code], env=e, timeout=60,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0

ok(not joins({"MOONCAKE_TLS_CA_FILE": None}), "a store without TLS cannot join")
ok(not joins({"MOONCAKE_TLS_CERT_FILE": None, "MOONCAKE_TLS_KEY_FILE": None}),
   "a store without a client certificate cannot join")
ok(not joins({"MOONCAKE_TLS_CERT_FILE": tmp + "/stranger.crt",
              "MOONCAKE_TLS_KEY_FILE": tmp + "/stranger.key"}),
   "a store with a certificate from another CA cannot join")
ok(not joins({"MOONCAKE_TLS_CA_FILE": tmp + "/other.crt"}),
   "a store that does not trust the master's CA cannot join")
sys.exit(1 if fails else 0)
PY

kill -0 "$MC_MASTER_PID" 2>/dev/null
check $? "the master is still serving"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
