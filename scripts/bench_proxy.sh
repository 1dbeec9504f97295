#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mooncake_proxy's figures, with upstream's Python proxy measured in the same run:
#   added latency per request (p50/p99 through a proxy minus p50/p99 of the same two requests
#   made directly by the caller) and requests/s, at STREAMS concurrent streamed completions
#   against fake instances (proxy_loadgen serve: one prefill, one decode streaming 8 events).
# Usage: scripts/bench_proxy.sh [BUILD_DIR] [STREAMS] [SECONDS]
#   PYPROXY: the Python that runs upstream's mooncake.vllm_v1_proxy_server (default
#   /work/venv-up/bin/python; empty: skipped); it needs fastapi, uvicorn and httpx.  When that
#   Python cannot import the module, PYPROXY_FILE (the module's file in upstream's wheel) is run
#   as a script with it.
# The unloaded figure (1 stream) is the proxy's cost without queueing; at STREAMS streams the
# latency is mostly waiting for the CPUs (2 here, shared with the load and the fakes).
set -u
B=$(cd "${1:-_build/dev}" && pwd)
STREAMS=${2:-64}
SECS=${3:-5}
PYPROXY=${PYPROXY-/work/venv-up/bin/python}
LG=$B/proxy_loadgen
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; wait 2>/dev/null' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { local i; for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
field() { echo "$1" | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }

PP=$(port); DP=$(port)
"$LG" serve "$PP" "$DP" 8 >/dev/null & pids="$pids $!"
wait_port "$PP" && wait_port "$DP" || { echo "fake instances did not start"; exit 1; }
echo "# $STREAMS streams, ${SECS}s each, fake prefill :$PP and decode :$DP, $(nproc) CPUs"
# Warm up, then the baseline: the caller does prefill then decode itself.
"$LG" load 127.0.0.1:"$DP" "$STREAMS" 1 127.0.0.1:"$PP" >/dev/null
direct=$("$LG" load 127.0.0.1:"$DP" "$STREAMS" "$SECS" 127.0.0.1:"$PP")
echo "direct            $direct"

XP=$(port)
"$B/mooncake_proxy" --host 127.0.0.1 --port "$XP" --prefill 127.0.0.1:"$PP" \
	--decode 127.0.0.1:"$DP" --log-level WARNING & pids="$pids $!"
wait_port "$XP" || { echo "mooncake_proxy did not start"; exit 1; }
"$LG" load 127.0.0.1:"$XP" "$STREAMS" 1 >/dev/null
ours=$("$LG" load 127.0.0.1:"$XP" "$STREAMS" "$SECS")
echo "mooncake_proxy    $ours"
direct1=$("$LG" load 127.0.0.1:"$DP" 1 "$SECS" 127.0.0.1:"$PP")
echo "direct, 1 stream          $direct1"
ours1=$("$LG" load 127.0.0.1:"$XP" 1 "$SECS")
echo "mooncake_proxy, 1 stream  $ours1"
own=$(curl -s "http://127.0.0.1:$XP/metrics" | awk '
	/^mooncake_proxy_added_seconds_bucket\{le="0.0001"\}/ { a = $2 }
	/^mooncake_proxy_added_seconds_bucket\{le="0.00025"\}/ { b = $2 }
	/^mooncake_proxy_added_seconds_count/ { n = $2 }
	END { if (n) printf "%.1f%% of requests <= 0.1 ms, %.1f%% <= 0.25 ms", 100 * a / n, 100 * b / n }')
echo "  proxy's own time per request (mooncake_proxy_added_seconds): $own"

py=""
PYPROXY_FILE=${PYPROXY_FILE:-$(ls /work/venv-up/lib/python3*/site-packages/mooncake/vllm_v1_proxy_server.py 2>/dev/null | head -1)}
pycmd=""
if [ -n "$PYPROXY" ] && "$PYPROXY" -c 'import mooncake.vllm_v1_proxy_server' 2>/dev/null; then
	pycmd="$PYPROXY -m mooncake.vllm_v1_proxy_server"
elif [ -n "$PYPROXY" ] && [ -f "$PYPROXY_FILE" ] && "$PYPROXY" -c 'import fastapi, uvicorn, httpx' 2>/dev/null; then
	pycmd="$PYPROXY $PYPROXY_FILE"
fi
if [ -n "$pycmd" ]; then
	YP=$(port)
	echo "# python proxy: $pycmd"
	$pycmd --host 127.0.0.1 --port "$YP" \
		--prefiller-hosts 127.0.0.1 --prefiller-ports "$PP" --decoder-hosts 127.0.0.1 \
		--decoder-ports "$DP" >/dev/null 2>&1 & pids="$pids $!"
	wait_port "$YP" || sleep 5
	"$LG" load 127.0.0.1:"$YP" "$STREAMS" 1 >/dev/null
	py=$("$LG" load 127.0.0.1:"$YP" "$STREAMS" "$SECS")
	echo "python proxy      $py"
	py1=$("$LG" load 127.0.0.1:"$YP" 1 "$SECS")
	echo "python proxy, 1 stream  $py1"
else
	echo "python proxy      skipped (PYPROXY=$PYPROXY cannot import mooncake.vllm_v1_proxy_server)"
fi

py1=${py1:-}
awk -v d50="$(field "$direct1" p50_us)" -v d99="$(field "$direct1" p99_us)" \
	-v o50="$(field "$ours1" p50_us)" -v o99="$(field "$ours1" p99_us)" \
	-v p50="$(field "$py1" p50_us)" -v p99="$(field "$py1" p99_us)" 'BEGIN {
	printf "1 stream:  mooncake_proxy added p50 %.3f ms, p99 %.3f ms\n", (o50 - d50) / 1000, (o99 - d99) / 1000
	if (p50 > 0)
		printf "1 stream:  python proxy   added p50 %.3f ms, p99 %.3f ms\n", (p50 - d50) / 1000, (p99 - d99) / 1000
}'
awk -v d50="$(field "$direct" p50_us)" -v d99="$(field "$direct" p99_us)" \
	-v o50="$(field "$ours" p50_us)" -v o99="$(field "$ours" p99_us)" -v ors="$(field "$ours" rps)" \
	-v p50="$(field "$py" p50_us)" -v p99="$(field "$py" p99_us)" -v prs="$(field "$py" rps)" 'BEGIN {
	printf "%d streams: ", '"$STREAMS"'
	printf "mooncake_proxy: added p50 %.3f ms, added p99 %.3f ms, %d requests/s\n",
		(o50 - d50) / 1000, (o99 - d99) / 1000, ors
	if (prs > 0) {
		printf "python proxy:   added p50 %.3f ms, added p99 %.3f ms, %d requests/s\n",
			(p50 - d50) / 1000, (p99 - d99) / 1000, prs
		printf "requests/s ratio mooncake_proxy / python proxy: %.1fx\n", ors / prs
	}
}'
