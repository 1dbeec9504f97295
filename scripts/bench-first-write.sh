#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# First writes into a fresh cluster's memory, ours against upstream's wheel in the same run.
#
# Usage: scripts/bench-first-write.sh [BUILD] [ROUNDS]
#   BUILD   our build directory (default _build/dev; it needs pybuild/, the Python package)
#   ROUNDS  rounds per figure (default 3; medians are printed)
# Environment: UPSTREAM_VENV (default /work/venv-up: a venv with mooncake-transfer-engine-non-cuda,
# reinstalled with pip when missing), SEGMENT (default 2GB), SIZES (segment sizes for the start-up
# figures, default "1GB 4GB"; add 16GB where the host has the memory), HUGEPAGES=1 (as root: also
# run every figure with MC_STORE_USE_HUGEPAGE=1 for both mooncake_clients, on a pool of 2 MB
# pages reserved for the run through /proc/sys/vm/nr_hugepages and given back at the end),
# BASELINE=DIR (another build of ours, e.g. main's before this change: also measured, as "base"),
# IMPLS (default "ours up", plus "base" with BASELINE: which to run, e.g. IMPLS=ours),
# HUGEPAGES=only (the 2 MB figures alone), STARTUP_ONLY=1 (the start-up figures alone),
# TRANSPORTS (default "tcp shm") and WHENS (default "now settled ready warm") for fewer rows,
# SIZES="" (no start-up figures), FIRST_WRITE_TRACE=1 (each run's first-batch latency and
# quarter times, from first_write.py).
#
# Each run starts a fresh master and one mooncake_client holding a SEGMENT segment, then
# scripts/first_write.py (a store client without a segment of its own) puts 1 GiB of distinct
# 1 MiB objects (batch 8, registered buffer), remove_all, 1 GiB more, then 1 MiB gets and 4 KiB
# puts (batch 32).  Once over tcp (MC_FORCE_TCP=1, and MC_STORE_SHM=0 for ours) and once over
# same-host shared memory (the default).  "now": the writes start as soon as the master shows the
# segment mounted; "settled": they start once our client reports the segment populated (for
# upstream, after the same wait); "warm" (shm only): settled, and the writer met the segment
# before its first round (first_write.py WARM=1: one 4 KiB put, then a wait until the writer's
# own page tables stop growing), as a writer that has run for a while has; "ready" (shm only):
# settled, and the writer's first round starts once what its set-up mapped stopped growing
# (first_write.py READY=1: no put before; the store opens same-host segments at set-up).  Then, through
# scripts/startup_time.py, the time from mooncake_client start to segment mounted and, for
# ours, to fully populated, for each of SIZES (one size at a time: "free -g" is printed before
# each; a size that does not fit in the memory available is skipped with a line saying so).
set -u
S=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-$S/_build/dev}" && pwd)
ROUNDS=${2:-3}
UP=${UPSTREAM_VENV:-/work/venv-up}
SEGMENT=${SEGMENT:-2GB}
SIZES=${SIZES-1GB 4GB}
TRANSPORTS=${TRANSPORTS:-tcp shm}
WHENS=${WHENS:-now settled ready warm}
tmp=$(mktemp -d)
pids=""
pool_orig=
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; sleep 0.3;
	for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"
	[ -z "$pool_orig" ] || echo "$pool_orig" >/proc/sys/vm/nr_hugepages; }
trap cleanup EXIT

if ! "$UP/bin/python" -c "import mooncake.store" 2>/dev/null; then
	echo "# upstream's wheel is missing from $UP: installing it"
	[ -x "$UP/bin/python" ] || python3 -m venv "$UP"
	"$UP/bin/pip" -q install mooncake-transfer-engine-non-cuda || exit 1
fi
[ -f "$B/pybuild/mooncake/_store.so" ] || { echo "no Python package in $B/pybuild"; exit 1; }

now() { date +%s.%N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# metric PORT NAME: the first value of NAME (with or without labels) on the master's /metrics.
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($1, m) == 1 { print $2; exit }'; }

# start_master IMPL: a master of IMPL; sets BIN (IMPL's binaries), MP (rpc), HP (metrics).
start_master() {
	local i
	case $1 in ours) BIN=$B ;; base) BIN=$BASELINE ;; *) BIN=$UP/bin ;; esac
	MP=$(free_port); HP=$(free_port)
	"$BIN/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$MP" --metrics_port="$HP" \
		>"$tmp/master-$1.log" 2>&1 &
	pids="$pids $!"
	for i in $(seq 100); do curl -s "http://127.0.0.1:$HP/metrics" >/dev/null && break; sleep 0.05; done
}

