#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Segment memory against real daemons: a mooncake_client's segment is populated in the background
# until the master's segment_populated_bytes reaches segment_total_capacity_bytes, and a store
# client in another process maps those pages into its own page tables ahead; the off switch
# leaves it unpopulated; with huge pages a reserved hugetlb pool backs the segment (reserved here
# through /proc/sys/vm/nr_hugepages and given back at the end), a pool too small stops start-up
# with one line naming the shortfall and the sysctl, the fallback starts on normal pages, and a
# store client in another process reads objects held in the huge-page segment through its memfd.
# NUMA placement runs where the host has two nodes, otherwise it is skipped with a message.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

TOOL=$MC_BIN/tests/integration/fault_tool
HP=/proc/sys/vm/nr_hugepages
HPDIR=/sys/kernel/mm/hugepages/hugepages-2048kB
n=0
failed=0
pool_orig=

ok() {	# ok STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}

# The daemons go first (their pages return to the pool), then the pool is given back.
restore_pool() {
	mc_cleanup
	if [ -n "$pool_orig" ]; then
		echo "$pool_orig" >"$HP" 2>/dev/null
		echo "# hugetlb pool given back: vm.nr_hugepages=$(cat "$HP")"
	fi
}
trap restore_pool EXIT

# metric NAME SEGMENT: the master's value of NAME{segment="SEGMENT"}, or empty.
metric() {
	curl -s "http://127.0.0.1:$MC_METRICS_PORT/metrics" |
		awk -v m="$1{segment=\"$2\"}" '$1 == m { print $2 }'
}

# wait_populated SEGMENT SECONDS: until populated == total; prints the last populated figure.
wait_populated() {
	local seg=$1 secs=$2 i=0 p t
	t=$(metric segment_total_capacity_bytes "$seg")
	while [ $i -lt $((secs * 10)) ]; do
		p=$(metric segment_populated_bytes "$seg")
		[ -n "$p" ] && [ "$p" = "$t" ] && break
		sleep 0.1; i=$((i + 1))
	done
	echo "$p"
}

# seg_rss PID SIZE_KB: that process's Rss (kB) in its mapping of a segment of SIZE_KB.
seg_rss() {
	awk -v want="$2" '/memfd:mooncake-segment/ { m = 1; next } /^[0-9a-f]+-[0-9a-f]+ / { m = 0 }
		m && $1 == "Size:" { sz = $2 } m && $1 == "Rss:" && sz == want { print $2; exit }' \
		"/proc/$1/smaps" 2>/dev/null
}
# wait_rss PID SIZE_KB SECONDS: until the Rss there is SIZE_KB; prints the last figure.
wait_rss() {
	local i rss=
	for i in $(seq $(($3 * 10))); do
		rss=$(seg_rss "$1" "$2")
		[ "$rss" = "$2" ] && break
		sleep 0.1
	done
	echo "${rss:-none}"
}

# client_seg NAME: the segment name ("host:port") in the client's log.
client_seg() {
	sed -n 's/.*serving segment \([^ ]*\) .*/\1/p' "$MC_TMP/$1.log" | head -1
}

# 1. Population (default): the figure reaches the total.
mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client pop 96MB || { mc_dump_logs; exit 1; }
pop_pid=$MC_LAST_PID
seg=$(client_seg pop)
p=$(wait_populated "$seg" 20)
ok $([ "$p" = $((96 << 20)) ] && echo 0 || echo 1) \
	"populated: segment_populated_bytes reaches the total, 96 MiB ($p)"
grep -q "segment memory: 96 MiB populated in" "$MC_TMP/pop.log"
ok $? "the client logs how long population took: $(grep -o 'segment memory: 96 MiB populated in.*' "$MC_TMP/pop.log")"
"$MC_BIN/mooncake_ctl" --master 127.0.0.1:"$MC_METRICS_PORT" capacity >"$MC_TMP/cap.txt"
grep -q "^$seg  *96.00 MiB  *96.00 MiB (100%)" "$MC_TMP/cap.txt" &&
	grep -q "127.0.0.1: 48 pages of 2MB: sysctl vm.nr_hugepages=48" "$MC_TMP/cap.txt"
ok $? "mooncake_ctl capacity shows the segment populated and the pool that would hold it"
"$MC_BIN/mooncake_ctl" capacity --segment-size 4GB --hugepage-size 1GB | grep -q "needs 4 pages"
ok $? "mooncake_ctl capacity --segment-size 4GB --hugepage-size 1GB: 4 pages"
MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" fill pop 20 1048576 >/dev/null 2>&1 &&
	MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" verify pop 20 1048576 >/dev/null 2>&1
ok $? "20 objects of 1 MiB put into the populated segment read back"
# 1b. A store client in another process that reads 20 MiB of it has mapped all of the owner's
# populated pages into its own page tables soon after it first reached the segment (the engine's
# map-ahead thread), so its later copies there take no page faults: its mapping's Rss reaches
# the segment's size.
MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" get-loop pop 20 1048576 4 >"$MC_TMP/pget.log" 2>&1 &
rpid=$!
rss=$(wait_rss $rpid 98304 6)
ok $([ "$rss" = 98304 ] && echo 0 || echo 1) \
	"a same-host reader maps all 96 MiB of the owner's pages ahead (its Rss there: $rss kB)"
# 1b'. Where the kernel grants transparent huge pages on request (THP not "never", shmem_enabled
# not "deny"), population gathered the segment into 2 MiB pages (the owner's mapping shows them
# mapped whole) and the reader's mapping, on 2 MiB boundaries too, maps them whole as well.
if grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null ||
	grep -q '\[deny\]' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null ||
	! [ -r /sys/kernel/mm/transparent_hugepage/shmem_enabled ]; then
	echo "# skip: no transparent huge pages for shared memory here"
else
	pmd() {	# pmd PID: ShmemPmdMapped (kB) of that process's 96 MiB segment mapping
		awk '/memfd:mooncake-segment/ { m = 1; next } /^[0-9a-f]+-[0-9a-f]+ / { m = 0 }
			m && $1 == "Size:" { sz = $2 } m && $1 == "ShmemPmdMapped:" && sz == 98304 {
			print $2; exit }' "/proc/$1/smaps" 2>/dev/null
	}
	own=$(pmd $pop_pid)
	rd=$(pmd $rpid)
	ok $([ "${own:-0}" -ge 65536 ] && [ "${rd:-0}" -ge 65536 ] && echo 0 || echo 1) \
		"the segment is on 2 MiB pages, mapped whole by the owner (${own:-none} kB) and the reader (${rd:-none} kB)"
fi
wait $rpid
ok $? "and its gets return the right bytes: $(tail -1 "$MC_TMP/pget.log")"
# 1b''. The map-ahead's fallback: where its check that a read maps the 64 KiB around it cannot
# be made (/proc/self/pagemap unreadable; forced here with MC_SEGMEM_NO_PAGEMAP=1), it maps the
# owner's pages with MADV_POPULATE_READ: all 96 MiB still, says so once, and gets are right.
MC_SEGMEM_NO_PAGEMAP=1 MC_LOG_LEVEL=info MC_MASTER=127.0.0.1:$MC_MASTER_PORT \
	"$TOOL" get-loop pop 20 1048576 4 >"$MC_TMP/pget-nopm.log" 2>&1 &
rpid=$!
rss=$(wait_rss $rpid 98304 6)
ok $([ "$rss" = 98304 ] && echo 0 || echo 1) \
	"MC_SEGMEM_NO_PAGEMAP=1: the fallback maps all 96 MiB of the owner's pages ahead ($rss kB)"
wait $rpid
ok $? "and its gets return the right bytes: $(tail -1 "$MC_TMP/pget-nopm.log")"
c=$(grep -c "mapped with MADV_POPULATE_READ" "$MC_TMP/pget-nopm.log")
ok $([ "$c" = 1 ] && echo 0 || echo 1) "the reader says once that it maps with MADV_POPULATE_READ ($c)"

# 1c. A store client that has not put anything yet opens the same-host segments at set-up
# (GetAllSegments) and maps the owner's pages ahead, so its first puts find its page tables
# built; a segment mounted after its set-up is picked up as well.
MC_LOG_LEVEL=info MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" idle 60 >"$MC_TMP/idle.log" 2>&1 &
ipid=$!
rss=$(wait_rss $ipid 98304 20)
ok $([ "$rss" = 98304 ] && echo 0 || echo 1) \
	"a store client that put nothing maps all 96 MiB of the same-host segment after set-up ($rss kB)"
grep -q "same-host segment $seg opened ahead of its first transfer" "$MC_TMP/idle.log"
ok $? "it logs the segment opened ahead"
mc_start_client late 64MB || { mc_dump_logs; exit 1; }
p=$(wait_populated "$(client_seg late)" 20)
rss=$(wait_rss $ipid 65536 30)
ok $([ "$rss" = 65536 ] && echo 0 || echo 1) \
	"a segment mounted after its set-up is opened and mapped too ($rss kB)"
kill "$ipid" 2>/dev/null
wait "$ipid" 2>/dev/null

# 2. The off switch: nothing is populated before the first write (flag, then variable).
mc_start_client off 64MB --populate_segment=false || { mc_dump_logs; exit 1; }
MC_STORE_POPULATE=0 mc_start_client offenv 64MB || { mc_dump_logs; exit 1; }
sleep 2.5	# a few pings
p=$(metric segment_populated_bytes "$(client_seg off)")
ok $([ "$p" = 0 ] && echo 0 || echo 1) "--populate_segment=false: populated stays 0 ($p)"
p=$(metric segment_populated_bytes "$(client_seg offenv)")
ok $([ "$p" = 0 ] && echo 0 || echo 1) "MC_STORE_POPULATE=0: populated stays 0 ($p)"
grep -q "population off" "$MC_TMP/off.log"
ok $? "the client says population is off"

# 3. Huge pages.  Start from what is free in the pool now: other users keep theirs.
if [ "$(id -u)" != 0 ] || ! [ -w "$HP" ] || ! [ -d "$HPDIR" ]; then
	echo "# skip: huge page parts need root and $HP, $HPDIR"
	exit $failed
fi
free_pages=$(($(cat "$HPDIR/free_hugepages") - $(cat "$HPDIR/resv_hugepages")))
# 3a. A pool too small: start-up fails with one line naming the shortfall and the sysctl.
short_mb=$(((free_pages + 8) * 2))
if [ $short_mb -le 4096 ]; then
	port=$(mc_free_port)
	timeout 20 "$MC_BIN/mooncake_client" --host=127.0.0.1 --port="$port" \
		--master_server_address=127.0.0.1:"$MC_MASTER_PORT" --metadata_server=P2PHANDSHAKE \
		--global_segment_size=${short_mb}MB --use_hugepage >"$MC_TMP/nopool.log" 2>&1
	rc=$?
	line=$(grep "hugetlb pool too small" "$MC_TMP/nopool.log")
	ok $([ $rc -eq 1 ] && [ "$(echo "$line" | wc -l)" = 1 ] &&
		echo "$line" | grep -q "8 short" && echo "$line" | grep -q "vm.nr_hugepages" &&
		echo 0 || echo 1) "without a pool: status $rc, one line: $line"
	# 3b. The same with the fallback allowed: normal pages, and a warning.
	mc_start_client fallback ${short_mb}MB --use_hugepage --hugepage_fallback=true \
		--populate_segment=false
	ok $? "--hugepage_fallback=true starts on normal pages"
	grep -q "falling back to normal pages" "$MC_TMP/fallback.log"
	ok $? "the fallback is logged as a warning"
	MC_STORE_USE_HUGEPAGE=1 MC_STORE_HUGEPAGE_FALLBACK=1 mc_start_client fallbackenv ${short_mb}MB \
		--populate_segment=false
	ok $? "MC_STORE_USE_HUGEPAGE=1 MC_STORE_HUGEPAGE_FALLBACK=1 starts on normal pages"
else
	echo "# skip: the hugetlb pool has $free_pages free pages; no small segment outgrows it"
fi
# 3c. With a pool: reserve 24 pages more than are free (48 MiB), give them back at the end.
pool_orig=$(cat "$HP")
echo $((pool_orig + 24)) >"$HP" 2>/dev/null
if [ "$(($(cat "$HPDIR/free_hugepages") - $(cat "$HPDIR/resv_hugepages")))" -lt 24 ]; then
	echo "# skip: the kernel could not reserve 24 huge pages of 2 MB (vm.nr_hugepages=$(cat "$HP"))"
	exit $failed
fi
echo "# hugetlb pool reserved: vm.nr_hugepages=$(cat "$HP")"
mc_start_master || { mc_dump_logs; exit 1; }
resv0=$(cat "$HPDIR/resv_hugepages")
free0=$(cat "$HPDIR/free_hugepages")
mc_start_client huge 40MB --use_hugepage --hugepage_size=2MB || { mc_dump_logs; exit 1; }
hpid=$MC_LAST_PID
seg=$(client_seg huge)
p=$(wait_populated "$seg" 20)
ok $([ "$p" = $((40 << 20)) ] && echo 0 || echo 1) "huge pages: populated reaches the total ($p)"
used=$((free0 - $(cat "$HPDIR/free_hugepages")))
ok $([ $used -ge 20 ] && echo 0 || echo 1) "the segment took 20 pages of the pool ($used taken)"
grep -q "2 MB hugetlb pages" "$MC_TMP/huge.log"
ok $? "the client says it runs on 2 MB hugetlb pages"
grep -A20 "memfd:mooncake-segment" "/proc/$hpid/smaps" | grep -q "KernelPageSize: *2048 kB"
ok $? "the segment's mapping has 2 MB kernel pages (/proc/PID/smaps)"
MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" fill huge 16 1048576 >"$MC_TMP/hfill.log" 2>&1
ok $? "16 objects of 1 MiB put into the huge-page segment"
# 3d. Another process reads them through the segment's memfd (same-host shm): its own mapping
# of the segment has 2 MB pages too.
MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" get-loop huge 16 1048576 3 >"$MC_TMP/hget.log" 2>&1 &
rpid=$!
sleep 1.5
grep -A20 "memfd:mooncake-segment" "/proc/$rpid/smaps" 2>/dev/null | grep -q "KernelPageSize: *2048 kB"
ok $? "a store client in another process maps the huge-page segment (shm)"
wait $rpid
ok $? "and reads the objects held there: $(grep -c . "$MC_TMP/hget.log") lines, status 0"
MC_MASTER=127.0.0.1:$MC_MASTER_PORT "$TOOL" verify huge 16 1048576 >/dev/null 2>&1
ok $? "the objects read back byte for byte"
kill -TERM $hpid; wait $hpid 2>/dev/null
ok $([ "$(cat "$HPDIR/resv_hugepages")" -le "$resv0" ] &&
	[ "$(cat "$HPDIR/free_hugepages")" -ge "$free0" ] && echo 0 || echo 1) \
	"the client gives its pages back to the pool when it stops"

# 4. NUMA placement: only where the host has two nodes (fake ones need numa=fake=2 at boot).
if [ -d /sys/devices/system/node/node1 ]; then
	mc_start_client numa 32MB --segment_location=cpu:1 || { mc_dump_logs; exit 1; }
	sleep 1.5
	grep "memfd:mooncake-segment" "/proc/$MC_LAST_PID/numa_maps" | grep -q "bind:1"
	ok $? "--segment_location=cpu:1 binds the segment to node 1"
else
	echo "# skip: NUMA placement needs two nodes; this kernel has one (fake nodes need numa=fake=2 on its command line)"
	mc_start_client numa0 16MB --segment_location=cpu:0 || { mc_dump_logs; exit 1; }
	grep "memfd:mooncake-segment" "/proc/$MC_LAST_PID/numa_maps" | grep -q "bind:0"
	ok $? "--segment_location=cpu:0 binds the segment to node 0 (/proc/PID/numa_maps)"
fi

echo "1..$n"
[ $failed -eq 0 ] || mc_dump_logs
exit $failed
