#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mooncake_proxy's kv_aware with the pool's contents: two proxies subscribe to a real master's KV
# events (--kv_events_endpoint); objects named as the proxy maps prompt blocks to keys
# (proxy_pool_keys.py) are put into and removed from the store.  Checks: a prompt whose prefix
# is in the pool goes to the least loaded prefill instance instead of the one holding it (unless
# one holds more of it than the pool); with
# --kv_pool_skip_prefill a prompt wholly in the pool goes straight to decode (no prefill request,
# no kv_transfer_params, the decode's bytes relayed); a partial prefix or a removed block brings
# the prefill back; when the master goes away the proxies drop their pool knowledge and route
# by their own prefix tree, and pick the events up again when it is back; a malformed message
# from a publisher is counted and dropped.  Needs libzmq and python3 with pyzmq and msgpack.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
grep -q '^#define HAVE_ZMQ 1' "$MC_TOP_BUILDDIR/config.h" ||
	{ echo "# SKIP: built without libzmq"; exit 77; }
PY=
for p in python3 /usr/bin/python3; do
	"$p" -c "import zmq, msgpack" 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "# SKIP: no python3 with zmq and msgpack (python3-zmq, python3-msgpack)"; exit 77; }
PX="$MC_BIN/mooncake_proxy"
FAKE="$MC_TOP_SRCDIR/tests/integration/fake_vllm.py"
KEYS="$MC_TOP_SRCDIR/tests/integration/proxy_pool_keys.py"
export PYTHONPATH="$MC_TOP_SRCDIR/tests/integration"
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
M=fake-model
LOG=$MC_TMP/requests.jsonl
DUMP=$MC_TMP/dump
FMT='vllm@fake-model@1@0@{hex}'
mkdir -p "$DUMP"

