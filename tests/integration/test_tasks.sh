#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Copy and move tasks end to end: tests/integration/test_tasks.py drives real daemons through the
# Python package (create_copy_task, create_move_task, query_task, refusals, a corrupt source,
# a master restart).
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_python_package || exit 77
exec python3 "$MC_TOP_SRCDIR/tests/integration/test_tasks.py"
