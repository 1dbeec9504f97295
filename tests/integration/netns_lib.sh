# SPDX-License-Identifier: Apache-2.0
# Network-namespace harness for the partition tests (test_partition_*.sh) and
# scripts/bench-partition.sh.  Each node (master, c1, c2, writer, ...) is a network namespace of
# its own with one veth link, eth0, to a bridge that lives in a further "switch" namespace; the
# test creates all of them, so nothing is configured in the namespace the test was started from
# and the addresses (10.231.R.N/24) exist only inside the test's namespaces.  Faults:
#   nn_cut NODE [link|drop]  partition a node: its switch port down, or iptables DROP of
#                            everything but loopback inside the node
#   nn_heal NODE             undo nn_cut
#   nn_block NODE IP PORT    DROP tcp from NODE to IP:PORT (inside NODE only)
#   nn_loss NODE PERCENT     drop that share of the packets NODE receives (iptables statistic)
#   nn_rate NODE RATE        shape NODE's egress with tc tbf (RATE as tc takes it: 100mbit)
# Everything is torn down on exit, failure included: processes first, then the namespaces.
# Needs root, ip, iptables, tc; otherwise the sourcing test exits 77 with a message.
# Usage: . "$MC_TOP_SRCDIR/tests/integration/netns_lib.sh"; nn_setup master c1 c2 writer
. "${MC_TOP_SRCDIR:-$(dirname "${BASH_SOURCE[0]}")/../..}/tests/integration/lib.sh"

NN_PREFIX=mc$$
NN_SW=$NN_PREFIX-sw
NN_NAMESPACES=""
NN_NODES=""
NN_SUBNET=10.231.$(($$ % 200 + 20))
declare -A NN_IP
NN_MASTER_PORT=50051
NN_METRICS_PORT=9003
NN_CLIENT_PORT=50052

nn_cleanup() {
	local ns
	mc_cleanup
	for ns in $NN_NAMESPACES; do ip netns del "$ns" 2>/dev/null; done
}
trap nn_cleanup EXIT
trap 'exit 130' INT TERM

nn_skip() {
	echo "# SKIP: $*"
	exit 77
}

# nn_reap_stale: namespaces left by an earlier run of these tests that was killed before its
# clean-up (named mc<pid>-*, whose process is gone).
nn_reap_stale() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E '^mc[0-9]+-sw$'); do
		pid=${ns#mc}
		pid=${pid%-sw}
		kill -0 "$pid" 2>/dev/null && continue
		ip netns list | awk '{ print $1 }' | grep -E "^mc$pid-" | while read -r ns; do
			ip netns del "$ns" 2>/dev/null
		done
	done
}

# nn_require: skip (77) unless this can run: root, the tools, and a namespace that can be made.
nn_require() {
	local t
	[ "$(id -u)" = 0 ] || nn_skip "network-namespace tests need root"
	for t in ip iptables tc; do
		command -v "$t" >/dev/null 2>&1 || nn_skip "$t is not installed (scripts/deps.sh)"
	done
	nn_reap_stale
	ip netns add "$NN_SW" 2>/dev/null || nn_skip "cannot create a network namespace (ip netns add)"
	NN_NAMESPACES="$NN_SW"
	ip netns exec "$NN_SW" iptables -L -n >/dev/null 2>&1 \
		|| nn_skip "iptables does not work inside a network namespace here"
}

nn_ns() { echo "$NN_PREFIX-$1"; }

# nn_setup NODE...: the switch, then one namespace per node; NN_IP[NODE] is its address.
nn_setup() {
	local n i=1 ns
	nn_require
	ip -n "$NN_SW" link add br0 type bridge || return 1
	ip -n "$NN_SW" link set br0 up
	ip -n "$NN_SW" link set lo up
	# Bridged frames must not pass through the switch's own iptables.
	ip netns exec "$NN_SW" sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null
	for n in "$@"; do
		ns=$(nn_ns "$n")
		ip netns add "$ns" || return 1
		NN_NAMESPACES="$NN_NAMESPACES $ns"
		ip -n "$NN_SW" link add "p-$n" type veth peer name eth0 netns "$ns" || return 1
		ip -n "$NN_SW" link set "p-$n" master br0
		ip -n "$NN_SW" link set "p-$n" up
		NN_IP[$n]=$NN_SUBNET.$i
		ip -n "$ns" addr add "${NN_IP[$n]}/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
		NN_NODES="$NN_NODES $n"
		i=$((i + 1))
	done
}

# nn_exec NODE CMD ARGS...: run a command inside NODE's namespace.
nn_exec() {
	local n=$1; shift
	ip netns exec "$(nn_ns "$n")" "$@"
}

