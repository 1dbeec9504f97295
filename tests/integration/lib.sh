# SPDX-License-Identifier: Apache-2.0
# Shared shell helpers for integration tests: free ports, starting daemons on 127.0.0.1 in a
# temporary directory, waiting for them, and tearing everything down on exit.
# Usage: . "$MC_TOP_SRCDIR/tests/integration/lib.sh"

: "${MC_TOP_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${MC_TOP_SRCDIR:=$MC_TOP_BUILDDIR}"
MC_BIN=$MC_TOP_BUILDDIR
MC_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mc-test.XXXXXX")
MC_PIDS=""

mc_cleanup() {
	local p
	for p in $MC_PIDS; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.2
	for p in $MC_PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	if [ "${MC_KEEP_TMP:-0}" = 1 ]; then echo "# logs kept in $MC_TMP"; else rm -rf "$MC_TMP"; fi
}
trap mc_cleanup EXIT

# A TCP port on 127.0.0.1 that nothing listens on right now.
mc_free_port() {
	python3 - <<'PY'
import socket, random
for _ in range(200):
    p = random.randint(20000, 40000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        s.close()
PY
}

# mc_wait_port PORT [SECONDS]: wait until something listens on 127.0.0.1:PORT.
mc_wait_port() {
	local port=$1 secs=${2:-20} i=0
	while [ $i -lt $((secs * 10)) ]; do
		if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then return 0; fi
		sleep 0.1; i=$((i + 1))
	done
	echo "# nothing listening on port $port after ${secs}s" >&2
	return 1
}

# mc_start NAME CMD ARGS...: start a daemon in the background, log to $MC_TMP/NAME.log.
# Sets MC_LAST_PID.
mc_start() {
	local name=$1; shift
	"$@" >"$MC_TMP/$name.log" 2>&1 &
	MC_LAST_PID=$!
	MC_PIDS="$MC_PIDS $MC_LAST_PID"
}

mc_dump_logs() {
	local f
	for f in "$MC_TMP"/*.log; do
		[ -f "$f" ] || continue
		echo "# ---- $(basename "$f") (last 30 lines)"
		tail -n 30 "$f" | sed 's/^/# /'
	done
}

# mc_start_master [EXTRA FLAGS...]: sets MC_MASTER_PORT, MC_METRICS_PORT, MC_MASTER_PID.
mc_start_master() {
	MC_MASTER_PORT=$(mc_free_port)
	MC_METRICS_PORT=$(mc_free_port)
	mc_start master "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 \
		--rpc_port="$MC_MASTER_PORT" --metrics_port="$MC_METRICS_PORT" "$@"
	MC_MASTER_PID=$MC_LAST_PID
	mc_wait_port "$MC_MASTER_PORT"
}

# mc_start_client NAME SEGMENT_SIZE [EXTRA FLAGS...]: a mooncake_client contributing memory.
mc_start_client() {
	local name=$1 seg=$2; shift 2
	local port
	port=$(mc_free_port)
	mc_start "$name" "$MC_BIN/mooncake_client" --host=127.0.0.1 --port="$port" \
		--master_server_address=127.0.0.1:"$MC_MASTER_PORT" \
		--metadata_server=P2PHANDSHAKE --global_segment_size="$seg" "$@"
	mc_wait_log "$name" "serving segment"
}

# mc_wait_log NAME TEXT [SECONDS]: wait until $MC_TMP/NAME.log contains TEXT.
mc_wait_log() {
	local name=$1 text=$2 secs=${3:-20} i=0
	while [ $i -lt $((secs * 10)) ]; do
		grep -q "$text" "$MC_TMP/$name.log" 2>/dev/null && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# '$text' not seen in $name.log after ${secs}s" >&2
	return 1
}
