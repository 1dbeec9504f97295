#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mooncake_proxy against fake vLLM instances (fake_vllm.py): the order prefill -> decode and
# what each receives, replies identical byte for byte to what the decode instance sent (streamed
# and not, completions and chat), OpenAI errors, the admin key, add/remove under load, a dead or
# failing instance taken out of rotation and put back, prefill retries, a caller's hang-up
# cancelling the upstream request, the bounds, metrics, and the official openai client.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
PX="$MC_BIN/mooncake_proxy"
FAKE="$MC_TOP_SRCDIR/tests/integration/fake_vllm.py"
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
M=fake-model
LOG=$MC_TMP/requests.jsonl
DUMP=$MC_TMP/dump
mkdir -p "$DUMP"

# fake NAME ROLE [ARGS...]: start a fake instance; sets FP (its port).
fake() {
	local name=$1 role=$2; shift 2
	FP=$(mc_free_port)
	mc_start "$name" python3 "$FAKE" --port "$FP" --role "$role" --model "$M" --log "$LOG" \
		--dump "$DUMP" "$@"
	eval "${name}_PID=$MC_LAST_PID ${name}_PORT=$FP"
	mc_wait_log "$name" "fake vllm" 10
}

# proxy NAME FLAGS...: start a proxy on a free port; sets U (its URL) and PX_PID.
proxy() {
	local name=$1 p; shift
	p=$(mc_free_port)
	mc_start "$name" env ADMIN_API_KEY=sekret "$PX" --host=127.0.0.1 --port="$p" --model "$M" \
		--health_interval=200ms "$@"
	PX_PID=$MC_LAST_PID
	U=http://127.0.0.1:$p
	mc_wait_log "$name" "proxy on" 10
}

