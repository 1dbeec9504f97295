#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The SSD tier end to end: a master with --offload_on_evict --promotion_on_hit, a client with a
# 16 MiB memory segment and an SSD area, a writer filling memory four times over.
#  1. every object stays readable byte for byte (from memory or from SSD) by another process;
#  2. kill -9 the SSD client and restart it on the same area: its SSD objects come back;
#  3. corrupt one object file and restart: it is reported and dropped, the rest load;
#  4. restart with a smaller SSD limit: watermark eviction asks the master first, and no reader
#     is ever handed a deleted object (every key reads back or is -704, nothing else);
#  5. keys removed or put again while the SSD client was dead do not come back from its SSD;
#  6. a master restarted without --persist_path adopts the SSD objects registered again;
#  7. a preallocated single-file area works like a directory, across kill -9.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
N=64
SZ=1048576
# A client silent for 2 s is Offline at once and its memory replicas go (no dormant segments).
mc_start_master --offload_on_evict --promotion_on_hit --client_ttl=2 --client_suspicion_ttl_sec=0 \
	--dormant_segment_ttl_sec=0 --default_kv_lease_ttl=500 \
	--eviction_ratio=0.2 || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT MC_STORE_SHM=0
SSD=$MC_TMP/ssd
mkdir -p "$SSD"
rc=0
metric() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

mc_start_client c1 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
"$T" fill ssd $N $SZ || rc=1
"$T" verify ssd $N $SZ || rc=1
off=$(metric master_offloaded_key_count)
[ "${off:-0}" -ge $((N / 2)) ] && echo "ok - $off objects were offloaded to SSD" \
	|| { echo "not ok - only ${off:-0} objects offloaded"; rc=1; }
# Read twice more: SSD-only objects get promoted back into memory.
"$T" verify ssd $N $SZ >/dev/null
mc_wait_metric_ge master_promotion_completed_total 1 10
"$T" verify ssd $N $SZ || rc=1
pro=$(metric master_promotion_completed_total)
[ "${pro:-0}" -gt 0 ] && echo "ok - $pro objects promoted back into memory after repeated reads" \
	|| { echo "not ok - no promotion"; rc=1; }
mc_wait_log master "SSD Storage: [1-9]" 15	# the periodic summary line
grep -q "SSD Storage: [1-9]" "$MC_TMP/master.log" && echo "ok - the summary line reports SSD usage" \
	|| { echo "not ok - summary line without SSD usage"; rc=1; }

# 2. kill -9 and restart at once on the same area (before the master declares the old process
# dead): its SSD objects are registered again, none is deleted, and once the old process is
# declared dead they are read from the new one.
files=$(ls "$SSD" | grep -c '\.mco$')
echo "# $files object files in the SSD area"
kill -9 "$c1"; wait "$c1" 2>/dev/null
mc_start_client c1b 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
mc_wait_log c1b "registered" 10
back=$(grep -o '[0-9]* objects registered' "$MC_TMP/c1b.log" | head -1 | awk '{print $1}')
[ "${back:-0}" -eq "$files" ] && [ "$(ls "$SSD" | grep -c '\.mco$')" -eq "$files" ] \
	&& echo "ok - restarted after kill -9, the client registered its $back SSD objects again" \
	|| { echo "not ok - $back registered of $files files"; rc=1; }
mc_wait_unmounted c1 2 || rc=1	# after client_ttl: the dead process's replicas go
"$T" verify ssd $N $SZ $((N - files)) || rc=1

