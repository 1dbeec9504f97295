#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# CRC-64 on arm64: test_crc64 built for aarch64 with the cross compiler and run under qemu's
# user-mode emulator, on CPU models with PMULL (the carry-less folding path) and checked there
# against the byte-at-a-time and slicing loops, exactly as on this machine.  Skips (77) where
# the cross compiler, its C library or qemu-aarch64 is missing (scripts/deps.sh installs them).
: "${MC_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
cc=aarch64-linux-gnu-gcc
command -v "$cc" >/dev/null 2>&1 || { echo "# SKIP: $cc not installed (gcc-aarch64-linux-gnu)"; exit 77; }
command -v qemu-aarch64 >/dev/null 2>&1 || { echo "# SKIP: qemu-aarch64 not installed (qemu-user)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-crc-arm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A cross compiler without its C library's headers (installed without the packages it
# recommends) builds nothing: that is the toolchain, not this code.
printf '#include <stdlib.h>\n#include <pthread.h>\nint main(void) { return 0; }\n' >"$tmp/probe.c"
"$cc" -static "$tmp/probe.c" -o "$tmp/probe" -lpthread >/dev/null 2>&1 ||
	{ echo "# SKIP: $cc cannot build a C program here (libc6-dev-arm64-cross)"; exit 77; }
"$cc" -O2 -static -Wall -Wextra -Werror -I"$MC_TOP_SRCDIR/src" -I"$MC_TOP_SRCDIR/tests/unit" \
	"$MC_TOP_SRCDIR/src/common/crc64.c" "$MC_TOP_SRCDIR/tests/unit/test_crc64.c" \
	-o "$tmp/test_crc64" -lpthread || { echo "not ok - cross build of test_crc64 for aarch64"; exit 1; }
rc=0
for cpu in cortex-a53 max; do
	echo "# qemu-aarch64 -cpu $cpu"
	out=$(qemu-aarch64 -cpu "$cpu" "$tmp/test_crc64" 2>&1)
	st=$?
	echo "$out" | sed 's/^/  /'
	if [ $st -ne 0 ] || echo "$out" | grep -q '^not ok'; then
		echo "not ok - test_crc64 on $cpu (exit $st)"; rc=1
	elif ! echo "$out" | grep -q 'implementation on this CPU: pmull'; then
		echo "not ok - $cpu has PMULL but the carry-less path was not chosen"; rc=1
	else
		echo "ok - test_crc64 on $cpu: every path agrees, PMULL chosen"
	fi
done
exit $rc
