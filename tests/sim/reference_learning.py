#!/usr/bin/env python3
"""An outside reading of the learning prefetchers of docs/simulator.md, written from the page alone
(not from sim/, not from reference_periodic.py, reference_capuchin.py or reference_forecast.py, the
first reading's): "Inputs" (**Steps**: the step column or the step markers), "Prefetch / prediction
policies" (`periodic:K`, `capuchin`, `forecast:H` with its demand forecaster, its error metrics,
its learnt next uses and its own early eviction) and rules 9 and 10 as they apply to them.

The engine under them (rules 1-8, the link, the host buffer, the memory timeline) is the outside
reading reference_outside.py, which is compared with `mhc simulate` on its own; this file adds the
prefetchers through its hooks (allocated, operand_wait, accessed, after_launch, early_demand).
Scope: the `ideal` allocator, the policies `lru`, `largest`, `belady`. Standard library only.

Where the page leaves a choice open, the comment says which reading was taken ("reading:").
"""
import bisect
import math
import sqlite3

import reference_outside as out

NEVER = math.inf
SEED = 0x9E3779B97F4A7C15   # the sampled policies' seed, which the forecaster's generator starts from
MASK = (1 << 64) - 1
FIT_STEPS = 32     # the forecaster fits on the last 32 completed steps
LOAD_KERNELS = 32  # the compute load over the last 32 kernels
SAMPLE = 64        # candidates per early-eviction round
SKIPS = 4          # a round stops when a fifth victim would be skipped


def xorshift64(x):
    x ^= (x << 13) & MASK
    x ^= x >> 7
    return x ^ ((x << 17) & MASK)


def round_half_away(x):
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def median(values, even):
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else even(v[m - 1], v[m])


LIMIT = 1 << 62   # the simulator's time range


class TooSlow(Exception):
    """A transfer that would end past the time range: the link is too slow for the trace."""


class Trace(out.Trace):
    """The outside reading's trace, with the steps of "Inputs" and each allocation's step and rank."""

    def __init__(self, path, device):
        super().__init__(path, device)
        db = sqlite3.connect(path)
        col = [st for (st,) in db.execute("SELECT step FROM kernels WHERE device = ? ORDER BY t_start, id",
                                          (self.device,))]
        markers = db.execute("SELECT t_start, t_end, id FROM markers WHERE kind = 0 ORDER BY t_start, id").fetchall()
        stepped = db.execute("SELECT 1 FROM meta WHERE key = 'steps_from'").fetchone() is not None   # an importer's
        db.close()
        n = len(col)
        if n and (2 * sum(1 for v in col if v is not None and v >= 0) >= n or stepped):
            value = [v if v is not None and v >= 0 else None for v in col]
        else:   # the last step marker (start order, then row) starting at or before, if not ended by then
            starts = [m[0] for m in markers]
            value = []
            for s in range(n):
                j = bisect.bisect_right(starts, self.kstart[s]) - 1
                value.append(markers[j][2] if j >= 0 and markers[j][1] > self.kstart[s] else None)
        # a step is a run of kernels of one value (kernels of no step do not break it); its
        # kernels, by position, are those from its first to the next step's first (the last
        # step's: to the last kernel), kernels of no step included ("Steps": its length)
        begin, last = [], None
        self.step_of, self.pos = [None] * n, [None] * n
        for s in range(n):
            if value[s] is None:
                continue
            if not begin or value[s] != last:
                begin.append(s)
            last = value[s]
            self.step_of[s] = len(begin) - 1
        self.steps = [list(range(b, e)) for b, e in zip(begin, begin[1:] + [n])]
        for s in range(n):
            if self.step_of[s] is not None:
                self.pos[s] = s - begin[self.step_of[s]]
        # an access's offset in its step: its place among the step's accesses (its kernels in
        # seq, operands in access order)
        self.offset0 = [None] * n
        for st in self.steps:
            o = 0
            for s in st:
                self.offset0[s] = o
                o += len(self.ops[s])
        # "made during" the step of the latest kernel started at or before the allocation (one
        # starting at that instant counts); its rank among that step's allocations (time, then row)
        self.alloc_step = []
        for a in range(len(self.ids)):
            j = bisect.bisect_right(self.kstart, self.t_alloc[a]) - 1
            self.alloc_step.append(self.step_of[j] if j >= 0 else None)
        self.step_allocs = [[] for _ in self.steps]
        for a in sorted(range(len(self.ids)), key=lambda a: (self.t_alloc[a], self.ids[a])):
            if self.alloc_step[a] is not None:
                self.step_allocs[self.alloc_step[a]].append(a)
        self.rank = [None] * len(self.ids)
        for lst in self.step_allocs:
            for r, a in enumerate(lst):
                self.rank[a] = r

    def next_use_after(self, a, q):
        """The first kernel after q that accesses a in the recorded trace (NEVER: none)."""
        u = self.uses[a]
        j = bisect.bisect_right(u, q)
        return u[j] if j < len(u) else NEVER