# start IMPL SEGMENT: a master and a mooncake_client; sets MP (rpc), HP (metrics), T0, T_MOUNT.
start() {
	local impl=$1 seg=$2 bin i total
	start_master "$impl"
	bin=$BIN
	total=$(python3 -c "import re,sys; v,u=re.match(r'(\d+)\s*([KMGT]?)B?',sys.argv[1].upper()).groups(); print(int(v)<<{'':0,'K':10,'M':20,'G':30,'T':40}[u])" "$seg")
	T0=$(now)
	env ${CLIENT_ENV:-} "$bin/mooncake_client" --host=127.0.0.1 --port="$(free_port)" \
		--master_server_address=127.0.0.1:"$MP" --metadata_server=P2PHANDSHAKE \
		--global_segment_size="$seg" >"$tmp/client-$impl.log" 2>&1 &
	CPID=$!
	pids="$pids $CPID"
	T_MOUNT=
	for i in $(seq 1200); do
		[ "$(metric "$HP" master_total_capacity_bytes | cut -d. -f1)" = "$total" ] && { T_MOUNT=$(now); break; }
		sleep 0.02
	done
	TOTAL=$total
}

# populated: seconds from T0 until our client's segment is populated (empty for upstream).
wait_populated() {
	local i p
	for i in $(seq 3000); do
		p=$(metric "$HP" segment_populated_bytes)
		[ -z "$p" ] && [ "$1" = up ] && return
		[ "${p%.*}" = "$TOTAL" ] && { echo "$(now) - $T0" | bc; return; }
		sleep 0.02
	done
}

stop() { kill $pids 2>/dev/null; sleep 0.3; kill -9 $pids 2>/dev/null; wait 2>/dev/null; pids=""; }

driver() {	# driver IMPL TRANSPORT TAG WHEN
	local py env=()
	case $1 in
	ours) py="env PYTHONPATH=$B/pybuild python3" ;;
	base) py="env PYTHONPATH=$BASELINE/pybuild python3" ;;
	*) py="$UP/bin/python" ;;
	esac
	[ "$2" = tcp ] && env=(MC_FORCE_TCP=1 MC_STORE_SHM=0)
	[ "$4" = warm ] && env+=(WARM=1)
	[ "$4" = ready ] && env+=(READY=1)
	env "${env[@]}" MC_LOG_LEVEL=warn $py "$S/scripts/first_write.py" 127.0.0.1:"$MP" 1 "$3" \
		2>>"$tmp/driver.err" | tail -1
	if [ -n "${FIRST_WRITE_TRACE:-}" ]; then
		grep '^#' "$tmp/driver.err" >&2
		: >"$tmp/driver.err"
	fi
}

PAGES=""
if [ "${HUGEPAGES:-0}" = 1 ] || [ "${HUGEPAGES:-0}" = only ]; then
	pool_orig=$(cat /proc/sys/vm/nr_hugepages)
	need=$(python3 -c "import re,sys; v,u=re.match(r'(\d+)\s*([KMGT]?)',sys.argv[1].upper()).groups(); print((int(v)<<{'':0,'K':10,'M':20,'G':30,'T':40}[u]) // (2<<20) + 64)" "$SEGMENT")
	echo $((pool_orig + need)) >/proc/sys/vm/nr_hugepages
	echo "# hugetlb pool: vm.nr_hugepages=$(cat /proc/sys/vm/nr_hugepages) (was $pool_orig)"
	PAGES="4k 2m"
	[ "$HUGEPAGES" = only ] && PAGES=2m
fi
echo "# $(date -u '+%F %T') host: $(nproc) CPUs, $(free -g | awk '/Mem/ {print $2}') GiB; upstream: $("$UP/bin/pip" show mooncake-transfer-engine-non-cuda 2>/dev/null | awk '/Version/ {print $2}')"
res=$tmp/results
[ "${STARTUP_ONLY:-0}" = 1 ] && PAGES=none
for pg in ${PAGES:-4k}; do
	[ "$pg" = none ] && continue
	[ "$pg" = 2m ] && CLIENT_ENV="MC_STORE_USE_HUGEPAGE=1" || CLIENT_ENV=""
	for r in $(seq "$ROUNDS"); do
		for when in $WHENS; do
			for tr in $TRANSPORTS; do
				[ "$when" = warm ] || [ "$when" = ready ] && [ "$tr" = tcp ] && continue
				for impl in ${IMPLS:-ours up ${BASELINE:+base}}; do
					[ "$impl" = base ] && [ "$pg" = 2m ] && continue
					start "$impl" "$SEGMENT"
					if [ -z "$T_MOUNT" ]; then
						echo "round $r $pg $when $tr $impl: the segment was not mounted"
						stop; continue
					fi
					if [ "$when" != now ]; then
						# Upstream gets the wait our population needed just before.
						if [ "$impl" = ours ]; then wait_populated ours >"$tmp/settle"
						else sleep "$(cat "$tmp/settle" 2>/dev/null || echo 1)"; fi
					fi
					line=$(driver "$impl" "$tr" "$impl-$pg-$tr-$when" "$when")
					echo "round $r $pg $when $tr $line"
					echo "$impl $pg $tr $when $line" >>"$res"
					stop
				done
			done
		done
	done
