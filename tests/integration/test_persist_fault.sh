#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A master whose SQLite file stops taking writes must not acknowledge what it cannot persist.
# For each fault point of the test hook (MC_TEST_SQLITE_FAULT: begin, insert, commit,
# checkpoint), switched on and off through a flag file, with a writer running (ckpt_busy, a
# checkpoint finding its lock taken, is the last case: no failure at all):
#   - while the fault is on, puts fail with PERSISTENT_FAIL (-1503), reads of earlier objects
#     keep working, /health says persistence_ok false and the metrics count the failures;
#   - once it is off, the master recovers on its own (no restart) and puts succeed again;
#   - after kill -9 and a restart from the same file, every acknowledged object (before, during
#     and after the fault) reads back byte-identical.
# Usage: test_persist_fault.sh [POINT...] (default: begin insert commit checkpoint continue busy).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
SIZE=16384
n=0

check() {	# check DESCRIPTION COMMAND...
	n=$((n + 1))
	if "${@:2}"; then echo "ok $n - $1"; else echo "not ok $n - $1"; mc_dump_logs; exit 1; fi
}

health() {
	python3 -c "import json,urllib.request,sys; print(json.load(urllib.request.urlopen('http://127.0.0.1:$MC_METRICS_PORT/health', timeout=5))['persistence_ok'])"
}

metric() {
	python3 - "$MC_METRICS_PORT" "$1" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read()
for line in body.decode().splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.split()[1]); break
PY
}

acked() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# restart_verify LABEL DIR MASTER_PID CLIENT_NAME CLIENT_PID ACKED: kill -9 the master, start
# it again on DIR/master.db, and check that every object listed in ACKED reads back; then stop
# both daemons (logs kept in DIR as master1.log and master2.log).
restart_verify() {
	local label=$1 dir=$2 master=$3 cname=$4 client=$5 acked_file=$6 out
	mc_log_mark "$cname"
	kill -KILL "$master"
	wait "$master" 2>/dev/null
	mv "$MC_TMP/master.log" "$dir/master1.log"
	mc_restart_master master --persist_path="$dir/master.db" --client_ttl=5 ||
		{ mc_dump_logs; exit 1; }
	master=$MC_MASTER_PID
	mc_wait_remounted "$cname"	# after its next ping
	out=$("$T" verify-acked "$acked_file" $SIZE 2>&1)
	echo "$out" | sed 's/^/#   /'
	check "$label: after kill -9 and a restart, all $(acked "$acked_file") acknowledged objects read back" \
		grep -q "^ok" <<<"$out"
	kill -TERM "$master" "$client" 2>/dev/null
	wait "$master" "$client" 2>/dev/null
	mv "$MC_TMP/master.log" "$dir/master2.log"
}

run_point() {
	local point=$1 dir=$MC_TMP/$1 out
	mkdir -p "$dir"
	rm -f "$dir/fault"
	MC_TEST_SQLITE_FAULT=$point MC_TEST_SQLITE_FAULT_FILE=$dir/fault \
		mc_start_master --persist_path="$dir/master.db" --client_ttl=5 \
		|| { mc_dump_logs; exit 1; }
	local master=$MC_MASTER_PID
	# Room for everything the writers put (two 1 s runs of 16 KiB puts, about 8,000 a second
	# today): an acknowledged object the store evicted for room would not read back.
	mc_start_client "client-$point" 1GB || { mc_dump_logs; exit 1; }
	local client=$MC_LAST_PID
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	echo "# fault point: $point"

	"$T" write-acked "$dir/before" 1 $SIZE before >"$dir/w1.out" 2>&1
	sed 's/^/#   before: /' "$dir/w1.out"
	check "$point: puts are acknowledged before the fault" [ "$(acked "$dir/before")" -gt 0 ]

	touch "$dir/fault"
	# A checkpoint is only due once the log holds 1000 pages: the writer gets there.
	"$T" write-acked "$dir/during" 4 $SIZE during >"$dir/w2.out" 2>&1
	sed 's/^/#   during: /' "$dir/w2.out"
	check "$point: puts fail with PERSISTENT_FAIL (-1503) while the fault is on" \
		grep -q "codes: -1503 x" "$dir/w2.out"
	check "$point: the master logged that persistence is failing, once" \
		[ "$(grep -c 'persistence failing' "$MC_TMP/master.log")" = 1 ]
	check "$point: /health says persistence_ok false" [ "$(health)" = False ]
	check "$point: mooncake_ctl status says persistence is failing" \
		grep -q "persistence: FAILING" <<<"$("$MC_BIN/mooncake_ctl" \
			--master="127.0.0.1:$MC_METRICS_PORT" status)"
	check "$point: failed commits are counted" \
		[ "$(metric master_persist_commit_failures_total)" -gt 0 ]
	check "$point: refused requests are counted" \
		[ "$(metric master_persist_refused_requests_total)" -gt 0 ]
	out=$("$T" verify-acked "$dir/before" $SIZE 2>&1)
	echo "$out" | sed 's/^/#   /'
	check "$point: objects acknowledged before the fault read back while it is on" \
		grep -q "^ok" <<<"$out"

	rm -f "$dir/fault"
	check "$point: the master recovers on its own once the fault is gone" \
		mc_wait_log master "persistence recovered" 15
	"$T" write-acked "$dir/after" 1 $SIZE after >"$dir/w3.out" 2>&1
	sed 's/^/#   after: /' "$dir/w3.out"
	check "$point: puts succeed again without a restart" \
		grep -q "acknowledged, 0 failed" "$dir/w3.out"
	check "$point: /health says persistence_ok true again" [ "$(health)" = True ]

	cat "$dir/before" "$dir/during" "$dir/after" >"$dir/all"
	restart_verify "$point" "$dir" "$master" "client-$point" "$client" "$dir/all"
}

