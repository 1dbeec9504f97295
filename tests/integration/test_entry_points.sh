#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Upstream's entry points (python -m mooncake.http_metadata_server, mc_store_rest_server,
# transfer_engine_topology_dump, the cli modules) against real daemons:
# tests/integration/test_entry_points.py.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_python_package || exit 77
exec python3 "$MC_TOP_SRCDIR/tests/integration/test_entry_points.py"