# post PATH BODY [CURL-ARGS...]: the reply body to $MC_TMP/body, headers to $MC_TMP/hdr; prints
# the status code.
post() {
	local path=$1 body=$2; shift 2
	curl -s -N -D "$MC_TMP/hdr" -o "$MC_TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "$body" "$@" "$U$path"
}
rid() { sed -n 's/^X-Request-Id: *\([^\r]*\).*/\1/ip' "$MC_TMP/hdr"; }
# same_as_decode: the reply body is byte for byte what the decode instance sent for it.
same_as_decode() { local r; r=$(rid); [ -n "$r" ] && cmp -s "$MC_TMP/body" "$DUMP/$r"; }
# logged RID ROLE PYEXPR: the request of ROLE for RID satisfies PYEXPR over b (its body).
logged() {
	python3 - "$LOG" "$1" "$2" "$3" <<'PY'
import json, sys
log, rid, role, expr = sys.argv[1:]
rows = [json.loads(l) for l in open(log)]
b = [r for r in rows if r["rid"] == rid and r["role"] == role]
sys.exit(0 if len(b) == 1 and eval(expr, {"b": b[0]["body"], "r": b[0], "rows": rows}) else 1)
PY
}
# in_order RID: the prefill request was received before the decode request.
in_order() {
	python3 - "$LOG" "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["rid"] == sys.argv[2]]
sys.exit(0 if [r["role"] for r in rows] == ["prefill", "decode"] and rows[0]["t"] <= rows[1]["t"] else 1)
PY
}
metric() { curl -s "$U/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
status_has() { curl -s "$U/status" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if $1 else 1)"; }
# wait_for PYEXPR-over-status: poll /status for up to 5 s.
wait_for() { local i; for i in $(seq 1 50); do status_has "$1" && return 0; sleep 0.1; done; return 1; }

fake p1 prefill; fake p2 prefill; fake d1 decode --tokens 6; fake d2 decode --tokens 6
proxy px1 --prefill 127.0.0.1:"$p1_PORT" 127.0.0.1:"$p2_PORT" -d 127.0.0.1:"$d1_PORT" 127.0.0.1:"$d2_PORT"

# ---- the disaggregated flow ---------------------------------------------------------------
t "completion: 200, the body is the decode instance's, byte for byte" \
	'[ "$(post /v1/completions "{\"model\":\"$M\",\"prompt\":\"San Francisco is a\",\"max_tokens\":5}")" = 200 ] && same_as_decode'
R=$(rid)
t "prefill first, then decode" 'in_order "$R"'
t "the prefill gets max_tokens 1, stream off, kv_transfer_params do_remote_decode" \
	'logged "$R" prefill "b[\"max_tokens\"] == 1 and b[\"stream\"] is False and b[\"kv_transfer_params\"][\"do_remote_decode\"] is True and b[\"kv_transfer_params\"][\"do_remote_prefill\"] is False and \"remote_engine_id\" in b[\"kv_transfer_params\"]"'
t "the decode gets the original request plus the prefill's kv_transfer_params" \
	'logged "$R" decode "b[\"max_tokens\"] == 5 and b[\"prompt\"] == \"San Francisco is a\" and b[\"kv_transfer_params\"][\"remote_engine_id\"].startswith(\"eng-\") and \"stream\" not in b"'
t "streamed completion: SSE bytes identical to the decode instance's" \
	'[ "$(post /v1/completions "{\"model\":\"$M\",\"prompt\":\"x\",\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true}}")" = 200 ] && same_as_decode && grep -qi "^content-type: text/event-stream" "$MC_TMP/hdr" && tail -c 14 "$MC_TMP/body" | grep -q "data: \[DONE\]"'
R=$(rid)
t "streamed: the prefill's copy has stream off and no stream_options; the decode keeps both" \
	'logged "$R" prefill "b[\"stream\"] is False and \"stream_options\" not in b" && logged "$R" decode "b[\"stream\"] is True and \"stream_options\" in b"'
t "chat completion, streamed: identical bytes, max_completion_tokens 1 at prefill" \
	'[ "$(post /v1/chat/completions "{\"model\":\"$M\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3,\"max_completion_tokens\":3,\"stream\":true}")" = 200 ] && same_as_decode && logged "$(rid)" prefill "b[\"max_completion_tokens\"] == 1" && in_order "$(rid)"'
t "chat completion, not streamed: identical bytes" \
	'[ "$(post /v1/chat/completions "{\"model\":\"$M\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}")" = 200 ] && same_as_decode'
t "round robin: successive requests alternate prefill and decode instances" \
	'for i in 1 2 3 4; do post /v1/completions "{\"prompt\":\"rr\"}" >/dev/null; echo "$(rid)"; done > "$MC_TMP/rids"; python3 -c "
import json,sys
rows=[json.loads(l) for l in open(\"$LOG\")]; rids=open(\"$MC_TMP/rids\").read().split()
for role in (\"prefill\",\"decode\"):
    ports=[r[\"port\"] for rid in rids for r in rows if r[\"rid\"]==rid and r[\"role\"]==role]
    assert len(ports)==4 and ports[0]!=ports[1] and ports[0]==ports[2] and ports[1]==ports[3], ports"'
t "a 100-request burst, 20 at a time: every reply is the decode instance's bytes" \
	'seq 1 100 | xargs -P 20 -I{} curl -s -N -o "$MC_TMP/b{}" -D "$MC_TMP/h{}" -d "{\"prompt\":\"p{}\",\"stream\":true}" "$U/v1/completions"; ok=0; for i in $(seq 1 100); do r=$(sed -n "s/^X-Request-Id: *\([^\r]*\).*/\1/ip" "$MC_TMP/h$i"); cmp -s "$MC_TMP/b$i" "$DUMP/$r" && ok=$((ok + 1)); done; [ $ok = 100 ]'

# ---- errors and read-only routes -----------------------------------------------------------
t "bad JSON: 400 in OpenAI's error form" \
	'[ "$(post /v1/completions "{bad")" = 400 ] && python3 -c "import json; e=json.load(open(\"$MC_TMP/body\"))[\"error\"]; assert e[\"type\"]==\"invalid_request_error\" and e[\"code\"]==400 and e[\"message\"]"'
t "a JSON array is not a request: 400" '[ "$(post /v1/completions "[1,2]")" = 400 ]'
t "GET on a completion route: 405; unknown route: 404" \
	'[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/v1/completions")" = 405 ] && [ "$(curl -s -o /dev/null -w "%{http_code}" "$U/nope")" = 404 ]'
t "GET /v1/models names --model" 'curl -s "$U/v1/models" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"object\"]==\"list\" and [m[\"id\"] for m in d[\"data\"]]==[\"$M\"]"'
t "GET /health: 200 ok with 2 and 2 in rotation" 'curl -s "$U/health" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d==dict(status=\"ok\",prefill_instances=2,decode_instances=2), d"'
t "GET /status: the seed's fields" 'status_has "d[\"prefill_node_count\"]==2 and d[\"decode_node_count\"]==2 and d[\"prefill_nodes\"]==[\"127.0.0.1:$p1_PORT\",\"127.0.0.1:$p2_PORT\"] and len(d[\"decode_nodes\"])==2"'
t "GET /metrics: requests, errors, in-flight, per-instance counters and histograms" \
	'curl -s "$U/metrics" > "$MC_TMP/m" && grep -q "^mooncake_proxy_requests_total [1-9]" "$MC_TMP/m" && { grep -q "^mooncake_proxy_errors_total 2$" "$MC_TMP/m" || { grep "^mooncake_proxy_errors_total" "$MC_TMP/m"; false; }; } && grep -q "^mooncake_proxy_inflight 0$" "$MC_TMP/m" && grep -q "^mooncake_proxy_instance_requests_total{role=\"decode\",instance=\"127.0.0.1:$d1_PORT\"} [1-9]" "$MC_TMP/m" && grep -q "^mooncake_proxy_instance_seconds_bucket{role=\"prefill\",instance=\"127.0.0.1:$p1_PORT\",le=\"+Inf\"} [1-9]" "$MC_TMP/m" && grep -q "^mooncake_proxy_added_seconds_count [1-9]" "$MC_TMP/m"'

# ---- admin -------------------------------------------------------------------------------------
fake p3 prefill
ADD="{\"type\":\"prefill\",\"instance\":\"127.0.0.1:$p3_PORT\"}"
t "admin without X-API-Key: 401" '[ "$(post /instances/add "$ADD")" = 401 ]'
t "admin with a wrong key: 403, logged with the peer" '[ "$(post /instances/add "$ADD" -H "X-API-Key: sekreT")" = 403 ] && [ "$(post /instances/add "$ADD" -H "X-API-Key: sekret-longer")" = 403 ] && grep -q "refused: wrong X-API-Key" "$MC_TMP/px1.log" && status_has "d[\"prefill_node_count\"]==2"'
t "admin add with the key: 200, the demo's message, in /status and in rotation" \
	'[ "$(post /instances/add "$ADD" -H "X-API-Key: sekret")" = 200 ] && grep -q "Added 127.0.0.1:$p3_PORT to prefill_instances." "$MC_TMP/body" && wait_for "d[\"prefill_node_count\"]==3 and d[\"prefill_out_of_rotation\"]==[]"'
t "admin add of the same instance: 400 Instance already exists." '[ "$(post /instances/add "$ADD" -H "X-API-Key: sekret")" = 400 ] && grep -q "Instance already exists." "$MC_TMP/body"'
t "admin add with a bad type or address: 400" '[ "$(post /instances/add "{\"type\":\"both\",\"instance\":\"h:1\"}" -H "X-API-Key: sekret")" = 400 ] && [ "$(post /instances/add "{\"type\":\"decode\",\"instance\":\"nope\"}" -H "X-API-Key: sekret")" = 400 ] && [ "$(post /instances/add "{\"type\":\"decode\",\"instance\":\"h:99999\"}" -H "X-API-Key: sekret")" = 400 ]'
t "the added prefill instance takes requests" 'for i in 1 2 3 4 5 6; do post /v1/completions "{\"prompt\":\"a\"}" >/dev/null; done; grep -q "\"port\": $p3_PORT" "$LOG"'
t "add and remove under load: 300 requests, none fails" \
	'seq 1 300 | xargs -P 16 -I{} curl -s -o /dev/null -w "%{http_code}\n" -d "{\"prompt\":\"load {}\"}" "$U/v1/completions" > "$MC_TMP/codes" & L=$!; for i in 1 2 3 4 5; do post /instances/remove "$ADD" -H "X-API-Key: sekret" >/dev/null; post /instances/add "$ADD" -H "X-API-Key: sekret" >/dev/null; done; wait $L; [ "$(sort -u "$MC_TMP/codes")" = 200 ] && [ "$(wc -l < "$MC_TMP/codes")" = 300 ]'
t "admin remove: 200, gone from /status; again: 404" \
	'[ "$(post /instances/remove "$ADD" -H "X-API-Key: sekret")" = 200 ] && status_has "d[\"prefill_node_count\"]==2" && [ "$(post /instances/remove "$ADD" -H "X-API-Key: sekret")" = 404 ]'
M=other-model fake om decode
t "an added instance serving another model stays out of rotation" \
	'[ "$(post /instances/add "{\"type\":\"decode\",\"instance\":\"127.0.0.1:$om_PORT\"}" -H "X-API-Key: sekret")" = 200 ] && sleep 0.6 && status_has "d[\"decode_out_of_rotation\"]==[\"127.0.0.1:$om_PORT\"] and d[\"decode_node_count\"]==3" && [ "$(post /instances/remove "{\"type\":\"decode\",\"instance\":\"127.0.0.1:$om_PORT\"}" -H "X-API-Key: sekret")" = 200 ]'

# ---- failures ----------------------------------------------------------------------------------
t "a failing prefill (500): every request still 200 through the other" \
	'curl -s -XPOST "http://127.0.0.1:$p2_PORT/fake/fail" >/dev/null; c=""; for i in 1 2 3 4; do c="$c$(post /v1/completions "{\"prompt\":\"f\"}")"; done; [ "$c" = 200200200200 ]'
t "... it is out of rotation" 'wait_for "d[\"prefill_out_of_rotation\"]==[\"127.0.0.1:$p2_PORT\"]" && [ "$(curl -s "$U/metrics" | grep -c "^mooncake_proxy_instance_healthy{role=\"prefill\",instance=\"127.0.0.1:$p2_PORT\"} 0")" = 1 ]'
t "... and back in rotation when it recovers" 'curl -s -XPOST "http://127.0.0.1:$p2_PORT/fake/ok" >/dev/null; wait_for "d[\"prefill_out_of_rotation\"]==[]"'
t "a dead decode instance: requests still 200, it leaves rotation" \
	'{ kill -KILL $d2_PID && wait $d2_PID; } 2>/dev/null; c=""; for i in 1 2 3 4; do c="$c$(post /v1/completions "{\"prompt\":\"d\"}")"; done; [ "$c" = 200200200200 ] && wait_for "d[\"decode_out_of_rotation\"]==[\"127.0.0.1:$d2_PORT\"]"'
t "... /health still 200 with one decode instance" 'curl -s "$U/health" | grep -q "\"decode_instances\":1"'
t "... restarted on its port, it is back in rotation" \
	'mc_start d2b python3 "$FAKE" --port "$d2_PORT" --role decode --model "$M" --log "$LOG" --dump "$DUMP" && wait_for "d[\"decode_out_of_rotation\"]==[]"'
t "every instance dead: 503 in OpenAI's error form" \
	'curl -s -XPOST "http://127.0.0.1:$p1_PORT/fake/fail" >/dev/null; curl -s -XPOST "http://127.0.0.1:$p2_PORT/fake/fail" >/dev/null; c=$(post /v1/completions "{\"prompt\":\"z\"}"); curl -s -XPOST "http://127.0.0.1:$p1_PORT/fake/ok" >/dev/null; curl -s -XPOST "http://127.0.0.1:$p2_PORT/fake/ok" >/dev/null; [ "$c" = 502 ] || [ "$c" = 503 ] && grep -q "\"type\":\"server_error\"" "$MC_TMP/body"'
t "a 4xx from the prefill is the caller's: relayed as it came, no retry, no decode" \
	'wait_for "d[\"prefill_out_of_rotation\"]==[]" && r0=$(metric mooncake_proxy_retries_total); [ "$(post /v1/completions "{\"prompt\":\"x\",\"fake_status\":422}")" = 422 ] && [ "$(cat "$MC_TMP/body")" = "{\"error\": {\"message\": \"refused on purpose\"}}" ] && [ "$(metric mooncake_proxy_retries_total)" = "$r0" ] && [ "$(grep -c "\"fake_status\": 422" "$LOG")" = 1 ]'

# ---- openai client -----------------------------------------------------------------------------
OPY=${MC_PROXY_OPENAI_PYTHON:-python3}
if "$OPY" -c "import openai" 2>/dev/null; then
	t "the openai package: completions and chat, streamed and not, models" \
		'"$OPY" "$MC_TOP_SRCDIR/tests/integration/test_proxy_openai.py" "$U/v1" "$M" | grep -q "^ok$"'
else
	echo "# the openai Python package is not installed: its check is skipped (set MC_PROXY_OPENAI_PYTHON)"
fi

# ---- hang-ups and bounds: a second proxy on slow instances -------------------------------------
fake sp prefill --delay 1.5; fake sd decode --delay 2 --tokens 50
proxy px2 --prefill 127.0.0.1:"$sp_PORT" --decode 127.0.0.1:"$sd_PORT" --max_inflight=2 --max_body_bytes=2KB
t "a caller hanging up during the prefill cancels it: no decode request, nothing in flight" \
	'curl -s -o /dev/null --max-time 0.5 -d "{\"prompt\":\"bye\"}" "$U/v1/completions"; sleep 1.5; [ "$(metric mooncake_proxy_client_aborts_total)" = 1 ] && [ "$(metric mooncake_proxy_inflight)" = 0 ] && [ "$(grep -c "\"port\": $sd_PORT" "$LOG")" = 0 ]'
t "a caller hanging up mid-stream: counted, nothing in flight" \
	'curl -s -N -o /dev/null --max-time 2.5 -d "{\"prompt\":\"bye\",\"stream\":true}" "$U/v1/completions"; sleep 0.5; [ "$(metric mooncake_proxy_client_aborts_total)" = 2 ] && [ "$(metric mooncake_proxy_inflight)" = 0 ]'
t "--max_inflight: the third concurrent request gets 503 at once" \
	'w=""; for i in 1 2; do curl -s -o /dev/null -d "{\"prompt\":\"q\"}" "$U/v1/completions" & w="$w $!"; done; sleep 0.3; c=$(post /v1/completions "{\"prompt\":\"q\"}"); wait $w; [ "$c" = 503 ] && [ "$(metric mooncake_proxy_rejected_total)" = 1 ]'
t "--max_body_bytes: a 4 KB body gets 413" \
	'head -c 4000 /dev/zero | tr "\0" a > "$MC_TMP/big"; [ "$(curl -s -o /dev/null -w "%{http_code}" --data-binary @"$MC_TMP/big" "$U/v1/completions")" = 413 ]'
t "--max_header_bytes: a 100 KB header is refused" \
	'[ "$(curl -s -o /dev/null -w "%{http_code}" -H "X-Big: $(head -c 100000 /dev/zero | tr "\0" a)" "$U/health")" != 200 ]'

t "a failed prefill is retried on another instance at once (no health check in between)" \
	'p=$(mc_free_port); P5=$p; mc_start px5 "$PX" --host=127.0.0.1 --port="$p" --health_interval=1h --prefill 127.0.0.1:"$p2_PORT" 127.0.0.1:"$p1_PORT" --decode 127.0.0.1:"$d1_PORT" && mc_wait_log px5 "proxy on" && curl -s -XPOST "http://127.0.0.1:$p2_PORT/fake/fail" >/dev/null && c=$(curl -s -o /dev/null -w "%{http_code}" -d "{\"prompt\":\"r\"}" "http://127.0.0.1:$p/v1/completions") && curl -s -XPOST "http://127.0.0.1:$p2_PORT/fake/ok" >/dev/null; [ "$c" = 200 ] && [ "$(curl -s "http://127.0.0.1:$p/metrics" | awk "\$1 == \"mooncake_proxy_retries_total\" {print \$2}")" = 1 ] && grep -q "prefill answered HTTP 500; trying another" "$MC_TMP/px5.log"'
# (On px5 the other prefill instance left rotation in the test above, with no health check to
# bring it back: every request here goes to the restarted one.)
t "an instance restarted behind kept-alive connections serves the next requests, and is not blamed" \
	'for i in 1 2 3; do curl -s -o /dev/null -d "{\"prompt\":\"k\"}" "http://127.0.0.1:$P5/v1/completions"; done; { kill -KILL $p1_PID && wait $p1_PID; } 2>/dev/null; mc_start p1b python3 "$FAKE" --port "$p1_PORT" --role prefill --model "$M" --log "$LOG" --dump "$DUMP" && mc_wait_log p1b "fake vllm" 10 && c=""; for i in 1 2 3 4; do c="$c$(curl -s -o /dev/null -w "%{http_code}" -d "{\"prompt\":\"k\"}" "http://127.0.0.1:$P5/v1/completions")"; done; [ "$c" = 200200200200 ] && [ "$(curl -s "http://127.0.0.1:$P5/status" | python3 -c "import json,sys; print(\"127.0.0.1:$p1_PORT\" in json.load(sys.stdin)[\"prefill_out_of_rotation\"])")" = False ]'

# ---- policies ----------------------------------------------------------------------------------
# ports_of FILE-OF-RIDS ROLE: the port that served each request id, in order.
ports_of() {
	python3 - "$LOG" "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {r["rid"]: r["port"] for r in rows if r["role"] == sys.argv[3]}
print(" ".join(str(by.get(r, "none")) for r in open(sys.argv[2]).read().split()))
PY
}
U0=$U
proxy px6 --prefill 127.0.0.1:"$p1_PORT" 127.0.0.1:"$p2_PORT" --decode 127.0.0.1:"$d1_PORT" \
	--scheduling kv_aware --kv_block_bytes 16
P=0123456789abcdef0123456789abcdef-shared-prefix-of-a-long-conversation
for i in 1 2 3 4 5 6; do post /v1/completions "{\"prompt\":\"$i distinct prompt number $i, long enough\"}" >/dev/null; rid; done > "$MC_TMP/distinct"
for i in 1 2 3 4 5; do post /v1/completions "{\"prompt\":\"$P turn $i and more words\"}" >/dev/null; rid; done > "$MC_TMP/shared"
t "kv_aware: prompts nobody has seen spread over the prefill instances" \
	'[ "$(ports_of "$MC_TMP/distinct" prefill | tr " " "\n" | sort -u | wc -l)" = 2 ]'
t "kv_aware: prompts sharing a prefix all go to the instance that has it" \
	'[ "$(ports_of "$MC_TMP/shared" prefill | tr " " "\n" | sort -u | wc -l)" = 1 ] && [ "$(metric mooncake_proxy_kv_prefix_blocks_matched_total)" -ge 16 ]'
t "kv_aware: chat messages are the prompt too" \
	'C="{\"messages\":[{\"role\":\"system\",\"content\":\"$P\"},{\"role\":\"user\",\"content\":\"q\"}]}"; for i in 1 2 3 4; do post /v1/chat/completions "$C" >/dev/null; rid; done > "$MC_TMP/chat"; [ "$(ports_of "$MC_TMP/chat" prefill | tr " " "\n" | sort -u | wc -l)" = 1 ]'
proxy px7 --prefill 127.0.0.1:"$sp_PORT" 127.0.0.1:"$p1_PORT" --decode 127.0.0.1:"$d1_PORT" \
	--scheduling least_loaded
t "least_loaded: while the slow instance holds a request, the others go to the idle one" \
	'curl -s -o /dev/null -d "{\"prompt\":\"slow\"}" "$U/v1/completions" & w=$!; sleep 0.3; for i in 1 2 3 4; do post /v1/completions "{\"prompt\":\"ll\"}" >/dev/null; rid; done > "$MC_TMP/ll"; wait $w; [ "$(ports_of "$MC_TMP/ll" prefill)" = "$p1_PORT $p1_PORT $p1_PORT $p1_PORT" ]'
U=$U0

# ---- the rest ------------------------------------------------------------------------------------
t "no admin key configured: 503" \
	'p=$(mc_free_port); mc_start px3 env -u ADMIN_API_KEY "$PX" --host=127.0.0.1 --port="$p" && mc_wait_log px3 "proxy on" && [ "$(curl -s -o /dev/null -w "%{http_code}" -H "X-API-Key: x" -d "$ADD" "http://127.0.0.1:$p/instances/add")" = 503 ] && [ "$(curl -s -o /dev/null -w "%{http_code}" -d "{\"prompt\":\"a\"}" "http://127.0.0.1:$p/v1/completions")" = 503 ]'
t "--admin_api_key_file: the key is the file's first line, ADMIN_API_KEY ignored" \
	'printf "filekey\nignored\n" > "$MC_TMP/key"; p=$(mc_free_port); mc_start px4 env ADMIN_API_KEY=envkey "$PX" --host=127.0.0.1 --port="$p" --admin_api_key_file="$MC_TMP/key" && mc_wait_log px4 "proxy on" && [ "$(curl -s -o /dev/null -w "%{http_code}" -H "X-API-Key: envkey" -d "$ADD" "http://127.0.0.1:$p/instances/add")" = 403 ] && [ "$(curl -s -o /dev/null -w "%{http_code}" -H "X-API-Key: filekey" -d "$ADD" "http://127.0.0.1:$p/instances/add")" = 200 ]'
t "an empty key file is refused at start-up (status 2, one line)" \
	': > "$MC_TMP/empty"; "$PX" --admin_api_key_file="$MC_TMP/empty" --check_config 2>"$MC_TMP/err"; [ $? = 2 ] && [ "$(wc -l < "$MC_TMP/err")" = 1 ]'
h=$("$PX" --help | grep -oE '^  --[A-Za-z0-9_-]+' | sed 's/^  --//' | grep -v '^help$\|^version$' | sort -u)
m=$(grep -oE '^\.It Fl -[A-Za-z0-9_-]+' "$MC_TOP_SRCDIR/man/mooncake_proxy.8" | sed 's/^\.It Fl -//' | grep -v '^help$\|^version$' | sort -u)
t "mooncake_proxy(8) documents exactly the flags of --help" '[ "$h" = "$m" ]'
t "SIGTERM: exit 0" 'kill -TERM $PX_PID; wait $PX_PID'
if command -v systemd-analyze >/dev/null 2>&1; then
	sed -e "s|@sbindir@|$MC_BIN|g" -e "s|@sysconfdir@|$MC_TMP|g" \
		"$MC_TOP_SRCDIR/etc/mooncake_proxy.service.in" > "$MC_TMP/mooncake_proxy.service"
	t "systemd-analyze verify mooncake_proxy.service" \
		'out=$(cd "$MC_TMP" && systemd-analyze verify --man=no "$MC_TMP/mooncake_proxy.service" 2>&1); [ -z "$out" ] || { echo "$out" | sed "s/^/# /"; false; }'
fi
[ $fail = 0 ] || mc_dump_logs
echo "1..$n"
exit $fail
