# SPDX-License-Identifier: Apache-2.0
# A three-member etcd cluster on 127.0.0.1 for the HA tests (test_ha_*.sh) and
# scripts/bench-ha*.sh: Debian's etcd-server, data in $MC_TMP, free ports.  Source after lib.sh.
#   etcd_require          exit 77 when etcd is not installed
#   etcd_start [N]        start N members (3), wait until the cluster has a leader; sets
#                         ETCD_EPS ("127.0.0.1:p1;127.0.0.1:p2;..."), ETCD_PID[i], ETCD_PORT[i]
#   etcd_kill I           kill -9 member I (1-based)
#   etcd_restart I        start member I again on its data
#   etcdctl_ ARGS...      etcdctl v3 against the cluster
# ETCD_IP (127.0.0.1) is the address the members listen on; ETCD_IN, when set, is a command
# prefix that runs etcd and etcdctl elsewhere (ETCD_IN="ip netns exec NS" for a namespace).
declare -A ETCD_PID ETCD_PORT ETCD_PEER
ETCD_N=0
ETCD_IP=${ETCD_IP:-127.0.0.1}
ETCD_IN=${ETCD_IN:-}

etcd_require() {
	command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1 ||
		{ echo "# SKIP: etcd and etcdctl are not installed (scripts/deps.sh: etcd-server etcd-client)"; exit 77; }
}

etcdctl_() {
	# shellcheck disable=SC2086
	ETCDCTL_API=3 $ETCD_IN etcdctl --endpoints="${ETCD_EPS//;/,}" --dial-timeout=2s --command-timeout=3s "$@"
}

etcd_member() {	# etcd_member I [LOGNAME [STATE]]: start member I (ports chosen by etcd_start)
	local i=$1 ip=$ETCD_IP
	# shellcheck disable=SC2086
	mc_start "${2:-etcd$i}" $ETCD_IN etcd --name "m$i" --data-dir "$MC_TMP/etcd$i" \
		--listen-client-urls "http://$ip:${ETCD_PORT[$i]}" \
		--advertise-client-urls "http://$ip:${ETCD_PORT[$i]}" \
		--listen-peer-urls "http://$ip:${ETCD_PEER[$i]}" \
		--initial-advertise-peer-urls "http://$ip:${ETCD_PEER[$i]}" \
		--initial-cluster "$ETCD_CLUSTER" --initial-cluster-state "${3:-new}" \
		--initial-cluster-token "mc-$$" --heartbeat-interval 50 --election-timeout 500
	ETCD_PID[$i]=$MC_LAST_PID
}

etcd_start() {
	local n=${1:-3} i
	ETCD_N=$n
	ETCD_CLUSTER=""
	ETCD_EPS=""
	for ((i = 1; i <= n; i++)); do
		ETCD_PORT[$i]=$(mc_free_port)
		ETCD_PEER[$i]=$(mc_free_port)
		ETCD_CLUSTER="${ETCD_CLUSTER:+$ETCD_CLUSTER,}m$i=http://$ETCD_IP:${ETCD_PEER[$i]}"
		ETCD_EPS="${ETCD_EPS:+$ETCD_EPS;}$ETCD_IP:${ETCD_PORT[$i]}"
	done
	for ((i = 1; i <= n; i++)); do etcd_member "$i"; done
	mc_wait_until 30 "the etcd cluster to elect a leader" etcdctl_ endpoint health --cluster
}

etcd_kill() {
	kill -9 "${ETCD_PID[$1]}" 2>/dev/null
	wait "${ETCD_PID[$1]}" 2>/dev/null
}

etcd_restart() {	# etcd_restart I: member I again, on its data
	etcd_member "$1" "etcd$1.restart" existing
}
