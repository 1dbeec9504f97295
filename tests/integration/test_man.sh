#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Man pages: mandoc -Tlint is clean, and every flag a program's --help lists is documented in its
# man page and vice versa, so docs and code cannot drift.
S=${MC_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${MC_TOP_BUILDDIR:-$S}
n=0; fail=0
t() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=1; fi; }
if command -v mandoc >/dev/null; then
	for m in "$S"/man/*.[1-8]; do
		t "mandoc -Tlint $(basename "$m")" 'mandoc -Tlint -W warning "$m"'
	done
else
	echo "# mandoc not installed: lint skipped"
fi
flags_help() { "$1" --help | grep -oE '^  --[A-Za-z0-9_-]+' | sed 's/^  --//' | sort -u; }
flags_man() { grep -oE '^\.It Fl -[A-Za-z0-9_-]+' "$1" | sed 's/^\.It Fl -//' | sort -u; }
for p in mooncake_master:8 mooncake_client:8 mooncake_http_metadata_server:8 mooncake_bench:1 \
	transfer_engine_bench:1 mooncake_proxy:8; do
	prog=${p%%:*}; sec=${p##*:}
	[ -x "$B/$prog" ] || continue
	h=$(flags_help "$B/$prog"); m=$(flags_man "$S/man/$prog.$sec")
	missing=$(comm -23 <(echo "$h") <(echo "$m") | grep -v '^help$\|^version$' | tr '\n' ' ')
	extra=$(comm -13 <(echo "$h") <(echo "$m") | grep -v '^help$\|^version$' | tr '\n' ' ')
	t "$prog($sec) documents every flag of --help${missing:+ (missing: $missing)}" '[ -z "$missing" ]'
	t "$prog($sec) documents no flag --help lacks${extra:+ (extra: $extra)}" '[ -z "$extra" ]'
done
echo "1..$n"
exit $fail