fake() {
	local name=$1 role=$2; shift 2
	FP=$(mc_free_port)
	mc_start "$name" python3 "$FAKE" --port "$FP" --role "$role" --model "$M" --log "$LOG" \
		--dump "$DUMP" "$@"
	eval "${name}_PORT=$FP"
	mc_wait_log "$name" "fake vllm" 10
}
# proxy NAME FLAGS...: sets NAME_URL.
proxy() {
	local name=$1 p; shift
	p=$(mc_free_port)
	mc_start "$name" "$PX" --host=127.0.0.1 --port="$p" --model "$M" --health_interval=200ms \
		--scheduling=kv_aware --kv_block_bytes=16 --kv_events_key_format="$FMT" \
		--prefill 127.0.0.1:"$p1_PORT" 127.0.0.1:"$p2_PORT" --decode 127.0.0.1:"$d1_PORT" "$@"
	eval "${name}_URL=http://127.0.0.1:$p"
	mc_wait_log "$name" "proxy on" 10
}
# post URL PROMPT: the status in $CODE, the body in $MC_TMP/body, the request id in $RID.
post() {
	CODE=$(curl -s -D "$MC_TMP/hdr" -o "$MC_TMP/body" -w '%{http_code}' \
		-H 'Content-Type: application/json' \
		--data-binary "{\"model\":\"$M\",\"prompt\":\"$2\",\"max_tokens\":4}" "$1/v1/completions")
	RID=$(sed -n 's/^X-Request-Id: *\([^\r]*\).*/\1/ip' "$MC_TMP/hdr")
}
# role_port RID ROLE: the port of the instance that got RID's ROLE request (empty: none).
role_port() {
	python3 - "$LOG" "$1" "$2" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["rid"] == sys.argv[2] and r["role"] == sys.argv[3]:
        print(r["port"])
PY
}
decode_has_params() {
	python3 - "$LOG" "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
b = [r["body"] for r in rows if r["rid"] == sys.argv[2] and r["role"] == "decode"]
sys.exit(0 if b and "kv_transfer_params" in b[0] else 1)
PY
}
metric() { curl -s "$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
# wait_metric URL NAME PYCOND: poll for up to 10 s until int(value) satisfies PYCOND over v.
wait_metric() {
	local i v
	for i in $(seq 1 100); do
		v=$(metric "$1" "$2")
		[ -n "$v" ] && python3 -c "import sys; v=int(float('$v')); sys.exit(0 if $3 else 1)" && return 0
		sleep 0.1
	done
	echo "# $2 at $1 is '$v', wanted $3" >&2
	return 1
}
same_as_decode() { [ -n "$RID" ] && cmp -s "$MC_TMP/body" "$DUMP/$RID"; }

KVP=$(mc_free_port)
MASTER_FLAGS=(--enable_kv_events --kv_events_bind_endpoint="tcp://127.0.0.1:$KVP"
	--kv_events_backend_id=t --kv_events_emit_object_key)
mc_start_master "${MASTER_FLAGS[@]}" || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
fake p1 prefill; fake p2 prefill; fake d1 decode --tokens 5
proxy pa --kv_events_endpoint="tcp://127.0.0.1:$KVP"
proxy pb --kv_events_endpoint="tcp://127.0.0.1:$KVP" --kv_pool_skip_prefill
A=0123456789abcdefAAAAAAAAAAAAAAAABBBBBBBBBBBBBBBBCCCCCCCCCCCCCCCC	# 4 blocks of 16
E=JJJJJJJJJJJJJJJJKKKKKKKKKKKKKKKKLLLLLLLLLLLLLLLLMMMMMMMMMMMMMMMM	# 4 blocks
C=GGGGGGGGGGGGGGGGHHHHHHHHHHHHHHHHIIIIIIIIIIIIIIII	# 3 blocks
B=zyxwvutsrqponmlkDDDDDDDDDDDDDDDDEEEEEEEEEEEEEEEE		# 3 blocks, never put

t "both proxies subscribe to the master's KV events" \
	'wait_metric "$pa_URL" mooncake_proxy_kv_events_connected "v == 1" &&
	 wait_metric "$pb_URL" mooncake_proxy_kv_events_connected "v == 1"'

# Nothing in the pool yet: the prefix tree sends a repeated prompt back to the same instance.
post "$pa_URL" "$A"; R1=$RID; post "$pa_URL" "$A"; R2=$RID
t "not in the pool: a repeated prompt goes to the instance holding its prefix" \
	'[ -n "$(role_port "$R1" prefill)" ] && [ "$(role_port "$R1" prefill)" = "$(role_port "$R2" prefill)" ]'
t "... and counts no pool hit" '[ "$(metric "$pa_URL" mooncake_proxy_kv_pool_hits_total)" = 0 ]'

t "the prompt's 4 blocks are put into the store under the connector's key names" \
	'python3 "$KEYS" "127.0.0.1:$MC_MASTER_PORT" put "$FMT" 16 "$A"'
t "both proxies learn them from the stored events" \
	'wait_metric "$pa_URL" mooncake_proxy_kv_pool_blocks "v >= 4" &&
	 wait_metric "$pb_URL" mooncake_proxy_kv_pool_blocks "v >= 4"'

ports=""
for i in 1 2 3 4; do post "$pa_URL" "$A"; ports="$ports $(role_port "$RID" prefill)"; done
t "in the pool: the least loaded prefill instance takes it, whichever holds it (ports:$ports)" \
	'[ "$(echo $ports | tr " " "\n" | sort -u | wc -l)" = 2 ]'
t "... four pool hits counted" '[ "$(metric "$pa_URL" mooncake_proxy_kv_pool_hits_total)" = 4 ]'
t "... and still prefilled without --kv_pool_skip_prefill" \
	'[ "$(metric "$pa_URL" mooncake_proxy_kv_pool_prefill_skipped_total)" = 0 ] && decode_has_params "$RID"'

# E is held by one instance (4 blocks), the pool has its first 2: that instance still wins.
post "$pa_URL" "$E"; R1=$RID
h=$(metric "$pa_URL" mooncake_proxy_kv_pool_hits_total)
python3 "$KEYS" "127.0.0.1:$MC_MASTER_PORT" put "$FMT" 16 "$E" 2 &&
	wait_metric "$pa_URL" mooncake_proxy_kv_pool_blocks "v >= 6" >/dev/null
ports=""
for i in 1 2 3; do post "$pa_URL" "$E"; ports="$ports $(role_port "$RID" prefill)"; done
t "an instance holding more of the prompt than the pool keeps it (ports: $(role_port "$R1" prefill),$ports)" \
	'[ "$(echo $(role_port "$R1" prefill) $ports | tr " " "\n" | sort -u | wc -l)" = 1 ] &&
	 [ "$(metric "$pa_URL" mooncake_proxy_kv_pool_hits_total)" = $((h + 3)) ]'

t "--kv_pool_skip_prefill, every block in the pool: 200, the decode's bytes" \
	'post "$pb_URL" "$A" && [ "$CODE" = 200 ] && same_as_decode'
t "... no prefill request was made" '[ -z "$(role_port "$RID" prefill)" ] && [ -n "$(role_port "$RID" decode)" ]'
t "... the decode got the caller's request, without kv_transfer_params" '! decode_has_params "$RID"'
t "... counted in mooncake_proxy_kv_pool_prefill_skipped_total" \
	'[ "$(metric "$pb_URL" mooncake_proxy_kv_pool_prefill_skipped_total)" = 1 ]'
t "a prompt whose last block is not in the pool is prefilled" \
	'post "$pb_URL" "${A}FFFFFFFFFFFFFFFF" && [ "$CODE" = 200 ] && [ -n "$(role_port "$RID" prefill)" ] && decode_has_params "$RID"'
t "a prompt not in the pool at all is prefilled and counts no hit" \
	'h=$(metric "$pb_URL" mooncake_proxy_kv_pool_hits_total); post "$pb_URL" "$B" && [ "$CODE" = 200 ] &&
	 [ -n "$(role_port "$RID" prefill)" ] && [ "$(metric "$pb_URL" mooncake_proxy_kv_pool_hits_total)" = "$h" ]'

t "removing the prompt's blocks from the store (removed events)" \
	'python3 "$KEYS" "127.0.0.1:$MC_MASTER_PORT" remove "$FMT" 16 "$A" &&
	 python3 "$KEYS" "127.0.0.1:$MC_MASTER_PORT" remove "$FMT" 16 "$E" 2 &&
	 wait_metric "$pb_URL" mooncake_proxy_kv_pool_blocks "v == 0"'
t "... and the prompt is prefilled again" \
	'post "$pb_URL" "$A" && [ "$CODE" = 200 ] && [ -n "$(role_port "$RID" prefill)" ]'

# The master goes away: the pool knowledge goes with it.  C is in the pool and new to the
# proxies: with pool knowledge its requests would spread, by the tree they stay together.
python3 "$KEYS" "127.0.0.1:$MC_MASTER_PORT" put "$FMT" 16 "$A" &&
	python3 "$KEYS" "127.0.0.1:$MC_MASTER_PORT" put "$FMT" 16 "$C" &&
	wait_metric "$pa_URL" mooncake_proxy_kv_pool_blocks "v >= 7" >/dev/null &&
	wait_metric "$pb_URL" mooncake_proxy_kv_pool_blocks "v >= 7" >/dev/null
kill -KILL "$MC_MASTER_PID"; wait "$MC_MASTER_PID" 2>/dev/null
t "the master killed: both proxies see it go and drop what they knew" \
	'wait_metric "$pa_URL" mooncake_proxy_kv_events_connected "v == 0" &&
	 wait_metric "$pb_URL" mooncake_proxy_kv_events_connected "v == 0" &&
	 [ "$(metric "$pb_URL" mooncake_proxy_kv_pool_blocks)" = 0 ] && mc_wait_log pb "went away" 5'
h=$(metric "$pa_URL" mooncake_proxy_kv_pool_hits_total)
post "$pa_URL" "$C"; R1=$RID; post "$pa_URL" "$C"; R2=$RID
t "without the master, routing follows the prefix tree again" \
	'[ -n "$(role_port "$R1" prefill)" ] && [ "$(role_port "$R1" prefill)" = "$(role_port "$R2" prefill)" ] &&
	 [ "$(metric "$pa_URL" mooncake_proxy_kv_pool_hits_total)" = "$h" ]'
t "without the master, nothing skips the prefill" \
	'post "$pb_URL" "$A" && [ "$CODE" = 200 ] && [ -n "$(role_port "$RID" prefill)" ] && same_as_decode'

mc_restart_master master2 "${MASTER_FLAGS[@]}" || { mc_dump_logs; exit 1; }
t "the master back: the proxies subscribe again" \
	'wait_metric "$pa_URL" mooncake_proxy_kv_events_connected "v == 1" &&
	 wait_metric "$pb_URL" mooncake_proxy_kv_events_connected "v == 1" &&
	 [ "$(metric "$pb_URL" mooncake_proxy_kv_events_disconnects_total)" = 1 ]'

# A publisher that sends garbage: counted, dropped, and the next good message still read.
GP=$(mc_free_port)
proxy pc --kv_events_endpoint="tcp://127.0.0.1:$GP"
"$PY" - "$GP" "$pc_URL" >"$MC_TMP/garbage.log" 2>&1 <<'PY' &
import json, struct, sys, time, urllib.request
import msgpack, zmq
port, url = sys.argv[1], sys.argv[2]
pub = zmq.Context().socket(zmq.PUB)
pub.bind("tcp://127.0.0.1:%s" % port)
def metric(name):
    for l in urllib.request.urlopen(url + "/metrics", timeout=5).read().decode().splitlines():
        if l.startswith(name + " "):
            return float(l.split()[1])
good = msgpack.packb([1, [{"event_type": "stored", "seq_hashes": [], "object_key":
                           "vllm@fake-model@1@0@abc"}], 0])
for seq in range(1, 600):
    pub.send_multipart([b"", struct.pack(">Q", seq), b"\xdc\xff\xff\x91\x92"])  # truncated
    pub.send_multipart([b"", struct.pack(">Q", seq), b"\x93\x01\x91\xc1\x00"])   # bad byte
    pub.send_multipart([b"only one frame"])
    pub.send_multipart([b"", struct.pack(">Q", seq), b"\x93\x01" + b"\x91" * 200 + b"\x00"])  # deep
    pub.send_multipart([b"", struct.pack(">Q", seq),   # a name that is a list: no block
                        msgpack.packb([1, [{"event_type": [1, [2]], "seq_hashes": [7]}], 0])])
    pub.send_multipart([b"", struct.pack(">Q", seq), good])
    time.sleep(0.02)
    if (metric("mooncake_proxy_kv_pool_blocks") >= 1 and
            metric("mooncake_proxy_kv_events_bad_messages_total") >= 4 and
            metric("mooncake_proxy_kv_events_unmapped_total") >= 1):
        print("the good message was read after %d bad ones" % metric("mooncake_proxy_kv_events_bad_messages_total"))
        break
PY
GPID=$!
MC_PIDS="$MC_PIDS $GPID"
wait "$GPID"
t "malformed messages (truncated, a bad byte, one frame, nested too deep) are counted and dropped; a good one after them is read" \
	'grep -q "good message was read" "$MC_TMP/garbage.log" &&
	 wait_metric "$pc_URL" mooncake_proxy_kv_events_bad_messages_total "v >= 4" &&
	 wait_metric "$pc_URL" mooncake_proxy_kv_events_unmapped_total "v >= 1"'
t "the publisher gone, the proxy forgets what it said" \
	'wait_metric "$pc_URL" mooncake_proxy_kv_pool_blocks "v == 0"'
t "the proxies still serve" 'post "$pc_URL" "$A" && [ "$CODE" = 200 ] && post "$pa_URL" "$B" && [ "$CODE" = 200 ]'

echo "1..$n"
[ $fail = 0 ] || mc_dump_logs
exit $fail