# nn_start NAME NODE CMD ARGS...: a background process inside NODE, logging to $MC_TMP/NAME.log;
# killed on exit.  Sets MC_LAST_PID.
nn_start() {
	local name=$1 n=$2; shift 2
	mc_start "$name" ip netns exec "$(nn_ns "$n")" "$@"
}

# nn_wait_port NODE IP PORT [SECONDS]: wait until IP:PORT accepts connections as seen from NODE.
nn_wait_port() {
	local n=$1 ip=$2 port=$3 secs=${4:-20}
	nn_exec "$n" bash -c 'for ((i = 0; i < '"$((secs * 10))"'; i++)); do
		(exec 3<>/dev/tcp/'"$ip/$port"') 2>/dev/null && exit 0; sleep 0.1; done; exit 1' \
		|| { echo "# $ip:$port not reachable from $n after ${secs}s" >&2; return 1; }
}

# nn_master_has_flag NAME: the master binary in use knows --NAME.
nn_master_has_flag() {
	"${NN_MASTER_BIN:-$MC_BIN/mooncake_master}" --help 2>&1 | grep -q -- "-$1"
}

# nn_liveness_flags ACTIVE SUSPECT: the liveness flags for a master that knows them; a master
# with only --client_ttl gets that one (it then declares a client dead after ACTIVE seconds).
nn_liveness_flags() {
	if nn_master_has_flag client_suspicion_ttl_sec; then
		echo "--client_active_ttl_sec=$1 --client_suspicion_ttl_sec=$2"
	else
		echo "--client_ttl=$1"
	fi
}

# nn_start_master [FLAGS...]: the master in node "master"; sets MC_MASTER (ip:port) and
# MC_MASTER_PID.
nn_start_master() {
	nn_start master master "${NN_MASTER_BIN:-$MC_BIN/mooncake_master}" \
		--rpc_address="${NN_IP[master]}" --rpc_port=$NN_MASTER_PORT \
		--metrics_port=$NN_METRICS_PORT --metrics_host="${NN_IP[master]}" "$@"
	# shellcheck disable=SC2034
	MC_MASTER_PID=$MC_LAST_PID
	MC_MASTER=${NN_IP[master]}:$NN_MASTER_PORT
	export MC_MASTER
	nn_wait_port master "${NN_IP[master]}" $NN_MASTER_PORT
}

# nn_start_client NODE SEGMENT_SIZE [FLAGS...]: a mooncake_client in NODE (log NODE.log), segment
# "IP:50052" (upstream's: IP:some port), waited for until the master lists it.  Sets NN_PID[NODE].
declare -A NN_PID
nn_start_client() {
	local n=$1 seg=$2 i; shift 2
	nn_start "$n" "$n" "${NN_CLIENT_BIN:-$MC_BIN/mooncake_client}" --host="${NN_IP[$n]}" \
		--port=$NN_CLIENT_PORT --master_server_address="$MC_MASTER" \
		--metadata_server=P2PHANDSHAKE --global_segment_size="$seg" "$@"
	NN_PID[$n]=$MC_LAST_PID
	for ((i = 0; i < 200; i++)); do
		nn_has_segment "$n" && return 0
		nn_alive "${NN_PID[$n]}" || break
		sleep 0.1
	done
	echo "# the master does not list $n's segment" >&2
	return 1
}

# nn_has_segment NODE: the master lists NODE's segment.
nn_has_segment() {
	nn_exec master curl -sf "http://${NN_IP[master]}:$NN_METRICS_PORT/get_all_segments" \
		| grep -q "^${NN_IP[$1]}:"
}

# nn_wait_segment NODE SECONDS: wait until the master lists NODE's segment (again).
nn_wait_segment() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		nn_has_segment "$1" && return 0
		sleep 0.1
	done
	return 1
}

# nn_listen_ports NODE: the TCP ports NODE's client process listens on.
nn_listen_ports() {
	nn_exec "$1" ss -ltnpH | grep "pid=${NN_PID[$1]}," | awk '{ sub(/.*:/, "", $4); print $4 }' \
		| sort -u
}

# The store client driver: fault_tool, or NN_DRIVER, a command taking the same subcommands and
# writing the same call logs (scripts/partition_driver.py on a Python package).
NN_DRIVER=${NN_DRIVER:-$MC_BIN/tests/integration/fault_tool}
# NN_CODES=0: the driver cannot tell error codes apart (the Python API's get returns no code).
NN_CODES=${NN_CODES:-1}