# --persist_on_error=continue: puts are acknowledged through the fault (today's behaviour, for
# those who choose it); the held batch is written once the fault clears.
run_continue() {
	local dir=$MC_TMP/continue
	mkdir -p "$dir"
	MC_TEST_SQLITE_FAULT=commit MC_TEST_SQLITE_FAULT_FILE=$dir/fault \
		mc_start_master --persist_path="$dir/master.db" --client_ttl=5 \
		--persist_on_error=continue || { mc_dump_logs; exit 1; }
	local master=$MC_MASTER_PID
	mc_start_client client-continue 1GB || { mc_dump_logs; exit 1; }
	local client=$MC_LAST_PID
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	echo "# --persist_on_error=continue"
	touch "$dir/fault"
	"$T" write-acked "$dir/during" 1 $SIZE during >"$dir/w.out" 2>&1
	sed 's/^/#   during: /' "$dir/w.out"
	check "continue: puts are acknowledged while the fault is on" \
		grep -q "acknowledged, 0 failed" "$dir/w.out"
	check "continue: the log says that acknowledged changes are not durable" \
		grep -q "acknowledging changes that are not durable" "$MC_TMP/master.log"
	check "continue: /health says persistence_ok false" [ "$(health)" = False ]
	rm -f "$dir/fault"
	check "continue: the held changes are written once the fault clears" \
		mc_wait_log master "persistence recovered" 15
	kill -TERM "$master" "$client" 2>/dev/null
	wait "$master" "$client" 2>/dev/null
	mv "$MC_TMP/master.log" "$dir/master.log"
}

# A checkpoint that finds the file busy (ckpt_busy: the checkpoint lock taken, as another
# connection recovering the log's index holds it) copied nothing but lost nothing: the commits
# are durable in the log.  It is tried again later; puts go on being acknowledged.
run_busy() {
	local dir=$MC_TMP/busy
	mkdir -p "$dir"
	# The checkpoint lock is taken while the file exists: 3000 puts (about 6 pages of log each)
	# stay far below the size at which a busy file counts as failing (MC_PERSIST_CKPT_BUSY_PAGES).
	MC_TEST_SQLITE_FAULT=ckpt_busy MC_TEST_SQLITE_FAULT_FILE=$dir/fault mc_start_master \
		--persist_path="$dir/master.db" --client_ttl=5 --log_level=debug \
		|| { mc_dump_logs; exit 1; }
	local master=$MC_MASTER_PID
	mc_start_client client-busy 1GB || { mc_dump_logs; exit 1; }
	local client=$MC_LAST_PID
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	echo "# fault point: ckpt_busy"
	touch "$dir/fault"
	local out busy
	out=$("$T" burst "$dir/during" during 3000 $SIZE)
	echo "#   during: $out"
	busy=$(grep -c 'checkpoint found the file busy' "$MC_TMP/master.log")
	rm -f "$dir/fault"
	check "ckpt_busy: checkpoints found the file busy ($busy times)" [ "$busy" -ge 1 ]
	check "ckpt_busy: every put was acknowledged meanwhile" \
		grep -q "burst: 3000 acked 0 refused 0 other" <<<"$out"
	check "ckpt_busy: persistence was never reported failing" \
		[ "$(grep -c 'persistence failing' "$MC_TMP/master.log")" = 0 ]
	check "ckpt_busy: /health says persistence_ok true" [ "$(health)" = True ]
	restart_verify ckpt_busy "$dir" "$master" client-busy "$client" "$dir/during"
}

for p in ${*:-begin insert commit checkpoint continue busy}; do
	case $p in
	continue) run_continue ;;
	busy) run_busy ;;
	*) run_point "$p" ;;
	esac
done
echo "1..$n"
