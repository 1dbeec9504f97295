#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The store's data plane, before and after a change, in the same run, next to its references:
# a master and one mooncake_client (2 GB segment) per build; mooncake_bench in another process
# puts then gets 1 MiB values (batch 8) and 4 KiB values (batch 32), over tcp (MC_FORCE_TCP=1,
# MC_STORE_SHM=0) and over same-host shared memory.  References: iperf3 single stream on
# loopback for tcp, a single-thread memcpy of 1 MiB blocks for shm.  Builds alternate round by
# round so a busy machine skews both alike; medians of RUNS rounds.
# SETTLE=N waits N seconds after the segment is mounted (a build that populates segment memory in
# the background is then measured settled); ENV_AFTER="VAR=value ..." sets variables for the
# second build's processes only (e.g. MOONCAKE_STORE_CHECKSUM=1 to price checksums, with the
# same build given twice); MASTER_AFTER="--flag=value ..." gives the second build's master flags
# (e.g. --cluster_secret_file=F with ENV_AFTER=MOONCAKE_CLUSTER_SECRET_FILE=F to price the
# cluster secret).
# Besides throughput, each row gives the CPU time per key of the whole cluster (mooncake_bench's
# own user+sys time from /usr/bin/time, plus what the master and the client spent meanwhile, from
# /proc/PID/stat), which a busy machine skews far less than throughput.
# Usage: [RUNS=3] [DUR=2] [SETTLE=0] [ENV_AFTER=...] [MASTER_AFTER=...] scripts/bench-dataplane.sh BEFORE AFTER
set -u
RUNS=${RUNS:-3}
DUR=${DUR:-2}
[ $# -ge 2 ] || { echo "usage: $0 BUILD_BEFORE BUILD_AFTER" >&2; exit 2; }
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cc -O2 -o "$tmp/memcpy-ref" "$(dirname "$0")/memcpy-ref.c" || exit 1
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
P=$((20000 + RANDOM % 20000))
iperf3 -s -D -p $((P + 500)) -B 127.0.0.1 --pidfile "$tmp/iperf.pid" >/dev/null 2>&1
sleep 0.5
pids="$pids $(cat "$tmp/iperf.pid" 2>/dev/null)"
iperf() {
	iperf3 -c 127.0.0.1 -p $((P + 500)) -t 2 -J 2>/dev/null | python3 -c \
		'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e9))'
}
# cluster BUILD N: start master + client on ports P+10N.., wait for the segment.
cluster() {
	local b=$1 p=$((P + 10 * $2))
	# shellcheck disable=SC2086
	"$b/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=$p --metrics_port=0 \
		--log_level=warn $4 >"$tmp/m$2.log" 2>&1 &
	mpid=$!
	for i in $(seq 50); do (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done
	env $3 "$b/mooncake_client" --host=127.0.0.1 --port=$((p + 1)) \
		--master_server_address=127.0.0.1:$p --global_segment_size=2GB --log_level=info \
		--enable_http_server --http_port=$((p + 2)) >"$tmp/c$2.log" 2>&1 &
	cpid=$!
	for i in $(seq 100); do grep -q "serving segment" "$tmp/c$2.log" && break; sleep 0.1; done
	sleep "${SETTLE:-0}"
	pids="$pids $mpid $cpid"
}
stop() { kill $mpid $cpid 2>/dev/null; wait $mpid $cpid 2>/dev/null; }
# accepted N: the data connections the client of cluster N has accepted (each one authenticated
# once with a secret), or ? from a build without the metric.
accepted() {
	curl -s "http://127.0.0.1:$((P + 10 * $1 + 2))/metrics" |
		awk '$1 == "mooncake_connections_accepted_total{port=\"engine_tcp\"}" {print $2; f=1} END {if (!f) print "?"}'
}
# ticks PID...: user+sys clock ticks the processes have used.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
# bench BUILD N MODE VALUE BATCH [ENV]: "put_MiBps get_MiBps put_ops get_ops"
bench() {
	local b=$1 p=$((P + 10 * $2)) env="$6"
	[ "$3" = tcp ] && env="$env MC_FORCE_TCP=1 MC_STORE_SHM=0"
	local t0 t1 a0 a1
	a0=$(accepted "$2")
	t0=$(ticks $mpid $cpid)
	env $env /usr/bin/time -f "%U %S" -o "$tmp/time" "$b/mooncake_bench" \
		--master_server_address=127.0.0.1:$p --value_size="$4" \
		--batch_size="$5" --threads=1 --duration="$DUR" --total_bytes=1GB \
		--local_buffer_size=0 --json 2>/dev/null >"$tmp/json"
	t1=$(ticks $mpid $cpid)
	a1=$(accepted "$2")
	echo "$a0 $a1" >"$tmp/acc"
	python3 -c '
import json,os,sys
r={}
for l in open(sys.argv[1]):
    j=json.loads(l); r[j["phase"]]=j
u,s=map(float,open(sys.argv[2]).read().split()[-2:])
cpu=u+s+(int(sys.argv[4])-int(sys.argv[3]))/os.sysconf("SC_CLK_TCK")
ops=r["put"]["ops"]+r["get"]["ops"]
a=open(sys.argv[5]).read().split()
acc=str(int(a[1])-int(a[0])) if "?" not in a else "?"
print("%.1f %.1f %.0f %.0f %.3f %s %d" % (r["put"]["MiBps"], r["get"]["MiBps"], r["put"]["ops_per_s"], r["get"]["ops_per_s"], cpu*1e6/max(ops,1), acc, ops))' "$tmp/json" "$tmp/time" "$t0" "$t1" "$tmp/acc"
}
for r in $(seq "$RUNS"); do
	for n in 1 2; do
		b=$1 e="" mf=""; [ $n = 2 ] && b=$2 e=${ENV_AFTER:-} mf=${MASTER_AFTER:-}
		cluster "$b" $((r * 2 + n)) "$e" "$mf"
		for mode in tcp shm; do
			echo "$n $mode 1MB $(bench "$b" $((r * 2 + n)) $mode 1MB 8 "$e")" >>"$tmp/res"
			echo "$n $mode 4KB $(bench "$b" $((r * 2 + n)) $mode 4KB 32 "$e")" >>"$tmp/res"
		done
		stop
	done
	iperf >>"$tmp/iperf"
	"$tmp/memcpy-ref" 1048576 268435456 1 | awk '{print $2}' >>"$tmp/memcpy"
done
ip=$(median <"$tmp/iperf"); mc=$(median <"$tmp/memcpy")
echo "references: iperf3 single stream $(tr '\n' ' ' <"$tmp/iperf")GB/s (median $ip); memcpy 1 MiB $(tr '\n' ' ' <"$tmp/memcpy")GB/s (median $mc)"
for mode in tcp shm; do
	ref=$ip; [ $mode = shm ] && ref=$mc
	for n in 1 2; do
		name=before; [ $n = 2 ] && name=after
		for v in 1MB 4KB; do
			awk -v n=$n -v m=$mode -v v=$v '$1 == n && $2 == m && $3 == v' "$tmp/res" >"$tmp/sel"
			put=$(awk '{print $4}' "$tmp/sel" | median); get=$(awk '{print $5}' "$tmp/sel" | median)
			pops=$(awk '{print $6}' "$tmp/sel" | median); gops=$(awk '{print $7}' "$tmp/sel" | median)
			cpu=$(awk '{print $8}' "$tmp/sel" | median)
			conns=$(awk '{printf "%s/%s ", $9, $10}' "$tmp/sel")
			if [ $v = 1MB ]; then
				echo "$mode $name 1MiB batch 8: put $(awk -v x=$put 'BEGIN{printf "%.2f", x*1048576/1e9}') GB/s, get $(awk -v x=$get 'BEGIN{printf "%.2f", x*1048576/1e9}') GB/s; get/ref $(awk -v x=$get -v r=$ref 'BEGIN{printf "%.2f", x*1048576/1e9/r}')x; CPU $cpu us per key (put+get); data connections/keys per run: $conns"
			else
				echo "$mode $name 4KiB batch 32: put $pops keys/s, get $gops keys/s; CPU $cpu us per key (put+get); data connections/keys per run: $conns"
			fi
		done
	done
done
