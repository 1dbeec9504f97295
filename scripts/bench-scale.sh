#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Small puts at scale, as a user measures them, ours and upstream's wheel in one run:
#   scripts/bench-scale.sh [-b BUILD] [-a REF_BUILD] [-n OBJECTS] [-w WRITERS] [-r ROUNDS]
#                          [-u UPSTREAM_VENV] [-t C_THREADS,...] [-m MODE,...] [-p tcp|shm]
# For each mode (default: ours, ours-persist, upstream, c-writer; -r ROUNDS times, alternating;
# "ref" and "ref-persist" run another build of ours, -a, e.g. main's, as a before/after reference)
# it starts a master and one mooncake_client with a segment large enough for the objects, then
# scripts/bench_scale.py: W Python writers (default 1) putting OBJECTS (default 1M; -n 10M for
# the long run) 64-byte values under 48-byte keys in put_batch calls of 128 over tcp
# (MC_FORCE_TCP=1 keeps our same-host shared memory out; -p shm lets ours use it, the labels
# then end in "-shm"), and prints its JSON line: puts/s per
# tenth, batch p50/p99 against a loopback round trip measured in the same run, CPU per process,
# master RSS per object, batch_is_exist / batch_get_replica_desc keys/s.  "ours-persist" adds
# --persist_path on the same disk; "upstream" runs the 0.3.13.post1 wheel's mooncake_master,
# mooncake_client and Python package from UPSTREAM_VENV (default /work/wt/venv-up-t27c; pip
# install mooncake-transfer-engine-non-cuda); "c-writer" runs mooncake_bench's put of 64-byte
# values in batches of 128 from one process into our cluster, once per thread count of -t
# (default 1,4; a fresh cluster each), with the master's, client's and writer's CPU per put;
# "c-writer-persist" (and "ref-c-writer-persist" with -a) the same with --persist_path; each
# runs until OBJECTS are put or DURATION seconds (environment, default 10) passed;
# KEY_ORDER=random (environment) makes its keys scattered (mooncake_bench --key_order).
# Every run's line is printed as it ends; at the end a table of the medians per mode.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/_build/opt A="" N=1000000 W=1 UP=${UPSTREAM_VENV:-/work/wt/venv-up-t27c} R=1 T=1,4 CT=1
FT=1 SFX=""
MODES=ours,ours-persist,upstream,c-writer
while getopts b:a:n:w:u:r:m:t:p: o; do
	case $o in
	b) B=$(cd "$OPTARG" && pwd) ;;
	a) A=$(cd "$OPTARG" && pwd) ;;
	n) N=$OPTARG ;;
	w) W=$OPTARG ;;
	u) UP=$OPTARG ;;
	r) R=$OPTARG ;;
	m) MODES=$OPTARG ;;
	t) T=$OPTARG ;;
	p) case $OPTARG in tcp) FT=1 SFX="" ;; shm) FT=0 SFX=-shm ;;
	   *) echo "-p: tcp or shm" >&2; exit 2 ;; esac ;;
	*) sed -n 3,21p "$0"; exit 2 ;;
	esac
done
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# Room for the objects with the allocator's rounding, at least 1 GB (upstream's allocator rounds
# small objects up further: 1 GB holds about 1.8M of them).
seg=$((N * 160 > 1073741824 ? N * 160 : 1073741824))
upseg=$((N * 1024 > 1073741824 ? N * 1024 : 1073741824))

