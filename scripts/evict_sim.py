#!/usr/bin/env python3
"""Prefix-cache eviction simulator: the master's eviction list (src/master/object_table.c) in
Python, for trying policies before writing them in C.

    evict_sim.py TRACE[,TRACE...] [POLICY[,POLICY...]] [--pools=1/16,1/8,1/4]
    evict_sim.py TRACE --reuse        reuse (stack) distances against the pool sizes

TRACE is a FAST'25-format trace (JSON lines with hash_ids).  Each request is replayed as
mooncake_bench --trace_simulate replays it (src/tools/bench_trace.c, mc_sim_table): a batch
probe of every block (a use of each block present), a batch read of the hit prefix (a use of
each), a batch put of the missing blocks (evicting from the head of the list while full) and a
batch PutEnd (a use of each new block).  The hit rate is the longest cached prefix, in blocks.

lru and prefix follow object_table.c step by step (list placement, the protected part's marker
and cap, the batch anchors, the cold last block of a put) and agree with --trace_simulate to
the third decimal.  The other policies are candidates that were measured and not adopted
(doc/eviction.md, "what was tried"); POLICY may carry parameters after a colon, separated by
semicolons: subset:f=0.2;mode=3.  Prints one line per trace and policy:
    TRACE POLICY 1/16 RATE 1/8 RATE 1/4 RATE
"""
import bisect
import json
import random
import sys

USES, TAIL, PROT = 0x03, 0x04, 0x80
PROT_PCT = 20


def load(path):
    ids, out = {}, []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append([ids.setdefault(b, len(ids)) for b in json.loads(line)["hash_ids"]])
    return out, len(ids)


def khash(b):
    """A key's hash in [0, 2^32): what the master would compute from the key's bytes."""
    return ((b + 1) * 0x9E3779B97F4A7C15 >> 17) & 0xFFFFFFFF


class Table:
    """The eviction list of object_table.c: objects are dense ids 0..n-1, LRU (the list's
    sentinel) is n and MARK (the prefix policy's marker) n+1."""

    def __init__(self, nids, prefix=True, pct=PROT_PCT):
        self.n = nids
        self.L, self.M = nids, nids + 1
        self.nx = [0] * (nids + 2)
        self.pv = [0] * (nids + 2)
        self.ev = [0] * (nids + 2)
        self.present = bytearray(nids + 2)
        L, M = self.L, self.M
        self.nx[L] = self.pv[L] = L
        self.prefix = prefix
        self.pct = pct
        self.count = self.lru_count = self.pc = 0
        self.anchor = [None, None]
        self.batch_last = None
        self.batch_n = 0
        self.batch_last_new = False
        if prefix:  # the marker at the tail
            self.pv[M], self.nx[M] = self.pv[L], L
            self.nx[self.pv[L]] = M
            self.pv[L] = M

    # -- list primitives, as object_table.c
    def rebalance(self):
        nx, pv, ev, M = self.nx, self.pv, self.ev, self.M
        while self.pc > 0 and self.pc * 100 > self.pct * self.lru_count:
            x = nx[M]
            if self.anchor[1] == x:
                self.anchor[1] = None
            nx[pv[M]] = x
            pv[x] = pv[M]
            nx[M] = nx[x]
            pv[nx[x]] = M
            nx[x] = M
            pv[M] = x
            ev[x] = (ev[x] & ~(PROT | USES)) | 1
            self.pc -= 1
            self.demoted(x)

    def demoted(self, x):
        pass

    def unlink(self, o):
        nx, pv = self.nx, self.pv
        nx[pv[o]] = nx[o]
        pv[nx[o]] = pv[o]
        if self.anchor[0] == o:
            self.anchor[0] = None
        if self.anchor[1] == o:
            self.anchor[1] = None
        if self.batch_last == o:
            self.batch_last = None
        if self.ev[o] & PROT:
            self.pc -= 1
            self.ev[o] &= ~PROT
        self.lru_count -= 1
        self.rebalance()

    def link_before(self, at, o):
        nx, pv = self.nx, self.pv
        nx[o] = at
        pv[o] = pv[at]
        nx[pv[at]] = o
        pv[at] = o

    def place(self, o, prot):
        at = self.L
        if self.prefix:
            a = self.anchor[prot]
            at = a if a is not None else (self.L if prot else self.M)
            self.anchor[prot] = o
            if prot:
                self.ev[o] |= PROT
                self.pc += 1
        self.link_before(at, o)
        self.lru_count += 1
        self.batch_last = o
        self.batch_last_new = (self.ev[o] & USES) <= 1 and not prot
        self.batch_n += 1
        if prot:
            self.rebalance()

    def to_head(self, o):
        self.unlink(o)
        self.link_before(self.nx[self.L], o)
        self.lru_count += 1

    # -- the table's operations
    def batch_begin(self):
        self.anchor = [None, None]
        self.batch_last = None
        self.batch_n = 0

    def batch_end(self):
        o, n = self.batch_last, self.batch_n
        self.batch_last = None
        self.anchor = [None, None]
        self.batch_n = 0
        if o is None or not self.batch_last_new or not self.prefix:
            return
        if (self.ev[o] & USES) == 0:
            cold = n >= 2
            if cold:
                self.ev[o] |= TAIL
        else:
            cold = self.ev[o] & TAIL
        if cold:
            self.to_head(o)

    def touch(self, o):
        if not self.prefix:
            if self.pv[self.L] == o:
                return
            self.unlink(o)
            self.place(o, 0)
            return
        ev = self.ev[o]
        uses = ev & USES
        if uses < USES:
            uses += 1
        prot = 1 if (ev & PROT) or uses >= 2 else 0
        self.unlink(o)
        self.ev[o] = (self.ev[o] & ~(USES | (TAIL if prot else 0))) | uses
        self.place(o, prot)

    def insert(self, o):
        self.present[o] = 1
        self.ev[o] = 0
        self.count += 1
        self.place(o, 0)

    def evict_first(self):
        x = self.nx[self.L]
        if x == self.M:
            x = self.nx[x]
        return None if x == self.L else x

    def erase(self, o):
        self.present[o] = 0
        self.count -= 1
        self.unlink(o)
        self.ev[o] = 0

    # hooks for candidates: a request's start (all its ids, hit prefix length)
    def request(self, ids, h):
        pass


