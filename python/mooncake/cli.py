# SPDX-License-Identifier: Apache-2.0
"""The `mooncake_master` console script: runs the store's master with the arguments given, as
upstream's wheel does (mooncake._binaries says where it is looked for)."""
import sys

from mooncake._binaries import exec_program


def main():
    return exec_program("mooncake_master")


if __name__ == "__main__":
    sys.exit(main())
