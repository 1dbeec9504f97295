#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The master's SQLite file on a real file system that fills up (a 4 MiB tmpfs, or
# MC_FULL_DISK_SIZE; needs root to mount it).  Writers run until puts are refused; then:
#   - nothing acknowledged is lost across kill -9 and a restart on the still-full disk;
#   - the restarted master loads its file, serves reads and refuses writes with -1503;
#   - once space comes back it resumes writes on its own, and those survive kill -9 too;
#   - a master started on the file system remounted read-only opens its file for reading,
#     serves it, refuses writes, and resumes once the file system is writable again.
# Prints the counts (acknowledged, refused, lost) for the record.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T=$MC_BIN/tests/integration/fault_tool
SIZE=4096
n=0

if [ "$(id -u)" != 0 ]; then
	echo "# SKIP: mounting a small tmpfs to fill needs root"
	exit 77
fi
FS=$MC_TMP/fs
mkdir -p "$FS"
if ! mount -t tmpfs -o size="${MC_FULL_DISK_SIZE:-4m}" tmpfs "$FS" 2>"$MC_TMP/mount.err"; then
	echo "# SKIP: cannot mount a tmpfs: $(cat "$MC_TMP/mount.err")"
	exit 77
fi
trap 'mc_cleanup_fs' EXIT
mc_cleanup_fs() {
	local p
	for p in $MC_PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	[ "${MC_KEEP_TMP:-0}" = 1 ] && cp -a "$FS" "$MC_TMP/fs-copy"
	umount "$FS" 2>/dev/null || umount -l "$FS"
	mc_cleanup
}

check() {	# check DESCRIPTION COMMAND...
	n=$((n + 1))
	if "${@:2}"; then echo "ok $n - $1"; else echo "not ok $n - $1"; mc_dump_logs; exit 1; fi
}

health() {
	python3 -c "import json,urllib.request; print(json.load(urllib.request.urlopen('http://127.0.0.1:$MC_METRICS_PORT/health', timeout=5))['persistence_ok'])"
}

# Counts from a write-acked output line.
acked_of() { sed -n 's/.*write-acked: \([0-9]*\) puts acknowledged.*/\1/p' "$1"; }
failed_of() { sed -n 's/.*acknowledged, \([0-9]*\) failed.*/\1/p' "$1"; }

restart_master() {
	mc_log_mark client1
	kill -KILL "$MASTER" 2>/dev/null
	wait "$MASTER" 2>/dev/null
	mv "$MC_TMP/master.log" "$MC_TMP/master-$1.log"
	mc_restart_master master --persist_path="$FS/master.db" --client_ttl=5 ||
		{ mc_dump_logs; exit 1; }
	MASTER=$MC_MASTER_PID
	mc_wait_remounted client1	# after its next ping
}

verify_all() {	# verify_all DESCRIPTION
	local out
	cat "$MC_TMP"/acked.* >"$MC_TMP/all"
	out=$("$T" verify-acked "$MC_TMP/all" $SIZE 2>&1)
	echo "$out" | sed 's/^/#   /'
	LOST=$(sed -n 's/.*(\([0-9]*\) bad).*/\1/p' <<<"$out")
	check "$1 ($(wc -l <"$MC_TMP/all") acknowledged, ${LOST:-?} lost)" grep -q "^ok" <<<"$out"
}

# Space to give back later, twice.
dd if=/dev/zero of="$FS/filler1" bs=64k count=8 status=none
dd if=/dev/zero of="$FS/filler2" bs=64k count=8 status=none
mc_start_master --persist_path="$FS/master.db" --client_ttl=5 || { mc_dump_logs; exit 1; }
MASTER=$MC_MASTER_PID
mc_start_client client1 1GB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT

