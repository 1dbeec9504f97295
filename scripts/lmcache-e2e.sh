#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# LMCache's own cache engine against a mooncake cluster: a synthetic KV cache stored by one
# process and retrieved, full hit and bytes identical, by another, in both of LMCache's Mooncake
# modes (zero_copy: batch_put_from / batch_get_into on its registered buffer; chunk_meta:
# put_parts with its chunk header / batch_get_buffer).  Prints put/get throughput per mode.
#
#   scripts/lmcache-e2e.sh [BUILD]          BUILD: our build directory (default _build/opt)
#
# Environment: LMCACHE_VENV (default /var/tmp/mooncake-lmcache-venv: made with the system
# Python's packages visible, so the CPU torch scripts/deps.sh installs is used, then
# `pip install lmcache==$LMCACHE_VERSION`, about 1 GB of wheels); UPSTREAM_VENV: a virtualenv
# with upstream's wheel (pip install mooncake-transfer-engine-non-cuda) to run the same on its
# daemons and client in the same run; TOKENS (4096: 256 MiB of KV), ROUNDS (3).
# Not part of `make check` (it downloads LMCache).  Exits non-zero on any miss or mismatch.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$top/_build/opt}" && pwd) || exit 2
VENV=${LMCACHE_VENV:-/var/tmp/mooncake-lmcache-venv}
TOKENS=${TOKENS:-4096}
ROUNDS=${ROUNDS:-3}
export PYTHONHASHSEED=0          # LMCache's chunk keys hash tokens: both processes must agree
[ -x "$B/mooncake_master" ] && [ -f "$B/pybuild/mooncake/_store.so" ] ||
	{ echo "lmcache-e2e: build $B first (with the Python package)" >&2; exit 2; }
if nm -D "$B/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init; then
	echo "lmcache-e2e: $B is a sanitizer build; use an optimized one (_build/opt)" >&2; exit 2
fi
if ! "$VENV/bin/python" -c "import lmcache, torch" 2>/dev/null; then
	python3 -c "import torch" 2>/dev/null || { echo "lmcache-e2e: no torch (scripts/deps.sh)" >&2; exit 2; }
	python3 -m venv --system-site-packages "$VENV" &&
		"$VENV/bin/pip" install -q "lmcache==${LMCACHE_VERSION:-0.5.6}" ||
		{ echo "lmcache-e2e: could not install LMCache into $VENV" >&2; exit 2; }
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/mc-lmcache.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	local i
	for i in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done
	return 1
}
wait_log() {
	local i
	for i in $(seq 400); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

# run_impl NAME BINDIR PYTHONPATH_DIR: a master and a mooncake_client with 3 GB, then the rounds.
fail=0
run_impl() {
	local name=$1 bin=$2 pypath=$3 mp cp m r seed
	mp=$(free_port); cp=$(free_port)
	"$bin/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$mp" --metrics_port="$(free_port)" \
		>"$T/$name-master.log" 2>&1 &
	pids+=($!)
	wait_port "$mp" || { echo "lmcache-e2e: $name master did not start" >&2; return 1; }
	"$bin/mooncake_client" --host=127.0.0.1 --port="$cp" --master_server_address="127.0.0.1:$mp" \
		--metadata_server=P2PHANDSHAKE --global_segment_size=3GB --protocol=tcp \
		>"$T/$name-client.log" 2>&1 &
	pids+=($!)
	# Ready once it mounted its segment (ours logs the dummy-client socket after that, upstream's
	# its client service).
	wait_log "$T/$name-client.log" "serving dummy clients|Starting real client service" ||
		{ echo "lmcache-e2e: $name mooncake_client did not start" >&2; return 1; }
	seed=$((RANDOM * 100))
	for m in zero_copy chunk_meta; do
		for r in $(seq "$ROUNDS"); do
			seed=$((seed + 1))      # fresh tokens, so every round stores new chunks
			for role in store retrieve; do
				if ! PYTHONPATH="$pypath" "$VENV/bin/python" "$top/scripts/lmcache_kv_roundtrip.py" \
					"$role" "127.0.0.1:$mp" "$m" "$TOKENS" "$seed" "$T/$name-$m-$r-$role.json" \
					>"$T/$name-$m-$r-$role.log" 2>&1; then
					echo "lmcache-e2e: $name $m $role failed:" >&2
					grep -v " INFO" "$T/$name-$m-$r-$role.log" | tail -15 >&2
					fail=1
				fi
			done
		done
	done
	python3 - "$T" "$name" "$ROUNDS" <<'EOF' || fail=1
import json, statistics, sys
t, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad = 0
for mode in ("zero_copy", "chunk_meta"):
    put, get = [], []
    for r in range(1, rounds + 1):
        try:
            s = json.load(open("%s/%s-%s-%d-store.json" % (t, name, mode, r)))
            g = json.load(open("%s/%s-%s-%d-retrieve.json" % (t, name, mode, r)))
        except OSError:
            bad += 1
            continue
        ok = g["hit_tokens"] == g["tokens"] == g["retrieved_tokens"] and g["sha256"] == s["sha256"]
        if not ok:
            print("%s %s round %d: hit %d, retrieved %d of %d, bytes %s" % (
                name, mode, r, g["hit_tokens"], g["retrieved_tokens"], g["tokens"],
                "identical" if g["sha256"] == s["sha256"] else "DIFFERENT"))
            bad += 1
        put.append(s["bytes"] / s["seconds"] / 2**30)
        get.append(g["bytes"] / g["seconds"] / 2**30)
    if put:
        print("%-9s %-10s rounds %d  %d MiB  store %.2f GiB/s  retrieve %.2f GiB/s  (medians; "
              "full hit, bytes identical: %s)" % (name, mode, len(put), s["bytes"] >> 20,
              statistics.median(put), statistics.median(get), "yes" if not bad else "NO"))
sys.exit(1 if bad else 0)
EOF
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}

run_impl ours "$B" "$B/pybuild"
if [ -n "${UPSTREAM_VENV:-}" ]; then
	site=$("$UPSTREAM_VENV/bin/python" -c 'import mooncake, os; print(os.path.dirname(os.path.dirname(mooncake.__file__)))')
	mkdir -p "$T/upstream-py" && ln -s "$site/mooncake" "$T/upstream-py/mooncake"
	run_impl upstream "$UPSTREAM_VENV/bin" "$T/upstream-py"
fi
[ $fail = 0 ] && echo "lmcache-e2e: ok" || echo "lmcache-e2e: FAILED"
exit $fail