free_port() {	# a port nothing listens on now
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cpu_ticks() {	# cpu_ticks PID: user + system clock ticks the process has used
	awk '{print $14 + $15}' /proc/"$1"/stat
}

wait_port() {	# wait_port PORT: until something listens on 127.0.0.1:PORT (30 s)
	local i
	for i in $(seq 300); do
		(exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on port $1" >&2
	return 1
}

run_mode() {	# run_mode MODE
	local mode=$1 p c m mp cp bin py extra=""
	p=$(free_port) c=$(free_port) m=$(free_port)
	bin=$B py="python3" ppath=$B/pybuild
	case $mode in ref*) [ -n "$A" ] || { echo "$mode: no -a REF_BUILD" >&2; return 0; }
		bin=$A ppath=$A/pybuild ;; esac
	if [ "$mode" = upstream ]; then
		bin=$UP/bin py=$UP/bin/python ppath=""
		[ -x "$bin/mooncake_master" ] || { echo "upstream: no $bin/mooncake_master" >&2; return 0; }
	fi
	rm -rf "$tmp/run" && mkdir -p "$tmp/run"
	case $mode in *-persist) extra="--persist_path=$tmp/run/master.db" ;; esac
	if [ "$mode" = upstream ]; then
		"$bin/mooncake_master" --rpc_port=$p --rpc_address=127.0.0.1 --metrics_port=$m \
			--enable_metric_reporting=false >"$tmp/run/m.log" 2>&1 &
	else
		"$bin/mooncake_master" --rpc_port=$p --rpc_address=127.0.0.1 --metrics_port=$m \
			--enable_metric_reporting=false --log_level=warn $extra >"$tmp/run/m.log" 2>&1 &
	fi
	mp=$!
	pids="$pids $mp"
	if ! wait_port $p; then
		echo "$mode: the master did not start; skipped" >&2
		tail -5 "$tmp/run/m.log" >&2
		kill $mp 2>/dev/null || true
		return 0
	fi
	MC_FORCE_TCP=$FT "$bin/mooncake_client" --host=127.0.0.1 --port=$c \
		--master_server_address=127.0.0.1:$p --metadata_server=P2PHANDSHAKE \
		--protocol=tcp --global_segment_size=$([ "$mode" = upstream ] && echo $upseg || echo $seg) \
		>"$tmp/run/c.log" 2>&1 &
	cp=$!
	pids="$pids $cp"
	sleep 2
	if [ "${mode#*c-writer}" != "$mode" ]; then
		# One process, CT threads, each putting batches of 128 64-byte values; the master's
		# and the client's CPU per put go into its line beside the writer's.  --keep: the
		# cluster goes anyway, and the removal of the keys would count as master time.
		local m0 c0
		m0=$(cpu_ticks $mp) c0=$(cpu_ticks $cp)
		MC_FORCE_TCP=$FT "$B/mooncake_bench" --master_server_address=127.0.0.1:$p \
			--operation=put --value_size=64 --key_size=48 --batch_size=128 \
			--key_order="${KEY_ORDER:-sequential}" --threads=$CT --duration="${DURATION:-10}" \
			--total_bytes=$((N * 64)) --json --keep \
			2>/dev/null >"$tmp/run/bench.json" || true
		python3 - "$tmp/run/bench.json" "$CT" "$m0" "$(cpu_ticks $mp)" "$c0" \
			"$(cpu_ticks $cp)" "$(getconf CLK_TCK)" "$mode" "$SFX" <<'PY' | tee -a "$tmp/results"
import json, sys
f, t, m0, m1, c0, c1, hz, mode, sfx = sys.argv[1:]
for line in open(f):
    if line.startswith("{"):
        r = json.loads(line)
        n = max(r["ops"], 1)
        r["label"] = mode + "-t" + t + sfx
        r["cpu_us_per_put"] = {"writers": r.get("cpu_us_per_op"),
                               "master": round((int(m1) - int(m0)) / int(hz) / n * 1e6, 2),
                               "client": round((int(c1) - int(c0)) / int(hz) / n * 1e6, 2)}
        print(json.dumps(r))
PY
	else
		MC_FORCE_TCP=$FT PYTHONPATH=$ppath $py "$top/scripts/bench_scale.py" \
			--master=127.0.0.1:$p --objects=$N --writers=$W --label=$mode$SFX \
			--pid=master=$mp --pid=client=$cp | tee -a "$tmp/results" ||
			echo "$mode: driver failed" >&2
	fi
	kill $cp $mp 2>/dev/null || true
	wait $cp $mp 2>/dev/null || true
}

for r in $(seq "$R"); do
	for mode in ${MODES//,/ }; do
		case $mode in
		*c-writer*)
			for CT in ${T//,/ }; do
				run_mode "$mode"
			done ;;
		*)	run_mode "$mode" ;;
		esac
	done
done
[ -s "$tmp/results" ] && python3 "$top/scripts/bench_scale.py" --summarize "$tmp/results"
exit 0
