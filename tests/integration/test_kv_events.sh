#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# KV events over ZeroMQ: tests/integration/test_kv_events.py subscribes to a master started with
# --enable_kv_events and checks upstream's message format, removals, /kv_events/status and the
# bounded queue.  Needs a master built with libzmq and a python3 with pyzmq and msgpack
# (Debian's python3-zmq and python3-msgpack).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
grep -q '^#define HAVE_ZMQ 1' "$MC_TOP_BUILDDIR/config.h" ||
	{ echo "# SKIP: built without libzmq"; exit 77; }
PY=
for p in python3 /usr/bin/python3; do
	"$p" -c "import zmq, msgpack" 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "# SKIP: no python3 with zmq and msgpack (python3-zmq, python3-msgpack)"; exit 77; }
port=$(mc_free_port)
mc_start_master --enable_kv_events --kv_events_bind_endpoint="tcp://127.0.0.1:$port" \
	--kv_events_backend_id=test-backend --kv_events_model_name=m1 --kv_events_block_size=16 \
	--kv_events_queue_capacity=100 || { mc_dump_logs; exit 1; }
mc_start_client c1 64MB || { mc_dump_logs; exit 1; }
mc_wait_mounted c1 || { mc_dump_logs; exit 1; }
PYTHONPATH="$MC_TOP_SRCDIR/tests/integration" "$PY" "$MC_TOP_SRCDIR/tests/integration/test_kv_events.py" \
	"127.0.0.1:$MC_MASTER_PORT" "127.0.0.1:$MC_METRICS_PORT" "tcp://127.0.0.1:$port"
rc=$?
[ $rc -eq 0 ] || mc_dump_logs
exit $rc