class Learning:
    """The learning prefetchers, over any engine that offers the hooks and helpers they use: `lt`
    (the trace above), `state`, `valid`, `protect`, `live_at_start`, `m`, `cap`, `shift`, `qfree`,
    `queue`, `prefetch`, `early_round` (which asks `early_demand`), `evict`, `evictable`,
    `would_drop`, `host_room`, `live`, `off`, `swap_ns` and `last_d2h_end` (the last swap-out's
    end). reference_outside.py's engine below; reference_learning_engine.py puts them over the
    third reading's (the caching allocator, `dtr` and `cost_aware`)."""

    def learning_setup(self, prefetch, early):
        name, _, arg = prefetch.partition(":")
        self.kind = name
        self.K = int(arg) if arg else 8
        # rule 10: early swap-out with periodic and forecast, never with capuchin
        self.early = early and name in ("periodic", "forecast")
        self.span = self.K if name == "periodic" else 8   # forecast prefetches as periodic:8
        tr = self.lt
        n = len(tr.ids)
        self.last_access = [-1] * n      # the kernel (seq) that accessed it last
        self.learnt = [None] * n         # periodic: predicted next use (seq, NEVER), None: unknown
        self.trigger = {}                # capuchin: access offset -> distance in kernels
        self.laid = []                   # capuchin: (position, order, allocation of the previous step)
        self.m["forecast_evictions"] = 0
        self.last_d2h_end = -math.inf
        self.fc_table = {}               # forecast: offset -> (position, distance, step)
        self.fc_last = [None] * n        # forecast: (seq, offset, position, step) of the last access
        self.fc_pred = [None] * n
        self.fc_list = []                # forecast: the allocations made, for its candidates
        self.fc_x = SEED
        self.fc_first_pos = {}           # forecast: rank -> the latest first use's distance from its step's first kernel
        self.adepth = [0] * n            # forecast: the depth of its writer (kernels of a step)
        self.adepth_step = [None] * n    # forecast: the step of that writer
        self.deepest = [0] * len(tr.steps)
        self.models = [None] + [self.fit(i) for i in range(1, len(tr.steps))] if name == "forecast" else []
        self.err, self.herr, self.perr = [], [], []
        self.step_max = {}

    # ---- the allocation map of periodic (and capuchin) ----
    def mapped(self, u, i):
        """An operand u of step i-1's kernel, mapped to step i: one made during step i-1 to the
        allocation of the same rank among step i's (None when it has fewer), any other to itself."""
        tr = self.lt
        if tr.alloc_step[u] == i - 1:
            lst = tr.step_allocs[i]
            return lst[tr.rank[u]] if tr.rank[u] < len(lst) else None
        return u

    # ---- hooks ----
    def allocated(self, a, t):
        tr = self.lt
        i = tr.alloc_step[a]
        if self.kind == "periodic" and i is not None and i >= 1:
            prev = tr.step_allocs[i - 1]
            if tr.rank[a] < len(prev):   # the counterpart's first use, shifted by the steps' distance
                fu = tr.uses[prev[tr.rank[a]]]
                self.learnt[a] = fu[0] + tr.steps[i][0] - tr.steps[i - 1][0] if fu else NEVER
        if self.kind == "forecast":
            self.fc_list.append(a)
            if i is not None and self.fc_first_pos.get(tr.rank[a], -1) >= 0:   # below 0: nothing
                self.fc_pred[a] = tr.steps[i][0] + self.fc_first_pos[tr.rank[a]]

    def operand_wait(self, s, k, d):
        """capuchin: the trigger of this access position moves earlier."""
        tr = self.lt
        if self.kind != "capuchin" or d <= 0 or tr.step_of[s] is None:
            return
        st, p = tr.steps[tr.step_of[s]], tr.pos[s]
        off = tr.offset0[s] + k
        o = p - self.trigger.get(off, 0)   # a distance of 0 is none: on demand
        if o < 0:   # learnt at another position, earlier than this step's first kernel: kept
            return
        c = o
        while c > 0 and tr.kstart[st[o]] - tr.kstart[st[c]] < d:
            c -= 1
        self.trigger[off] = p - c

    def accessed(self, s, k, a, mode):
        tr = self.lt
        i, p = tr.step_of[s], tr.pos[s]
        if self.kind == "periodic":
            self.learnt[a] = None   # any access but one that lines up makes it unknown
            if i is not None and i >= 1:
                prev = tr.steps[i - 1]
                if p < len(prev) and len(tr.ops[prev[p]]) == len(tr.ops[s]):
                    q = prev[p]
                    nu = tr.next_use_after(tr.ops[q][k][0], q)
                    self.learnt[a] = NEVER if nu == NEVER else s + (nu - q)
        if self.kind == "forecast":
            off = tr.offset0[s] + k if i is not None else None
            last = self.fc_last[a]
            if last is not None and last[1] is not None and last[0] < s:
                self.fc_table[last[1]] = (last[2], s - last[0], last[3])
            self.fc_pred[a] = None
            if off is not None:
                e = self.fc_table.get(off)
                if e is not None and e[0] == p and i > e[2]:
                    self.fc_pred[a] = s + e[1]
            if self.fc_last[a] is None and tr.alloc_step[a] is not None:   # its first use
                self.fc_first_pos[tr.rank[a]] = s - tr.steps[tr.alloc_step[a]][0]
            self.fc_last[a] = (s, off, p, i)
        self.last_access[a] = s

    def after_launch(self, s, start):
        tr = self.lt
        i, p = tr.step_of[s], tr.pos[s]
        self.protect = {a for a, _ in tr.ops[s]}
        if self.kind == "forecast" and i is not None:
            self.observe(s)
        if i is None or i < 1:   # step 0 (and no step) runs on demand
            return
        prev = tr.steps[i - 1]
        wanted = []
        if self.kind in ("periodic", "forecast"):
            for q in prev[p + 1:p + 1 + self.span]:
                for u, _ in tr.ops[q]:
                    m = self.mapped(u, i)
                    if m is not None:
                        wanted.append(m)
        elif self.kind == "capuchin":
            if p == 0:   # step i begins: lay out step i-1's accesses that have a trigger
                lay = []
                for q in prev:
                    for k, (u, _) in enumerate(tr.ops[q]):
                        dist = self.trigger.get(tr.offset0[q] + k)
                        if dist:
                            # its kernel's position: q's place after the step's first kernel,
                            # also for a kernel of no step inside the step ("Steps")
                            lay.append((max(q - prev[0] - dist, 0), len(lay), u))
                self.laid = sorted(lay)
            while self.laid and self.laid[0][0] <= p:
                _, _, u = self.laid.pop(0)
                m = self.mapped(u, i)
                if m is not None and self.state[m] not in (out.NA, out.FREED):
                    wanted.append(m)
        self.protect |= set(wanted)
        for m in wanted:
            if self.state[m] == out.HOST:
                self.prefetch(m, start)
        if not self.early or p >= len(prev):
            return
        if self.kind == "periodic":
            self.early_round(s, start)
        else:
            self.forecast_round(s, start)

    # ---- periodic: rule 10.4's learnt next use and demand ----
    def predicted(self, v, s, pred):
        """A prediction, or for none: never used when allocated before the previous step began and
        not accessed since; None (unknown) otherwise."""
        if pred is not None:
            return pred
        tr = self.lt
        f = tr.steps[tr.step_of[s] - 1][0]
        if tr.t_alloc[v] < tr.kstart[f] and self.last_access[v] < f:
            return NEVER
        return None

    def early_demand(self, v, s):
        tr = self.lt
        nu = self.predicted(v, s, self.learnt[v])
        if nu is None:
            return None
        L = nu - s - 1
        if L <= 0:
            return None
        prev = tr.steps[tr.step_of[s] - 1]
        n, p = len(prev), tr.pos[s]
        most = max(self.live_at_start[prev[(p + 1 + j) % n]] for j in range(int(min(L, n))))
        return most + self.live() - self.live_at_start[prev[p]]

    # ---- forecast ----
    def fit(self, i):
        """The model fitted when step i begins, on steps max(0, i-32) .. i-1: (trend, level). The
        levels are whole bytes (rounded half away from 0), as are the predictions."""
        tr = self.lt
        ks = list(range(max(0, i - FIT_STEPS), i))
        lives = {k: [self.live_at_start[s] for s in tr.steps[k]] for k in ks}
        means = [sum(lives[k]) / len(lives[k]) for k in ks]
        changes = [b - a for a, b in zip(means, means[1:])]
        trend = 0.0 if len(changes) < 2 else median(changes, lambda a, b: a if abs(a) <= abs(b) else b)
        length = max(len(lives[k]) for k in ks)   # the longest fitted step's positions
        level = []
        for p in range(length):
            vals = [lives[k][p] - trend * k for k in ks if p < len(lives[k])]
            level.append(round_half_away(median(vals, lambda a, b: (a + b) / 2)))
        return trend, level

    def forecast(self, model, j):
        trend, level = model
        return [max(0, lv + round_half_away(trend * j)) for lv in level]

    def observe(self, s):
        """Kernel s of a step started: its depth in the step's graph and the forecast's errors."""
        tr = self.lt
        i, p = tr.step_of[s], tr.pos[s]
        d = 0
        for a, mode in tr.ops[s]:
            if mode in (1, 3) and self.adepth_step[a] == i:
                d = max(d, self.adepth[a])
        for a, mode in tr.ops[s]:
            if mode in (2, 3):
                self.adepth[a], self.adepth_step[a] = d + 1, i
        self.deepest[i] = max(self.deepest[i], d + 1)
        actual = self.live_at_start[s]
        self.step_max[i] = max(self.step_max.get(i, 0), actual)
        if i >= 1:
            f = self.forecast(self.models[i], i)
            if p < len(f):
                self.err.append(abs(f[p] - actual) / max(actual, 1))
            if i >= self.K:   # made when step i-H+1 began, H steps ahead
                h = self.forecast(self.models[i - self.K + 1], i)
                if p < len(h):
                    self.herr.append(abs(h[p] - actual) / max(actual, 1))

    def errors(self):
        """forecast_error, forecast_peak_error, forecast_horizon_error (None where nothing counts)."""
        for i, m in self.step_max.items():
            if i >= 1:
                self.perr.append(abs(max(self.forecast(self.models[i], i)) - m) / max(m, 1))
        mean = lambda xs: sum(xs) / len(xs) if xs else None   # noqa: E731
        return mean(self.err), mean(self.perr), mean(self.herr)

    def load(self, s):
        tr = self.lt
        a = max(0, s - LOAD_KERNELS)
        lo, hi = tr.kstart[a], tr.kstart[s]
        if hi == lo:
            return 1.0
        ran, cur = 0, lo
        for x, y in sorted((max(tr.kstart[j], lo), min(tr.kend[j], hi)) for j in range(a, s)):
            x = max(x, cur)
            if y > x:
                ran += y - x
                cur = y
        return ran / (hi - lo)

    def candidates(self):
        """Every allocation of the list (at most 64) or 64 drawn positions (one drawn twice counts
        once), as the list was when the round began; one found freed leaves the list then, the
        last entry taking its place."""
        lst = self.fc_list
        if len(lst) <= SAMPLE:
            drawn = list(lst)
        else:
            seen, drawn = set(), []
            for _ in range(SAMPLE):
                self.fc_x = xorshift64(self.fc_x)
                x = self.fc_x % len(lst)
                if x not in seen:
                    seen.add(x)
                    drawn.append(lst[x])
        for a in drawn:
            if self.state[a] == out.FREED:
                x = lst.index(a)
                lst[x] = lst[-1]
                lst.pop()
                continue
            yield a

    def forecast_round(self, s, t):
        tr = self.lt
        i, p = tr.step_of[s], tr.pos[s]
        trend, level = self.models[i]
        f = self.forecast(self.models[i], i)
        if p >= len(f) or s + 1 >= len(tr.kid):
            return
        q = self.queue(out.D2H_Q)
        if self.qfree[q] > tr.kstart[s + 1] + self.shift:
            return
        peak = max(f)
        rt = round_half_away(trend)
        if peak + max(0, rt) * self.K + self.live() - f[p] - self.off() <= self.cap:
            return
        prev = tr.steps[i - 1]
        q0 = prev[p]
        spacing = (tr.kstart[s] - tr.kstart[0]) / max(s, 1)
        load = self.load(s)
        scored = []
        for a in self.candidates():
            if self.state[a] != out.GPU or a in self.protect or self.valid[a]:
                continue
            nu = self.predicted(a, s, self.fc_pred[a])
            if nu is None or nu <= s + 1:
                continue
            b = tr.bytes[a]
            if nu == NEVER:
                ttnu = 1e18
            else:
                d = nu - s
                ttnu = tr.kstart[q0 + d] - tr.kstart[q0] if q0 + d < s else d * spacing
                ttnu = max(ttnu, 1)
            reload = max(1.0, self.swap_ns(b, out.H2D_Q))
            backlog = max(0, self.last_d2h_end - t)
            hide = 1.0 if backlog + self.swap_ns(b, out.D2H_Q) + reload <= ttnu * load else 0.1
            if self.adepth_step[a] is None:   # never written
                depth = 0.0
            else:
                deepest = max(self.deepest[i], self.deepest[i - 1], 1) if self.adepth_step[a] == i else \
                    max(self.deepest[i - 1], 1)
                depth = min(1.0, self.adepth[a] / deepest)
            scored.append((-(ttnu / reload * hide * (1.25 - depth / 2)), a, nu))
        scored.sort()
        skipped = 0
        for _, v, nu in scored:
            L = nu - s - 1
            demand = None
            if L > 0:
                rest = len(f) - p - 1
                demand = max(f[p + 1:p + 1 + int(min(L, rest))], default=-math.inf)
                if L > rest:
                    demand = max(demand, max(f[:int(min(L - rest, len(f)))]) + rt)
                    n_steps = self.K if nu == NEVER else min(self.K, math.ceil((L - rest) / len(f)))
                    if n_steps >= 2:
                        demand = max(demand, peak + rt * (n_steps if trend > 0 else 2))
                demand += self.live() - f[p]
            if demand is not None and demand - self.off() > self.cap:
                if self.qfree[q] > tr.kstart[s + 1] + self.shift:
                    return
                if (self.evictable(v) and v not in self.protect and not self.valid[v] and not self.would_drop(v)
                        and self.host_room(tr.bytes[v])):
                    self.evict(v, t)
                    self.m["early_evictions"] += 1
                    self.m["forecast_evictions"] += 1
                    continue
            if skipped == SKIPS:
                return
            skipped += 1

    def learning_metrics(self):
        if self.kind == "forecast":
            e, pe, he = self.errors()
            self.metrics.update(forecast_error=e, forecast_peak_error=pe, forecast_horizon_error=he,
                                forecast_horizon_steps=self.K)
        else:
            self.metrics.pop("forecast_evictions", None)


class Sim(Learning, out.Sim):
    """The learning prefetchers over reference_outside.py's engine (the `ideal` allocator; `lru`,
    `largest`, `belady`)."""

    def __init__(self, tr, capacity, policy, link, prefetch, host_cap=0, early=True, samples=4096):
        out.Sim.__init__(self, tr, capacity, policy, link, 0, host_cap, early, samples)
        self.lt = tr
        self.learning_setup(prefetch, early)

    def start_transfer(self, a, direction, t):
        x = super().start_transfer(a, direction, t)
        if x.end > LIMIT:   # "Link models": past the time range, the run stops (exit 2)
            raise TooSlow(self.tr.bytes[a])
        if direction == out.D2H_Q:
            self.last_d2h_end = x.end
        return x

    def would_drop(self, v):
        return False   # no policy of this engine drops

    def swap_ns(self, b, direction):
        return self.link.lat[direction] * 1e9 + b * (1e9 / self.link.bps[direction])

    def run(self):
        super().run()
        self.learning_metrics()
        return self
