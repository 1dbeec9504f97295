#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Multi-tenancy end to end: tests/integration/test_tenants.py: namespaces, quotas, the admin API,
# per-tenant eviction and a master restart.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_python_package || exit 77
exec python3 "$MC_TOP_SRCDIR/tests/integration/test_tenants.py"
