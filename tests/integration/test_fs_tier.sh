#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The legacy shared-directory tier (--root_fs_dir, --cluster_id): every object is also written to
# <root_fs_dir>/<cluster_id>/<d1>/<d2>/<sanitized key> by its writer; after memory is evicted
# (three pools' worth of objects) another process still reads every object byte for byte from
# the files; a file changed behind the store's back (another size) is never served.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
N=48
SZ=1048576
FS=$MC_TMP/shared
mkdir -p "$FS"
mc_start_master --root_fs_dir="$FS" --cluster_id=fstest --default_kv_lease_ttl=300 \
	|| { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
rc=0
mc_start_client c1 16MB || { mc_dump_logs; exit 1; }
"$T" fill fs $N $SZ || rc=1
files=$(find "$FS/fstest" -type f -name 'fs_*' | wc -l)
[ "$files" -eq $N ] && echo "ok - $N files under <root_fs_dir>/fstest/<d1>/<d2>/" \
	|| { echo "not ok - $files files"; rc=1; }
bad=$(find "$FS/fstest" -type f -name 'fs_*' | awk -F/ '{print $(NF-2) $(NF-1)}' | grep -vc '^[a-p][a-p]$')
[ "$bad" -eq 0 ] && echo "ok - two hashed directory levels a..p" || { echo "not ok - layout"; rc=1; }
"$T" verify fs $N $SZ || rc=1
fh=$(curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk '$1 == "file_cache_hit_nums_" {print $2}')
[ "${fh:-0}" -gt 0 ] && echo "ok - $fh reads were served from the shared files (memory evicted)" \
	|| { echo "not ok - no read from the files"; rc=1; }
# Truncate the file of an object that is only on disk now: it must not be served.
victim=$(find "$FS/fstest" -type f -name 'fs_0')
truncate -s 1000 "$victim"
"$T" verify fs 1 $SZ 0 >"$MC_TMP/v.out" 2>&1
grep -q "1 bad" "$MC_TMP/v.out" && echo "ok - a file of the wrong size is not served" \
	|| { echo "not ok - a damaged file was served"; cat "$MC_TMP/v.out"; rc=1; }
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
