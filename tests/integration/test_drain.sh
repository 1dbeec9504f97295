#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Drain jobs end to end: tests/integration/test_drain.py drains a segment with memory and SSD
# copies through the HTTP API and mooncake_ctl, then stops it and reads every object back.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_python_package || exit 77
exec python3 "$MC_TOP_SRCDIR/tests/integration/test_drain.py"