# 3. corrupt one object file: reported and dropped, the rest load.
kill -9 "$c1"; wait "$c1" 2>/dev/null
victim=$(ls "$SSD"/*.mco | head -1)
printf 'X' | dd of="$victim" bs=1 seek=5000 conv=notrunc 2>/dev/null
mc_wait_unmounted c1b 2 || rc=1
mc_start_client c1c 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
mc_wait_log c1c "registered" 10
grep -q "corrupt (checksum mismatch): discarded" "$MC_TMP/c1c.log" && [ ! -e "$victim" ] \
	&& echo "ok - the corrupt object is reported and discarded" \
	|| { echo "not ok - corrupt object not reported"; rc=1; }
back=$(grep -o '[0-9]* objects registered' "$MC_TMP/c1c.log" | head -1 | awk '{print $1}')
[ "${back:-0}" -eq $((files - 1)) ] && echo "ok - the other $back objects load" \
	|| { echo "not ok - $back objects loaded, want $((files - 1))"; rc=1; }
"$T" verify ssd $N $SZ $((N - files + 1)) || rc=1

# 4. a smaller SSD limit: the watermark evicts, each deletion released by the master first.
kill -TERM "$c1"; wait "$c1" 2>/dev/null
mc_start_client c1d 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=24MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
# Its watermark evicts at start, each deletion released by the master first.
ssd_evicted() {
	[ "$(ls "$SSD" | grep -c '\.mco$')" -le 19 ] && [ "$(metric master_disk_evicted_key_count)" -gt 0 ]
}
mc_wait_until 15 "the SSD watermark eviction" ssd_evicted
left=$(ls "$SSD" | grep -c '\.mco$')
[ "$left" -le 19 ] && [ "$left" -ge 10 ] && echo "ok - SSD watermark eviction: $left objects left (limit 24 MiB, low mark 0.8)" \
	|| { echo "not ok - $left objects left on SSD"; rc=1; }
ev=$(metric master_disk_evicted_key_count)
[ "${ev:-0}" -gt 0 ] && echo "ok - the master released $ev SSD copies before they were deleted" \
	|| { echo "not ok - the master was not asked"; rc=1; }
"$T" verify ssd $N $SZ $N || rc=1
kill -0 "$c1" 2>/dev/null || { echo "not ok - client died"; rc=1; }

# 5. while the SSD client is dead, some of its keys are removed and some put again with new
# bytes: when it restarts, those must not come back (nor the old bytes), the rest must.
kill -9 "$c1"; wait "$c1" 2>/dev/null
mapfile -t held < <(python3 -c '
import glob, struct, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.mco")):
    h = open(f, "rb").read(4160)
    print(h[64:64 + struct.unpack_from("<I", h, 24)[0]].decode().split("/")[1])' "$SSD")
third=$(( ${#held[@]} / 3 ))
echo "# the dead client holds ${#held[@]} objects: ${held[*]}"
mc_wait_unmounted c1d 2 || rc=1	# declared dead: its objects are now ghosts at the master
mc_start_client c2 16MB || { mc_dump_logs; exit 1; }
c2=$MC_LAST_PID
for i in "${held[@]:0:$third}"; do "$T" remove ssd "$i" $((i + 1)) >/dev/null || rc=1; done
for i in "${held[@]:$third:$third}"; do "$T" put-gen ssd "$i" $((i + 1)) $SZ 4 >/dev/null || rc=1; done
mc_start_client c1e 16MB --enable_offload --ssd_offload_path="$SSD" \
	--ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
c1=$MC_LAST_PID
mc_wait_log c1e "registered" 10
keep=$(( ${#held[@]} - 2 * third ))
mc_wait_until 5 "the stale SSD files to be deleted" eval '[ "$(ls "$SSD" | grep -c "\.mco$")" -eq "$keep" ]'
back=$(grep -o '[0-9]* objects registered' "$MC_TMP/c1e.log" | head -1 | awk '{print $1}')
[ "${back:-0}" -eq "$keep" ] && [ "$(ls "$SSD" | grep -c '\.mco$')" -eq "$keep" ] \
	&& echo "ok - the restarted client registered the $keep untouched objects and deleted the $((2 * third)) stale ones" \
	|| { echo "not ok - $back registered, $(ls "$SSD" | grep -c '\.mco$') files, want $keep"; rc=1; }
bad=0
for i in "${held[@]:0:$third}"; do "$T" expect ssd "$i" $((i + 1)) $SZ absent >/dev/null || bad=1; done
for i in "${held[@]:$third:$third}"; do "$T" expect ssd "$i" $((i + 1)) $SZ 4 >/dev/null || bad=1; done
for i in "${held[@]:$((2 * third))}"; do "$T" expect ssd "$i" $((i + 1)) $SZ 3 >/dev/null || bad=1; done
[ $bad -eq 0 ] && echo "ok - keys removed while their SSD owner was dead stay removed, keys put again read the new bytes, the rest the old ones" \
	|| { echo "not ok - stale SSD data came back"; rc=1; }

# 6. the master restarts without --persist_path: it knows nothing, the client mounts its area
# again and the master adopts the objects written before it started.
kill -9 "$MC_MASTER_PID"; wait "$MC_MASTER_PID" 2>/dev/null
mc_restart_master master2 --offload_on_evict --promotion_on_hit --client_ttl=2 \
	--client_suspicion_ttl_sec=0 --dormant_segment_ttl_sec=0 \
	--default_kv_lease_ttl=500 --eviction_ratio=0.2 || { mc_dump_logs; exit 1; }
mc_wait_port "$MC_METRICS_PORT" || { mc_dump_logs; exit 1; }
i=0
while [ "$(grep -c 'objects registered' "$MC_TMP/c1e.log")" -lt 2 ] && [ $i -lt 100 ]; do
	sleep 0.1; i=$((i + 1))
done
bad=0
for i in "${held[@]:$((2 * third))}"; do "$T" expect ssd "$i" $((i + 1)) $SZ 3 >/dev/null || bad=1; done
[ $bad -eq 0 ] && grep 'objects registered' "$MC_TMP/c1e.log" | tail -1 | grep -q "^.* $keep objects registered" \
	&& echo "ok - after a master restart without state the client registers its $keep objects again and they read back" \
	|| { echo "not ok - objects not adopted by a restarted master"; rc=1; }

# 7. a single-file area: a preallocated file instead of a directory.
kill -TERM "$c1" "$c2"; wait "$c1" "$c2" 2>/dev/null	# clean exits: their segments unmount
mc_wait_unmounted c1e 2 || rc=1	# no SSD copy is left at the master but the next client's
AREA=$MC_TMP/area.bin
truncate -s 64M "$AREA"
mc_start_client c3 16MB --enable_offload --ssd_offload_path="$AREA" || { mc_dump_logs; exit 1; }
c3=$MC_LAST_PID
"$T" fill sf 40 $SZ || rc=1
"$T" verify sf 40 $SZ || rc=1
# The offloads to the area are written in the background: wait until the master counts them.
mc_wait_metric_ge master_offloaded_key_count 24 10
kill -9 "$c3"; wait "$c3" 2>/dev/null
mc_start_client c3b 16MB --enable_offload --ssd_offload_path="$AREA" || { mc_dump_logs; exit 1; }
c3=$MC_LAST_PID
mc_wait_log c3b "registered" 10
back=$(grep -o '[0-9]* objects registered' "$MC_TMP/c3b.log" | head -1 | awk '{print $1}')
[ "${back:-0}" -ge 24 ] && echo "ok - a single-file area holds $back objects across kill -9" \
	|| { echo "not ok - single-file area: ${back:-0} objects registered"; rc=1; }
mc_wait_unmounted c3 2 || rc=1	# after client_ttl: the dead process's replicas go
"$T" verify sf 40 $SZ $((40 - ${back:-0})) || rc=1
kill -0 "$MC_MASTER_PID" 2>/dev/null || { echo "not ok - master died"; rc=1; }
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