ACKED=0 REFUSED=0 round=0
while [ "$REFUSED" -eq 0 ] && [ $round -lt 20 ]; do
	round=$((round + 1))
	"$T" write-acked "$MC_TMP/acked.fill$round" 3 $SIZE "fill$round" >"$MC_TMP/w.out" 2>&1
	ACKED=$((ACKED + $(acked_of "$MC_TMP/w.out")))
	REFUSED=$((REFUSED + $(failed_of "$MC_TMP/w.out")))
	sed 's/^/#   /' "$MC_TMP/w.out"
done
df -k "$FS" | sed 's/^/#   /'
check "the disk filled: puts were refused ($ACKED acknowledged, $REFUSED refused)" \
	[ "$REFUSED" -gt 0 ]
check "refusals carry PERSISTENT_FAIL (-1503)" grep -q "codes: -1503 x" "$MC_TMP/w.out"
check "/health says persistence_ok false" [ "$(health)" = False ]

restart_master full
check "a master restarted on the full disk starts and loads its file" \
	grep -q "recovered" "$MC_TMP/master.log"
verify_all "after kill -9 and a restart on the full disk every acknowledged object reads back"
"$T" write-acked "$MC_TMP/acked.stillfull" 1 $SIZE stillfull >"$MC_TMP/w.out" 2>&1
sed 's/^/#   /' "$MC_TMP/w.out"
check "the restarted master refuses writes on the full disk with -1503" \
	grep -q "codes: -1503 x" "$MC_TMP/w.out"
REFUSED=$((REFUSED + $(failed_of "$MC_TMP/w.out")))

rm -f "$FS/filler1"
check "space returned: the master resumes on its own" \
	mc_wait_log master "persistence recovered" 15
"$T" write-acked "$MC_TMP/acked.after" 1 $SIZE after >"$MC_TMP/w.out" 2>&1
sed 's/^/#   /' "$MC_TMP/w.out"
check "puts are acknowledged again without a restart" [ "$(acked_of "$MC_TMP/w.out")" -gt 0 ]
restart_master recovered
verify_all "after another kill -9 every acknowledged object reads back"
echo "# full disk: $ACKED puts acknowledged while filling, $REFUSED refused, ${LOST:-?} lost"

# A master started on a file system that is read-only (a running master keeps its file open
# for writing, so the file system cannot be remounted under it).
kill -KILL "$MASTER"
wait "$MASTER" 2>/dev/null
check "the file system is remounted read-only" mount -o remount,ro "$FS"
restart_master readonly
check "a master started on a read-only file system opens its file for reading" \
	grep -q "opened for reading only" "$MC_TMP/master.log"
# One whose file does not exist yet starts empty and says it cannot persist.
P2=$(mc_free_port) M2=$(mc_free_port)
mc_start master-new "$MC_BIN/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$P2" \
	--metrics_port="$M2" --persist_path="$FS/new.db"
check "a master given a new file on a read-only file system starts" mc_wait_port "$P2"
check "and says it cannot persist" [ "$(MC_METRICS_PORT=$M2 health)" = False ]
kill -TERM "$MC_LAST_PID"
verify_all "it serves every acknowledged object"
"$T" write-acked "$MC_TMP/acked.ro2" 1 $SIZE ro2 >"$MC_TMP/w.out" 2>&1
sed 's/^/#   /' "$MC_TMP/w.out"
check "and refuses writes with -1503" grep -q "codes: -1503 x" "$MC_TMP/w.out"
mount -o remount,rw "$FS"
rm -f "$FS/filler2"
check "the file system writable again: the master resumes on its own" \
	mc_wait_log master "persistence recovered" 15
"$T" write-acked "$MC_TMP/acked.rw" 1 $SIZE rw >"$MC_TMP/w.out" 2>&1
sed 's/^/#   /' "$MC_TMP/w.out"
check "puts are acknowledged again" [ "$(acked_of "$MC_TMP/w.out")" -gt 0 ]
restart_master rw
verify_all "after kill -9 every acknowledged object reads back"
echo "1..$n"
