#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Real clients from PyPI against a mooncake cluster, each writing in one process and reading
# in another, checking a full hit and identical bytes, and printing throughput:
#  - lmcache: LMCache's own cache engine with its Mooncake backend, a synthetic KV cache, in
#    both of its modes (zero_copy: batch_put_from / batch_get_into on its registered buffer;
#    chunk_meta: put_parts with its chunk header / batch_get_buffer);
#  - sglang: SGLang's HiCache Mooncake backend class (MooncakeStore) over a host KV pool,
#    batch_set_v1 / batch_exists / batch_get_v1 (batch_put_from_multi_buffers and friends).
#
#   scripts/client-e2e.sh [lmcache|sglang|all] [BUILD]     BUILD: default _build/opt
#
# Environment: LMCACHE_VENV, SGLANG_VENV (default /var/tmp/mooncake-{lmcache,sglang}-venv, made
# with the system Python's packages visible, so the CPU torch scripts/deps.sh installs is used;
# LMCache installs with its dependencies, about 1 GB; SGLang's full install pins another torch
# and CUDA kernels, so its package goes in without dependencies plus the pure-Python modules its
# Mooncake backend imports); UPSTREAM_VENV: a virtualenv with upstream's wheel (pip install
# mooncake-transfer-engine-non-cuda) to run the same on its daemons and client in the same run;
# TOKENS (LMCache, 4096: 256 MiB of KV), PAGES (SGLang, 1024: 256 MiB), ROUNDS (3).
# Not part of `make check` (it downloads the clients).  Exits non-zero on any miss or mismatch.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
WHICH=${1:-all}
case $WHICH in lmcache|sglang|all) ;; *) echo "usage: $0 [lmcache|sglang|all] [BUILD]" >&2; exit 2;; esac
B=$(cd "${2:-$top/_build/opt}" && pwd) || exit 2
LVENV=${LMCACHE_VENV:-/var/tmp/mooncake-lmcache-venv}
SVENV=${SGLANG_VENV:-/var/tmp/mooncake-sglang-venv}
TOKENS=${TOKENS:-4096}
PAGES=${PAGES:-1024}
ROUNDS=${ROUNDS:-3}
export PYTHONHASHSEED=0          # LMCache's chunk keys hash tokens: both processes must agree
[ -x "$B/mooncake_master" ] && [ -f "$B/pybuild/mooncake/_store.so" ] ||
	{ echo "client-e2e: build $B first (with the Python package)" >&2; exit 2; }
if nm -D "$B/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init; then
	echo "client-e2e: $B is a sanitizer build; use an optimized one (_build/opt)" >&2; exit 2
fi
python3 -c "import torch" 2>/dev/null || { echo "client-e2e: no torch (scripts/deps.sh)" >&2; exit 2; }

clients=()
if [ "$WHICH" != sglang ]; then
	if ! "$LVENV/bin/python" -c "import lmcache" 2>/dev/null; then
		python3 -m venv --system-site-packages "$LVENV" &&
			"$LVENV/bin/pip" install -q "lmcache==${LMCACHE_VERSION:-0.5.6}" ||
			{ echo "client-e2e: could not install LMCache into $LVENV" >&2; exit 2; }
	fi
	clients+=(lmcache)
fi
if [ "$WHICH" != lmcache ]; then
	mod=sglang.srt.mem_cache.storage.mooncake_store.mooncake_store
	if ! "$SVENV/bin/python" -c "import $mod" 2>/dev/null; then
		python3 -m venv --system-site-packages "$SVENV" &&
			"$SVENV/bin/pip" install -q --no-deps "sglang==${SGLANG_VERSION:-0.5.23}" &&
			"$SVENV/bin/pip" install -q psutil pybase64 pillow starlette msgspec pyzmq tqdm \
				aiohttp transformers torchvision dill apache-tvm-ffi==0.1.11 sentencepiece \
				compressed-tensors gguf requests 2>/dev/null
		"$SVENV/bin/python" -c "import $mod" ||
			{ echo "client-e2e: SGLang's Mooncake backend does not import in $SVENV" >&2; exit 2; }
	fi
	clients+=(sglang)
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/mc-clients.XXXXXX")
pids=()
stop_daemons() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}
trap 'stop_daemons; rm -rf "$T"' EXIT
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

# one NAME CLIENT MODE ROUND SEED MASTER PYPATH: the writer, then the reader, in two processes.
one() {
	local name=$1 client=$2 mode=$3 r=$4 seed=$5 master=$6 pypath=$7 role py script size
	local -a roles
	if [ "$client" = lmcache ]; then
		py=$LVENV/bin/python; script=lmcache_kv_roundtrip.py; roles=(store retrieve)
	else
		py=$SVENV/bin/python; script=sglang_hicache_roundtrip.py; roles=(set get)
	fi
	for role in "${roles[@]}"; do
		local f="$T/$name-$client-$mode-$r-$role"
		if [ "$client" = lmcache ]; then
			set -- "$role" "$master" "$mode" "$TOKENS" "$seed" "$f.json"
		else
			set -- "$role" "$master" "$PAGES" "$seed" "$f.json"
		fi
		if ! PYTHONPATH="$pypath" "$py" "$top/scripts/$script" "$@" >"$f.log" 2>&1; then
			echo "client-e2e: $name $client $mode $role failed:" >&2
			grep -v " INFO" "$f.log" | tail -15 >&2
			fail=1
		fi
	done
}

