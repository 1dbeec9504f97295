#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The master's admin and metrics HTTP endpoints (/metrics, /health, the key and segment queries,
# /api/v1/remove_all, the Grafana dashboard's metrics) and SIGHUP handling against a live cluster.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
c1pid=$MC_LAST_PID
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
seg=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/c1.log" | awk '{print $3}')
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$MC_BIN/tests/integration/fault_tool" put-preferred adm 20 "$seg" >/dev/null
H=http://127.0.0.1:$MC_METRICS_PORT
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
m=$(curl -sf $H/metrics)
t "/metrics has the capacity gauges" 'echo "$m" | grep -q "^master_total_capacity_bytes 67108864"'
t "/metrics counts the keys" 'echo "$m" | grep -q "^master_key_count 20"'
t "/metrics has per-operation counters" 'echo "$m" | grep -q "^master_put_start_requests_total 20" && echo "$m" | grep -q "^master_put_end_failures_total 0"'
t "/metrics has batch counters" 'echo "$m" | grep -q "^master_batch_put_start_items_total"'
t "/metrics has the value-size histogram" 'echo "$m" | grep -q "master_value_size_bytes_bucket{le=\"4096\"}"'
t "/metrics has per-segment gauges" 'echo "$m" | grep -q "segment_total_capacity_bytes{segment=\"$seg\"} 67108864"'
t "/metrics/summary is the v0.3.9 summary" 'curl -sf $H/metrics/summary | grep -q "^Mem Storage: .* / 64.00 MB .*| Keys: 20 (soft-pinned: 0) | Clients: "'
t "/health is ok" 'curl -sf $H/health | grep -q "\"status\":\"ok\""'
t "/query_key of a stored key" 'curl -sf "$H/query_key?key=adm/3" | grep -q "\"transport_endpoint_\""'
t "/query_key of a missing key is 404 with -704" '[ "$(curl -s -o /dev/null -w %{http_code} "$H/query_key?key=nope")" = 404 ] && curl -s "$H/query_key?key=nope" | grep -q "\-704"'
t "/batch_query_keys mixes hits and misses" 'curl -sf "$H/batch_query_keys?keys=adm/1,nope" | grep -q "\"nope\":{\"ok\":false"'
t "/batch_query_keys without keys is 400" '[ "$(curl -s -o /dev/null -w %{http_code} "$H/batch_query_keys")" = 400 ]'
t "/get_all_keys lists 20 keys" '[ "$(curl -sf $H/get_all_keys | wc -l)" = 20 ]'
t "/get_all_segments lists the segment" '[ "$(curl -sf $H/get_all_segments)" = "$seg" ]'
t "/query_segment reports usage" 'curl -sf "$H/query_segment?segment=$seg" | grep -q "^Capacity(bytes) : 67108864"'
t "/get_segments_detail is JSON with one segment" 'curl -sf $H/get_segments_detail | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"total_segments\"]==1 and d[\"segments\"][0][\"segment_name\"]==\"$seg\""'
t "GET on remove_all is refused" '[ "$(curl -s -o /dev/null -w %{http_code} $H/api/v1/remove_all)" = 405 ]'
t "POST /api/v1/remove_all?force=true removes all" 'curl -sf -XPOST "$H/api/v1/remove_all?force=true" | grep -q "\"removed_count\":20"'
t "unknown path is 404" '[ "$(curl -s -o /dev/null -w %{http_code} $H/nope)" = 404 ]'
kill -HUP "$c1pid"; mc_wait_log c1 "SIGHUP: nothing can change" 5
t "SIGHUP to mooncake_client is logged, not fatal" 'kill -0 "$c1pid" && grep -q "SIGHUP: nothing can change" "$MC_TMP/c1.log"'
P2=$(mc_free_port)
mc_start meta "$MC_BIN/mooncake_http_metadata_server" --port="$P2" --host=127.0.0.1
mc_wait_port "$P2"
kill -HUP "$MC_LAST_PID"; mc_wait_log meta "SIGHUP: nothing to reload" 5
t "SIGHUP to the metadata server is logged, not fatal" 'kill -0 "$MC_LAST_PID" && grep -q "SIGHUP: nothing to reload" "$MC_TMP/meta.log"'
# Requests after the first on a kept-alive connection (as Prometheus and libcurl make them) are
# answered at once: sent under Nagle's algorithm, a multi-segment answer waited 40 ms each time
# for the client's delayed acknowledgement.
KA="$MC_TOP_SRCDIR/tests/integration/keepalive_ms.py"
ka=$(python3 "$KA" "$MC_METRICS_PORT" /metrics)
t "/metrics on a kept-alive connection: median $ka ms (under 20)" 'awk -v v="$ka" "BEGIN { exit !(v != \"\" && v < 20) }"'
ka=$(python3 "$KA" "$P2" "/metadata?key=ka" 65536)
t "the metadata server on a kept-alive connection: median $ka ms (under 20)" 'awk -v v="$ka" "BEGIN { exit !(v != \"\" && v < 20) }"'
# SIGHUP re-reads the configuration file and applies what can change at run time.
echo '{"default_kv_lease_ttl": 10000, "eviction_high_watermark_ratio": 0.9}' >"$MC_TMP/master.json"
mc_start_master --config_path="$MC_TMP/master.json" || { mc_dump_logs; exit 1; }
echo '{"default_kv_lease_ttl": "300ms", "eviction_high_watermark_ratio": 0.8}' >"$MC_TMP/master.json"
kill -HUP "$MC_MASTER_PID"; mc_wait_log master "configuration reloaded" 5
t "SIGHUP reloads lease and watermark from the file" 'grep -q "configuration reloaded (lease 300 ms, high watermark 0.80" "$MC_TMP/master.log"'
echo '{"default_kv_lease_ttl": "soon"}' >"$MC_TMP/master.json"
kill -HUP "$MC_MASTER_PID"; mc_wait_log master "configuration invalid" 5
t "an invalid file on SIGHUP keeps the running configuration" 'grep -q "configuration invalid, keeping the running one" "$MC_TMP/master.log" && kill -0 "$MC_MASTER_PID"'
t "--check_config refuses an invalid file with status 2" '"$MC_BIN/mooncake_master" --config_path="$MC_TMP/master.json" --check_config 2>/dev/null; [ $? = 2 ]'
# Every metric the Grafana dashboard queries exists on /metrics.
for name in $(grep -oE '(master|valid|total)_[a-z_]+' "${MC_TOP_SRCDIR}/etc/grafana-mooncake.json" | sed 's/_bucket$//' | sort -u); do
	case $name in master_.*_requests_total|master_.*_failures_total) continue ;; esac
	t "dashboard metric $name is exported" 'echo "$m" | grep -q "^$name"'
done
echo "1..$n"
[ $fail -eq 0 ] || mc_dump_logs
exit $fail
