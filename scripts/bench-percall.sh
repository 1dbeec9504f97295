#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Per-call cost of the Python store API, this project's package next to upstream's wheel in the
# same run: for each round and each implementation, starts that implementation's own
# mooncake_master and two mooncake_client processes (512 MiB segments each) on 127.0.0.1, runs
# scripts/bench-percall.py against them (batch_is_exist of 128 keys; batch_put_from and
# batch_get_into of 8 x 1 MiB over tcp), stops them, and prints its line.  At the end: the median
# of each figure over the rounds and the ratio ours/upstream, both of calls per second (which a
# busy host's preemptions drag down at random) and of the median call's latency.
#
# Usage: scripts/bench-percall.sh [ROUNDS [SECONDS]]     (default 5 rounds of 2 s per figure)
# Environment:
#   MC_BUILD     our build directory (default _build/dev), with the Python package built
#                (make -C BUILD pybuild/mooncake/_store.so)
#   MC_UPSTREAM  upstream's venv (default /work/venv-up), made with
#                python3 -m venv /work/venv-up &&
#                /work/venv-up/bin/pip install mooncake-transfer-engine-non-cuda
#   MC_BASE      another build directory of this project (an older commit, say), run as "base"
#                next to the others when set
#   WHICH        "both" (default: ours, base when MC_BASE is set, upstream), "ours" or "upstream"
# Data moves over tcp on both sides (MC_FORCE_TCP=1; MC_STORE_SHM=0 for ours).  Not part of
# make check.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${MC_BUILD:-$SRC/_build/dev}" && pwd)
UP=${MC_UPSTREAM:-/work/venv-up}
ROUNDS=${1:-5}
SECS=${2:-2}
WHICH=${WHICH:-both}
PYOURS=$(command -v python3)
export MC_FORCE_TCP=1 MC_STORE_SHM=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-percall.XXXXXX")
pids=""
stop_all() {
	local p
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	pids=""
}
trap 'stop_all; rm -rf "$tmp"' EXIT

# wait_port PORT: until something listens on 127.0.0.1:PORT (10 s at most)
wait_port() {
	local i
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

run_one() {	# IMPL ROUND: a second try on other ports when the first does not start
	run_try "$@" || { stop_all; run_try "$@"; }
}

run_try() {	# IMPL ROUND
	local impl=$1 r=$2 P M C py line i
	P=$((20000 + RANDOM % 20000))
	case $impl in
	upstream) M=$UP/bin/mooncake_master C=$UP/bin/mooncake_client py=$UP/bin/python ;;
	base) M=$BASE/mooncake_master C=$BASE/mooncake_client py=$PYOURS ;;
	*) M=$B/mooncake_master C=$B/mooncake_client py=$PYOURS ;;
	esac
	"$M" --rpc_address=127.0.0.1 --rpc_port=$P --metrics_port=$((P + 9)) \
		>"$tmp/$impl-m.log" 2>&1 &
	pids="$pids $!"
	wait_port $P || { echo "$impl: master did not start (see $tmp)"; return 1; }
	for i in 1 2; do
		"$C" --host=127.0.0.1 --port=$((P + i)) --master_server_address=127.0.0.1:$P \
			--metadata_server=P2PHANDSHAKE --global_segment_size=512MB --protocol=tcp \
			>"$tmp/$impl-c$i.log" 2>&1 &
		pids="$pids $!"
	done
	sleep 2
	if [ "$impl" = upstream ]; then
		line=$(env -u PYTHONPATH "$py" "$SRC/scripts/bench-percall.py" 127.0.0.1:$P "$SECS" 2>"$tmp/$impl-py.log")
	elif [ "$impl" = base ]; then
		line=$(PYTHONPATH=$BASE/pybuild "$py" "$SRC/scripts/bench-percall.py" 127.0.0.1:$P "$SECS" 2>"$tmp/$impl-py.log")
	else
		line=$(PYTHONPATH=$B/pybuild "$py" "$SRC/scripts/bench-percall.py" 127.0.0.1:$P "$SECS" 2>"$tmp/$impl-py.log")
	fi
	stop_all
	[ -n "$line" ] || { echo "$impl: no figures:"; tail -5 "$tmp/$impl-py.log"; return 1; }
	printf '%-9s round %d: %s\n' "$impl" "$r" "$line"
	# shellcheck disable=SC2001
	echo "$line" | sed 's/^exist=\([0-9]*\) put=\([0-9]*\) get=\([0-9]*\) calls.s .p50 us: \([0-9]*\) \([0-9]*\) \([0-9]*\)).*/\1 \2 \3 \4 \5 \6/' \
		>>"$tmp/$impl.fig"
}