# nn_drv NODE SUBCOMMAND ARGS...: run the driver inside NODE.
nn_drv() {
	local n=$1; shift
	# shellcheck disable=SC2086
	nn_exec "$n" env MC_MASTER="$MC_MASTER" MC_LOCAL_HOST="${NN_IP[$n]}" $NN_DRIVER "$@"
}

# nn_drv_bg NAME NODE SUBCOMMAND ARGS...: the same in the background (output in NAME.log); a
# writer or reader stops at nn_stop.
nn_drv_bg() {
	local name=$1 n=$2; shift 2
	# shellcheck disable=SC2086
	nn_start "$name" "$n" env MC_MASTER="$MC_MASTER" MC_LOCAL_HOST="${NN_IP[$n]}" \
		MC_STOP_FILE="$MC_TMP/stop" $NN_DRIVER "$@"
}

nn_stop() { touch "$MC_TMP/stop"; }

# nn_wait_pid PID SECONDS: wait for a background process; kill it if it runs longer (returns 1).
nn_wait_pid() {
	local p=$1 i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null; return 0; }
		sleep 0.1
	done
	echo "# process $p still running after $2 s: killed" >&2
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	return 1
}

# nn_alive PID...: every process is still running (no daemon was restarted).
nn_alive() {
	local p
	for p in "$@"; do kill -0 "$p" 2>/dev/null || return 1; done
}

nn_cut() {
	local n=$1 how=${2:-link} ns
	ns=$(nn_ns "$n")
	if [ "$how" = link ]; then
		ip -n "$NN_SW" link set "p-$n" down
	else
		ip netns exec "$ns" iptables -N MCCUT 2>/dev/null
		ip netns exec "$ns" iptables -F MCCUT
		ip netns exec "$ns" iptables -A MCCUT -i lo -j RETURN
		ip netns exec "$ns" iptables -A MCCUT -o lo -j RETURN
		ip netns exec "$ns" iptables -A MCCUT -j DROP
		ip netns exec "$ns" iptables -I INPUT -j MCCUT
		ip netns exec "$ns" iptables -I OUTPUT -j MCCUT
	fi
	echo "# $(date +%T.%N | cut -c1-12) cut $n ($how)"
}

nn_heal() {
	local n=$1 ns
	ns=$(nn_ns "$n")
	ip -n "$NN_SW" link set "p-$n" up
	if ip netns exec "$ns" iptables -L MCCUT -n >/dev/null 2>&1; then
		ip netns exec "$ns" iptables -D INPUT -j MCCUT 2>/dev/null
		ip netns exec "$ns" iptables -D OUTPUT -j MCCUT 2>/dev/null
		ip netns exec "$ns" iptables -F MCCUT
		ip netns exec "$ns" iptables -X MCCUT
	fi
	echo "# $(date +%T.%N | cut -c1-12) healed $n"
}

nn_block() {
	nn_exec "$1" iptables -A OUTPUT -p tcp -d "$2" --dport "$3" -j DROP
	echo "# $(date +%T.%N | cut -c1-12) $1 -> $2:$3 dropped"
}

nn_unblock() {
	nn_exec "$1" iptables -D OUTPUT -p tcp -d "$2" --dport "$3" -j DROP
	echo "# $(date +%T.%N | cut -c1-12) $1 -> $2:$3 open again"
}

nn_loss() {
	local p
	p=$(awk -v x="$2" 'BEGIN { printf "%.4f", x / 100 }')
	nn_exec "$1" iptables -A INPUT -i eth0 -m statistic --mode random --probability "$p" -j DROP
}

nn_rate() {
	nn_exec "$1" tc qdisc replace dev eth0 root tbf rate "$2" burst 64kb latency 400ms
}

# nn_clear NODE: no loss, no rate limit, no blocked ports.
nn_clear() {
	nn_exec "$1" iptables -F INPUT
	nn_exec "$1" iptables -F OUTPUT
	nn_exec "$1" tc qdisc del dev eth0 root 2>/dev/null
	return 0
}

# nn_metric NAME: a master metric (scraped from inside the master's namespace).
nn_metric() {
	nn_exec master curl -sf "http://${NN_IP[master]}:$NN_METRICS_PORT/metrics" \
		| awk -v n="$1" '$1 == n {print $2}'
}

# nn_segments: how many segments the master lists.
nn_segments() {
	nn_exec master curl -sf "http://${NN_IP[master]}:$NN_METRICS_PORT/get_all_segments" \
		| grep -c .
}

# nn_now: wall-clock seconds, as the call logs write them.
nn_now() { date +%s.%N; }

