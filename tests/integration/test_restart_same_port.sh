#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regression: a mooncake_client restarted on its fixed host:port after kill -9 was refused
# (SEGMENT_ALREADY_EXISTS) until its predecessor's liveness ran out (30 s with the defaults),
# so a systemd restart loop gave up.  A client silent for 3 s gives its name to the new
# process at once: the old segment goes dormant (its objects unreadable, never served by the
# new process), the new one mounts and serves.  A live client keeps its name.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
rc=0

mc_start_master || { mc_dump_logs; exit 1; }
port=$(mc_free_port)
mc_start_client c1 64MB --port="$port" || { mc_dump_logs; exit 1; }
pid1=$MC_LAST_PID
mc_start_client c2 64MB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$T" put-preferred old 20 "127.0.0.1:$port" || rc=1
kill -KILL "$pid1"
wait "$pid1" 2>/dev/null
# Time passing: the master gives a name to a new process once its holder was silent for 3 s
# (MC_CLIENT_SILENT_MS); the last ping of c1 was at most a second before the kill.
sleep 3.1
t0=$(date +%s.%N)
mc_start_client c1b 64MB --port="$port" || { mc_dump_logs; exit 1; }
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "# the restarted client served after %.1f s\n", b - a }'
grep -q "a new process mounted its segment name" "$MC_TMP/master.log" \
	&& echo "ok - the silent predecessor went Offline when its name was mounted again" \
	|| { echo "not ok - no takeover line in the master log"; rc=1; }
"$T" check old 20 -704 || rc=1		# never read from the new process's memory
"$T" fill new 20 1048576 || rc=1
"$T" verify new 20 1048576 || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
