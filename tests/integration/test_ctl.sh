#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mooncake_ctl against a live cluster: every command, JSON and tables, and the capacity analysis
# on the Qwen2-7B example (57,344 KV bytes per token).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
CTL="$MC_BIN/mooncake_ctl"
[ -x "$CTL" ] || { echo "# SKIP: mooncake_ctl not built"; exit 77; }
mc_start_master --enable_metric_reporting || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
seg=$(grep -o 'serving segment 127.0.0.1:[0-9]*' "$MC_TMP/c1.log" | awk '{print $3}')
export MC_MASTER=127.0.0.1:$MC_MASTER_PORT
"$MC_BIN/tests/integration/fault_tool" put-preferred ctl 10 "$seg" >/dev/null
C="$CTL --master=127.0.0.1:$MC_METRICS_PORT"
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
t "status shows capacity, keys and clients" '$C status | grep -q "keys:      10" && $C status | grep -q "of 64.00 MiB"'
t "status --json" '$C --json status | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"keys\"]==10 and d[\"capacity_bytes\"]==67108864"'
t "segments lists the segment" '$C segments | grep -q "^$seg "'
t "keys lists all keys" '[ "$($C keys | wc -l)" = 10 ]'
t "keys with a pattern" '[ "$($C keys "ctl/[0-4]$" | wc -l)" = 5 ]'
t "get-info shows where a key lives" '$C get-info ctl/3 | grep -q "127.0.0.1:"'
t "get-info of a missing key fails with status 1" '$C get-info nope 2>/dev/null; [ $? = 1 ]'
t "metrics prints Prometheus text" '$C metrics | grep -q "^master_key_count 10"'
"$MC_BIN/tests/integration/fault_tool" check ctl 10 ok >/dev/null	# reads lease every key
t "remove of a leased key is refused with OBJECT_HAS_LEASE" 'out=$($C remove ctl/2 2>&1); [ $? = 1 ] && echo "$out" | grep -q OBJECT_HAS_LEASE'
t "remove --force removes" '$C remove --force ctl/2 | grep -q "removed ctl/2" && [ "$($C keys | wc -l)" = 9 ]'
t "remove of a missing key fails" '! $C remove --force ctl/2 >/dev/null 2>&1'
# Capacity: the seed's Qwen2-7B example.
cat >"$MC_TMP/config.json" <<'J'
{"hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
 "num_hidden_layers": 28, "torch_dtype": "float16"}
J
t "capacity computes 57344 bytes per token for Qwen2-7B" '$C --json capacity --model-config "$MC_TMP/config.json" | grep -q "\"kv_bytes_per_token\": 57344"'
"$MC_BIN/mooncake_bench" --master_server_address=$MC_MASTER --value_size=1MB --total_bytes=40MB \
	--duration=5 --operation=put --keep >/dev/null
used=$($C --json status | python3 -c "import json,sys; print(json.load(sys.stdin)[\"used_bytes\"])")
tok=$((used / 57344))
t "usage explained by the tokens is expected" '$C capacity --model-config "$MC_TMP/config.json" --tokens $tok | grep -q "verdict: expected"'
t "usage three times the tokens is unexpected saturation" '$C capacity --model-config "$MC_TMP/config.json" --tokens $((tok / 3)) | grep -q "verdict: unexpected saturation"'
printf '{"event": "token_retention", "retained_tokens": %d}\n{"event": "token_retention", "retained_tokens": %d}\n' $((tok / 2)) $((tok - tok / 2)) >"$MC_TMP/tokens.log"
t "a token log is summed" '$C --json capacity --model-config "$MC_TMP/config.json" --token-log "$MC_TMP/tokens.log" | grep -q "\"retained_tokens\": $tok"'
echo "2026-11-22 12:00:00 I mooncake_master: Master Metrics: Mem Storage: 6.70 MB / 4.00 GB (0.2%) | Keys: 1" >"$MC_TMP/m.log"
t "usage can come from a master log (120 tokens = 6.7 MB)" '$C capacity --model-config "$MC_TMP/config.json" --tokens 120 --master-log "$MC_TMP/m.log" | grep -q "verdict: expected"'
t "remove-all --force" '$C remove-all --force | grep -q "removed 49 objects"'
t "an unreachable master fails with status 1" '$CTL --master=127.0.0.1:1 status 2>/dev/null; [ $? = 1 ]'
t "bad usage exits 2" '$CTL bogus 2>/dev/null; [ $? = 2 ]'
echo "1..$n"
[ $fail -eq 0 ] || mc_dump_logs
exit $fail
