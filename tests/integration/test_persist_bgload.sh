#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The background load after a restart from --persist_path: with the loader slowed down
# (MC_TEST_LOAD_DELAY_MS), the restarted master answers before its objects are loaded: reads of
# keys not loaded yet come back byte-identical (looked up in the file), unknown keys are absent,
# a remove of a key not loaded yet and puts of new keys wait for the load and then hold; a
# kill -9 during the load loses nothing, and neither does a clean stop during it.  A request
# that waits holds back nothing behind it on its connection (a ping, a read); at most 4096 wait
# on a connection; a kill -9 with requests waiting loses nothing acknowledged.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
DB=$MC_TMP/master.db
N=6000

mc_persist_fill "$DB" bg $N || exit 1
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT

# restart NAME DELAY_MS [OPTION...]: the master again on the same port and file.
restart() { local name=$1; shift; mc_restart_persisted "$name" "$DB" "$@"; }
rc=0
check() { mc_check "$@" || rc=1; }	# check DESCRIPTION CMD...: one TAP line

# 6000 rows at 500 ms a 1024: the scan alone takes about 3 s.
restart master2 500
check "the restarted master answers before its objects are loaded" \
	grep -q "loading the objects in the background" "$MC_TMP/master2.log"
check "keys not loaded yet read back byte-identical" "$T" expect bg $((N - 20)) $N 1024 1
check "keys that were never stored are absent" "$T" expect none 0 5 1024 absent
mc_check_loading master2 "the reads were answered" || rc=1
mc_is "$(mc_metric master_load_in_progress)" 1 "master_load_in_progress is 1 while loading" ||
	rc=1
# kill -9 in the middle of the load.
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null

# Changes wait for the end of the load; a client gives up on a call after 2 s (and a call whose
# deadline has passed is not run), so this load is shorter: about 0.9 s.
restart master3 150
check "a remove of keys not loaded yet waits for the load and holds" \
	"$T" remove bg $((N - 100)) $((N - 90))
check "puts of new keys during the load succeed" "$T" put-gen new 0 10 1024 2
mc_wait_log master3 "in the background in" 30 || { mc_dump_logs; exit 1; }
grep "recovered" "$MC_TMP/master3.log" | sed 's/^/# /'
mc_is "$(mc_metric master_load_in_progress)" 0 "master_load_in_progress is 0 once loaded" ||
	rc=1
check "the removed keys are absent" "$T" expect bg $((N - 100)) $((N - 90)) 1024 absent
check "the new keys read back" "$T" expect new 0 10 1024 2
check "the other keys read back" "$T" expect bg 0 $((N - 100)) 1024 1

# A clean stop in the middle of a load.
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null
restart master4 500
t0=$(date +%s%N)
kill -TERM "$MPID"
wait "$MPID"
st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $st -eq 0 ] && [ $ms -lt 5000 ] && ! mc_loaded master4; then
	echo "ok - a clean stop during the load exits 0 in $ms ms"
else
	echo "not ok - a clean stop during the load: status $st after $ms ms"; rc=1
fi
restart master5 0
mc_wait_log master5 "in the background in" 30 || { mc_dump_logs; exit 1; }
check "after kill -9 and a stop during loads: removed keys absent" \
	"$T" expect bg $((N - 100)) $((N - 90)) 1024 absent
check "after kill -9 and a stop during loads: new keys read back" "$T" expect new 0 10 1024 2
check "after kill -9 and a stop during loads: every other key reads back" \
	"$T" expect bg 0 $((N - 100)) 1024 1
kill -TERM "$MPID"
wait "$MPID"

# A request that waits for the load is parked alone: what follows it on its connection is
# answered at once; the bound on parked requests; a put through the client library waits for a
# load longer than the client's 2 s silence rule (its master answers pings meanwhile).  An idle
# timeout of 2 s (shorter than the load) does not close a connection whose request waits.
P="$MC_TOP_SRCDIR/tests/integration/bgload_park.py"
export PYTHONPATH="$MC_TOP_SRCDIR/tests/integration${PYTHONPATH:+:$PYTHONPATH}"
restart master6 450 --rpc_conn_timeout_seconds=2
t0=$(date +%s%N)
"$T" put-gen wait 0 4 1024 3 >"$MC_TMP/wait.out" 2>&1 &
wpid=$!
python3 "$P" park "127.0.0.1:$MC_MASTER_PORT" "$MC_METRICS_PORT" bg/$((N - 1)) || rc=1
wait $wpid
wst=$?
wms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $wst -eq 0 ] && [ $wms -ge 2000 ]; then
	echo "ok - a put through the client library waits $wms ms for the load and succeeds"
else
	sed 's/^/# /' "$MC_TMP/wait.out"
	echo "not ok - a put through the client library during the load: status $wst after $wms ms"
	rc=1
fi
mc_wait_log master6 "in the background in" 30 || { mc_dump_logs; exit 1; }
check "the put that waited reads back" "$T" expect wait 0 4 1024 3

# kill -9 while requests are parked: they were never acknowledged, and never ran.
kill -TERM "$MPID"
wait "$MPID"
restart master7 500
python3 "$P" hold "127.0.0.1:$MC_MASTER_PORT" bg/10 >"$MC_TMP/hold.out" 2>&1 &
hpid=$!
mc_wait_metric_ge master_load_waiting_requests 2 20 || { mc_dump_logs; exit 1; }
if mc_loaded master7; then
	echo "not ok - the kill -9 with parked requests came after the load"; rc=1
fi
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null
restart master8 0
mc_wait_log master8 "in the background in" 30 || { mc_dump_logs; exit 1; }
check "after kill -9 with parked requests: the parked remove did not run" \
	"$T" expect bg 10 11 1024 1
check "after kill -9 with parked requests: the parked put did not run" \
	"$T" expect lost 0 1 1024 absent
check "after kill -9 with parked requests: the put answered after a wait is there" \
	"$T" expect wait 0 4 1024 3
check "after kill -9 with parked requests: every other key reads back" \
	"$T" expect bg 0 $((N - 100)) 1024 1
kill -TERM "$MPID"
wait "$MPID"
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
