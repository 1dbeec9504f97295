# SPDX-License-Identifier: Apache-2.0
# Shared shell helpers for integration tests: free ports, starting daemons on 127.0.0.1 in a
# temporary directory, waiting for them (a port, a log line, a metric, an HTTP answer: tests
# wait for a condition with a deadline, they do not sleep), checks that print both operands, and
# tearing everything down on exit.
# Usage: . "$MC_TOP_SRCDIR/tests/integration/lib.sh"
# MC_TEST_KEEP=1 keeps the temporary directory $MC_TMP (daemon logs, data files) and prints its
# path at the end of the test's log.

: "${MC_TOP_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${MC_TOP_SRCDIR:=$MC_TOP_BUILDDIR}"
MC_BIN=$MC_TOP_BUILDDIR
MC_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mc-test.XXXXXX")
MC_PIDS=""
MC_PORT_DIR=${TMPDIR:-/tmp}/mc-test-ports

mc_cleanup() {
	local p
	for p in $MC_PIDS; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.2
	for p in $MC_PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	mc_release_ports
	if [ "${MC_TEST_KEEP:-${MC_KEEP_TMP:-0}}" = 1 ]; then
		echo "# MC_TEST_KEEP=1: temporary files kept in $MC_TMP"
	else
		rm -rf "$MC_TMP"
	fi
}
trap mc_cleanup EXIT
# Killed by tests/run-with-timeout: say so and show the daemons' logs before the cleanup.
trap 'echo "# killed (SIGTERM): test timed out?"; mc_dump_logs; exit 124' TERM

# A TCP port on 127.0.0.1 that nothing listens on right now.
mc_free_port() {
	# Below the kernel's ephemeral range (32768 and up here): a port from there may be taken
	# by any outgoing connection (a ZeroMQ or client reconnect) before the daemon binds it.
	# A port handed out is reserved machine-wide until this test ends (a file naming the test's
	# shell in $MC_PORT_DIR, made under a lock): a daemon started later may not have bound it
	# yet, and test suites running side by side must not pick it meanwhile.
	python3 "$MC_TOP_SRCDIR/tests/integration/mc_ports.py" "$MC_TMP/.ports" "$MC_PORT_DIR" "$$"
}

# mc_release_ports: give back this test's port reservations (mc_cleanup does it at exit).
mc_release_ports() {
	local p
	[ -f "$MC_TMP/.ports" ] || return 0
	for p in $(cat "$MC_TMP/.ports"); do
		[ "$(cat "$MC_PORT_DIR/$p" 2>/dev/null)" = "$$" ] && rm -f "$MC_PORT_DIR/$p"
	done
	return 0
}

