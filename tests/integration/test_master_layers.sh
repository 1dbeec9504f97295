#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# No call cycles between the master's modules (files of src/master): each calls only those below
# it, and the disk tiers are reached from the tables through the hooks they set.
: "${MC_TOP_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${MC_TOP_SRCDIR:=$MC_TOP_BUILDDIR}"
lib=$MC_TOP_BUILDDIR/src/master/.libs/libmcmaster.a
command -v nm >/dev/null || { echo "1..0 # SKIP nm not found"; exit 77; }
[ -f "$lib" ] || { echo "1..0 # SKIP $lib not built"; exit 77; }
exec python3 "$MC_TOP_SRCDIR/tests/integration/master_layers.py" "$lib"