# run_impl NAME BINDIR PYTHONPATH_DIR: a master and a mooncake_client with 3 GB, then the rounds.
fail=0
run_impl() {
	local name=$1 bin=$2 pypath=$3 mp cp client m r seed master
	mp=$(free_port); cp=$(free_port); master=127.0.0.1:$mp
	"$bin/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$mp" --metrics_port="$(free_port)" \
		>"$T/$name-master.log" 2>&1 &
	pids+=($!)
	wait_port "$mp" || { echo "client-e2e: $name master did not start" >&2; fail=1; return; }
	"$bin/mooncake_client" --host=127.0.0.1 --port="$cp" --master_server_address="$master" \
		--metadata_server=P2PHANDSHAKE --global_segment_size=3GB --protocol=tcp \
		>"$T/$name-client.log" 2>&1 &
	pids+=($!)
	# Ready once its segment is mounted (ours then logs its dummy-client socket, upstream's
	# its client service).
	wait_log "$T/$name-client.log" "serving dummy clients|Starting real client service" ||
		{ echo "client-e2e: $name mooncake_client did not start" >&2; fail=1; return; }
	seed=$((RANDOM * 100))
	for client in "${clients[@]}"; do
		for m in $([ "$client" = lmcache ] && echo zero_copy chunk_meta || echo hicache); do
			for r in $(seq "$ROUNDS"); do
				seed=$((seed + 1))      # fresh content, so every round writes new objects
				one "$name" "$client" "$m" "$r" "$seed" "$master" "$pypath"
			done
		done
	done
	python3 - "$T" "$name" "$ROUNDS" "${clients[@]}" <<'PYEOF' || fail=1
import json, statistics, sys
t, name, rounds, clients = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
bad = 0
for client in clients:
    w, rd = ("store", "retrieve") if client == "lmcache" else ("set", "get")
    for mode in (("zero_copy", "chunk_meta") if client == "lmcache" else ("hicache",)):
        put, get, ok_all = [], [], True
        for r in range(1, rounds + 1):
            base = "%s/%s-%s-%s-%d-" % (t, name, client, mode, r)
            try:
                s, g = json.load(open(base + w + ".json")), json.load(open(base + rd + ".json"))
            except OSError:
                ok_all = False
                continue
            if client == "lmcache":
                full = g["hit_tokens"] == g["tokens"] == g["retrieved_tokens"]
                what = "hit %d, retrieved %d of %d tokens" % (g["hit_tokens"],
                                                            g["retrieved_tokens"], g["tokens"])
            else:
                full = s["stored"] == g["found"] == g["read"] == g["pages"]
                what = "stored %d, found %d, read %d of %d pages" % (s["stored"], g["found"],
                                                                   g["read"], g["pages"])
            same = g["sha256"] == s["sha256"]
            if not (full and same):
                print("%s %s %s round %d: %s, bytes %s" % (name, client, mode, r, what,
                      "identical" if same else "DIFFERENT"))
                ok_all = False
            put.append(s["bytes"] / s["seconds"] / 2**30)
            get.append(g["bytes"] / g["seconds"] / 2**30)
        bad += not ok_all
        if put:
            print("%-9s %-8s %-10s rounds %d  %4d MiB  put %6.2f GiB/s  get %6.2f GiB/s  "
                  "(medians)  full hit, bytes identical: %s" % (
                      name, client, mode, len(put), s["bytes"] >> 20, statistics.median(put),
                      statistics.median(get), "yes" if ok_all else "NO"))
sys.exit(1 if bad else 0)
PYEOF
	stop_daemons
}

run_impl ours "$B" "$B/pybuild"
if [ -n "${UPSTREAM_VENV:-}" ]; then
	site=$("$UPSTREAM_VENV/bin/python" -c 'import mooncake, os; print(os.path.dirname(os.path.dirname(mooncake.__file__)))') ||
		{ echo "client-e2e: no mooncake in $UPSTREAM_VENV" >&2; exit 2; }
	mkdir -p "$T/upstream-py" && ln -s "$site/mooncake" "$T/upstream-py/mooncake"
	run_impl upstream "$UPSTREAM_VENV/bin" "$T/upstream-py"
fi
[ $fail = 0 ] && echo "client-e2e: ok" || echo "client-e2e: FAILED"
exit $fail
