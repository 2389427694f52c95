"""The prefetcher `capuchin` as docs/simulator.md states it ("Prefetch / prediction policies"),
written from the document alone: a mixin of reference_sim.Sim (with reference_periodic's steps of
allocations)."""
from reference_dtr import FREED, HOST, NOT_YET


class CapuchinPrefetch:
    def init_capuchin(self, on):
        self.capuchin = on
        self.trigger = {}   # access offset in a step -> distance in kernels (absent: none)
        self.plan = []
        if on:
            self.steps_of_allocations()

    def capuchin_wait(self, s, k, d):
        """Operand k of kernel s was ready d ns after the kernel's time: move its trigger earlier."""
        tr = self.tr
        place = self.access_place(s, k)
        if place is None:
            return
        q, pos = place
        base = s - pos
        old = pos - self.trigger.get(q, 0)
        new = old
        while new > 0 and tr.kernels[base + old][2] - tr.kernels[base + new][2] < d:
            new -= 1
        self.trigger[q] = pos - new

    def mapped_now(self, a_prev, st):
        """Step i-1's allocation as step i's, when it is made and not freed (else None)."""
        a = self.counterpart(a_prev, st)
        if a is None:
            return None
        if a == a_prev:
            return None if self.state[a] == FREED else a
        return None if self.state[a] == NOT_YET else a

    def capuchin_round(self, s, t):
        tr = self.tr
        st = tr.kernel_steps[s]
        self.protected = set()
        if st < 1:
            return
        base = self.first_of(st)
        pos = s - base
        if s == base:   # lay the triggers learnt so far over this step
            prev = self.first_of(st - 1)
            self.plan = []
            for q in range(prev, base):
                for k, (a, _) in enumerate(tr.operands[q]):
                    off = self.access_begin[q] - self.access_begin[prev] + k
                    if self.trigger.get(off, 0) > 0:
                        self.plan.append((max(q - prev - self.trigger[off], 0), len(self.plan), a))
            self.plan.sort()
        self.protected = {a for a, _ in tr.operands[s]}
        fired = []
        while self.plan and self.plan[0][0] <= pos:
            _, _, a_prev = self.plan.pop(0)
            a = self.mapped_now(a_prev, st)
            if a is not None:
                fired.append(a)
        self.protected.update(fired)   # all protected before the first is prefetched
        for a in fired:
            if self.state[a] == HOST:
                self.prefetch(a, t)
