#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mooncake_http_metadata_server: upstream's HTTP metadata protocol (reference §2), bounds,
# concurrency, flags; and the same service embedded in mooncake_master.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
P=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --port="$P" --host=127.0.0.1 \
	--max_value_bytes=1MB --max_keys=1000
mc_wait_port "$P" || { mc_dump_logs; exit 1; }
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
code() { curl -s -o "$MC_TMP/body" -w '%{http_code}' "$@"; }

suite() {
	local U=$1
	t "PUT stores a value" '[ "$(code -XPUT --data-binary "{\"a\":1}" "$U/metadata?key=k1")" = 200 ] && [ "$(cat $MC_TMP/body)" = "metadata updated" ]'
	t "GET returns it verbatim as JSON" '[ "$(code "$U/metadata?key=k1")" = 200 ] && [ "$(cat $MC_TMP/body)" = "{\"a\":1}" ] && curl -sI "$U/metadata?key=k1" -XGET | grep -qi "content-type: application/json"'
	t "URL-escaped keys are decoded" '[ "$(code -XPUT --data-binary v "$U/metadata?key=mooncake%2Fram%2F10.0.0.1%3A12345")" = 200 ] && [ "$(code "$U/metadata?key=mooncake/ram/10.0.0.1:12345")" = 200 ] && [ "$(cat $MC_TMP/body)" = v ]'
	t "PUT replaces a value" 'code -XPUT --data-binary "{\"a\":2}" "$U/metadata?key=k1" >/dev/null && [ "$(curl -s "$U/metadata?key=k1")" = "{\"a\":2}" ]'
	t "missing key is 404" '[ "$(code "$U/metadata?key=nope")" = 404 ] && [ "$(cat $MC_TMP/body)" = "metadata not found" ]'
	t "no key parameter is 400" '[ "$(code "$U/metadata")" = 400 ] && [ "$(cat $MC_TMP/body)" = "Missing key parameter" ]'
	t "rpc_meta: same body is unchanged" 'code -XPUT --data-binary r1 "$U/metadata?key=mooncake/rpc_meta/h:1" >/dev/null; [ "$(code -XPUT --data-binary r1 "$U/metadata?key=mooncake/rpc_meta/h:1")" = 200 ] && [ "$(cat $MC_TMP/body)" = "metadata unchanged" ]'
	t "rpc_meta: a different body is refused" '[ "$(code -XPUT --data-binary r2 "$U/metadata?key=mooncake/rpc_meta/h:1")" = 400 ] && [ "$(cat $MC_TMP/body)" = "Duplicate rpc_meta key not allowed" ]'
	t "DELETE removes" '[ "$(code -XDELETE "$U/metadata?key=k1")" = 200 ] && [ "$(cat $MC_TMP/body)" = "metadata deleted" ] && [ "$(code "$U/metadata?key=k1")" = 404 ]'
	t "DELETE of a missing key is 404" '[ "$(code -XDELETE "$U/metadata?key=k1")" = 404 ]'
	t "/health is OK" '[ "$(code "$U/health")" = 200 ] && [ "$(cat $MC_TMP/body)" = OK ]'
	t "binary values are stored verbatim" 'head -c 70000 /dev/urandom > $MC_TMP/bin; code -XPUT --data-binary @$MC_TMP/bin "$U/metadata?key=bin" >/dev/null; curl -s "$U/metadata?key=bin" -o $MC_TMP/bin2; cmp -s $MC_TMP/bin $MC_TMP/bin2'
	t "200 concurrent PUTs all land" 'seq 1 200 | xargs -P 20 -I{} curl -s -o /dev/null -XPUT --data-binary "v{}" "$U/metadata?key=par/{}"; ok=0; for i in 1 50 200; do [ "$(curl -s "$U/metadata?key=par/$i")" = "v$i" ] && ok=$((ok+1)); done; [ $ok = 3 ]'
}

