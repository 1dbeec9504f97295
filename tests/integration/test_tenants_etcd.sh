#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The etcd tenant quota connector (--tenant_quota_connector_type=etcd) against a real etcd: the
# master reads upstream's key mooncake-store/<cluster_id>/tenant_quota_policy at start (a
# missing key is an empty policy), writes every change made through /api/v1/tenant_quotas back
# to it (answered once etcd has it, undone when etcd does not take it), and a restart finds
# them there; a value that is not a policy, an etcd that does not answer and a cluster id that
# cannot be a key stop the start with the reason.  With HA, a standby that becomes the leader
# reads the key again: it serves the policies the former leader wrote after it started.
. "$MC_TOP_SRCDIR/tests/integration/lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/etcd_lib.sh"
. "$MC_TOP_SRCDIR/tests/integration/ha_lib.sh"
etcd_require
rc=0

etcd_start 1 || { mc_dump_logs; exit 1; }
KEY=mooncake-store/tq1/tenant_quota_policy
etcdctl_ put "$KEY" "$(printf 'version: 1\ntenants:\n  - name: tenant-a\n    quota: 8MB\n')" >/dev/null ||
	{ echo "not ok - etcdctl put"; exit 1; }
ETC=(--enable_multi_tenants --tenant_quota_connector_type=etcd
     "--tenant_quota_connector_uri=$ETCD_EPS" --cluster_id=tq1)

# field JSON PATH...: a field of a JSON document ("" when absent).
field() {
	python3 -c 'import json, sys
d = json.loads(sys.argv[1])
for k in sys.argv[2:]:
    d = d[int(k)] if isinstance(d, list) else d.get(k) if isinstance(d, dict) else None
print("" if d is None else json.dumps(d) if isinstance(d, (dict, list, bool)) else d)' "$@" 2>/dev/null
}
api() {	# api METHOD QUERY [BODY]: "STATUS BODY" of /api/v1/tenant_quotas?QUERY
	curl -s -o "$MC_TMP/body" -w '%{http_code}' -X "$1" ${3:+-H 'Content-Type: application/json' -d "$3"} \
		"http://127.0.0.1:$MC_METRICS_PORT/api/v1/tenant_quotas${2:+?$2}"
	echo " $(cat "$MC_TMP/body")"
}

