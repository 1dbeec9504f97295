#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install the Debian 12 packages needed to build and test mooncake (only the missing ones).
set -e
PKGS="build-essential autoconf automake libtool pkg-config libevent-dev libjansson-dev
libsqlite3-dev libyaml-dev libzmq3-dev libhiredis-dev libcurl4-openssl-dev libssl-dev libibverbs-dev
librdmacm-dev python3 python3-dev python3-zmq python3-msgpack curl iperf3 mandoc redis-server
etcd-server etcd-client procps iproute2 iptables gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
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
# CPU is enough for the tensor tests, but PyPI's Linux torch wheel is its CUDA build: about 4.5 GB
# of downloads and 5.4 GB installed, 1-2 minutes here.  Installed once into the same Python
# (without pip's cache, so the wheels are not kept twice); MC_NO_TORCH=1 skips it (the tensor
# tests then skip).
if [ -n "$py" ] && [ "${MC_NO_TORCH:-0}" != 1 ] && ! "$py" -c "import torch, numpy" 2>/dev/null; then
	echo "deps.sh: installing torch and numpy for the Python tensor tests (about 5 GB)" >&2
	"$py" -m pip install -q --no-cache-dir torch numpy >/dev/null 2>&1 ||
		echo "deps.sh: could not install torch (the tensor tests will be skipped)" >&2
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