suite "http://127.0.0.1:$P"
head -c $((2 * 1024 * 1024)) /dev/zero > "$MC_TMP/big"
t "a value over --max_value_bytes is refused with 413" '[ "$(code -XPUT --data-binary @$MC_TMP/big "http://127.0.0.1:$P/metadata?key=big")" = 413 ]'
t "the server still answers afterwards" '[ "$(code "http://127.0.0.1:$P/health")" = 200 ]'
t "a key over the length bound is refused" '[ "$(code -XPUT --data-binary v "http://127.0.0.1:$P/metadata?key=$(head -c 2000 /dev/zero | tr "\0" a)")" = 400 ]'
t "other methods get 405" '[ "$(code -XPATCH "http://127.0.0.1:$P/metadata?key=x")" = 405 ]'
t "unknown paths get 404" '[ "$(code "http://127.0.0.1:$P/nope")" = 404 ]'
t "the key limit answers 503" 'for i in $(seq 1 1100); do echo "url = \"http://127.0.0.1:$P/metadata?key=lim/$i\""; echo "upload-file = \"/dev/null\""; echo "output = \"/dev/null\""; done > $MC_TMP/curlcfg; curl -s -K $MC_TMP/curlcfg; [ "$(code -XPUT --data-binary v "http://127.0.0.1:$P/metadata?key=one-more")" = 503 ]'
t "an unknown flag exits with status 2" '"$MC_BIN/mooncake_http_metadata_server" --bogus >/dev/null 2>&1; [ $? = 2 ]'
t "a bad value exits with status 2" '"$MC_BIN/mooncake_http_metadata_server" --port=99999 >/dev/null 2>&1; [ $? = 2 ]'
t "--help lists every flag with its default" '"$MC_BIN/mooncake_http_metadata_server" --help | grep -q -- "--port=<int>.*(default: 8080)" && "$MC_BIN/mooncake_http_metadata_server" --help | grep -q -- "--log-level"'

# The same protocol, embedded in the master.
E=$(mc_free_port)
mc_start_master --enable_http_metadata_server --http_metadata_server_host=127.0.0.1 \
	--http_metadata_server_port="$E" || { mc_dump_logs; exit 1; }
mc_wait_port "$E" || { mc_dump_logs; exit 1; }
suite "http://127.0.0.1:$E"

# A dead client's entries are deleted with --enable_metadata_cleanup_on_timeout.
E2=$(mc_free_port)
mc_start_master --enable_http_metadata_server --http_metadata_server_host=127.0.0.1 \
	--http_metadata_server_port="$E2" --enable_metadata_cleanup_on_timeout --client_ttl=2 \
	|| { mc_dump_logs; exit 1; }
mc_wait_port "$E2" || { mc_dump_logs; exit 1; }
mc_start_client cl 16MB || { mc_dump_logs; exit 1; }
clpid=$MC_LAST_PID
seg=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/cl.log" | awk '{print $3}')
curl -s -o /dev/null -XPUT --data-binary '{}' "http://127.0.0.1:$E2/metadata?key=mooncake/ram/$seg"
curl -s -o /dev/null -XPUT --data-binary '{}' "http://127.0.0.1:$E2/metadata?key=mooncake/rpc_meta/$seg"
curl -s -o /dev/null -XPUT --data-binary '{}' "http://127.0.0.1:$E2/metadata?key=mooncake/ram/other:1"
kill -KILL $clpid
sleep 4
t "a dead client's ram and rpc_meta entries are deleted" '[ "$(code "http://127.0.0.1:$E2/metadata?key=mooncake/ram/$seg")" = 404 ] && [ "$(code "http://127.0.0.1:$E2/metadata?key=mooncake/rpc_meta/$seg")" = 404 ]'
t "other entries stay" '[ "$(code "http://127.0.0.1:$E2/metadata?key=mooncake/ram/other:1")" = 200 ]'
echo "1..$n"
[ $fail -eq 0 ] || mc_dump_logs
exit $fail
