#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The legacy shared-directory tier (--root_fs_dir, --cluster_id).
# 1. Protocol: PutEnd/PutRevoke by replica type, a PROCESSING DISK replica never read,
#    GetStorageConfig, FS_EVICT under leases, deletions handed out by FsHeartbeat after the lease
#    (test_fs_rpc.py); an abandoned DISK write is reaped by Remove.
# 2. Every object is also written to <root_fs_dir>/<cluster_id>/<d1>/<d2>/<sanitized key> by its
#    writer's worker; after memory is evicted (three pools' worth of objects) another process
#    still reads every object byte for byte from the files; a file changed behind the store's back
#    (another size) is never served; the metrics count the DISK bytes and the quota.
# 3. A file write that fails (the directory is a regular file) revokes only the DISK replica:
#    the puts succeed and read back from memory, no DISK byte stays accounted.
# 4. Removal deletes the files (through the heartbeat); a master with a 6 MiB quota: the writer
#    evicts its oldest files, the directory stays under the quota, the newest objects read back.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
N=48
SZ=1048576
FS=$MC_TMP/shared
mkdir -p "$FS"
metric() {
	curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
mc_start_master --root_fs_dir="$FS" --cluster_id=fstest --default_kv_lease_ttl=300 \
	--quota_bytes=64MB --put_start_release_timeout_sec=1 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
rc=0
PYTHONPATH="$MC_TOP_SRCDIR/tests/integration" python3 \
	"$MC_TOP_SRCDIR/tests/integration/test_fs_rpc.py" "127.0.0.1:$MC_MASTER_PORT" \
	"$FS/fstest" $((64 << 20)) || rc=1
mc_start_client c1 16MB || { mc_dump_logs; exit 1; }
"$T" fill fs $N $SZ || rc=1
files=$(find "$FS/fstest" -type f -name 'fs_*' | wc -l)
[ "$files" -eq $N ] && echo "ok - $N files under <root_fs_dir>/fstest/<d1>/<d2>/" \
	|| { echo "not ok - $files files"; rc=1; }
bad=$(find "$FS/fstest" -type f -name 'fs_*' | awk -F/ '{print $(NF-2) $(NF-1)}' | grep -vc '^[a-p][a-p]$')
[ "$bad" -eq 0 ] && echo "ok - two hashed directory levels a..p" || { echo "not ok - layout"; rc=1; }
fsz=$(metric master_allocated_file_size_bytes)
cap=$(metric master_total_file_capacity_bytes)
# test_fs_rpc.py leaves one 4096-byte PROCESSING DISK replica (r/c) behind.
[ "$fsz" = $((N * SZ + 4096)) ] && echo "ok - master_allocated_file_size_bytes $fsz" \
	|| { echo "not ok - master_allocated_file_size_bytes $fsz"; rc=1; }
[ "$cap" = $((64 << 20)) ] && echo "ok - master_total_file_capacity_bytes is the quota" \
	|| { echo "not ok - master_total_file_capacity_bytes $cap"; rc=1; }
"$T" verify fs $N $SZ || rc=1
fh=$(metric file_cache_hit_nums_)
[ "${fh:-0}" -gt 0 ] && echo "ok - $fh reads were served from the shared files (memory evicted)" \
	|| { echo "not ok - no read from the files"; rc=1; }
# Truncate the file of an object that is only on disk now: it must not be served.
victim=$(find "$FS/fstest" -type f -name 'fs_0')
truncate -s 1000 "$victim"
# The reader reports it damaged and asks again: the object is then gone (absent), or the read
# fails; it never reads back.
"$T" verify fs 1 $SZ 1 >"$MC_TMP/v.out" 2>&1
grep -qE "0 identical, (1 absent, 0 bad|0 absent, 1 bad)" "$MC_TMP/v.out" \
	&& echo "ok - a file of the wrong size is not served" \
	|| { echo "not ok - a damaged file was served"; cat "$MC_TMP/v.out"; rc=1; }
# ... and the reader had the master forget it (and deleted it): the object is gone.
fsz=$((fsz - SZ))
[ "$(metric master_allocated_file_size_bytes)" = "$fsz" ] && [ ! -e "$victim" ] &&
	[ "$(metric master_disk_copies_lost_total)" = 1 ] &&
	"$T" check fs 1 -704 >/dev/null \
	&& echo "ok - the damaged file is forgotten at the master and deleted; the object reads as absent" \
	|| { echo "not ok - the damaged file is still known"; rc=1; }

# 3. Failed file writes: <fsdir> is a regular file for a while.
mv "$FS/fstest" "$FS/fstest.away"
: >"$FS/fstest"
"$T" fill wf 4 4096 || rc=1
# The writes fail in the background and revoke their DISK replicas.
mc_wait_metric master_allocated_file_size_bytes "$fsz" 10
"$T" verify wf 4 4096 || rc=1
fsz2=$(metric master_allocated_file_size_bytes)
mc_is "$fsz2" "$fsz" "failed file writes revoked their DISK replicas only" || rc=1
rm -f "$FS/fstest"
mv "$FS/fstest.away" "$FS/fstest"
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }

