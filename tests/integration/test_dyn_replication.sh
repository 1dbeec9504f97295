#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Dynamic MEMORY replication of hot keys (--dynamic_replication_mode) against real daemons:
# tests/integration/test_dyn_replication.py.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_python_package || exit 77
exec python3 "$MC_TOP_SRCDIR/tests/integration/test_dyn_replication.py"
