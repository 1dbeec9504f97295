# SPDX-License-Identifier: Apache-2.0
"""Where this installation's programs are, for the console scripts that run them.

Upstream's wheel carries its binaries inside the package; here they are installed by
`make install` (daemons in sbin, tools in bin).  A program is looked for in
$MOONCAKE_BIN_DIR, next to this package, in the bin and sbin directories of the prefix it was
installed under (walking up from the package), in sys.prefix's, then on PATH.
"""
import os
import shutil
import sys


def _candidates(name):
    env = os.environ.get("MOONCAKE_BIN_DIR")
    if env:
        for d in env.split(os.pathsep):
            yield os.path.join(d, name)
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, name)
    d = here
    for _ in range(6):              # .../lib/python3.X/site-packages/mooncake -> prefix
        d = os.path.dirname(d)
        for sub in ("sbin", "bin"):
            yield os.path.join(d, sub, name)
    for sub in ("sbin", "bin"):
        yield os.path.join(sys.prefix, sub, name)


def find(name):
    """The path of program name, or None."""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else None
    for p in _candidates(name):
        if os.path.isfile(p) and os.access(p, os.X_OK) and os.path.realpath(p) != me:
            return p
    p = shutil.which(name)
    if p and os.path.realpath(p) != me:
        return p
    for d in ("/usr/local/sbin", "/usr/sbin"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def exec_program(name, argv=None):
    """Replace this process with program name (the same process id, as upstream's
    mooncake_master script keeps it); 127 with a message when it is not installed."""
    path = find(name)
    if path is None:
        sys.stderr.write("%s: not found (install this build with `make install`, or set "
                         "MOONCAKE_BIN_DIR to the directory holding it)\n" % name)
        return 127
    args = sys.argv[1:] if argv is None else list(argv)
    os.execv(path, [path] + args)
    return 127      # not reached
