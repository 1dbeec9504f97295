#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Upstream's conf/master.json and conf/master.yaml (copied as conf/upstream_master.*) load with
# --config_path: --check_config accepts them, a master runs from each (with the ports given on the
# command line winning over the file's), the file's values take effect, and the glog flags
# (--log_dir, --logtostderr, --minloglevel) do what they say.  Their HA keys (enable_oplog,
# etcd_endpoints as an http:// URL, oplog_poll_interval_ms, batch_oplog_retry_timeout_sec) are
# taken as they are.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
M=$MC_BIN/mooncake_master
conf=$MC_TOP_SRCDIR/tests/integration/conf
cp "$conf/upstream_master.yaml" "$MC_TMP/master.yaml"
cp "$conf/upstream_master.json" "$MC_TMP/master.json"
t "upstream's conf/master.json passes --check_config" '"$M" --config_path="$MC_TMP/master.json" --check_config'
if "$M" --config_path="$MC_TMP/master.yaml" --check_config 2>"$MC_TMP/yaml.err" ||
	! grep -q "found no libyaml" "$MC_TMP/yaml.err"; then
	t "upstream's conf/master.yaml passes --check_config" '"$M" --config_path="$MC_TMP/master.yaml" --check_config'
	yaml=1
	t "the sample etc/master.yaml passes --check_config" '"$M" --config_path="$MC_TOP_SRCDIR/etc/master.yaml" --check_config'
else
	echo "# SKIP: this build has no libyaml: $(cat "$MC_TMP/yaml.err")"
	t "without libyaml a YAML file is refused naming libyaml" 'grep -q "libyaml-dev" "$MC_TMP/yaml.err"'
	yaml=
fi
t "an unknown key in a YAML or JSON file is refused with status 2" \
	'printf "{\"no_such_key\": 1}" >"$MC_TMP/bad.json"; "$M" --config_path="$MC_TMP/bad.json" --check_config 2>"$MC_TMP/bad.err"; [ $? = 2 ] && grep -q "unknown key .no_such_key." "$MC_TMP/bad.err"'
for f in json ${yaml:+yaml}; do
	mkdir -p "$MC_TMP/logs.$f"
	mc_start_master --config_path="$MC_TMP/master.$f" --log_dir="$MC_TMP/logs.$f" ||
		{ mc_dump_logs; exit 1; }
	t "a master runs from master.$f, on the ports given on the command line" \
		'curl -sf http://127.0.0.1:$MC_METRICS_PORT/health | grep -q ok'
	# rpc_thread_num: 16 in upstream's file; the master says what it makes of it.
	t "master.$f's values are in effect (rpc_thread_num)" \
		'grep -q -- "--rpc_thread_num ignored" "$MC_TMP/logs.$f/mooncake_master.log"'
	t "--log_dir: the log is in <log_dir>/mooncake_master.log" \
		'grep -q "listening for RPC on 127.0.0.1:$MC_MASTER_PORT" "$MC_TMP/logs.$f/mooncake_master.log"'
	kill "$MC_MASTER_PID"; wait "$MC_MASTER_PID" 2>/dev/null
done
t "--log_dir naming no directory is refused" \
	'"$M" --log_dir="$MC_TMP/none" --check_config 2>&1 | grep -q "invalid value .* for --log_dir"'
t "--logtostderr and --minloglevel=1: notices are not logged" \
	'p=$(mc_free_port); timeout -s INT 2 "$M" --rpc_address=127.0.0.1 --rpc_port=$p --metrics_port=$(mc_free_port) --logtostderr --minloglevel=1 >"$MC_TMP/q.log" 2>&1; ! grep -q "listening for RPC" "$MC_TMP/q.log"'
t "--logtostderr: notices go to stderr" \
	'p=$(mc_free_port); timeout -s INT 2 "$M" --rpc_address=127.0.0.1 --rpc_port=$p --metrics_port=$(mc_free_port) --logtostderr 2>"$MC_TMP/e.log" >/dev/null; grep -q "listening for RPC" "$MC_TMP/e.log"'
echo "1..$n"
[ $fail -eq 0 ] || mc_dump_logs
exit $fail
