#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A persisted master at scale: restart, clean stop and the CPU cost of a persisted put.
#   scripts/bench-scale-restart.sh BUILD [OBJECTS] [WRITERS]
# BUILD is a build directory (mooncake_master, mooncake_client, mooncake_bench); OBJECTS
# defaults to 1000000 (10000000 for the 10M figures), WRITERS (mooncake_bench threads, batches
# of 128 puts of 64 bytes) to 8.  In a temporary directory on the same disk it:
#   1. starts a master with --persist_path and one mooncake_client (segment sized to fit),
#      fills the table with OBJECTS puts, and reads the master's CPU time (/proc/PID/stat, user
#      and system) before and after: master CPU per persisted put and puts/s;
#   2. stops the master with SIGTERM: seconds until it has exited (clean stop);
#   3. starts it again: seconds until its RPC port accepts (answering), until /metrics answers
#      on the admin port, and until master_key_count reaches OBJECTS and, for a master that
#      has it, master_load_in_progress is 0 (fully loaded: every range re-reserved too);
#   4. kills it with SIGKILL and repeats 3 (restart after a crash).
# With OLD=DIR (another build's directory, e.g. of main), step 3 also starts OLD's master on the
# same file, alternating with BUILD's, ROUNDS times (default 2), each stopped cleanly: before
# and after in one run.  With SYNTH=1 there is no fill: scripts/gen-persist-db.py writes a file
# of OBJECTS objects (10M in about 2 minutes), and steps 3 and 2 run on it; SYNTH_SCHEMA=7
# writes it keyed by key, as a master before schema 8 did (a newer master converts it at its
# first start).  The synthetic file has no key index: the first start builds it, and a lookup
# during that first load waits for the scan.
# Each restart's line gives the master's CPU an object and its loop thread's share; a master
# that logs its loader's line (rows, threads, CPU) has it printed below.  MC_LOAD_THREADS=N in
# the environment sets the loader threads of a master that has them.
# Prints one line per figure; the master's log stays in the directory named at the end when
# KEEP=1.
set -eu
B=$1 N=${2:-1000000} T=${3:-8}
MASTER=$B/mooncake_master
dir=$(mktemp -d)
mp= cp=
cleanup() {
	[ -n "$cp" ] && kill "$cp" 2>/dev/null
	[ -n "$mp" ] && kill -9 "$mp" 2>/dev/null
	wait 2>/dev/null || true
	[ "${KEEP:-0}" = 1 ] && echo "kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p=$(free_port) mport=$(free_port) c=$(free_port)
hz=$(getconf CLK_TCK)
# Each 64-byte object takes a 64-byte block (and the allocator's rounding): 256 B each is ample.
seg=$(( (N * 256 / 1048576 + 64) ))MB

now() { date +%s.%N; }
cpu_s() { awk -v hz="$hz" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }
# loop_cpu_s PID: the CPU time of the master's main thread (its loop), of the process's total.
loop_cpu_s() { awk -v hz="$hz" '{ print ($14 + $15) / hz }' "/proc/$1/task/$1/stat"; }
keys() { curl -s "http://127.0.0.1:$mport/metrics" 2>/dev/null |
	awk '$1 == "master_key_count" { print $2 }'; }
# loading: 1 while a master that says so (master_load_in_progress) still loads, else 0: its
# objects are in the table before their ranges are re-reserved, at the end of the load.
loading() { curl -s "http://127.0.0.1:$mport/metrics" 2>/dev/null |
	awk '$1 == "master_load_in_progress" { l = $2 } END { print l + 0 }'; }
port_open() { python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(0.05)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}
# exist_answer PORT KEY: an ExistKey for KEY; prints 1 or 0 (the answer), fails without one.
exist_answer() { python3 - "$1" "$2" <<'PY'
import socket, struct, sys
key = sys.argv[2].encode()
body = struct.pack("<II", 1, len(key)) + key
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(struct.pack("<IBBHIiQ", 0x5052434D, 1, 0, 43, len(body), 0, 1) + body)
buf = b""
while len(buf) < 32:
    d = s.recv(64)
    if not d:
        sys.exit(1)
    buf += d
magic, _, kind, op, blen, status, rid = struct.unpack_from("<IBBHIiQ", buf)
if status != 0:
    sys.exit(1)
print(struct.unpack_from("<Ii", buf, 24)[1])
PY
}
# The key a lookup is timed with: one the master must find (SYNTH), else one it cannot.
probe_key=bench/restart/absent

start_master() {	# start_master: sets mp, t0 and mlines (the log's lines before)
	mlines=$(cat "$dir/m.log" 2>/dev/null | wc -l)
	t0=$(now)
	"$MASTER" --rpc_address=127.0.0.1 --rpc_port="$p" --metrics_port="$mport" \
		--persist_path="$dir/master.db" --enable_metric_reporting=false \
		--remount_grace_period_sec=600 >>"$dir/m.log" 2>&1 &
	mp=$!
}

measure_start() {	# measure_start LABEL: waits for the port, /metrics and the full table
	local label=$1 t_rpc= t_http= k c_rpc= t_ans= ans=
	while :; do
		if [ -z "$t_rpc" ] && port_open "$p"; then t_rpc=$(now) c_rpc=$(cpu_s "$mp"); fi
		if [ -n "$t_rpc" ] && [ -z "$t_ans" ] && ans=$(exist_answer "$p" "$probe_key"); then
			t_ans=$(now)
		fi
		if [ -n "$t_rpc" ]; then
			k=$(keys)
			if [ -n "$k" ] && [ -z "$t_http" ]; then t_http=$(now); fi
			if [ -n "$t_ans" ] && [ -n "$k" ] && [ "${k%.*}" -ge "$N" ] &&
			   [ "$(loading)" = 0 ]; then break; fi
		fi
		kill -0 "$mp" 2>/dev/null || { echo "master died"; tail "$dir/m.log"; exit 1; }
		sleep 0.02
	done
	awk -v a="$t0" -v r="$t_rpc" -v h="$t_http" -v l="$(now)" -v n="$N" -v w="$label" \
		-v c="$c_rpc" -v x="$t_ans" -v e="$ans" -v pk="$probe_key" -v cl="$(cpu_s "$mp")" \
		-v lp="$(loop_cpu_s "$mp")" \
		'BEGIN { printf "%s: RPC port accepts after %.2f s (master CPU %.2f s by then), ExistKey(%s) answered %s after %.2f s, /metrics after %.2f s, all %d objects loaded after %.2f s (%.2f M objects/s from start; master CPU %.2f s, %.0f ns an object, of which the loop thread %.0f ns)\n", w, r - a, c, pk, e, x - a, h - a, n, l - a, n / (l - a) / 1e6, cl, cl * 1e9 / n, lp * 1e9 / n }'
	tail -n +$((mlines + 1)) "$dir/m.log" | grep "rows read by" | sed 's/^.*loading/  loader:/'
}

stop_master() {	# stop_master LABEL: SIGTERM, seconds until it has exited
	local s0
	s0=$(now)
	kill -TERM "$mp"
	while kill -0 "$mp" 2>/dev/null; do sleep 0.01; done
	wait "$mp" 2>/dev/null || true
	mp=
	awk -v a="$s0" -v b="$(now)" -v w="$1" 'BEGIN { printf "%s: %.2f s\n", w, b - a }'
}

rounds() {	# OLD's and BUILD's masters in turn on the file, ROUNDS times
	local r bin
	for r in $(seq "${ROUNDS:-2}"); do
		for bin in ${OLD:+"$OLD/mooncake_master"} "$B/mooncake_master"; do
			MASTER=$bin
			start_master
			measure_start "$bin, round $r"
			stop_master "$bin, round $r: clean stop (SIGTERM to exit)"
		done
	done
	MASTER=$B/mooncake_master
}

restarts() {	# BUILD's master: a restart, kill -9, a restart after it, a clean stop
	start_master
	measure_start "restart after a clean stop"
	kill -9 "$mp"; wait "$mp" 2>/dev/null || true
	start_master
	measure_start "restart after kill -9"
	stop_master "clean stop of the restarted master"
}

if [ "${SYNTH:-0}" = 1 ]; then
	python3 "$(dirname "$0")/gen-persist-db.py" "$dir/master.db" "$N" "${SYNTH_SCHEMA:-8}"
	probe_key=$(printf 'synthetic/restart/bench/%016d' $((N - 1)))	# the last row read
	ls -l "$dir"/master.db* | awk '{ s += $5 } END { printf "database: %.0f MB (synthetic)\n", s / 1048576 }'
	rounds
	restarts
	exit 0
fi
start_master
while ! port_open "$p"; do sleep 0.05; done
"$B/mooncake_client" --host=127.0.0.1 --port="$c" --master_server_address=127.0.0.1:"$p" \
	--metadata_server=P2PHANDSHAKE --global_segment_size="$seg" >"$dir/c.log" 2>&1 &
cp=$!
for i in $(seq 200); do grep -qs "serving segment" "$dir/c.log" && break; sleep 0.1; done
c0=$(cpu_s "$mp") w0=$(now)
"$B/mooncake_bench" --master_server_address=127.0.0.1:"$p" --operation=put --value_size=64 \
	--batch_size=128 --threads="$T" --keep --duration=3600 --total_bytes=$((N * 64)) \
	>"$dir/bench.log" 2>&1
c1=$(cpu_s "$mp") w1=$(now)
k=$(keys)
awk -v c="$(echo "$c1 - $c0" | bc -l)" -v w="$(echo "$w1 - $w0" | bc -l)" -v k="$k" -v t="$T" \
	'BEGIN { printf "fill: %d objects by %d writers in %.1f s: %.0f persisted puts/s, master %.2f cores, %.2f us master CPU per put\n", k, t, w, k / w, c / w, c * 1e6 / k }'
# The bench writes whole batches per thread: the table holds what it wrote.
[ "${k%.*}" -ge $((N * 9 / 10)) ] || { echo "only $k objects stored"; exit 1; }
N=${k%.*}
# The client stays: a client that unmounts takes its objects with it, and real clients ride
# out a master restart (they re-mount).
stop_master "clean stop (SIGTERM to exit)"
ls -l "$dir"/master.db* | awk '{ s += $5 } END { printf "database: %.0f MB\n", s / 1048576 }'
[ -n "${OLD:-}" ] && rounds
restarts
