#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What TLS costs on the control plane, in the same run: two masters of one build, one plain
# and one with TLS (a throw-away CA and a certificate for 127.0.0.1), each with the cluster
# secret; a Python store client calls is_exist (one key: one round trip per call) and
# batch_is_exist (128 keys) against each for DUR seconds, rounds alternating so a busy machine
# skews both alike; medians of RUNS rounds.  With TLS every call goes through the client's
# loop thread (the direct lane is a plain socket): "plain-loop" is the plain master with
# MC_RPC_DIRECT=0, the same path without TLS.
# Usage: [RUNS=5] [DUR=3] scripts/bench-tls.sh BUILD   (BUILD has pybuild/: make check, or
# make pybuild/mooncake/_store.so)
set -u
RUNS=${RUNS:-5}
DUR=${DUR:-3}
[ $# -ge 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
b=$(cd "$1" && pwd)
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cd "$tmp" || exit 1
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj "/CN=bench ca" -days 1 \
	-out ca.crt 2>/dev/null &&
openssl req -newkey rsa:2048 -nodes -keyout srv.key -subj "/CN=127.0.0.1" -out srv.csr \
	2>/dev/null &&
openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
	-extfile <(printf 'subjectAltName=IP:127.0.0.1\n') -out srv.crt 2>/dev/null || exit 1
(umask 077; head -c 32 /dev/urandom | base64 >secret)
cd - >/dev/null || exit 1
P=$((20000 + RANDOM % 20000))
"$b/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=$P --metrics_port=0 --log_level=warn \
	--cluster_secret_file="$tmp/secret" >"$tmp/plain.log" 2>&1 &
pids="$pids $!"
"$b/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=$((P + 1)) --metrics_port=0 \
	--log_level=warn --cluster_secret_file="$tmp/secret" --tls_cert_file="$tmp/srv.crt" \
	--tls_key_file="$tmp/srv.key" >"$tmp/tls.log" 2>&1 &
pids="$pids $!"
for p in $P $((P + 1)); do
	for i in $(seq 50); do (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done
done
run() {	# run PORT plain|plain-loop|tls: "single_calls_per_s batch_calls_per_s"
	local e=(MC_RPC_DIRECT=1)
	[ "$2" = plain-loop ] && e=(MC_RPC_DIRECT=0)
	[ "$2" = tls ] && e=(MOONCAKE_TLS_CA_FILE="$tmp/ca.crt")
	env "${e[@]}" MOONCAKE_CLUSTER_SECRET_FILE="$tmp/secret" PYTHONPATH="$b/pybuild" \
		python3 - "$1" "$DUR" <<'PY'
import sys, time
from mooncake.store import MooncakeDistributedStore
port, dur = sys.argv[1], float(sys.argv[2])
s = MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", "127.0.0.1:" + port) == 0
keys = ["k%d" % i for i in range(128)]
out = []
for batch in (False, True):
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < dur:
        if batch:
            s.batch_is_exist(keys)
        else:
            s.is_exist("k0")
        n += 1
    out.append(n / (time.perf_counter() - t0))
s.close()
print("%.0f %.0f" % tuple(out))
PY
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for r in $(seq "$RUNS"); do
	echo "plain $(run $P plain)" >>"$tmp/res"
	echo "plain-loop $(run $P plain-loop)" >>"$tmp/res"
	echo "tls $(run $((P + 1)) tls)" >>"$tmp/res"
done
for k in plain plain-loop tls; do
	one=$(awk -v k=$k '$1 == k {print $2}' "$tmp/res" | median)
	bat=$(awk -v k=$k '$1 == k {print $3}' "$tmp/res" | median)
	echo "$k: is_exist $one calls/s, batch_is_exist(128) $bat calls/s ($(awk -v k=$k '$1 == k {printf "%s/%s ", $2, $3}' "$tmp/res"))"
done