# mc_python ARGS...: python3 with the built package first on its path (and, in a sanitizer
# build, the sanitizer runtimes loaded first, as the extension needs).  Exits 77 from the test
# when the package was not built.
mc_python() {
	[ -f "$MC_BIN/pybuild/mooncake/_store.so" ] || { echo "# SKIP: Python package not built"; exit 77; }
	if nm -D "$MC_BIN/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init; then
		LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
			ASAN_OPTIONS="detect_leaks=0:abort_on_error=0" \
			PYTHONPATH="$MC_BIN/pybuild${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"
	else
		PYTHONPATH="$MC_BIN/pybuild${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"
	fi
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

# mc_restart_master NAME [FLAGS...]: a master again, on the ports of the one mc_start_master
# started, logging to NAME.log; sets MC_MASTER_PID and MC_MASTER_LOG, waits for its port.
mc_restart_master() {
	local name=$1
	shift
	mc_start "$name" "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 \
		--rpc_port="$MC_MASTER_PORT" --metrics_port="$MC_METRICS_PORT" "$@"
	MC_MASTER_PID=$MC_LAST_PID
	MC_MASTER_LOG=$name
	mc_wait_port "$MC_MASTER_PORT"
}

# mc_restart_persisted NAME DB DELAY_MS [OPTION...]: the master again on the same ports, persisting
# to DB, its background load slowed by DELAY_MS per 1000 rows (MC_TEST_LOAD_DELAY_MS; 0: not);
# sets MPID.  Exits the test, the logs dumped, when it does not start.
mc_restart_persisted() {
	local name=$1 db=$2 delay=$3
	shift 3
	MC_TEST_LOAD_DELAY_MS=$delay mc_restart_master "$name" --persist_path="$db" "$@" ||
		{ mc_dump_logs; exit 1; }
	MPID=$MC_MASTER_PID
}

# mc_persist_fill DB PREFIX N: a master persisting to DB and a client with a 64 MB segment, N
# objects of 1 KiB under PREFIX (fault_tool put-gen), then the master killed with SIGKILL and
# waited for (wait, not mc_wait_gone: the port is free only once its every thread has ended).
# The client stays.  Returns 1 (with the logs dumped) when a step failed.
mc_persist_fill() {
	mc_start_master --persist_path="$1" || { mc_dump_logs; return 1; }
	mc_start_client client1 64MB || { mc_dump_logs; return 1; }
	mc_wait_mounted client1 || { mc_dump_logs; return 1; }
	MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$MC_BIN/tests/integration/fault_tool" put-gen "$2" 0 \
		"$3" 1024 1 >"$MC_TMP/fill.out" 2>&1 || { cat "$MC_TMP/fill.out"; mc_dump_logs; return 1; }
	kill -KILL "$MC_MASTER_PID"
	wait "$MC_MASTER_PID" 2>/dev/null
	return 0
}

# mc_loaded NAME: the master logging to $MC_TMP/NAME.log has ended its background load.
mc_loaded() { grep -q "objects and .* SSD ghosts from .* in the background" "$MC_TMP/$1.log"; }

# mc_check_loading NAME WHAT: a TAP line saying WHAT happened while the master logging to NAME
# still loaded (ok), or that its load was over already (not ok, returns 1).
mc_check_loading() {
	if mc_loaded "$1"; then
		echo "not ok - $2 while loading (the load was over already)"
		return 1
	fi
	echo "ok - $2 while loading"
}

# mc_persist_older_row DB KEY: put an older copy of KEY's row into DB (generation 1, size 512,
# the same replicas), as a crash or an upgrade can leave: a load must take the newer row.
mc_persist_older_row() {
	python3 - "$1" "$2" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT key, size, flags, put_start_ms, soft_pin_until_ms, writer, replicas "
                 "FROM objects WHERE key = ?", (sys.argv[2].encode(),)).fetchone()
db.execute("INSERT INTO objects(gen, key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
           "replicas, checksum) VALUES (1, ?, 512, ?, ?, ?, ?, ?, NULL)",
           (row[0], row[2], row[3], row[4], row[5], row[6]))
db.commit()
PY
}

# mc_persist_key_rows DB KEY: the rows of KEY in DB's objects table.
mc_persist_key_rows() {
	python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
		"SELECT count(*) FROM objects WHERE key = ?", (sys.argv[2].encode(),)).fetchone()[0])' \
		"$1" "$2"
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

# mc_wait_mounted NAME...: wait until each mooncake_client NAME is in good standing at the
# master: a client's first ping is answered NEED_REMOUNT and it re-mounts its segments (logged
# "segments re-mounted"), which the master needs before the client counts as fully up.  After a
# master restart use mc_wait_remounted, which waits for the next such line.
mc_wait_mounted() {
	local name
	for name in "$@"; do
		mc_wait_log "$name" "segments re-mounted" || return 1
	done
}

# mc_log_mark NAME...: remember how many lines each log has now; mc_wait_log_after then looks
# only at the lines written after this mark.
declare -A MC_MARK
mc_log_mark() {
	local name
	for name in "$@"; do
		MC_MARK[$name]=$(wc -l <"$MC_TMP/$name.log" 2>/dev/null || echo 0)
	done
}