BASE=${MC_BASE:+$(cd "$MC_BASE" && pwd)}
case $WHICH in
both) impls="ours${BASE:+ base} upstream" ;;
ours | upstream) impls=$WHICH ;;
*) echo "WHICH: both, ours or upstream" >&2; exit 2 ;;
esac
case " $impls " in *" upstream "*)
	[ -x "$UP/bin/mooncake_master" ] || { echo "no upstream venv at $UP (see the header)" >&2; exit 1; } ;;
esac
case " $impls " in *" base "*)
	[ -f "$BASE/pybuild/mooncake/_store.so" ] ||
		{ echo "MC_BASE: build its Python package first" >&2; exit 1; } ;;
esac
case " $impls " in *" ours "*)
	[ -f "$B/pybuild/mooncake/_store.so" ] ||
		{ echo "build the Python package first (make -C $B pybuild/mooncake/_store.so)" >&2; exit 1; } ;;
esac
for r in $(seq "$ROUNDS"); do
	for i in $impls; do run_one "$i" "$r" || { echo "giving up" >&2; exit 1; }; done
done
median() {	# COLUMN FILE
	cut -d' ' -f"$1" "$2" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}
for i in $impls; do
	[ -s "$tmp/$i.fig" ] || continue
	printf '%-9s median:  exist=%s put=%s get=%s calls/s (p50 us: %s %s %s)\n' "$i" \
		"$(median 1 "$tmp/$i.fig")" "$(median 2 "$tmp/$i.fig")" "$(median 3 "$tmp/$i.fig")" \
		"$(median 4 "$tmp/$i.fig")" "$(median 5 "$tmp/$i.fig")" "$(median 6 "$tmp/$i.fig")"
done
for i in ours base; do
	if [ ! -s "$tmp/$i.fig" ] || [ ! -s "$tmp/upstream.fig" ]; then continue; fi
	paste -d' ' "$tmp/$i.fig" "$tmp/upstream.fig" | awk -v i="$i" '
		{ printf "%s/upstream round %d: calls/s exist %.2fx put %.2fx get %.2fx;" \
			 " by p50 latency exist %.2fx put %.2fx get %.2fx\n",
			 i, NR, $1/$7, $2/$8, $3/$9, $10/$4, $11/$5, $12/$6 }'
	printf '%s/upstream, ratio of medians: calls/s exist %.2fx put %.2fx get %.2fx;' "$i" \
		"$(echo "$(median 1 "$tmp/$i.fig") / $(median 1 "$tmp/upstream.fig")" | bc -l)" \
		"$(echo "$(median 2 "$tmp/$i.fig") / $(median 2 "$tmp/upstream.fig")" | bc -l)" \
		"$(echo "$(median 3 "$tmp/$i.fig") / $(median 3 "$tmp/upstream.fig")" | bc -l)"
	printf ' by p50 latency exist %.2fx put %.2fx get %.2fx\n' \
		"$(echo "$(median 4 "$tmp/upstream.fig") / $(median 4 "$tmp/$i.fig")" | bc -l)" \
		"$(echo "$(median 5 "$tmp/upstream.fig") / $(median 5 "$tmp/$i.fig")" | bc -l)" \
		"$(echo "$(median 6 "$tmp/upstream.fig") / $(median 6 "$tmp/$i.fig")" | bc -l)"
done
