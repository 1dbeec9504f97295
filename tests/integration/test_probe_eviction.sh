#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Lookups that do not read, against eviction (probe_eviction.py): with batch_is_exist's leases
# on every cold object eviction frees the new ones, with batch_probe_key the cold ones.  Prints
# the figures.  Skips (77) without the Python package.
B=${MC_TOP_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
S=${MC_TOP_SRCDIR:-$B}
[ -f "$B/pybuild/mooncake/_store.so" ] || { echo "# SKIP: Python package not built"; exit 77; }
python3 -c "import pytest" 2>/dev/null || { echo "# SKIP: pytest is not installed"; exit 77; }
export PYTHONPATH="$B/pybuild${PYTHONPATH:+:$PYTHONPATH}"
if nm -D "$B/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
	export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
fi
exec python3 "$S/tests/integration/probe_eviction.py" "$B" --check