# mc_wait_log_after NAME TEXT [SECONDS]: wait until a line of $MC_TMP/NAME.log written after
# mc_log_mark NAME matches TEXT.
mc_wait_log_after() {
	local name=$1 text=$2 secs=${3:-20} i=0 from=$((${MC_MARK[$1]:-0} + 1))
	while [ $i -lt $((secs * 10)) ]; do
		tail -n +"$from" "$MC_TMP/$name.log" 2>/dev/null | grep -q -- "$text" && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# '$text' not seen in $name.log (after line $((from - 1))) after ${secs}s" >&2
	return 1
}

# mc_wait_remounted NAME...: after mc_log_mark NAME..., wait until each client re-mounted its
# segments again (a restarted master answers its next ping NEED_REMOUNT).
mc_wait_remounted() {
	local name
	for name in "$@"; do
		mc_wait_log_after "$name" "segments re-mounted" || return 1
	done
}

# mc_segment_of NAME: the segment name mooncake_client NAME serves (host:port, from its log).
mc_segment_of() {
	grep -o 'serving segment [^ ]*' "$MC_TMP/$1.log" 2>/dev/null | head -1 | awk '{print $3}'
}

# mc_wait_unmounted NAME [N] [SECONDS]: wait until the master has dropped the segments of the
# (killed) mooncake_client NAME, every replica on them gone: N segments by that name (1; 2 for a
# client with an SSD area, which bears the same name).  The master's log is
# $MC_TMP/$MC_MASTER_LOG.log (MC_MASTER_LOG=master unless a test restarted it under another name).
mc_wait_unmounted() {
	local seg
	seg=$(mc_segment_of "$1")
	[ -n "$seg" ] || { echo "# no segment name in $1.log" >&2; return 1; }
	mc_wait_log_count "${MC_MASTER_LOG:-master}" "segment $seg unmounted" "${2:-1}" "${3:-20}"
}

# mc_wait_log NAME TEXT [SECONDS]: wait until $MC_TMP/NAME.log contains TEXT (a grep regex).
mc_wait_log() {
	mc_wait_log_count "$1" "$2" 1 "${3:-20}"
}