# Call logs (fault_tool writer/reader, scripts/partition_driver.py) have one line per call:
#   START_WALLCLOCK LATENCY_S RC OP KEY      (RC 0 success, 1 wrong bytes, else the error code)
# nn_stats LOG FROM TO: for the calls that overlap [FROM, TO) (started before TO, ended after
# FROM): "n=.. fail=.. max=.. p99=..".
nn_stats() {
	awk -v a="$2" -v b="$3" '$1 < b && $1 + $2 > a { print $2, $3 }' "$1" | sort -g \
		| awk '{ l[n++] = $1; if ($2 != 0) f++ }
		END {
			if (n == 0) { print "n=0 fail=0 max=0 p99=0"; exit }
			k = int(n * 0.99 + 0.999999) - 1; if (k < 0) k = 0
			printf "n=%d fail=%d max=%.3f p99=%.3f\n", n, f, l[n - 1], l[k]
		}'
}

# nn_field STATS NAME: one field of nn_stats' output.
nn_field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }

# nn_first_ok LOG T: seconds from T to the end of the first successful call that ended after T
# ("none" if there was none).
nn_first_ok() {
	awk -v t="$2" '$3 == 0 && $1 + $2 >= t { e = $1 + $2 - t; if (!s || e < m) m = e; s = 1 }
		END { if (s) printf "%.3f\n", m; else print "none" }' "$1"
}

# nn_ok_at_least LOG N: LOG has at least N successful calls.
nn_ok_at_least() {
	[ "$(awk '$3 == 0' "$1" 2>/dev/null | wc -l)" -ge "$2" ]
}

# nn_ok_after LOG T: LOG has a successful call that ended after T.
nn_ok_after() {
	[ -f "$1" ] && [ "$(nn_first_ok "$1" "$2")" != none ]
}

# nn_wait_ok LOG N [SECONDS]: wait until LOG has N successful calls (a driver is in its stride).
nn_wait_ok() {
	mc_wait_until "${3:-20}" "$2 successful calls in $(basename "$1")" nn_ok_at_least "$1" "$2"
}

# nn_wait_first_ok T SECONDS LOG...: wait until each LOG has a successful call that ended after
# T (after a heal: the drivers got through again).
nn_wait_first_ok() {
	local t=$1 secs=$2 log; shift 2
	for log in "$@"; do
		mc_wait_until "$secs" "a successful call after the heal in $(basename "$log")" \
			nn_ok_after "$log" "$t" || return 1
	done
}

# nn_le A B: A <= B, as numbers.
nn_le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "none" && a + 0 <= b + 0) }'; }

# nn_verified OUTPUT: "identical" count from a driver's verify / verify-acked output.
nn_verified() {
	echo "$1" | awk '/^# verify-acked:/ { s += $5 } /^# verify [^:]*:/ { s += $4 } END { print s + 0 }'
}

# nn_read_back PREFIX N SIZE WSIZE: after the heal, from the app node, PREFIX/0..N-1 (SIZE
# bytes each) and every put acknowledged in $MC_TMP/acked (WSIZE bytes) read back
# byte-identical (clears rc otherwise).  Sets NN_ACKED (objects acknowledged in all) and
# NN_READABLE (of those, read back).
nn_read_back() {
	local out
	out=$(nn_drv app verify "$1" "$2" "$3") || rc=1
	echo "$out"
	NN_READABLE=$(nn_verified "$out")
	NN_ACKED=$(($2 + $(grep -c . "$MC_TMP/acked")))
	out=$(nn_drv app verify-acked "$MC_TMP/acked" "$4") || rc=1
	echo "$out"
	NN_READABLE=$((NN_READABLE + $(nn_verified "$out")))
}

# nn_figures SCENARIO ACKED READABLE STATS FIRST_OK: the line scripts/bench-partition.sh reads.
nn_figures() {
	echo "# figures: scenario=$1 acked=$2 readable=$3 max=$(nn_field "$4" max)" \
		"p99=$(nn_field "$4" p99) heal_first_ok=$5"
}

# nn_replicas_on NODE PREFIX N: how many of PREFIX/0..N-1 the master says have a readable
# replica on NODE.
nn_replicas_on() {
	local keys
	keys=$(seq 0 $(($3 - 1)) | sed "s|^|$2/|" | paste -sd,)
	nn_exec master curl -s "http://${NN_IP[master]}:$NN_METRICS_PORT/batch_query_keys?keys=$keys" \
		| python3 -c 'import json, sys
try:
    d = json.load(sys.stdin)["data"]
    print(sum(1 for v in d.values() if sys.argv[1] in json.dumps(v)))
except Exception:
    print("unknown")' "${NN_IP[$1]}:"
}
