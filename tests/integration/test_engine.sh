#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The transfer engine C API per transport (tcp, same-host shm, file segments) and per metadata
# backend (P2PHANDSHAKE, the HTTP metadata service, etcd and redis, real servers started here
# on loopback), and transfer_engine_bench between two processes.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
rc=0
ET="$MC_BIN/tests/integration/engine_test"
FLEN=3000000
# engines META [put-command]: the engine suite over tcp and shm, then (when the backend can
# hold a descriptor) over a file segment whose descriptor put-command KEY VALUE stores.
engines() {
	local meta=$1 put=$2 log="$MC_TMP/engine-$RANDOM.log"
	"$ET" "$meta" tcp || rc=1
	MC_LOG_LEVEL=info "$ET" "$meta" shm 2>"$log" || { cat "$log" >&2; rc=1; }
	# Each same-host segment is first opened through shm, and is served through shm in the
	# end: a child restarted under the same name may be seen through its dead predecessor's
	# descriptor for a moment (the metadata service still holds it), which tcp serves until
	# the refresh finds the new one.
	if grep -q "through shm" "$log" && awk '/segment .* through /{
			for (i = 1; i < NF; i++) if ($i == "segment") seg = $(i + 1)
			if (!(seg in first)) first[seg] = $NF; last[seg] = $NF }
		END { for (s in first) if (first[s] != "shm" || last[s] != "shm") exit 1 }' "$log"; then
		echo "ok - $meta: same-host segments were served by shm"
	else
		echo "not ok - $meta: same-host segments were not served by shm"; rc=1
		grep -E "through (shm|tcp)|shm" "$log" | sed 's/^/# /' | head -20
	fi
	[ -n "$put" ] || return 0
	local seg="files-$RANDOM" f1="$MC_TMP/seg-a.bin" f2="$MC_TMP/seg-b.bin"
	head -c $FLEN /dev/zero >"$f1"; head -c $FLEN /dev/zero >"$f2"
	$put "mooncake/nvmeof/$seg" "{\"name\":\"$seg\",\"protocol\":\"nvmeof\",\"buffers\":[{\"file_path\":\"/nonexistent/$seg\",\"length\":$FLEN,\"local_path_map\":{\"127.0.0.1\":\"$f1\"}},{\"file_path\":\"$f2\",\"length\":$FLEN,\"local_path_map\":{}}]}" >/dev/null ||
		{ echo "not ok - $meta: storing a file segment descriptor"; rc=1; return; }
	"$ET" "$meta" file "$seg" "$f1" "$f2" $FLEN || rc=1
}
engines P2PHANDSHAKE
# Two threads open one same-host segment at once: one descriptor fetch and one shm attach serve
# both (engine_test checks both handles copy byte for byte; the debug log is counted here).
race_log="$MC_TMP/engine-race.log"
MC_LOG_LEVEL=debug "$ET" P2PHANDSHAKE shm-race >"$MC_TMP/engine-race.out" 2>"$race_log" || rc=1
cat "$MC_TMP/engine-race.out"
race_seg=$(sed -n 's/^# race segment //p' "$MC_TMP/engine-race.out")
fetches=$(grep -c "segment $race_seg through shm" "$race_log")
attaches=$(grep -c "shm: attached to $race_seg " "$race_log")
if [ -n "$race_seg" ] && [ "$fetches" = 1 ] && [ "$attaches" = 1 ]; then
	echo "ok - two concurrent opens of $race_seg: one descriptor fetch, one shm attach"
else
	echo "not ok - two concurrent opens of ${race_seg:-?}: $fetches fetches, $attaches attaches"
	rc=1
	tail -20 "$race_log" | sed 's/^/# /'
fi
P=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --port="$P" --host=127.0.0.1
mc_wait_port "$P" || { mc_dump_logs; exit 1; }
http_put() { curl -sf -X PUT --data-binary "$2" "http://127.0.0.1:$P/metadata?key=$1"; }
engines "http://127.0.0.1:$P/metadata" http_put
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/metadata?key=mooncake/ram/target-seg")
code2=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/metadata?key=mooncake/rpc_meta/initiator-seg")
if [ "$code" = 404 ] && [ "$code2" = 404 ]; then
	echo "ok - destroyed engines removed their descriptors and rpc_meta"
else
	echo "not ok - descriptors left behind after shutdown ($code, $code2)"; rc=1
fi
# The same with the metadata service's bearer token (MC_METADATA_HTTP_TOKEN): the engines send
# it, and a request without it is refused.
PT=$(mc_free_port)
MC_METADATA_HTTP_TOKEN=tok-engine mc_start metat "$MC_BIN/mooncake_http_metadata_server" \
	--port="$PT" --host=127.0.0.1
mc_wait_port "$PT" || { mc_dump_logs; exit 1; }
http_put_tok() {
	curl -sf -H "Authorization: Bearer tok-engine" -X PUT --data-binary "$2" \
		"http://127.0.0.1:$PT/metadata?key=$1"
}
MC_METADATA_HTTP_TOKEN=tok-engine engines "http://127.0.0.1:$PT/metadata" http_put_tok
if grep -q "refused with 401" "$MC_TMP/metat.log"; then
	echo "not ok - engines with MC_METADATA_HTTP_TOKEN were refused"; rc=1
