#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Object-table benchmark (not a test): tests/bench_objtable drives the master's object table
# directly to N objects with 40-byte keys and one 64-byte replica each, and prints insert and
# lookup rates per tenth of the run and resident bytes per object.  Built twice: from this tree
# (_build/opt, -O2, made here if missing) and with the object table, object index, segment
# allocator and bench of git revision REF (default main) in _build/objtable-base, linked with
# this tree's common library.  The two runs alternate, ROUNDS times (default 1), so both see the
# same machine load.
# Usage: scripts/bench-objtable.sh [REF] [bench_objtable options, e.g. --objects 100000000]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-main}
[ $# -gt 0 ] && shift
opt=$top/_build/opt
base=$top/_build/objtable-base
if [ ! -f "$opt/Makefile" ]; then
	mkdir -p "$opt"
	(cd "$opt" && "$top/configure" -q CFLAGS="-O2 -g")
fi
make -C "$opt" -s tests/bench_objtable src/segment/libmcsegment.la src/common/libmccommon.la
mkdir -p "$base/src/master" "$base/src/segment" "$base/tests"
for f in src/master/object_table.c src/master/object_table.h src/master/object_index.c \
	src/master/object_index.h src/master/prefault.c src/master/prefault.h src/segment/alloc.c \
	src/segment/alloc.h tests/bench_objtable.c; do
	git -C "$top" show "$ref:$f" > "$base/$f" 2>/dev/null || cp "$top/$f" "$base/$f"
done
# REF's headers come first on the include path, so master.h sees REF's structs.
${CC:-cc} -O2 -g -include "$opt/config.h" -I"$base/src" -I"$top/src" -I"$top/include" -I"$opt" \
	$(pkg-config --cflags libevent 2>/dev/null) -o "$base/bench_objtable" \
	"$base/tests/bench_objtable.c" "$base/src/master/object_table.c" \
	"$base/src/master/object_index.c" "$base/src/master/prefault.c" "$base/src/segment/alloc.c" \
	"$opt/src/common/.libs/libmccommon.a" -lpthread
for r in $(seq "${ROUNDS:-1}"); do
	echo "=== round $r: object table of $ref"
	"$base/bench_objtable" "$@"
	echo "=== round $r: object table of this tree"
	"$opt/tests/bench_objtable" "$@"
done
