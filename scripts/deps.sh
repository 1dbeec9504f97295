#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install the Debian 12 packages needed to build and test mooncake (only the missing ones).
set -e
PKGS="build-essential autoconf automake libtool pkg-config libevent-dev libjansson-dev
libsqlite3-dev libhiredis-dev libcurl4-openssl-dev libibverbs-dev librdmacm-dev python3 python3-dev
curl iperf3 mandoc redis-server etcd-server etcd-client procps iproute2 iptables
clang libclang-rt-14-dev"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# pytest for the Python package's tests, into the Python that configure will find.
py=$(command -v python3 || true)
if [ -n "$py" ] && ! "$py" -c "import pytest" 2>/dev/null; then
	"$py" -m pip install -q pytest >/dev/null 2>&1 || echo "deps.sh: could not install pytest (Python tests will be skipped)" >&2
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$missing (run as root or install them)" >&2
	exit 1
fi
echo "deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
