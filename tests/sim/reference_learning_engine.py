#!/usr/bin/env python3
"""The learning prefetchers (`periodic:K`, `capuchin`, `forecast:H`) of docs/simulator.md over an
engine that has what reference_outside.py's leaves out: the `caching` allocator (default settings,
a profiler's first reserved figure) and the sampled policies `dtr` and `cost_aware` with drops and
recursive recomputation.

Two outside readings, each written from the page alone, put together and nothing else: the
prefetchers are reference_learning.py's (`Learning`), the engine is the third reading's
(reference_ranks_engine.py's `Engine`: rules 1-10, the link, the host buffer, the memory samples).
Until 2026-12-06 these combinations (a learning prefetcher with the caching allocator, or with a
policy that drops) had one reading only, the first (reference_sim.py).
Standard library only."""
import reference_learning as lrn
import reference_ranks_engine as eng


class Sim(lrn.Learning, eng.Engine):
    """trace: a reference_ranks_engine.Trace; opts: its configuration (allocator, policy, link,
    host_ratio, max_ops, memory_samples, no_early, and prefetch: periodic[:K], capuchin or
    forecast[:H]); capacity in bytes (None: unlimited). reference_ranks_engine.simulate_job takes
    it as its engine (opts["engine"]): the learning prefetchers on coupled ranks."""

    def __init__(self, trace, opts, capacity):
        eng.Engine.__init__(self, trace, opts, capacity)
        self.lt = lrn.Trace(trace.path, trace.device)
        # what both readings take from "Inputs" must be the same, or the pair reads nothing
        if [list(o) for o in self.lt.ops] != [list(o) for o in trace.ops] or self.lt.kid != trace.kid:
            raise AssertionError(f"{trace.path}: the two readings disagree on the kernels' operands")
        _, self.live_at_start = self.lt.live_walk()
        # "Identity": at an unlimited capacity no demand exceeds it, so rule 10 never evicts
        self.learning_setup(opts["prefetch"], not opts.get("no_early") and capacity is not None)
        if self.lookahead:
            self.early = not opts.get("no_early") and capacity is not None

    # the engine's names for what the prefetchers ask
    @property
    def protect(self):
        return self.window

    @protect.setter
    def protect(self, allocations):
        self.window = allocations

    @property
    def valid(self):
        return self.host_valid

    def queue(self, direction):
        return direction if self.link["engines"] >= 2 else 0

    def live(self):
        return self.live_bytes

    def off(self):
        return self.live_bytes - self.resident_bytes

    def swap_ns(self, b, direction):
        if direction == 0:
            return self.link["h2d_lat"] * 1e9 + b * self.ns_in
        return self.link["d2h_lat"] * 1e9 + b * self.ns_out

    def transfer(self, kind, i, t):
        x = super().transfer(kind, i, t)
        if x.end > lrn.LIMIT:   # "Link models": past the time range, the run stops (exit 2)
            raise lrn.TooSlow(self.tr.abytes[i])
        if kind == 1:
            self.last_d2h_end = x.end
        return x

    # `lookahead:K` and `none` stay the engine's own (reference_ranks_engine.py), so that one
    # driver runs every prefetcher over the engine's settings
    def after_launch(self, s, t):
        if self.lookahead:
            return eng.Engine.after_launch(self, s, t)
        return lrn.Learning.after_launch(self, s, t)

    def early_demand(self, v, s):
        if self.lookahead:
            return eng.Engine.early_demand(self, v, s)
        return lrn.Learning.early_demand(self, v, s)

    def run_alone(self):
        """One trace's run, with the figures its stored run holds (metrics, kernel_times, memory)."""
        for _ in self.run():   # no cross-rank kernels here: it never waits
            pass
        tr = self.tr
        m = dict(self.m)
        m.update(baseline_peak_bytes=self.base_peak, simulated_peak_bytes=self.peak, host_peak_bytes=self.host_peak,
                 kernels_reached=len(self.kt), baseline_makespan_ns=tr.last - tr.first,
                 capacity_bytes=-1 if self.cap is None else self.cap)
        if self.kt:
            m["last_kernel_reached"] = tr.kid[max(self.kt)]
        base = tr.last - tr.first
        if isinstance(self.oom, dict):
            o = self.oom
            mk = o["t"] - tr.first
            m.update(oom=1, simulated_makespan_ns=mk, throughput_loss=None, peak_reduction=None,
                     oom_slowdown=mk / (o["recorded"] - tr.first) - 1 if o["recorded"] != tr.first else 0.0,
                     oom_bytes_needed=o["needed"], oom_bytes_pinned=o["pinned"], oom_bytes_short=o["short"],
                     oom_time_ns=o["t"])
            m["oom_fragmentation"] = int(o.get("frag", False))   # "Outputs": 0 with the ideal allocator
        else:
            mk = tr.last + self.shift - tr.first
            m.update(oom=0, simulated_makespan_ns=mk, throughput_loss=mk / base - 1 if base else None,
                     peak_reduction=1 - self.peak / self.base_peak if self.base_peak else 0.0)
        self.metrics = m
        self.learning_metrics()
        self.kernel_times = {tr.kid[s]: (t, t + tr.kend[s] - tr.kstart[s]) for s, t in self.kt.items()}
        self.memory = [self.buckets[b] for b in sorted(self.buckets)]
        return self


def simulate(path, opts, share):
    """`mhc simulate PATH` under opts with --capacity share ("70%", "unlimited" or bytes)."""
    trace = eng.Trace(path, opts.get("device"))
    base = eng.baseline_peak(trace, opts["allocator"])
    sim = Sim(trace, opts, eng.capacity_of(share, base))
    sim.base_peak = base
    return sim.run_alone()
