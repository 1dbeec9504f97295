#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make install into a DESTDIR: every file lands, units carry the installed paths, the installed
# daemons run, a program builds against the installed header and pkg-config file, and the units
# pass systemd-analyze verify where systemd is available.
B=${MC_TOP_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$(mktemp -d "${TMPDIR:-/tmp}/mc-install.XXXXXX")
trap 'rm -rf "$D"' EXIT
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
prefix=$(sed -n 's/^prefix = //p' "$B/Makefile")
unitdir=$(sed -n 's/^systemdsystemunitdir = //p' "$B/Makefile")
unitdir=${unitdir//\$\{prefix\}/$prefix}
t "make install DESTDIR succeeds" 'make -C "$B" install DESTDIR="$D" >"$D.log" 2>&1 || { tail -20 "$D.log"; false; }'
R=$D$prefix
for f in sbin/mooncake_master sbin/mooncake_http_metadata_server bin/mooncake_client \
	bin/mooncake_bench include/mooncake/store_c.h lib/pkgconfig/libmooncake.pc \
	share/man/man8/mooncake_master.8 share/man/man8/mooncake_client.8 \
	share/man/man8/mooncake_http_metadata_server.8 share/man/man1/mooncake_bench.1 \
	etc/mooncake/master.json etc/mooncake/mooncake.json share/mooncake/grafana-mooncake.json \
	share/man/man5/mooncake.json.5 share/man/man3/libmooncake.3 share/man/man1/mooncake_ctl.1 \
	bin/mooncake_ctl bin/transfer_engine_bench include/mooncake/transfer_engine_c.h \
	share/man/man1/transfer_engine_bench.1; do
	t "installed $f" '[ -e "$R/$f" ]'
done
t "installed libmooncake.so" 'ls "$R"/lib/libmooncake.so* >/dev/null 2>&1'
t "installed etc/mooncake/master.yaml" '[ -f "$R/etc/mooncake/master.yaml" ]'
# Upstream's wheel puts the daemons on PATH: bin links to sbin.
for p in mooncake_master mooncake_http_metadata_server; do
	t "bin/$p runs sbin/$p" '[ -L "$R/bin/$p" ] && [ "$(readlink -f "$R/bin/$p")" = "$(readlink -f "$R/sbin/$p")" ]'
done
if [ -f "$B/pybuild/mooncake/_store.so" ]; then
	for p in mc_store_rest_server transfer_engine_topology_dump; do
		t "installed console script bin/$p" '[ -x "$R/bin/$p" ] && head -1 "$R/bin/$p" | grep -q "^#!/"'
	done
	# The script names the installed package directory; under DESTDIR it is found through
	# PYTHONPATH (and a sanitizer build's extension needs its runtimes preloaded).
	pyd=$(find "$D" -type d -name mooncake -path "*-packages/*" | head -1)
	pre=
	nm -D "$B/pybuild/mooncake/_store.so" 2>/dev/null | grep -q __asan_init &&
		pre="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
	t "bin/mc_store_rest_server --help is upstream's" 'PYTHONPATH="$(dirname "$pyd")" LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 "$R/bin/mc_store_rest_server" --help 2>&1 | grep -q -- "--max-wait-time"'
fi
if [ -n "$unitdir" ]; then
	for u in mooncake_master.service mooncake_http_metadata_server.service mooncake_client@.service; do
		t "unit $u installed with its paths" '[ -f "$D$unitdir/$u" ] && ! grep -q "@[a-z]*dir@" "$D$unitdir/$u" && grep -q "^ExecStart=$prefix/" "$D$unitdir/$u"'
	done
fi
export LD_LIBRARY_PATH="$R/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
t "installed master runs" '"$R/sbin/mooncake_master" --help | grep -q rpc_port'
t "installed client runs" '"$R/bin/mooncake_client" --help | grep -q global_segment_size'
t "installed master checks a configuration" '"$R/sbin/mooncake_master" --config_path="$R/etc/mooncake/master.json" --check_config >/dev/null'
cat >"$D/prog.c" <<'C'
#include <mooncake/store_c.h>
#include <stdio.h>
int main(void)
{
	mooncake_store_t s = mooncake_store_create();
	int rc = mooncake_store_health_check(s);
	mooncake_store_destroy(s);
	printf("%d\n", rc);
	return rc == 1 ? 0 : 1;
}
C
t "a program builds against the installed header and pkg-config file" 'PKG_CONFIG_PATH="$R/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D" cc "$D/prog.c" -o "$D/prog" $(PKG_CONFIG_PATH="$R/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D" pkg-config --cflags --libs libmooncake) $(sed -n "s/^MC_SAN_FLAGS = //p" "$B/Makefile") && "$D/prog" >/dev/null'
t "only the public API is exported" '! nm -D --defined-only "$R"/lib/libmooncake.so | awk "{print \$3}" | grep -v "^mooncake_" | grep -q "^mc_"'
if command -v systemd-analyze >/dev/null 2>&1 && [ -n "$unitdir" ]; then
	# Verify copies whose paths point into the DESTDIR, so the executables they name exist.
	mkdir -p "$D/verify"
	for u in mooncake_master.service mooncake_http_metadata_server.service mooncake_client@.service; do
		sed "s|$prefix/|$R/|g" "$D$unitdir/$u" >"$D/verify/${u/@/@t}"
	done
	for u in "$D"/verify/*.service; do
		t "systemd-analyze verify $(basename "$u")" 'out=$(cd "$D/verify" && systemd-analyze verify --man=no "$u" 2>&1); [ -z "$out" ] || { echo "$out" | sed "s/^/# /"; false; }'
	done
else
	echo "# systemd-analyze not available: unit verification skipped"
fi
echo "1..$n"
exit $fail
