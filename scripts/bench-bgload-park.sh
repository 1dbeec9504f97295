#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The loop's cost of requests parked during a background load (rpc_server.c): a master restarts
# on a synthetic file of OBJECTS objects (scripts/gen-persist-db.py) with its loader slowed down
# (MC_TEST_LOAD_DELAY_MS), PARKED removes wait for the end of the load on 4000-request
# connections, then LOOKUPS ExistKeys of keys not loaded yet are answered from the file one after
# the other (each answer is a step of the load).  Prints the loop thread's CPU per lookup.
#   scripts/bench-bgload-park.sh NEW_BUILD [OLD_BUILD [ROUNDS]]
# Defaults: OBJECTS=300000 PARKED=60000 LOOKUPS=500 DELAY_MS=200; with OLD_BUILD both masters
# run in alternation, ROUNDS times (3), on copies of one file.
set -eu
NEW=$1 OLD=${2:-} R=${3:-3}
N=${OBJECTS:-300000} PARKED=${PARKED:-60000} L=${LOOKUPS:-500} D=${DELAY_MS:-200}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
mp=
cleanup() {
	[ -n "$mp" ] && kill -9 "$mp" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
python3 "$here/gen-persist-db.py" "$dir/src.db" "$N" >/dev/null
one() {	# one NAME BUILD
	local p m
	p=$(free_port) m=$(free_port)
	rm -f "$dir/run.db"*
	cp "$dir/src.db" "$dir/run.db"
	MC_TEST_LOAD_DELAY_MS=$D "$2/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$p" \
		--metrics_port="$m" --persist_path="$dir/run.db" >"$dir/$1.log" 2>&1 &
	mp=$!
	for _ in $(seq 200); do
		grep -q "loading the objects in the background" "$dir/$1.log" 2>/dev/null && break
		sleep 0.05
	done
	echo "$1 $(python3 "$here/bench-bgload-park.py" "127.0.0.1:$p" "$m" "$mp" "$N" "$PARKED" "$L")"
	kill -9 "$mp"
	wait "$mp" 2>/dev/null || true
	mp=
}
for ((i = 1; i <= R; i++)); do
	[ -n "$OLD" ] && one old "$OLD"
	one new "$NEW"
done
