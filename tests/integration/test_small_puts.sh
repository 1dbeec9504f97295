#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Small puts over tcp (MC_FORCE_TCP=1: no same-host shared memory) into one mooncake_client:
# batches of 128 64-byte values, a batch mixing a 1 MiB value with small ones, read back byte
# for byte (small_puts.py).  Once with the writer carrying small batches over its own
# connections (the default), once through the loop's lanes only (MC_TCP_DIRECT=0), once with
# object checksums on.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
rc=0
export MC_FORCE_TCP=1
mc_start_master || { mc_dump_logs; exit 1; }
mc_start_client c1 256MB --protocol=tcp || { mc_dump_logs; exit 1; }
M=127.0.0.1:$MC_MASTER_PORT
PY=$MC_TOP_SRCDIR/tests/integration/small_puts.py
mc_python "$PY" "$M" direct || rc=1
MC_TCP_DIRECT=0 mc_python "$PY" "$M" lanes || rc=1
MOONCAKE_STORE_CHECKSUM=1 mc_python "$PY" "$M" checksum || rc=1
[ $rc = 0 ] || mc_dump_logs
exit $rc