# 4. Removal and quota, on a master with a 6 MiB quota.
"$T" remove fs 0 $N || rc=1
for _ in $(seq 50); do
	left=$(find "$FS/fstest" -type f -name 'fs_*' | wc -l)
	[ "$left" -eq 0 ] && break
	sleep 0.1
done
[ "$left" -eq 0 ] && echo "ok - removing the objects deleted their files" \
	|| { echo "not ok - $left files left after removal"; rc=1; }
kill "$MC_MASTER_PID"
wait "$MC_MASTER_PID" 2>/dev/null
mc_start_master --root_fs_dir="$FS" --cluster_id=fsq --default_kv_lease_ttl=300 \
	--quota_bytes=6MB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
mc_start_client c2 16MB || { mc_dump_logs; exit 1; }
"$T" fill q 16 $SZ || rc=1
# The writer (in the background) writes the files and evicts its oldest ones past the quota,
# telling the master first: wait until every file is written or evicted.
quota_settled() {
	local f e
	f=$(find "$FS/fsq" -type f -name 'q_*' | wc -l)
	e=$(metric master_disk_evicted_key_count)
	[ "$f" -le 6 ] && [ "${e:-0}" -ge 10 ] && [ "$f" -eq $((16 - ${e:-0})) ]
}
mc_wait_until 15 "the quota's evictions" quota_settled
files=$(find "$FS/fsq" -type f -name 'q_*' | wc -l)
[ "$files" -le 6 ] && [ "$files" -ge 1 ] && echo "ok - the writer evicted its oldest files ($files of 16 left)" \
	|| { echo "not ok - $files files under a 6 MiB quota"; rc=1; }
[ "$(metric master_allocated_file_size_bytes)" -le $((6 << 20)) ] \
	&& echo "ok - DISK bytes within the quota" || { echo "not ok - DISK bytes over quota"; rc=1; }
ev=$(metric master_disk_evicted_key_count)
[ "${ev:-0}" -ge 10 ] && echo "ok - the master was told of $ev evictions before the files went" \
	|| { echo "not ok - $ev evictions reported"; rc=1; }
[ "$files" -eq $((16 - ${ev:-0})) ] && echo "ok - exactly the evicted files were deleted" \
	|| { echo "not ok - $files files, $ev evicted of 16"; rc=1; }
"$T" verify q 16 $SZ 16 >"$MC_TMP/q.out" 2>&1
grep -q " 0 bad" "$MC_TMP/q.out" && echo "ok - no evicted or surviving object reads back wrong" \
	|| { echo "not ok - quota run"; cat "$MC_TMP/q.out"; rc=1; }
[ -z "$(find "$FS" -name '*.tmp')" ] && echo "ok - no temporary file left" \
	|| { echo "not ok - temporary files left"; rc=1; }
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
