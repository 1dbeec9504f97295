#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Object checksums on the shared-directory tier (--root_fs_dir, MOONCAKE_STORE_CHECKSUM=1): once
# memory is evicted, objects are read from their DISK files and checked against the object's
# CRC-64 as well as the file's own CRC-32C.  A file whose bytes changed while its CRC-32C
# attribute went missing (a copy, a restore, a file system without user xattrs) passes the
# file's check but not the object's: the whole read and a ranged read answer -801, one log
# line names the key, the file and both values, and the master forgets the file.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
FS=$MC_TMP/shared
mkdir -p "$FS"
rc=0
metric() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
mc_start_master --root_fs_dir="$FS" --cluster_id=ck --default_kv_lease_ttl=300 \
	--quota_bytes=256MB || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0 MOONCAKE_STORE_CHECKSUM=1
mc_start_client c1 16MB || { mc_dump_logs; exit 1; }
# Three pools' worth: the first objects live only in their files afterwards.
"$T" fill fsck 48 1048576 || rc=1
mc_python "$MC_TOP_SRCDIR/tests/integration/ranged_get.py" "$MC_MASTER" put rg/0 1048576 1 || rc=1
"$T" fill pad 24 1048576 || rc=1
"$T" verify fsck 4 1048576 || rc=1
hits=$(metric file_cache_hit_nums_)
[ "${hits:-0}" -gt 0 ] && echo "ok - objects were read from their files (memory evicted), verified" \
	|| { echo "not ok - no read from the files"; rc=1; }
# Rot two files' middles, their CRC-32C attributes gone.
for k in fsck_1 rg_0; do
	f=$(find "$FS/ck" -type f -name "$k")
	python3 - "$f" <<'PY' || rc=1
import os, sys
p = sys.argv[1]
try:
    os.removexattr(p, "user.mooncake.crc32c")
except OSError:
    pass
with open(p, "r+b") as f:
    f.seek(500000)
    b = f.read(1)
    f.seek(500000)
    f.write(bytes([b[0] ^ 0x10]))
PY
done
out=$("$T" verify fsck 2 1048576 2>&1)
echo "$out" | grep -q "get fsck/1: -801" && echo "ok - the rotted file answers -801, not its bytes" \
	|| { echo "not ok - $out"; rc=1; }
echo "$out" | grep -q "checksum mismatch: key fsck/1, DISK file .*expected [0-9a-f]*, read [0-9a-f]*" \
	&& echo "ok - one line names the key, the file and both values" \
	|| { echo "not ok - no mismatch line: $out"; rc=1; }
mc_python "$MC_TOP_SRCDIR/tests/integration/ranged_get.py" "$MC_MASTER" ranges rg/0 1048576 -801 || rc=1
mc_wait_metric master_disk_copies_lost_total 2 10 && echo "ok - the master forgot both files" \
	|| { echo "not ok - master_disk_copies_lost_total $(metric master_disk_copies_lost_total)"; rc=1; }
left=$(find "$FS/ck" -type f \( -name fsck_1 -o -name rg_0 \) | wc -l)
mc_is "$left" 0 "the rotted files were deleted" || rc=1
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
