#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bad input at start-up: every flag of every daemon and tool, the environment variables and the
# configuration files, from the table in bad_flags.tsv.  A bad value must end the program with
# status 2 and exactly one line on stderr naming the flag (variable, key) and the value; the same
# flag with a good value must pass the program's check-only flag (--check_config).  The test also
# checks that the table covers every flag each program's --help lists.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"

TABLE=$MC_TOP_SRCDIR/tests/integration/bad_flags.tsv
n=0
failed=0

ok() {	# ok COND_STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}

# Good configuration files the rows refer to.
cat >"$MC_TMP/mooncake_good.json" <<JSON
{"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
 "master_server_address": "127.0.0.1:50051", "protocol": "tcp", "global_segment_size": "1GB"}
JSON
echo '{"rpc_port": 5000, "eviction_ratio": 0.1}' >"$MC_TMP/master_good.json"
echo '{"cuda": [["mlx5_0"], []]}' >"$MC_TMP/matrix.json"
cat >"$MC_TMP/model.json" <<JSON
{"num_hidden_layers": 2, "num_key_value_heads": 2, "hidden_size": 64,
 "num_attention_heads": 4, "torch_dtype": "float16"}
JSON
echo '{"retained_tokens": 10}' >"$MC_TMP/tokens.jsonl"
echo '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}' \
	>"$MC_TMP/trace.jsonl"

# run OUT ERR [ENV=VALUE ...] -- PROGRAM ARGS...: run with a clean MOONCAKE_*/MC_* environment.
run() {
	local out=$1 err=$2; shift 2
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	local prog=$1; shift
	# The metadata service's default address is not a loopback one: allowed without a token
	# here, so the rows check the flags alone (test_http_metadata.sh checks the refusal).
	env -u MOONCAKE_CONFIG_PATH -u MOONCAKE_MASTER -u MC_LOG_LEVEL \
		-u MC_METADATA_HTTP_TOKEN MC_METADATA_HTTP_ALLOW_INSECURE=1 "${envs[@]}" \
		timeout 20 "$MC_BIN/$prog" "$@" >"$out" 2>"$err"
}

# expect_bad DESCRIPTION NAME SHOWN [ENV...] -- PROGRAM ARGS...
expect_bad() {
	local what=$1 name=$2 shown=$3 rc lines; shift 3
	run "$MC_TMP/out" "$MC_TMP/err" "$@"
	rc=$?
	lines=$(wc -l <"$MC_TMP/err")
	if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$name" "$MC_TMP/err" &&
		grep -qF -- "$shown" "$MC_TMP/err"; then
		ok 0 "$what: status 2, one line: $(cat "$MC_TMP/err")"
	else
		ok 1 "$what: status $rc, $lines lines on stderr (want 2, 1 naming '$name' and '$shown')"
		sed 's/^/#   /' "$MC_TMP/err"
	fi
}

# expect_good DESCRIPTION WANT [ENV...] -- PROGRAM ARGS...  (WANT: 0, or !2 for "not a usage error")
expect_good() {
	local what=$1 want=$2 rc; shift 2
	run "$MC_TMP/out" "$MC_TMP/err" "$@"
	rc=$?
	if { [ "$want" = '!2' ] && [ $rc -ne 2 ]; } || [ "$want" = "$rc" ]; then
		ok 0 "$what: status $rc"
	else
		ok 1 "$what: status $rc (want $want)"
		sed 's/^/#   /' "$MC_TMP/err"
	fi
}

sub() { printf '%b' "${1//@TMP@/$MC_TMP}"; }

# The argument vector of mooncake_ctl for one of its flags set to value.
ctl_args() {
	local name=$1 value=$2
	case $name in
	master | json) echo "--$name=$value"; echo status ;;
	model-config) echo capacity; echo "--$name=$value" ;;
	*) echo capacity; echo "--model-config=$MC_TMP/model.json"; echo "--$name=$value" ;;
	esac
}

while IFS=$'\t' read -r kind prog name bad good shown override; do
	case $kind in '' | '#'*) continue ;; esac
	bad=$(sub "$bad")
	good=$(sub "$good")
	[ -n "$shown" ] || shown=$bad
	case $kind in
	flag)
		expect_bad "$prog --$name=<bad>" "--$name" "$shown" -- "$prog" "--$name=$bad" --check_config
		expect_good "$prog --$name=$good" 0 -- "$prog" "--$name=$good" --check_config
		;;
	ctl)
		mapfile -t args < <(ctl_args "$name" "$bad")
		expect_bad "$prog --$name=<bad>" "--$name" "$shown" -- "$prog" "${args[@]}"
		if [ "$good" = - ]; then
			mapfile -t args < <(ctl_args "$name" x)
			args=("${args[@]/--$name=x/--$name}")
		else
			mapfile -t args < <(ctl_args "$name" "$good")
		fi
		expect_good "$prog --$name=$good" '!2' -- "$prog" "${args[@]}"
		;;
	env)
		expect_bad "$name=<bad> $prog" "$name" "$shown" "$name=$bad" -- "$prog" --check_config
		expect_good "$name=$good $prog" 0 "$name=$good" -- "$prog" --check_config
		;;
	json)
		if [ "$prog" = mooncake_client ]; then
			base=$MC_TMP/mooncake_good.json flag=--config
		else
			base=$MC_TMP/master_good.json flag=--config_path
		fi
		for v in bad good; do
			python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(d, open(sys.argv[4], "w"))' "$base" "$name" "${!v}" "$MC_TMP/$v.json"
		done
		expect_bad "$prog: '$name' in a config file" "'$name'" "$shown" -- \
			"$prog" "$flag=$MC_TMP/bad.json" --check_config
		if [ -n "$override" ]; then
			expect_bad "$prog: '$name' in a config file, overridden by $override" "'$name'" \
				"$shown" -- "$prog" "$flag=$MC_TMP/bad.json" "$override" --check_config
		fi
		expect_good "$prog: '$name'=$good in a config file" 0 -- \
			"$prog" "$flag=$MC_TMP/good.json" --check_config
		;;
	*) ok 1 "unknown row kind '$kind' in $TABLE" ;;
	esac
done <"$TABLE"

# Every flag --help lists has a row.
for prog in mooncake_master mooncake_client mooncake_http_metadata_server transfer_engine_bench \
	mooncake_bench; do
	missing=""
	for f in $("$MC_BIN/$prog" --help | sed -n 's/^  --\([A-Za-z0-9_-]*\)=.*/\1/p'); do
		awk -F'\t' -v p="$prog" -v f="$f" '$1 == "flag" && $2 == p && $3 == f { found = 1 }
			END { exit !found }' "$TABLE" || missing="$missing $f"
	done
	[ -z "$missing" ]
	ok $? "every flag of $prog --help has a row in bad_flags.tsv${missing:+ (missing:$missing)}"
done
missing=""
for f in $("$MC_BIN/mooncake_ctl" --help capacity 2>/dev/null |
	grep -o -- '--[a-z][a-z-]*' | sort -u; "$MC_BIN/mooncake_ctl" capacity --help |
	grep -o -- '--[a-z][a-z-]*' | sort -u); do
	f=${f#--}
	case $f in help | version) continue ;; esac
	awk -F'\t' -v f="$f" '$1 == "ctl" && $3 == f { found = 1 } END { exit !found }' \
		"$TABLE" || missing="$missing $f"
done
[ -z "$missing" ]
ok $? "every flag of mooncake_ctl has a row in bad_flags.tsv${missing:+ (missing:$missing)}"

echo "1..$n"
exit $failed
