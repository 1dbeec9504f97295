#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No call cycles between the master's modules.

argv: the master's library (libmcmaster.a).  Reads which file defines and which uses every
global symbol (nm), makes the graph of calls between files, and fails naming every cycle
(strongly connected set of files) found.  Prints TAP lines.
"""
import subprocess
import sys


def graph(archive):
    out = subprocess.run(["nm", "-A", archive], capture_output=True, text=True,
                         check=True).stdout
    defs, uses = {}, {}
    for line in out.splitlines():
        where, _, rest = line.rpartition(":")
        member = where.rsplit(":", 1)[-1].replace(".o", "")
        f = rest.split()
        uses.setdefault(member, set())
        if len(f) == 3 and f[1] in "TDBR":
            defs[f[2]] = member
        elif len(f) == 2 and f[0] == "U":
            uses[member].add(f[1])
    return {m: {defs[s] for s in u if s in defs and defs[s] != m} for m, u in uses.items()}


def cycles(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main():
    g = graph(sys.argv[1])
    found = cycles(g)
    print(("ok" if len(g) >= 10 else "not ok") + " 1 - the library has its modules (%d)" % len(g))
    print(("ok" if not found else "not ok") + " 2 - no call cycles between the master's modules"
          + "".join("\n# cycle: " + " <-> ".join(c) for c in found))
    print("1..2")
    return 1 if found or len(g) < 10 else 0


if __name__ == "__main__":
    sys.exit(main())
