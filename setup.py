# SPDX-License-Identifier: Apache-2.0
"""pip install . : builds the mooncake Python package through the project's autotools build.

The C extensions (mooncake._store, mooncake._engine, mooncake._fast_copy) are compiled by `./configure && make` with
this Python (--enable-python=yes PYTHON=sys.executable) in a private build directory, then copied
next to the pure-Python modules.  Needs the Debian packages listed in scripts/deps.sh.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


class AutotoolsBuild(build_ext):
    def run(self):
        build = os.path.abspath(os.path.join(self.build_temp, "autotools"))
        if os.path.exists(os.path.join(HERE, "config.status")):
            build = HERE        # a tree configured in place builds in place
        os.makedirs(build, exist_ok=True)
        if not os.path.exists(os.path.join(HERE, "configure")):
            subprocess.check_call(["autoreconf", "-fi"], cwd=HERE)
        if not os.path.exists(os.path.join(build, "Makefile")):
            subprocess.check_call([os.path.join(HERE, "configure"), "-q", "--enable-python=yes",
                                   "PYTHON=" + sys.executable, "--disable-werror"], cwd=build)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["make", "-j" + jobs, "src/python/_store.la",
                               "src/python/_engine.la", "src/python/_fast_copy.la"], cwd=build)
        for ext in self.extensions:
            name = ext.name.split(".")[-1]
            dest = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(build, "src", "python", ".libs", name + ".so"), dest)


setup(
    name="mooncake-c",
    version="0.1.0",
    description="Mooncake KV-cache store (C implementation): Python bindings",
    packages=["mooncake", "mooncake.store"],
    package_dir={"": "python"},
    ext_modules=[Extension("mooncake._store", sources=[]), Extension("mooncake._engine", sources=[]),
                 Extension("mooncake._fast_copy", sources=[])],
    cmdclass={"build_ext": AutotoolsBuild},
    # Upstream's console scripts; the programs they run come from `make install`
    # (mooncake._binaries finds them).
    entry_points={"console_scripts": [
        "mc_store_rest_server = mooncake.mooncake_store_service:sync_main",
        "mooncake_client = mooncake.cli_client:main",
        "mooncake_http_metadata_server = mooncake.http_metadata_server:main",
        "mooncake_master = mooncake.cli:main",
        "transfer_engine_bench = mooncake.cli_bench:main",
        "transfer_engine_topology_dump = mooncake.transfer_engine_topology_dump:main",
    ]},
    python_requires=">=3.8",
)