mc_start_master "${ETC[@]}" || { mc_dump_logs; exit 1; }
out=$(api GET tenant_id=tenant-a)
mc_is "${out%% *} $(field "${out#* }" data requested_quota_bytes)" "200 8388608" \
	"the policy in etcd is loaded at start: tenant-a has 8 MiB" || rc=1
out=$(api PUT tenant_id=tenant-b '{"requested_quota_bytes":4096}')
mc_is "${out%% *} $(field "${out#* }" data requested_quota_bytes)" "200 4096" \
	"PUT of a policy for tenant-b" || rc=1
v=$(etcdctl_ get --print-value-only "$KEY")
echo "$v" | grep -q '^  - name: "tenant-b"$' && echo "$v" | grep -q '^    quota: 4096$' &&
	echo "ok - etcd's key holds it" || { echo "not ok - etcd's key: $v"; rc=1; }
out=$(api DELETE tenant_id=tenant-a)
mc_is "${out%% *}" 200 "DELETE of tenant-a's policy" || rc=1
v=$(etcdctl_ get --print-value-only "$KEY")
echo "$v" | grep -q tenant-a && { echo "not ok - tenant-a still in etcd: $v"; rc=1; } ||
	echo "ok - and etcd's key no longer has it"

kill "$MC_MASTER_PID"
mc_wait_gone "$MC_MASTER_PID" || rc=1
mc_start_master "${ETC[@]}" || { mc_dump_logs; exit 1; }
out=$(api GET tenant_id=tenant-b)
mc_is "${out%% *} $(field "${out#* }" data requested_quota_bytes)" "200 4096" \
	"after a restart tenant-b's policy comes from etcd" || rc=1
mc_is "$(api GET tenant_id=tenant-a | cut -d' ' -f1)" 404 "and tenant-a has none" || rc=1

# etcd does not take a change: it is refused and undone.
etcd_kill 1
out=$(api PUT tenant_id=tenant-c '{"requested_quota_bytes":8192}')
mc_is "${out%% *} $(field "${out#* }" success)" "500 false" \
	"with etcd down a PUT fails (after the connector's timeout)" || rc=1
mc_is "$(api GET tenant_id=tenant-c | cut -d' ' -f1)" 404 "and is undone" || rc=1
kill "$MC_MASTER_PID"
mc_wait_gone "$MC_MASTER_PID" || rc=1

# Nothing answers at start: the master does not start, and says why.
"$MC_BIN/mooncake_master" --rpc_port="$(mc_free_port)" --metrics_port="$(mc_free_port)" \
	"${ETC[@]}" >"$MC_TMP/down.log" 2>&1
[ $? -ne 0 ] && grep -q "failed to load tenant quota policy from etcd key '$KEY': no endpoint answered" \
	"$MC_TMP/down.log" && echo "ok - an etcd that does not answer stops the start" ||
	{ echo "not ok - etcd down at start:"; tail -3 "$MC_TMP/down.log"; rc=1; }
etcd_restart 1
mc_wait_until 30 "etcd back" etcdctl_ endpoint health || rc=1

# A missing key is an empty policy; a value that is not one stops the start.
mc_start_master --enable_multi_tenants --tenant_quota_connector_type=etcd \
	"--tenant_quota_connector_uri=$ETCD_EPS" --cluster_id=tq2 || { mc_dump_logs; exit 1; }
out=$(api GET "")
mc_is "$out" '200 {"success":true,"data":[]}' "no key in etcd: an empty policy" || rc=1
out=$(api PUT tenant_id=tenant-z '{"requested_quota_bytes":1024}')
mc_is "${out%% *}" 200 "the first policy is created through the admin API" || rc=1
mc_is "$(etcdctl_ get --print-value-only mooncake-store/tq2/tenant_quota_policy | grep -c tenant-z)" \
	1 "and lands in the key" || rc=1
kill "$MC_MASTER_PID"
mc_wait_gone "$MC_MASTER_PID" || rc=1
etcdctl_ put mooncake-store/tq3/tenant_quota_policy 'version: 2' >/dev/null
"$MC_BIN/mooncake_master" --rpc_port="$(mc_free_port)" --metrics_port="$(mc_free_port)" \
	--enable_multi_tenants --tenant_quota_connector_type=etcd \
	"--tenant_quota_connector_uri=$ETCD_EPS" --cluster_id=tq3 >"$MC_TMP/bad.log" 2>&1
[ $? -ne 0 ] && grep -q "tenant quota policy in etcd key 'mooncake-store/tq3/tenant_quota_policy'" \
	"$MC_TMP/bad.log" && echo "ok - a value that is not a policy stops the start" ||
	{ echo "not ok - a bad policy in etcd:"; tail -3 "$MC_TMP/bad.log"; rc=1; }
"$MC_BIN/mooncake_master" --check_config --enable_multi_tenants \
	--tenant_quota_connector_type=etcd --tenant_quota_connector_uri=127.0.0.1:1 \
	--cluster_id='a/b' >"$MC_TMP/id.log" 2>&1
[ $? -ne 0 ] && grep -q "invalid tenant quota etcd cluster_id 'a/b'" "$MC_TMP/id.log" &&
	echo "ok - a cluster id that cannot be a key is refused" ||
	{ echo "not ok - cluster id a/b:"; tail -3 "$MC_TMP/id.log"; rc=1; }
"$MC_BIN/mooncake_master" --check_config --enable_multi_tenants \
	--tenant_quota_connector_type=etcd >"$MC_TMP/uri.log" 2>&1
[ $? -ne 0 ] && grep -q "needs the etcd endpoints in --tenant_quota_connector_uri" "$MC_TMP/uri.log" &&
	echo "ok - the etcd connector without endpoints is refused" ||
	{ echo "not ok - no endpoints:"; tail -3 "$MC_TMP/uri.log"; rc=1; }

# HA: two masters; the leader takes a policy, dies; the other one, elected, serves it.
HA_FLAGS="--enable_multi_tenants --tenant_quota_connector_type=etcd --tenant_quota_connector_uri=$ETCD_EPS"
ha_start_master 1 || { mc_dump_logs; exit 1; }
ha_start_master 2 || { mc_dump_logs; exit 1; }
L=$(ha_wait_leader 20) || { mc_dump_logs; exit 1; }
S=$((3 - L))
MC_METRICS_PORT=${HA_METRICS[$L]}
out=$(api PUT tenant_id=tenant-h '{"requested_quota_bytes":2048}')
mc_is "${out%% *}" 200 "the HA leader takes a policy for tenant-h" || rc=1
ha_kill "$L"
N=$(ha_wait_leader 30 "$L") || { mc_dump_logs; exit 1; }
mc_is "$N" "$S" "the standby is elected" || rc=1
MC_METRICS_PORT=${HA_METRICS[$S]}
has_h() { [ "$(api GET tenant_id=tenant-h | cut -d' ' -f1)" = 200 ]; }
mc_wait_until 10 "tenant-h's policy at the new leader" has_h &&
	echo "ok - the new leader read the policy again from etcd" ||
	{ echo "not ok - the new leader has no policy for tenant-h: $(api GET tenant_id=tenant-h)"; rc=1; }
[ $rc = 0 ] || mc_dump_logs
exit $rc
