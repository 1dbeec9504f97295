#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Figures for partitions: runs the network-namespace scenarios (tests/integration/
# test_partition_*.sh) with longer faults against this project's build, upstream Mooncake's
# wheel, or both, and prints for each scenario: objects acknowledged, how many read back
# byte-identical after the heal, max and p99 get latency during the fault, seconds from the heal
# to the first successful call.  Both sides run the same Python driver
# (scripts/partition_driver.py) on the same Python API; the interpreter and PYTHONPATH pick the
# implementation, and each side's own mooncake_master and mooncake_client serve.
#
# Usage: scripts/bench-partition.sh [ours|upstream|both] [SCENARIO...]
#   SCENARIO: one_node client master data_port (default: all four)
# Environment:
#   MC_BUILD       our build directory (default _build/dev), with the Python package built
#                  (make pybuild/mooncake/_store.so, done by make check)
#   MC_UPSTREAM    upstream's venv (default /work/venv-up), made with
#                  python3 -m venv /work/venv-up &&
#                  /work/venv-up/bin/pip install mooncake-transfer-engine-non-cuda
#   MC_DRIVER      "python" (default) or "c": our side driven by tests/integration/fault_tool
#   CUT_CLIENT, CUT_MASTER, CUT_PORT   seconds of each fault (45, 30, 30); POST seconds after
#                  the heal before the writers stop (40)
# Needs root (network namespaces, iptables).  Not part of make check.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${MC_BUILD:-$SRC/_build/dev}" && pwd)
UP=${MC_UPSTREAM:-/work/venv-up}
WHICH=${1:-both}
[ $# -gt 0 ] && shift
SCENARIOS=${*:-one_node client master data_port}
: "${CUT_CLIENT:=45}" "${CUT_MASTER:=30}" "${CUT_PORT:=30}" "${POST:=40}"
PYOURS=$(python3 -c 'import sys; print(sys.executable)')

run_one() {	# IMPL SCENARIO
	local impl=$1 sc=$2 cut out rc
	case $sc in
	client) cut=$CUT_CLIENT ;;
	master) cut=$CUT_MASTER ;;
	data_port) cut=$CUT_PORT ;;
	*) cut=0 ;;
	esac
	out=$(
		export MC_TOP_SRCDIR=$SRC MC_TOP_BUILDDIR=$B NN_CUT=$cut NN_POST=$POST
		if [ "$impl" = upstream ]; then
			export NN_MASTER_BIN=$UP/bin/mooncake_master NN_CLIENT_BIN=$UP/bin/mooncake_client
			export NN_DRIVER="$UP/bin/python $SRC/scripts/partition_driver.py" NN_CODES=0
		elif [ "${MC_DRIVER:-python}" = python ]; then
			export PYTHONPATH=$B/pybuild
			export NN_DRIVER="$PYOURS $SRC/scripts/partition_driver.py" NN_CODES=0
		fi
		bash "$SRC/tests/integration/test_partition_$sc.sh" 2>&1
	)
	rc=$?
	echo "$out" >"$LOGDIR/$impl-$sc.log"
	fig=$(echo "$out" | grep '^# figures:' | tail -1 | sed 's/^# figures: //')
	[ -n "$fig" ] || fig="(no figures: see $LOGDIR/$impl-$sc.log)"
	printf '%-9s %-10s rc=%-3s %s\n' "$impl" "$sc" "$rc" "$fig"
}

[ "$(id -u)" = 0 ] || { echo "bench-partition.sh: needs root (network namespaces)" >&2; exit 1; }
case $WHICH in
ours) impls=ours ;;
upstream) impls=upstream ;;
both) impls="ours upstream" ;;
*) echo "usage: $0 [ours|upstream|both] [SCENARIO...]" >&2; exit 2 ;;
esac
for i in $impls; do
	if [ "$i" = upstream ] && [ ! -x "$UP/bin/mooncake_master" ]; then
		echo "bench-partition.sh: no upstream venv at $UP (see the header)" >&2
		exit 1
	fi
	if [ "$i" = ours ] && [ "${MC_DRIVER:-python}" = python ] &&
		[ ! -f "$B/pybuild/mooncake/_store.so" ]; then
		echo "bench-partition.sh: build the Python package first" \
			"(make -C $B pybuild/mooncake/_store.so)" >&2
		exit 1
	fi
done
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/bench-partition.XXXXXX")
echo "# cuts: client ${CUT_CLIENT}s, master ${CUT_MASTER}s, data port ${CUT_PORT}s;" \
	"writers stop ${POST}s after the heal"
echo "# acked: objects acknowledged (before and during the fault); readable: of those, read back"
echo "# byte-identical after the heal; max/p99: get latency (s) during the fault; heal_first_ok:"
echo "# seconds from the heal to the first successful call (none: no success before the"
echo "# writers stopped)"
echo "# logs in $LOGDIR"
for sc in $SCENARIOS; do
	for i in $impls; do run_one "$i" "$sc"; done
done