elif [ "$(curl -s -o /dev/null -w '%{http_code}' -XPUT --data-binary x \
	"http://127.0.0.1:$PT/metadata?key=x")" != 401 ]; then
	echo "not ok - a request without the token is refused with 401"; rc=1
else
	echo "ok - engines send MC_METADATA_HTTP_TOKEN; a request without it is refused"
fi
# etcd's v3 JSON gateway (Debian's etcd-server), started here on loopback.
if command -v etcd >/dev/null; then
	EP=$(mc_free_port); EPP=$(mc_free_port)
	mc_start etcd etcd --name mc-test --data-dir "$MC_TMP/etcd" \
		--listen-client-urls "http://127.0.0.1:$EP" --advertise-client-urls "http://127.0.0.1:$EP" \
		--listen-peer-urls "http://127.0.0.1:$EPP" --initial-advertise-peer-urls "http://127.0.0.1:$EPP" \
		--initial-cluster "mc-test=http://127.0.0.1:$EPP"
	mc_wait_http "http://127.0.0.1:$EP/health" '"health": *"true"' 30
	etcd_put() {
		curl -sf -X POST --data-binary "{\"key\":\"$(printf %s "$1" | base64 -w0)\",\"value\":\"$(printf %s "$2" | base64 -w0)\"}" \
			"http://127.0.0.1:$EP/v3/kv/put"
	}
	engines "etcd://127.0.0.1:$EP" etcd_put
else
	echo "# etcd not installed: etcd backend not tested"
fi
# redis, with and without a password.
if command -v redis-server >/dev/null; then
	RP=$(mc_free_port)
	mc_start redis redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no
	mc_wait_port "$RP"
	redis_put() { [ "$(redis-cli -h 127.0.0.1 -p "$RP" SET "$1" "$2")" = OK ]; }
	if command -v redis-cli >/dev/null; then
		engines "redis://127.0.0.1:$RP" redis_put
	else
		engines "redis://127.0.0.1:$RP"
	fi
	RP2=$(mc_free_port)
	mc_start redis2 redis-server --port "$RP2" --bind 127.0.0.1 --save '' --appendonly no \
		--requirepass s3cret
	mc_wait_port "$RP2"
	MC_REDIS_PASSWORD=s3cret MC_REDIS_DB_INDEX=3 "$ET" "redis://127.0.0.1:$RP2" tcp || rc=1
	if "$ET" "redis://127.0.0.1:$RP2" tcp >/dev/null 2>&1; then
		echo "not ok - a wrong redis password must fail"; rc=1
	else
		echo "ok - without MC_REDIS_PASSWORD the protected redis refuses the engine"
	fi
else
	echo "# redis-server not installed: redis backend not tested"
fi
# The bench: a target and an initiator process.
mc_start target "$MC_BIN/transfer_engine_bench" --mode=target --buffer_size=64MB \
	--local_server_name=127.0.0.1
mc_wait_log target "target ready" || { mc_dump_logs; exit 1; }
seg=$(sed -n 's/.*segment \([^,]*\),.*/\1/p' "$MC_TMP/target.log")
base=$(sed -n 's/.*buffer 0x\([0-9a-f]*\).*/\1/p' "$MC_TMP/target.log")
# The initiator finds the target's buffer in its descriptor (the write); TEB_REMOTE_BASE, the
# address the target printed, still overrides it (the read).
for op in write read; do
	remote=
	[ $op = read ] && remote=$((16#$base))
	out=$(TEB_REMOTE_BASE=$remote "$MC_BIN/transfer_engine_bench" --mode=initiator \
		--operation=$op --segment_id="$seg" --segment_size=64MB --block_size=1MB \
		--batch_size=8 --threads=2 --duration=1 --local_server_name=127.0.0.1 2>&1)
	echo "$out" | sed 's/^/# /'
	if echo "$out" | grep -q "^Throughput: [0-9.]* GB/s$"; then
		echo "ok - transfer_engine_bench $op between two processes"
	else
		echo "not ok - transfer_engine_bench $op"; rc=1
	fi
done
# protocol rdma with a NIC this host lacks, or a matrix file that cannot be read: a clear
# error at start (upstream's behaviour), never a silent fallback.
for args in "--device_name=mc_no_such_nic0,mc_no_such_nic1" \
	    "--nic_priority_matrix=$MC_TMP/no-such-matrix.json"; do
	out=$("$MC_BIN/transfer_engine_bench" --mode=target --protocol=rdma --buffer_size=1MB \
		--threads=1 --local_server_name=127.0.0.1 $args 2>&1)
	st=$?
	if [ $st -eq 1 ] && echo "$out" | grep -q "mc_no_such_nic0\|no-such-matrix.json"; then
		echo "ok - transfer_engine_bench --protocol=rdma $args fails clearly"
	else
		echo "$out" | sed 's/^/# /'
		echo "not ok - transfer_engine_bench --protocol=rdma $args (exit $st)"; rc=1
	fi
done
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