done
CLIENT_ENV=""

[ -f "$res" ] && echo "# medians over $ROUNDS rounds (GB/s; first = into memory nothing wrote, later = same memory after remove_all)"
[ -f "$res" ] && python3 - "$res" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    impl, pg, tr, when = line.split()[:4]
    vals = dict(re.findall(r"(\w+)=([0-9.]+)", line))
    rows.setdefault((pg, tr, when, impl), []).append({k: float(v) for k, v in vals.items()})
med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else float("nan")
div = lambda a, b: a / b if b else float("nan")
for pg in ("4k", "2m"):
    for tr in ("tcp", "shm"):
        for when in ("now", "settled", "ready", "warm"):
            o, u = rows.get((pg, tr, when, "ours"), []), rows.get((pg, tr, when, "up"), [])
            b = rows.get((pg, tr, when, "base"), [])
            if not o and not u:
                continue
            print("%s %-4s %-8s ours first %5.2f later %5.2f (first/later %.2f)  upstream first "
                  "%5.2f later %5.2f  ours/upstream first %.2fx | 1MiB gets ours %.2f up %.2f | "
                  "4KiB puts/s ours %.0f up %.0f" % (
                      pg, tr, when, med(o, "first_GBps"), med(o, "later_GBps"),
                      div(med(o, "first_GBps"), med(o, "later_GBps")), med(u, "first_GBps"),
                      med(u, "later_GBps"), div(med(o, "first_GBps"), med(u, "first_GBps")),
                      med(o, "get_1MiB_GBps"), med(u, "get_1MiB_GBps"),
                      med(o, "put_4KiB_per_s"), med(u, "put_4KiB_per_s")))
            if len(o) > 1:
                # A round's first and later writes ran under the same conditions; the rounds
                # differ more from each other (a shared host) than its two halves do.
                print("%s %-4s %-8s   first/later of each round: %s (median %.2f)" % (
                    pg, tr, when, " ".join("%.2f" % r["ratio"] for r in o), med(o, "ratio")))
            if o and "first_cpu_s_per_GiB" in o[0]:
                print("%s %-4s %-8s   writer CPU s/GiB: ours first %.3f later %.3f%s" % (
                    pg, tr, when, med(o, "first_cpu_s_per_GiB"), med(o, "later_cpu_s_per_GiB"),
                    "  base first %.3f later %.3f" % (med(b, "first_cpu_s_per_GiB"),
                                                      med(b, "later_cpu_s_per_GiB"))
                    if b and "first_cpu_s_per_GiB" in b[0] else ""))
            if b:
                print("%s %-4s %-8s   base (BASELINE) first %5.2f later %5.2f | 1MiB gets %.2f | "
                      "4KiB puts/s %.0f" % (pg, tr, when, med(b, "first_GBps"),
                                            med(b, "later_GBps"), med(b, "get_1MiB_GBps"),
                                            med(b, "put_4KiB_per_s")))
PY

echo "# start-up: seconds from mooncake_client start to segment mounted (master shows it) and, for ours, to populated"
for seg in $SIZES; do
	need=$(python3 -c "import re,sys; v,u=re.match(r'(\d+)\s*([KMGT]?)',sys.argv[1].upper()).groups(); print((int(v)<<{'':0,'K':10,'M':20,'G':30,'T':40}[u]) >> 20)" "$seg")
	for impl in ${IMPLS:-ours up ${BASELINE:+base}}; do
		m=(); p=()
		for r in $(seq "$ROUNDS"); do
			echo "# free -g before $seg $impl round $r: $(free -g | awk '/Mem/ {print "total " $2 ", used " $3 ", available " $7}')"
			avail=$(free -m | awk '/Mem/ {print $7}')
			if [ "$impl" != up ] && [ "$avail" -lt $((need + 2048)) ]; then
				echo "# $seg does not fit: $avail MiB available, the segment populated needs $need MiB and 2 GiB to spare; skipped"
				continue
			fi
			start_master "$impl"
			read -r _ mt _ pt < <(env ${CLIENT_ENV:-} python3 "$S/scripts/startup_time.py" "$BIN" "$seg" "$MP" "$HP" "$tmp/client-$impl.log")
			echo "round $r $seg $impl mounted $mt populated $pt"
			m+=("$mt"); [ "$pt" != - ] && p+=("$pt")
			stop
		done
		[ ${#m[@]} -gt 0 ] && python3 -c "import statistics,sys; m=[float(x) for x in sys.argv[3].split() if x != '-']; p=[float(x) for x in sys.argv[4].split()]; print('%-5s %-4s mounted %.3f s%s' % (sys.argv[1], sys.argv[2], statistics.median(m), ('  populated %.2f s' % statistics.median(p)) if p else ''))" "$seg" "$impl" "${m[*]}" "${p[*]:-}"
	done
done
