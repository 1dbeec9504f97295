#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Multi-tenancy together with the SSD and shared-directory tiers:
# tests/integration/test_tenants_tiers.py.
. "${MC_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/integration/lib.sh"
mc_python_package || exit 77
exec python3 "$MC_TOP_SRCDIR/tests/integration/test_tenants_tiers.py"
