#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `pip wheel .` builds the Python package through autotools from a copy of the source tree; the
# wheel holds both extensions and the pure-Python modules, and they import.
S=${MC_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=${PYTHON:-python3}
$PY -m pip --version >/dev/null 2>&1 || { echo "# SKIP: pip not available"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mc-wheel.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir "$T/src"
(cd "$S" && tar cf - --exclude=./_build --exclude=./build --exclude=./.git --exclude='*.o' \
	--exclude='*.lo' --exclude='*.la' --exclude=./.libs --exclude=config.status --exclude=Makefile \
	--exclude=config.h --exclude=libtool --exclude=./pybuild .) | (cd "$T/src" && tar xf -)
unset LD_PRELOAD
if ! (cd "$T/src" && $PY -m pip wheel -q --no-deps . -w "$T/whl" >"$T/pip.log" 2>&1); then
	if grep -qiE "could not find a version|connection|network|Temporary failure" "$T/pip.log"; then
		echo "# SKIP: pip could not fetch its build requirements"; exit 77
	fi
	tail -30 "$T/pip.log" | sed 's/^/# /'
	echo "not ok 1 - pip wheel ."; exit 1
fi
echo "ok 1 - pip wheel . builds"
mkdir "$T/x" && (cd "$T/x" && $PY -m zipfile -e "$T"/whl/*.whl .)
n=1; fail=0
for f in __init__.py store/__init__.py engine.py mooncake_config.py buffer_pool.py async_store.py tensor_io.py store_tensor.py structured_object_store.py; do
	n=$((n + 1)); [ -f "$T/x/mooncake/$f" ] && echo "ok $n - wheel has $f" || { echo "not ok $n - $f missing"; fail=1; }
done
n=$((n + 1))
if (cd / && PYTHONPATH="$T/x" $PY -c "from mooncake.store import MooncakeDistributedStore, ReplicateConfig; from mooncake.engine import TransferEngine; assert MooncakeDistributedStore().health_check() == 1"); then
	echo "ok $n - the wheel's modules import and run"
else
	echo "not ok $n - import from the wheel"; fail=1
fi
echo "1..$n"
exit $fail
