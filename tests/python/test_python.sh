#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Python package's tests (pytest) against real daemons.  Skips (77) when the package was not
# built (no Python headers) or pytest is missing.
B=${MC_TOP_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
S=${MC_TOP_SRCDIR:-$B}
PY=${PYTHON:-python3}
[ -f "$B/pybuild/mooncake/_store.so" ] || { echo "# SKIP: Python package not built (no Python headers)"; exit 77; }
$PY -c "import pytest" 2>/dev/null || { echo "# SKIP: pytest is not installed"; exit 77; }
export PYTHONPATH="$B/pybuild${PYTHONPATH:+:$PYTHONPATH}"
export MC_TOP_BUILDDIR="$B"
# A sanitizer build's extension needs the sanitizer runtimes loaded into python first.
if nm -D "$B/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
	export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
fi
# MC_TEST_KEEP=1: the cluster's temporary directory is kept; -s lets its path be printed.
keep=
[ "${MC_TEST_KEEP:-0}" = 1 ] && keep=-s
exec $PY -m pytest -q $keep -p no:cacheprovider "$S/tests/python"
