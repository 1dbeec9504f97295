# SPDX-License-Identifier: Apache-2.0
"""The `transfer_engine_bench` console script: runs the transfer engine's benchmark with the
arguments given, as upstream's wheel does (mooncake._binaries says where it is looked for)."""
import sys

from mooncake._binaries import exec_program


def main():
    return exec_program("transfer_engine_bench")


if __name__ == "__main__":
    sys.exit(main())
