"""The prefetcher `forecast:H` as docs/simulator.md states it ("forecast": the demand forecaster,
its errors, learnt next uses and its own early eviction; prefetching as periodic:8), written from
the document alone: a mixin of reference_sim.Sim (with reference_periodic)."""
import math

from reference_dtr import FREED, GPU, SEED, swap_remove, xorshift64

NEVER = 1 << 62
MAX_STEPS = 32     # steps the model is fitted on
LOAD_WINDOW = 32   # kernels over which the compute load is measured
SAMPLE = 64
SKIPS = 4


def median(values, even):
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else even(v[m - 1], v[m])


def round_half_away(x):
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


class ForecastPrefetch:
    def init_forecast(self, horizon):
        self.forecast = horizon   # H; 0: not this prefetcher
        if not horizon:
            return
        self.steps_of_allocations()
        n = len(self.tr.allocs)
        self.f_live = []            # the allocations made, in order (freed ones leave when drawn)
        self.f_pos = {}
        self.f_x = SEED             # its own generator for the draws
        self.track_last = [-1] * n  # kernel of its last access
        self.track_pred = [-1] * n  # learnt next use (-1: unknown)
        self.track_off = [-1] * n   # offset of its last access in its step (-1: none)
        self.track_pos = [0] * n    # position of that kernel in its step
        self.first_pos = {}         # rank -> position of the first use in its step
        self.off_use = {}           # access offset -> (position, distance to the next use)
        self.f_depth = [0] * n   # not depth: cost_aware has a depth()
        self.f_depth_step = [-1] * n
        self.cur_step = -1
        self.pred = []              # this step's forecast per position
        self.pred_peak = None
        self.trend = 0.0
        self.ahead = {}             # step -> the forecast made H steps before
        self.depth_cur = 0
        self.depth_prev = 1
        self.step_max = 0
        self.err = [0.0, 0, 0.0, 0, 0.0, 0]   # sums and counts: per kernel, per step peak, H ahead
        self.m["forecast_evictions"] = 0

    def step_len(self, st):
        return self.tr.step_span[st][1]

    # -- learning
    def forecast_on_alloc(self, a):
        self.f_pos[a] = len(self.f_live)
        self.f_live.append(a)
        self.track_last[a] = -1
        self.track_pred[a] = -1
        st = self.alloc_step[a]
        if st >= 0 and self.first_pos.get(self.alloc_rank[a], -1) >= 0:
            self.track_pred[a] = self.first_of(st) + self.first_pos[self.alloc_rank[a]]

    def forecast_on_access(self, s, k, a):
        if self.track_last[a] >= 0:
            if self.track_off[a] >= 0 and self.track_last[a] < s:
                self.off_use[self.track_off[a]] = (self.track_pos[a], s - self.track_last[a])
        elif self.alloc_step[a] >= 0:
            self.first_pos[self.alloc_rank[a]] = s - self.first_of(self.alloc_step[a])
        self.track_last[a] = s
        self.track_pred[a] = -1
        self.track_off[a] = -1
        place = self.access_place(s, k)
        if place is None:
            return
        off, pos = place
        self.track_off[a] = off
        self.track_pos[a] = pos
        use = self.off_use.get(off)
        if use and use[0] == pos and use[1] > 0:
            self.track_pred[a] = s + use[1]

    # -- the model
    def step_mean(self, st):
        b, n = self.tr.step_span[st]
        return sum(self.live_at(q) for q in range(b, b + n)) / n

    def refit(self, st):
        first = max(0, st - MAX_STEPS)
        means = [self.step_mean(k) for k in range(first, st) if self.step_len(k) > 0]
        length = max((self.step_len(k) for k in range(first, st)), default=0)
        diffs = [means[i] - means[i - 1] for i in range(1, len(means))]
        self.trend = 0.0 if len(diffs) < 2 else median(diffs, lambda lo, hi: lo if abs(lo) <= abs(hi) else hi)
        self.level = []
        for p in range(length):
            vals = [self.live_at(self.first_of(k) + p) - self.trend * k for k in range(first, st)
                    if p < self.step_len(k)]
            self.level.append(round_half_away(median(vals, lambda lo, hi: (lo + hi) / 2)))
        self.pred = self.predict(st)
        self.pred_peak = max(self.pred) if self.pred else None
        self.ahead[st - 1 + self.forecast] = self.predict(st - 1 + self.forecast)

    def predict(self, target):
        return [max(0, lv + round_half_away(self.trend * target)) for lv in self.level]

    def close_step(self, st):
        if st < 0 or not self.pred:
            return
        self.err[2] += abs(self.pred_peak - self.step_max) / max(self.step_max, 1)
        self.err[3] += 1

    def observe(self, s):
        tr = self.tr
        st = tr.kernel_steps[s]
        if st < 0:
            return
        if st != self.cur_step:
            self.close_step(self.cur_step)
            if st > self.cur_step:
                self.refit(st)
            else:
                self.pred = []
            self.cur_step = st
            self.step_max = 0
            self.depth_prev = max(self.depth_cur, 1)
            self.depth_cur = 0
        d = 1 + max((self.f_depth[a] for a, mode in tr.operands[s] if mode & 1 and self.f_depth_step[a] == st),
                    default=0)
        for a, mode in tr.operands[s]:
            if mode & 2:
                self.f_depth[a], self.f_depth_step[a] = d, st
        self.depth_cur = max(self.depth_cur, d)
        actual = self.live_at(s)
        self.step_max = max(self.step_max, actual)
        pos = s - self.first_of(st)
        if pos < len(self.pred):
            self.err[0] += abs(self.pred[pos] - actual) / max(actual, 1)
            self.err[1] += 1
        ahead = self.ahead.get(st)
        if ahead is not None and pos < len(ahead):
            self.err[4] += abs(ahead[pos] - actual) / max(actual, 1)
            self.err[5] += 1

    def forecast_finish(self):
        self.close_step(self.cur_step)
        m = self.m
        if self.err[1]:
            m["forecast_error"] = self.err[0] / self.err[1]
        if self.err[3]:
            m["forecast_peak_error"] = self.err[2] / self.err[3]
        if self.err[5]:
            m["forecast_horizon_error"] = self.err[4] / self.err[5]

    # -- demand
    def predicted_next(self, v, s):
        if self.track_pred[v] >= 0:
            return self.track_pred[v]
        st = self.tr.kernel_steps[s]
        if st < 1:
            return -1
        prev = self.first_of(st - 1)
        return NEVER if self.track_last[v] < prev and self.tr.allocs[v][3] < self.tr.kernels[prev][2] else -1

    def pred_max(self, lo, hi):
        return max(self.pred[lo:hi + 1])

    def demand_until(self, nu, s):
        st = self.tr.kernel_steps[s]
        if st < 0 or st != self.cur_step or not self.pred or nu < 0:
            return None
        n = len(self.pred)
        pos = s - self.first_of(st)
        if pos >= n:
            return None
        length = NEVER if nu == NEVER else nu - s - 1
        if length <= 0:
            return None
        rest = n - 1 - pos
        demand = None
        if rest > 0:
            demand = self.pred_max(pos + 1, pos + min(length, rest))
        if length > rest:
            over = length - rest
            trend = round_half_away(self.trend)
            nxt = self.pred_max(0, min(over, n) - 1) + trend
            demand = nxt if demand is None else max(demand, nxt)
            steps = min(self.forecast, (over + n - 1) // n) if over > n else 1
            if steps >= 2:
                demand = max(demand, self.pred_peak + trend * (steps if trend > 0 else 2))
        return demand + self.live_now - self.pred[pos]

    # -- early eviction with its own victims
    def f_draw(self):   # not draw(): the sampled policies' generator is another one
        self.f_x = xorshift64(self.f_x)
        return self.f_x

    def candidates(self, s):
        if len(self.f_live) <= SAMPLE:
            cand = list(self.f_live)
        else:
            n = len(self.f_live)
            cand, seen = [], set()
            for _ in range(SAMPLE):
                at = self.f_draw() % n
                if at not in seen:
                    seen.add(at)
                    cand.append(self.f_live[at])
        kept = []
        for c in cand:
            if self.state[c] == FREED:
                swap_remove(self.f_live, self.f_pos, c)
                continue
            nu = self.predicted_next(c, s)
            if (self.state[c] == GPU and c not in self.protected and not self.host_valid[c] and nu >= 0
                    and (nu == NEVER or nu > s + 1)):
                kept.append((c, nu))
        return kept

    def compute_load(self, s):
        tr = self.tr
        b = max(0, s - LOAD_WINDOW)
        span = tr.kernels[s][2] - tr.kernels[b][2]
        if span <= 0:
            return 1.0
        busy, covered = 0, tr.kernels[b][2]
        for q in range(b, s):
            lo, hi = max(tr.kernels[q][2], covered), min(tr.kernels[q][3], tr.kernels[s][2])
            if hi > lo:
                busy += hi - lo
                covered = hi
        return min(1.0, busy / span)

    def f_score(self, a, nu, s, t):
        tr = self.tr
        st = tr.kernel_steps[s]
        q0 = self.first_of(st - 1) + (s - self.first_of(st))
        ahead = nu - s
        q1 = q0 + ahead
        if nu == NEVER:
            ttnu = 1e18
        elif q1 < s:   # the previous step ran that far: the recorded time there
            ttnu = max(float(tr.kernels[q1][2] - tr.kernels[q0][2]), 1.0)
        else:          # at the mean kernel spacing so far
            ttnu = max(ahead * float(tr.kernels[s][2] - tr.kernels[0][2]) / max(s, 1), 1.0)
        reload = max(self.swap_cost(a, True), 1.0)
        backlog = float(max(0, self.d2h_end - t))
        hides = backlog + self.swap_cost(a, False) + reload <= ttnu * self.compute_load(s)
        ref = max(self.depth_cur, self.depth_prev) if self.f_depth_step[a] == self.cur_step else self.depth_prev
        frac = 0.0 if self.f_depth_step[a] < 0 else min(1.0, self.f_depth[a] / max(ref, 1))
        return ttnu / reload * (1.0 if hides else 0.1) * (1.25 - 0.5 * frac)

    def early_open(self, s):
        n = len(self.tr.kernels)
        if s + 1 >= n:
            return False
        d2h = True if self.link.copy_engines == 1 else False
        return self.queue_free[d2h] <= self.tr.kernels[s + 1][2] + self.shift

    def forecast_early(self, s, t):
        tr = self.tr
        if not self.pred or tr.kernel_steps[s] != self.cur_step or not self.early_open(s):
            return
        pos = s - self.first_of(self.cur_step)
        if pos >= len(self.pred):
            return
        cap = self.cap
        # no victim's demand can exceed this bound: when it fits, nothing is drawn
        bound = (self.pred_peak + max(0, round_half_away(self.trend)) * self.forecast + self.live_now
                 - self.pred[pos])
        if bound - self.off <= cap:
            return
        kept = self.candidates(s)
        ranked = sorted(((self.f_score(c, nu, s, t), -c) for c, nu in dict(kept).items()), reverse=True)
        skipped = 0
        for _, neg in ranked:
            v = -neg
            demand = self.demand_until(self.predicted_next(v, s), s)
            if demand is None or demand - self.off <= cap:
                skipped += 1
                if skipped > SKIPS:
                    break
                continue
            if not self.early_open(s):
                break
            if (self.state[v] != GPU or self.pins[v] or v in self.protected or self.host_valid[v]
                    or (self.sampled and (v not in self.epos or self.drops(v)))
                    or not self.host_room(tr.allocs[v][2])):
                skipped += 1
                if skipped > SKIPS:
                    break
                continue
            self.evict(v, t)
            self.m["early_evictions"] += 1
            self.m["forecast_evictions"] += 1