def run(reqs, table, cap):
    """Replay reqs against table as mc_sim_table does; the block hit rate."""
    hit = tot = 0
    present = table.present
    for ids in reqs:
        n = len(ids)
        h = n
        table.batch_begin()
        pres = [False] * n
        for j in range(n):
            if present[ids[j]]:
                pres[j] = True
                table.touch(ids[j])
            elif h == n:
                h = j
        table.batch_end()
        hit += h
        tot += n
        table.request(ids, h)
        table.batch_begin()
        for j in range(h):
            table.touch(ids[j])
        table.batch_end()
        table.batch_begin()
        for j in range(h, n):
            if pres[j] or present[ids[j]]:
                continue
            while table.count >= cap and table.count > 0:
                table.erase(table.evict_first())
            if cap > 0:
                table.insert(ids[j])
        table.batch_end()
        table.batch_begin()
        for j in range(h, n):
            if not pres[j] and present[ids[j]]:
                table.touch(ids[j])
        table.batch_end()
    return hit / tot


POLICIES = {
    "lru": lambda n, cap, **kw: Table(n, prefix=False),
    "prefix": lambda n, cap, **kw: Table(n, prefix=True, **kw),
}


# ---------------------------------------------------------------- candidates (not adopted)
OUT = 0x08  # a spare evstate bit: the block's put was outside the kept subset