# mc_wait_log_count NAME TEXT N [SECONDS]: wait until N lines of $MC_TMP/NAME.log match TEXT
# (the Nth re-mount, the second "Offline"...).
mc_wait_log_count() {
	local name=$1 text=$2 n=$3 secs=${4:-20} i=0 c
	while [ $i -lt $((secs * 10)) ]; do
		c=$(grep -c -- "$text" "$MC_TMP/$name.log" 2>/dev/null)
		[ "${c:-0}" -ge "$n" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# '$text' seen ${c:-0} times (want $n) in $name.log after ${secs}s" >&2
	return 1
}

# mc_wait_until SECONDS WHAT CMD...: run CMD every 0.1 s until it succeeds; after SECONDS print
# "# timed out after SECONDS s waiting for WHAT" and return 1.
mc_wait_until() {
	local secs=$1 what=$2 i=0; shift 2
	while [ $i -lt $((secs * 10)) ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# timed out after ${secs}s waiting for $what" >&2
	return 1
}

# mc_metric NAME [PORT]: the value of metric NAME at the master's /metrics (empty when absent).
mc_metric() {
	curl -sf "http://127.0.0.1:${2:-$MC_METRICS_PORT}/metrics" | awk -v n="$1" '$1 == n {print $2}'
}

# mc_wait_metric NAME VALUE [SECONDS] [PORT]: wait until the master's metric NAME reads VALUE.
mc_wait_metric() {
	local name=$1 want=$2 secs=${3:-20} port=${4:-$MC_METRICS_PORT} i=0 v=
	while [ $i -lt $((secs * 10)) ]; do
		v=$(mc_metric "$name" "$port")
		[ "$v" = "$want" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# metric $name is '$v' after ${secs}s, waited for '$want'" >&2
	return 1
}

# mc_wait_metric_ge NAME MIN [SECONDS] [PORT]: wait until the integer metric NAME is >= MIN.
mc_wait_metric_ge() {
	local name=$1 min=$2 secs=${3:-20} port=${4:-$MC_METRICS_PORT} i=0 v=
	while [ $i -lt $((secs * 10)) ]; do
		v=$(mc_metric "$name" "$port")
		[ -n "$v" ] && [ "${v%.*}" -ge "$min" ] 2>/dev/null && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# metric $name is '$v' after ${secs}s, waited for >= $min" >&2
	return 1
}

# mc_wait_http URL REGEX [SECONDS]: wait until GET URL answers 2xx with a body matching REGEX
# (grep -E; "" = any body).
mc_wait_http() {
	local url=$1 re=$2 secs=${3:-20} i=0
	while [ $i -lt $((secs * 10)) ]; do
		curl -sf "$url" 2>/dev/null | grep -Eq -- "${re:-.}" && return 0
		[ -z "$re" ] && curl -sf -o /dev/null "$url" 2>/dev/null && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "# $url did not answer /$re/ after ${secs}s" >&2
	return 1
}

# mc_wait_gone PID [SECONDS]: wait until process PID has exited.  A zombie counts as gone only
# once it is its last thread: a killed process's leader turns zombie while its other threads
# still exit, and its files (a listening port, a database lock) close with the last of them.
mc_wait_gone() {
	local pid=$1 secs=${2:-20} i=0 tasks
	while [ $i -lt $((secs * 10)) ]; do
		kill -0 "$pid" 2>/dev/null || return 0
		if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
			tasks=$(ls "/proc/$pid/task" 2>/dev/null | wc -l)
			[ "$tasks" -le 1 ] && return 0
		fi
		sleep 0.1; i=$((i + 1))
	done
	echo "# process $pid still running after ${secs}s" >&2
	return 1
}

# mc_db_rows DB TABLE: the number of rows of TABLE in the SQLite file DB, read through Python's
# sqlite3 module (the sqlite3 tool is not among the dependencies); "?" when it cannot be read.
mc_db_rows() {
	python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
		"SELECT count(*) FROM " + sys.argv[2]).fetchone()[0])' "$1" "$2" 2>/dev/null || echo "?"
}

# mc_is GOT EXPECTED WHAT: print "ok - WHAT", or "not ok - WHAT: got 'GOT', expected 'EXPECTED'"
# and return 1.  Use: mc_is "$n" 2 "two segments remain" || rc=1
mc_is() {
	if [ "$1" = "$2" ]; then
		echo "ok - $3"
	else
		echo "not ok - $3: got '$1', expected '$2'"
		return 1
	fi
}

# mc_check WHAT CMD...: run CMD; print "ok - WHAT", or its output as comments and
# "not ok - WHAT" and return 1.  Use: mc_check "the key reads back" "$T" get k || rc=1
mc_check() {
	local what=$1
	shift
	if "$@" >"$MC_TMP/step.out" 2>&1; then
		echo "ok - $what"
	else
		sed 's/^/# /' "$MC_TMP/step.out"
		echo "not ok - $what"
		return 1
	fi
}

# mc_ge GOT MIN WHAT: the same for an integer at least MIN.
mc_ge() {
	if [ -n "$1" ] && [ "$1" -ge "$2" ] 2>/dev/null; then
		echo "ok - $3"
	else
		echo "not ok - $3: got '$1', expected >= $2"
		return 1
	fi
}

# mc_python_package: make the built Python package (pybuild) importable by python3 (and the
# sanitizer runtimes preloaded for a sanitizer build); 1 with a "# SKIP" line when it was not
# built.  The daemons started from Python drop LD_PRELOAD again (mc_cluster.py).
mc_python_package() {
	[ -f "$MC_TOP_BUILDDIR/pybuild/mooncake/_store.so" ] ||
		{ echo "# SKIP: Python package not built (no Python headers)"; return 1; }
	export PYTHONPATH="$MC_TOP_BUILDDIR/pybuild:$MC_TOP_SRCDIR/tests/integration${PYTHONPATH:+:$PYTHONPATH}"
	if nm -D "$MC_TOP_BUILDDIR/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init; then
		export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
		export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
	fi
}
