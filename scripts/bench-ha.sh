#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What master HA costs, in one run on one machine: tests/bench_master's put workloads (PutStart +
# PutEnd pairs, single and in batches of 128, 8 in flight per connection), CLIENTS (4) of them at
# once, each on its own connection and keys, against
#   off      one master, no persistence
#   sqlite   one master with --persist_path (the SQLite group commit)
#   ha       the leader of three masters with --enable_ha --enable_oplog on a three-member etcd
#            cluster (every batch written to etcd, then to the leader's SQLite file, before the
#            replies; two standbys following)
# and, while the ha run puts, the standbys' replication lag (ha_oplog_replication_lag_ms: age of
# the last batch a standby applied when it applied it; ha_oplog_standby_lag: batches behind),
# sampled every 100 ms.
#   scripts/bench-ha.sh [BUILD_DIR] [ROUNDS]     (BUILD_DIR: _build/opt; ROUNDS: 3)
# Rounds alternate the three setups so the machine's noise falls on all; prints every run and the
# medians.  Needs etcd (scripts/deps.sh).
set -u
B=$(cd "${1:-_build/opt}" && pwd)
ROUNDS=${2:-3}
NKEYS=${NKEYS:-50000}
CLIENTS=${CLIENTS:-4}
MC_TOP_SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
MC_TOP_BUILDDIR=$B
export MC_TOP_SRCDIR MC_TOP_BUILDDIR
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
[ -x "$B/tests/bench_master" ] || make -C "$B" tests/bench_master >/dev/null
OUT=$MC_TMP/results
etcd_start 3 >/dev/null || { mc_dump_logs; exit 1; }

pairs() {	# pairs LABEL ADDR PID: CLIENTS bench_masters' puts, append "LABEL single batch128"
	local label=$1 addr=$2 pid=$3 k pids=""
	rm -f "$MC_TMP"/bench.*.out
	for ((k = 1; k <= CLIENTS; k++)); do
		MC_BENCH_TAG=c$k/ "$B/tests/bench_master" "$addr" "$pid" "$NKEYS" puts \
			>"$MC_TMP/bench.$k.out" 2>&1 &
		pids="$pids $!"
	done
	# shellcheck disable=SC2086
	wait $pids
	echo "$label $(cat "$MC_TMP"/bench.*.out | awk '/batch 1:/ { a += $(NF - 1) }
		/batch 128:/ { b += $(NF - 1) } END { printf "%.0f %.0f", a, b }')" | tee -a "$OUT" |
		sed 's/^/# /'
}

single() {	# single LABEL [FLAGS...]: one master alone
	local label=$1 port metrics pid; shift
	port=$(mc_free_port); metrics=$(mc_free_port)
	"$B/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$port" --metrics_port="$metrics" \
		--enable_metric_reporting=false "$@" >"$MC_TMP/$label.log" 2>&1 &
	pid=$!
	mc_wait_port "$port" >/dev/null
	pairs "$label" "127.0.0.1:$port" "$pid"
	kill "$pid"; wait "$pid" 2>/dev/null
}

ha_round() {	# ha_round R: three fresh masters (a new cluster id), bench the leader
	local r=$1 i l s sampler
	HA_CLUSTER=bench$$-$r
	for i in 1 2 3; do
		HA_PORT[$i]=""; HA_METRICS[$i]=""
		rm -f "$MC_TMP/master$i.db"*
		HA_LEASE=5 ha_start_master "$i" --enable_metric_reporting=false >/dev/null
	done
	l=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
	(	# the standbys' lag while the leader puts
		while :; do
			for s in 1 2 3; do
				[ "$s" = "$l" ] && continue
				curl -sf -m 1 "http://127.0.0.1:${HA_METRICS[$s]}/metrics" | awk -v s="$s" '
					$1 == "ha_oplog_replication_lag_ms" { ms = $2 }
					$1 == "ha_oplog_standby_lag" { b = $2 }
					END { print s, ms, b }'
			done
			sleep 0.1
		done >"$MC_TMP/lag.$r" ) &
	sampler=$!
	pairs ha "127.0.0.1:${HA_PORT[$l]}" "${HA_PID[$l]}"
	kill "$sampler"; wait "$sampler" 2>/dev/null
	awk '{ print "lag", $2, $3 }' "$MC_TMP/lag.$r" >>"$OUT"
	for i in 1 2 3; do ha_kill "$i"; done
}

for ((r = 1; r <= ROUNDS; r++)); do
	single off
	single sqlite --persist_path="$MC_TMP/single.db"
	rm -f "$MC_TMP/single.db"*
	ha_round "$r"
done
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); etcd $(etcd --version | head -1 | awk '{ print $3 }'), 3 members on this machine; $CLIENTS clients"
python3 - "$OUT" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for label in ("off", "sqlite", "ha"):
    r = [x for x in rows if x[0] == label]
    if not r:
        continue
    med[label] = (statistics.median(float(x[1]) for x in r), statistics.median(float(x[2]) for x in r))
    print("%-6s PutStart+PutEnd pairs/s, all clients: single %9.0f   batch of 128 %9.0f   "
          "(medians of %d)" % (label, med[label][0], med[label][1], len(r)))
if "ha" in med:
    for base in ("off", "sqlite"):
        if base in med:
            print("ha / %-6s batched: %.2f   single: %.2f" % (base, med["ha"][1] / med[base][1],
                                                          med["ha"][0] / med[base][0]))
lag = [x for x in rows if x[0] == "lag" and len(x) == 3]
if lag:
    ms = sorted(float(x[1]) for x in lag)
    b = sorted(float(x[2]) for x in lag)
    print("standby replication lag during the ha runs: median %.0f ms, p99 %.0f ms, max %.0f ms; "
          "batches behind: median %.0f, max %.0f (%d samples)" % (
              statistics.median(ms), ms[int(len(ms) * 0.99) - 1 if len(ms) > 1 else 0], ms[-1],
              statistics.median(b), b[-1], len(ms)))
PY