class Subset(Table):
    """Anti-thrash by a consistent subset of requests, on top of prefix.  A put batch is in
    the subset when its first key's hash falls below f * 2^32 (so a chain is kept or traded as
    a whole, and the same request always gets the same answer).
      mode=0 (keep):  subset puts enter the protected part, the rest probation as prefix;
      mode=1 (trade): puts outside the subset go to the head of the list at the put and at
                      their PutEnd (evicted first unless reused before), the subset as prefix;
      mode=2 (coin):  as keep, but the subset is a per-request coin, not the key's hash;
      mode=3 (fifo):  as coin, and the protected part is a FIFO of whole requests (a use of a
                      protected block does not move it).
    adapt=1 sizes f as ARC sizes its target: a sampled ghost list (keys with hash % 16 == 0,
    at most cap/16 of them) remembers evicted keys and their class; a put of a ghost from
    outside the subset grows f, one of a ghost from inside shrinks it."""

    def __init__(self, n, cap, f=0.3, mode=0, adapt=0, step=0.01, pct=PROT_PCT):
        super().__init__(n, prefix=True, pct=pct)
        self.f, self.mode, self.adapt, self.step = f, int(mode), int(adapt), step
        self.cls = 0
        self.ghost = {}
        self.gcap = max(1, int(cap) // 16)
        self.rng = random.Random(1)

    def in_subset(self, o):
        if self.mode >= 2:
            return self.rng.random() < self.f
        return khash(o) < self.f * 4294967296.0

    def insert(self, o):
        if self.batch_n == 0:
            self.cls = self.in_subset(o)
        if self.adapt and o in self.ghost:
            was_in = self.ghost.pop(o)
            self.f += -self.step if was_in else self.step
            self.f = min(0.95, max(0.05, self.f))
        self.present[o] = 1
        self.count += 1
        if self.cls and self.mode in (0, 2, 3):
            self.ev[o] = 1
            self.place(o, 1)
            return
        self.ev[o] = 0 if self.cls else OUT
        self.place(o, 0)
        if not self.cls and self.mode == 1:
            self.to_head(o)

    def touch(self, o):
        if self.mode == 3 and self.ev[o] & PROT:
            if (self.ev[o] & USES) < USES:
                self.ev[o] += 1
            return
        out_first = (self.ev[o] & OUT) and (self.ev[o] & USES) == 0
        super().touch(o)
        if out_first and self.mode == 1:
            self.to_head(o)

    def erase(self, o):
        if self.adapt and khash(o) % 16 == 0:
            self.ghost[o] = not (self.ev[o] & OUT)
            if len(self.ghost) > self.gcap:
                del self.ghost[next(iter(self.ghost))]
        super().erase(o)


POLICIES["subset"] = lambda n, cap, **kw: Subset(n, cap, **kw)


class Hint(Subset):
    """What a writer's hint would have to carry: an oracle says whether a request's first new
    block is used again later, right with probability q (the opposite otherwise), and the
    put follows it as Subset's mode (1: a "not again" put goes to the head; 0: an "again" put
    enters protected).  Needs the trace's future: a bound, not a policy."""

    def __init__(self, n, cap, reqs, q=1.0, mode=1, pct=PROT_PCT):
        super().__init__(n, cap, f=0, mode=mode, pct=pct)
        self.last = {}
        for i, ids in enumerate(reqs):
            for b in ids:
                self.last[b] = i
        self.q, self.i, self.again = q, -1, False

    def request(self, ids, h):
        self.i += 1
        new = [b for b in ids[h:] if not self.present[b]]
        again = bool(new) and self.last[new[0]] > self.i
        self.again = again if self.rng.random() < self.q else not again

    def in_subset(self, o):
        return self.again


class Unit(Table):
    """prefix, with a request's new blocks evicted as a unit: when a block never used since its
    put is evicted (not its cold last block), the other unused blocks of the same put go with it (they are reused together
    or not at all).  An object would need one more bit (same put as its list neighbour)."""

    def __init__(self, n, cap, pct=PROT_PCT):
        super().__init__(n, prefix=True, pct=pct)
        self.group = [0] * (n + 2)
        self.members = {}
        self.gid = 0

    def batch_begin(self):
        super().batch_begin()
        self.gid += 1

    def insert(self, o):
        super().insert(o)
        self.group[o] = self.gid
        self.members.setdefault(self.gid, []).append(o)

    def erase(self, o):
        # the put's cold last block (evicted first) goes alone
        g = None if self.ev[o] & TAIL else self.members.pop(self.group[o], None)
        super().erase(o)
        for x in g or ():
            if x != o and self.present[x] and self.group[x] == self.group[o] and \
                    (self.ev[x] & USES) <= 1 and not (self.ev[x] & PROT):
                super().erase(x)


POLICIES["unit"] = lambda n, cap, **kw: Unit(n, cap, **kw)
POLICIES["hint"] = lambda n, cap, **kw: Hint(n, cap, **kw)


def reuse_distances(reqs):
    """LRU stack distance of every reuse (distinct blocks referenced since the block's last
    reference), in the order blocks are probed: under LRU the reuse hits when it is below the
    pool.  A Fenwick tree over reference positions marks each block's latest one."""
    nref = sum(len(r) for r in reqs)
    bit = [0] * (nref + 1)

    def add(i, v):
        i += 1
        while i <= nref:
            bit[i] += v
            i += i & -i

    def pref(i):  # sum of [0, i)
        s = 0
        while i > 0:
            s += bit[i]
            i -= i & -i
        return s

    last = {}
    dists = []
    t = 0
    for ids in reqs:
        for b in ids:
            p = last.get(b, -1)
            if p >= 0:
                dists.append(pref(t) - pref(p + 1))
                add(p, -1)
            add(t, 1)
            last[b] = t
            t += 1
    return dists


def main(argv):
    pools = [16, 8, 4]
    args = [a for a in argv if not a.startswith("--")]
    for a in argv:
        if a.startswith("--pools="):
            pools = [int(x.split("/")[1]) for x in a[8:].split(",")]
    if "--reuse" in argv:
        for path in args[0].split(","):
            reqs, nids = load(path)
            d = sorted(reuse_distances(reqs))
            print(f"{path}: {nids} blocks, {sum(map(len, reqs))} references, {len(d)} reuses")
            edges = [nids // 64 * k for k in range(0, 17)] + [nids]
            for lo, hi in zip(edges, edges[1:]):
                c = bisect.bisect_left(d, hi) - bisect.bisect_left(d, lo)
                print(f"  stack distance {lo:7d}-{hi:7d}: {c / len(d):.3f} of reuses")
            for f in pools:
                cap = int(nids / f + 0.5)
                print(f"  pool 1/{f} ({cap} blocks): {bisect.bisect_left(d, cap) / len(d):.3f}"
                      f" of reuses within it, {1 - bisect.bisect_left(d, 2 * cap) / len(d):.3f}"
                      f" beyond twice it")
        return
    pols = (args[1] if len(args) > 1 else "lru,prefix").split(",")
    for path in args[0].split(","):
        reqs, nids = load(path)
        for spec in pols:
            name, _, params = spec.partition(":")
            kw = {k: float(v) for k, v in (p.split("=") for p in params.split(";") if p)}
            out = []
            for f in pools:
                cap = int(nids / f + 0.5)
                if name == "hint":
                    kw["reqs"] = reqs
                out.append(f"1/{f} {run(reqs, POLICIES[name](nids, cap, **kw), cap):.3f}")
            print(f"{path.split('/')[-1]:28s} {spec:28s} {' '.join(out)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
