#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The disk tiers when the disk fails (faults injected with the MC_TEST_FAULT test hook, no root
# needed) or lies:
#  1. SSD offload (--enable_offload) with a failed or short write, a failed fdatasync or a failed
#     rename: every acknowledged object reads back, the failure is counted
#     (master_offload_failed_total), offload resumes by itself once the fault clears (every
#     object ends on SSD), and after kill -9 and a restart of the SSD client every object reads
#     back from its SSD area;
#  2. demotion (--offload_on_evict) while SSD writes fail: an object whose copy failed stays in
#     memory; no acknowledged object is lost;
#  3. the shared directory (--root_fs_dir) with a failed or short write, a failed fdatasync or
#     rename: every acknowledged object reads back, writes resume after the fault, and after
#     kill -9 of the memory holder every object whose file was written reads back from it;
#  4. an SSD object file truncated and another rewritten in place: readers get an error or the
#     object is gone, never wrong bytes, and both copies are forgotten and deleted
#     (master_disk_copies_lost_total);
#  5. the same for shared-directory files.
# test_ssd_full_tmpfs.sh does the same on a real file system that fills (as root).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
T="$MC_BIN/tests/integration/fault_tool"
SZ=1048576
rc=0
export MC_STORE_SHM=0
check() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; rc=1; fi; }
metric() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
# agree: 1 when one scrape (one turn of the master's loop) counts as many objects demoted as
# evicted; two scrapes may straddle an eviction.
agree() { curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" | awk '
	$1 == "master_evicted_key_count" { e = $2 } $1 == "master_demoted_key_count" { d = $2 }
	END { print (e != "" && e == d) ? 1 : 0 }'; }
# wait_metric NAME MIN SECONDS
wait_metric() {
	local i=0
	while [ "$(metric "$1")" -lt "$2" ] 2>/dev/null && [ $i -lt $(($3 * 10)) ]; do
		sleep 0.1; i=$((i + 1))
	done
}
stop_all() {
	local p
	for p in $MC_PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	MC_PIDS=""
}

# 1. SSD write points, background offload of every object.
n=0
for spec in ssd_write:ENOSPC:6 ssd_write:short:6 ssd_fsync:EIO:6 ssd_rename:EIO:6; do
	n=$((n + 1))
	SSD=$MC_TMP/ssd$n
	mc_start_master --enable_offload --client_ttl=2 --client_suspicion_ttl_sec=0 --dormant_segment_ttl_sec=0 || { mc_dump_logs; exit 1; }
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	MC_TEST_FAULT=$spec mc_start_client s$n 16MB --enable_offload --ssd_offload_path="$SSD" \
		--ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
	c=$MC_LAST_PID
	"$T" burst "$MC_TMP/acked_s$n" s$n 12 $SZ >/dev/null
	wait_metric master_offload_completed_total 12 20
	failed=$(metric master_offload_failed_total)
	done_n=$(metric master_offload_completed_total)
	check "$spec: all 12 acknowledged objects read back while the SSD fails" \
		'"$T" verify-acked "$MC_TMP/acked_s$n" $SZ >/dev/null'
	check "$spec: the failure is counted (master_offload_failed_total $failed) and logged" \
		'[ "${failed:-0}" -ge 1 ] && grep -q "failed" "$MC_TMP/s$n.log"'
	check "$spec: offload resumed once the fault cleared, no restart: $done_n of 12 on SSD" \
		'[ "${done_n:-0}" -eq 12 ] && [ "$(ls "$SSD" | grep -c "\.mco$")" -eq 12 ] &&
		 [ "$(ls "$SSD" | grep -c "\.tmp$")" -eq 0 ]'
	kill -9 "$c"; wait "$c" 2>/dev/null
	mc_start_client s${n}b 16MB --enable_offload --ssd_offload_path="$SSD" \
		--ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
	mc_wait_log s${n}b "registered" 10
	# After client_ttl the master drops the dead process's memory copies: reads go to SSD.
	mc_wait_unmounted s$n 2 || rc=1
	check "$spec: after kill -9 and a restart every acknowledged object reads back from SSD" \
		'"$T" verify-acked "$MC_TMP/acked_s$n" $SZ >/dev/null'
	stop_all
done

# 2. demotion while SSD writes fail: nothing acknowledged is evicted for lack of an SSD copy.
mc_start_master --offload_on_evict || { mc_dump_logs; exit 1; }
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
MC_TEST_FAULT=ssd_write:EIO:5 mc_start_client d1 16MB --enable_offload \
	--ssd_offload_path="$MC_TMP/ssd_d" --ssd_offload_size_limit=256MB || { mc_dump_logs; exit 1; }
out=$(MOONCAKE_PUT_SPACE_WAIT_MS=8000 "$T" burst "$MC_TMP/acked_d" d 40 $SZ)
echo "# demotion under EIO: $out"
# The client reports a failed SSD write after the burst may have returned: wait (bounded) for
# the report and for the eviction counters to agree.
wait_metric master_offload_failed_total 1 10
agreed=0
mc_wait_until 10 "evicted and demoted counts to agree" eval '[ "$(agree)" = 1 ]' && agreed=1
failed=$(metric master_offload_failed_total)
check "demotion with failing SSD writes: failures counted ($failed), memory kept those objects" \
	'[ "${failed:-0}" -ge 1 ] && [ "$agreed" = 1 ]'
check "every acknowledged object reads back" \
	'"$T" verify-acked "$MC_TMP/acked_d" $SZ >/dev/null'

# 4. SSD files truncated and corrupted behind the client's back (objects only on SSD now).
SSD=$MC_TMP/ssd_d
files=$(ls "$SSD"/*.mco | head -2)
f1=$(echo "$files" | sed -n 1p); f2=$(echo "$files" | sed -n 2p)
truncate -s 5000 "$f1"
printf 'XYZ' | dd of="$f2" bs=1 seek=9000 conv=notrunc 2>/dev/null
out=$("$T" probe "$MC_TMP/acked_d" $SZ); prc=$?
echo "# first read after the damage: $out"
check "a truncated and a corrupt SSD file: readers never get wrong bytes" '[ $prc -eq 0 ]'
mc_wait_metric master_disk_copies_lost_total 2 10
out=$("$T" probe "$MC_TMP/acked_d" $SZ); prc=$?
echo "# then: $out"
lost=$(metric master_disk_copies_lost_total)
check "both copies are dropped: forgotten by the master (lost $lost), files deleted, reads say absent" \
	'[ $prc -eq 0 ] && [ "${lost:-0}" -eq 2 ] && [ ! -e "$f1" ] && [ ! -e "$f2" ] &&
	 echo "$out" | grep -q "^probe: $(($(wc -l <"$MC_TMP/acked_d") - 2)) identical 2 absent 0 errors 0 wrong"'
check "the client logged both" \
	'[ "$(grep -c "is corrupt" "$MC_TMP/d1.log")" -ge 2 ]'
stop_all

# 3. shared-directory write points.  Puts 300 ms apart, so writes are tried again after the
# backoff and resume when the fault clears.
n=0
for spec in fs_write:ENOSPC:3 fs_write:short:3 fs_fsync:EIO:3 fs_rename:EIO:3; do
	n=$((n + 1))
	SH=$MC_TMP/shared$n
	mc_start_master --root_fs_dir="$SH" --cluster_id=t --client_ttl=2 --client_suspicion_ttl_sec=0 --dormant_segment_ttl_sec=0 || { mc_dump_logs; exit 1; }
	export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
	mc_start_client m$n 32MB || { mc_dump_logs; exit 1; }
	c=$MC_LAST_PID
	MC_TEST_FAULT=$spec MC_BURST_GAP_MS=300 "$T" burst "$MC_TMP/acked_f$n" f$n 12 $SZ \
		>"$MC_TMP/w$n.log" 2>&1
	nf=$(find "$SH" -type f ! -name '*.tmp' | wc -l)
	check "$spec: all 12 acknowledged objects read back" \
		'"$T" verify-acked "$MC_TMP/acked_f$n" $SZ >/dev/null'
	check "$spec: writes failed, backed off and resumed without a restart ($nf files written)" \
		'[ "$nf" -ge 1 ] && [ "$nf" -lt 12 ] && grep -q "writes resume" "$MC_TMP/w$n.log" &&
		 [ "$(find "$SH" -name "*.tmp" | wc -l)" -eq 0 ]'
	kill -9 "$c"; wait "$c" 2>/dev/null
	mc_wait_unmounted m$n || rc=1	# after client_ttl: memory copies gone, DISK files stay
	out=$("$T" probe "$MC_TMP/acked_f$n" $SZ)
	check "$spec: after kill -9 of the memory holder the $nf objects with a file read back ($out)" \
		'echo "$out" | grep -q "^probe: $nf identical $((12 - nf)) absent 0 errors 0 wrong"'
	if [ $n -eq 1 ]; then
		# 5. damaged shared-directory files.
		g1=$(find "$SH" -type f | sed -n 1p)
		truncate -s 1000 "$g1"
		out=$("$T" probe "$MC_TMP/acked_f$n" $SZ); prc=$?
		check "a truncated shared-directory file is an error or absent, never wrong bytes ($out)" \
			'[ $prc -eq 0 ] && [ ! -e "$g1" ]'
		if [ "$nf" -ge 2 ]; then
			g2=$(find "$SH" -type f | sed -n 1p)
			printf 'XYZ' | dd of="$g2" bs=1 seek=4000 conv=notrunc 2>/dev/null
			out=$("$T" probe "$MC_TMP/acked_f$n" $SZ); prc=$?
			# The reader that finds it corrupt has the master forget it and asks again:
			# the object then reads as absent (or an error), never as wrong bytes.
			check "a corrupt one (same size, checksum) is an error or absent, never wrong bytes ($out)" \
				'[ $prc -eq 0 ] && echo "$out" | grep -q "^probe: $((nf - 2)) identical .* 0 wrong"'
			out=$("$T" probe "$MC_TMP/acked_f$n" $SZ)
			lost=$(metric master_disk_copies_lost_total)
			check "both are forgotten at the master ($lost) and deleted ($out)" \
				'[ ! -e "$g2" ] && [ "${lost:-0}" -eq 2 ] &&
				 echo "$out" | grep -q "^probe: $((nf - 2)) identical $((14 - nf)) absent 0 errors 0 wrong"'
		fi
	fi
	stop_all
done

[ $rc -eq 0 ] || mc_dump_logs
exit $rc
