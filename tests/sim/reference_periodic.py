"""The prefetcher `periodic:K` as docs/simulator.md states it ("Prefetch / prediction policies" and
rule 10.4), written from the document alone: a mixin of reference_sim.Sim."""
import bisect

from reference_dtr import HOST

NEVER = 1 << 62


class PeriodicPrefetch:
    """Needs from Sim: tr, state, live_now, protected, prefetch, early_swap_out, live_max, live_at."""

    def init_periodic(self, window):
        self.periodic = window   # K; 0: not this prefetcher
        n = len(self.tr.allocs)
        self.learnt = [None] * n     # learnt next use (seq, NEVER), None: unknown
        self.last_seq = [-1] * n     # the kernel that accessed it last
        if window:
            self.steps_of_allocations()

    def steps_of_allocations(self):
        """Each allocation's step (that of the latest kernel started at or before it) and rank in it."""
        tr = self.tr
        starts = [k[2] for k in tr.kernels]
        self.alloc_step = [-1] * len(tr.allocs)
        self.alloc_rank = [-1] * len(tr.allocs)
        self.step_allocs = {}
        self.access_begin = [0]   # accesses before each kernel
        for ops in tr.operands:
            self.access_begin.append(self.access_begin[-1] + len(ops))
        for i in sorted(range(len(tr.allocs)), key=lambda i: (tr.allocs[i][3], i)):
            s = bisect.bisect_right(starts, tr.allocs[i][3]) - 1
            if s < 0 or tr.kernel_steps[s] < 0:
                continue
            st = tr.kernel_steps[s]
            self.alloc_step[i] = st
            self.alloc_rank[i] = len(self.step_allocs.setdefault(st, []))
            self.step_allocs[st].append(i)

    def access_place(self, s, k):
        """Operand k of kernel s: (its place among its step's accesses, s's position), None
        outside steps."""
        st = self.tr.kernel_steps[s]
        if st < 0:
            return None
        base = self.first_of(st)
        return self.access_begin[s] - self.access_begin[base] + k, s - base

    def first_of(self, st):
        return self.tr.step_span[st][0]

    def counterpart(self, a_prev, st):
        """The allocation of step st playing a_prev's part (of step st-1): same rank, or itself."""
        if self.alloc_step[a_prev] != st - 1:
            return a_prev
        mine = self.step_allocs.get(st, [])
        r = self.alloc_rank[a_prev]
        return mine[r] if r < len(mine) else None

    # -- learning next uses
    def periodic_on_alloc(self, a):
        self.learnt[a] = None
        st = self.alloc_step[a]
        if st < 1:
            return
        prev = self.step_allocs.get(st - 1, [])
        r = self.alloc_rank[a]
        if r >= len(prev):
            return
        f = self.next_use_after(prev[r], -1)
        self.learnt[a] = NEVER if f == NEVER else f + (self.first_of(st) - self.first_of(st - 1))

    def periodic_on_access(self, s, k, a):
        """a is operand number k of kernel s."""
        self.last_seq[a] = s
        self.learnt[a] = None
        st = self.tr.kernel_steps[s]
        if st < 1:
            return
        q = self.first_of(st - 1) + (s - self.first_of(st))
        ops = self.tr.operands
        if q >= self.first_of(st) or len(ops[q]) != len(ops[s]):
            return
        nu = self.next_use_after(ops[q][k][0], q)
        self.learnt[a] = NEVER if nu == NEVER else s + (nu - q)

    # -- after a kernel starts: protect, prefetch, swap out early
    def periodic_round(self, s, t, window=None, early=None):
        """After kernel s starts: the window of `window` kernels (periodic's K), then early
        swap-out (`early(s, t)`: forecast's own; else rule 10 on periodic's demand)."""
        tr = self.tr
        st = tr.kernel_steps[s]
        self.protected = set()
        if st < 1:
            return
        pos = s - self.first_of(st)
        prev, prev_end = self.first_of(st - 1), self.first_of(st)
        lo, hi = prev + pos, min(prev + pos + (window or self.periodic), prev_end - 1)
        window = [self.counterpart(a, st) for q in range(lo + 1, hi + 1) for a, _ in tr.operands[q]]
        self.protected = {a for a, _ in tr.operands[s]} | {c for c in window if c is not None}
        for c in window:
            if c is not None and self.state[c] == HOST:
                self.prefetch(c, t)
        if lo >= prev_end:
            return
        if early:
            early(s, t)
        else:
            self.early_swap_out(s, t, lambda v: self.periodic_demand(v, s))

    def periodic_demand(self, v, s):
        st = self.tr.kernel_steps[s]
        prev, prev_end = self.first_of(st - 1), self.first_of(st)
        pos = s - self.first_of(st)
        nu = self.learnt[v]
        if nu is None and self.last_seq[v] < prev and self.tr.allocs[v][3] < self.tr.kernels[prev][2]:
            nu = NEVER   # it lived through the whole previous step unused
        if nu is None:
            return None
        length = NEVER if nu == NEVER else nu - s - 1
        rest = prev_end - 1 - (prev + pos)
        demand = None
        if length > 0 and min(length, rest) > 0:
            demand = self.live_max(prev + pos + 1, prev + pos + min(length, rest))
        if length > rest:
            more = self.live_max(prev, prev + min(length - rest, prev_end - prev) - 1)
            demand = more if demand is None else max(demand, more)
        if demand is None:
            return None
        return demand + self.live_now - self.live_at(prev + pos)
