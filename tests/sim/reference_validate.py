#!/usr/bin/env python3
"""What `mhc validate` predicts and how it judges, read from the documents alone (docs/validation.md
"Defaults that predict the machine that is measured", "What is judged", "What a prediction is
compared with", "Time scale"; docs/simulator.md "Link models", "Capacity"), sharing no code with
replay/ or sim/:

* the link the replay copies at: a preset, or a profile with its `by_chunk` rate at `--chunk`
  (interpolated in log size; a rate of 0 is not measured: the profile's own), without NCCL or
  memcpy contention (`nccl_share` = `memcpy_share` = 0);
* the time scale: given, or `auto`: the modelled link's bandwidth over the replay link's (each the
  mean of both directions), kept in [1, 1000], and with the paced host link at least 17, the paced
  link then slowed so that the ratio is kept;
* the prediction's link: the replay link with its bandwidths x the scale and latencies / the scale;
* each configuration predicted on the recorded trace (`--recorded-timing`): peak, makespan, loss,
  traffic, stalls (the engine under it is reference_sim.py, the first reading of the simulator);
* `--replay-steps N`: the window (the first kernel of the last N steps at which no prediction has a
  transfer in flight or a kernel running) and each prediction restricted to it;
* the estimate of the replays' duration (predicted makespan x scale x replays, the baseline 2N - 1);
* the verdict from the measured makespans: medians, spreads, error, validated / not validated /
  inconclusive / missed / within target, unconfirmed.
"""

import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_sim as engine   # noqa: E402
import reference_sweep as sweep  # noqa: E402

UNLIMITED = 1 << 62
MIN_PACED_SCALE = 17.0      # "with the paced host link the scale is at least x17"
SCALE_RANGE = (1.0, 1000.0)  # "kept in [1, 1000]"
MISS_FACTOR = 3.0            # "an error beyond the target and more than 3 times the spread"


# ---- the link ---------------------------------------------------------------------------------

def profile(name):
    """A preset as a profile (no by_chunk rows), or the profile file's JSON."""
    if name in sweep.PRESETS:
        bw, duplex = sweep.PRESETS[name]
        return {"name": name, "h2d": {"bandwidth_Bps": bw, "latency_s": 6e-6},
                "d2h": {"bandwidth_Bps": bw, "latency_s": 6e-6}, "copy_engines": 2, "duplex_factor": duplex}
    return json.loads(Path(name).read_text())


def chunk_rate(prof, direction, chunk):
    """"validation predicts with the profile's by_chunk rate at that size (interpolated in log size)";
    docs/simulator.md: "rates are interpolated between the rows around a chunk size ... a rate of 0
    (not measured) is not interpolated: the profile's own then". A chunk outside the rows takes the
    nearest row's rate (reading: nothing is extrapolated)."""
    own = prof[direction]["bandwidth_Bps"]
    key = f"{direction}_Bps"
    rows = [(r["bytes"], r.get(key, 0)) for r in prof.get("by_chunk", [])]
    if not rows:
        return own
    if chunk <= rows[0][0]:
        lo = hi = rows[0]
    elif chunk >= rows[-1][0]:
        lo = hi = rows[-1]
    else:
        i = next(i for i, r in enumerate(rows) if r[0] >= chunk)
        lo, hi = rows[i - 1], rows[i]
        if hi[0] == chunk:
            lo = hi
    if lo[1] <= 0 or hi[1] <= 0:
        return own
    if lo[0] == hi[0]:
        return lo[1]
    f = (math.log(chunk) - math.log(lo[0])) / (math.log(hi[0]) - math.log(lo[0]))
    return lo[1] + (hi[1] - lo[1]) * f


def at_chunk(prof, chunk):
    """The link the replay copies at: the profile's figures at the chunk size, no contention shares."""
    return engine.Link(h2d_bps=chunk_rate(prof, "h2d", chunk), d2h_bps=chunk_rate(prof, "d2h", chunk),
                       h2d_latency_s=prof["h2d"]["latency_s"], d2h_latency_s=prof["d2h"]["latency_s"],
                       copy_engines=prof["copy_engines"], duplex_factor=prof["duplex_factor"],
                       nccl_share=0.0, memcpy_share=0.0)


def mean_bw(h2d, d2h):
    return (h2d + d2h) / 2


def slowed(prof, factor):
    """The profile with every rate (its own and its by_chunk rows') x factor; latencies kept."""
    p = json.loads(json.dumps(prof))
    for d in ("h2d", "d2h"):
        p[d]["bandwidth_Bps"] *= factor
    for r in p.get("by_chunk", []):
        for k in ("h2d_Bps", "d2h_Bps", "both_h2d_Bps", "both_d2h_Bps"):
            if k in r:
                r[k] *= factor
    return p


def prediction_link(link_name, chunk, given_scale, model_link, paced=True):
    """(time scale, the prediction's link). given_scale: a number, or None for auto: the modelled
    link's bandwidth (its own figures: what `mhc simulate --link` moves on the machine that recorded
    the trace) over the replay link's at the chunk size, each the mean of both directions, kept in
    [1, 1000]; with the paced host link at least 17, the paced link's rates slowed by the ratio / 17."""
    prof = profile(link_name)
    x = given_scale
    if x is None:
        m = profile(model_link)
        here = at_chunk(prof, chunk)
        x = mean_bw(m["h2d"]["bandwidth_Bps"], m["d2h"]["bandwidth_Bps"]) / mean_bw(here.h2d_bps, here.d2h_bps)
        x = min(max(x, SCALE_RANGE[0]), SCALE_RANGE[1])
        if paced and x < MIN_PACED_SCALE:
            prof = slowed(prof, x / MIN_PACED_SCALE)
            x = MIN_PACED_SCALE
    return x, scaled_link(at_chunk(prof, chunk), x)


def scaled_link(link, x):
    """"predicting with the link's bandwidths x X and latencies / X is the same experiment"."""
    return replace(link, h2d_bps=link.h2d_bps * x, d2h_bps=link.d2h_bps * x,
                   h2d_latency_s=link.h2d_latency_s / x, d2h_latency_s=link.d2h_latency_s / x)


# ---- the predictions --------------------------------------------------------------------------

class Prediction:
    """One configuration simulated on the recorded trace with the prediction's link."""

    def __init__(self, path, cap_text, link, policy="lru", prefetch="none", allocator="caching", ratio="0",
                 device=None, conf="", max_ops=0.0):
        self.device = sweep.pick_device(path, device)
        self.baseline_peak = sweep.baseline_peak(path, self.device, allocator)
        self.cap = sweep.capacity_bytes(cap_text, self.baseline_peak)
        host = sweep.host_capacity_bytes(ratio, self.cap)
        tr = engine.Trace(str(path), self.device)
        self.trace = tr
        sim = engine.Sim(tr, UNLIMITED if self.cap < 0 else self.cap, policy, replace(link, max_ops_per_sec=max_ops),
                         allocator=allocator, host_cap=max(host, 0), allocator_conf=conf,
                         **sweep.prefetch_args(prefetch))
        res = sim.run()
        m = res.metrics
        self.oom = res.oom
        self.events = res.events
        self.kernel_times = {k: (a, b) for k, a, b in res.kernel_times}
        self.peak = m["simulated_peak_bytes"]
        self.makespan = m["simulated_makespan_ns"]
        self.baseline_makespan = m["baseline_makespan_ns"]
        self.loss = None if res.oom or self.baseline_makespan <= 0 else self.makespan / self.baseline_makespan - 1
        self.swap_in_bytes, self.swap_out_bytes = m["swap_in_bytes"], m["swap_out_bytes"]
        self.swap_ins, self.swap_outs = m["swap_ins"], m["swap_outs"]
        self.stalls, self.stall_ns = m["stalls"], m["stall_ns"]

    def busy_at(self, kernel_id, t):
        """At the kernel's simulated start t: a transfer in flight (begun before t, ending after it)
        or a kernel running (started before t, ending after it). What begins at t itself (the
        kernel's own prefetches and early swap-outs) is the window's."""
        for e in self.events:
            if e[0] in ("swap_in", "swap_out") and e[1] < t < e[2]:
                return True
        return any(k != kernel_id and a < t < b for k, (a, b) in self.kernel_times.items())


def window_kernel(preds, steps):
    """--replay-steps N: the first kernel of the last N steps at which no prediction has a transfer in
    flight or a kernel running (None: replayed whole; the trace has no more steps than N or none).
    A prediction that ran out of memory before a kernel does not hold it back. Returns (kernel id, its
    seq), or None: the whole trace (also when no kernel of those steps is clear)."""
    tr = preds[0].trace
    step_of = tr.kernel_steps
    numbered = [s for s in step_of if s >= 0]
    if steps is None or not numbered:
        return None
    count = max(numbered) + 1
    if count <= steps:
        return None
    first = next(i for i, s in enumerate(step_of) if s >= count - steps)
    for seq in range(first, len(tr.kernels)):
        kid = tr.kernels[seq][0]
        if all((p.oom and kid not in p.kernel_times) or
               (kid in p.kernel_times and not p.busy_at(kid, p.kernel_times[kid][0])) for p in preds):
            return kid, seq
    return None


def window_figures(pred, kid, seq):
    """The window's makespan (the run's end - the kernel's simulated start), the baseline's (the
    recorded span from it) and their loss."""
    tr = pred.trace
    rec_start = tr.kernels[seq][2]
    times = [a[3] for a in tr.allocs] + [a[4] for a in tr.allocs if a[4] is not None]
    times += [k[2] for k in tr.kernels] + [k[3] for k in tr.kernels]
    first = min(times)
    rec_end = first + pred.baseline_makespan
    base = rec_end - rec_start
    end = first + pred.makespan
    span = end - pred.kernel_times[kid][0]
    loss = None if pred.oom or base <= 0 else span / base - 1
    return span, base, loss


def estimate_seconds(makespans_ns, baseline_ns, scale, repeat):
    """"each configuration's predicted makespan x the time scale x its replays (the baseline 2N - 1)"."""
    total = baseline_ns * scale * (2 * repeat - 1)
    for m in makespans_ns:
        total += m * scale * repeat
    return total / 1e9


# ---- the verdict ------------------------------------------------------------------------------

def makespan_spread(ms):
    """"the range of the makespans, without the fastest and the slowest when there are 5 or more"."""
    s = sorted(ms)
    if len(s) >= 5:
        s = s[1:-1]
    return s[-1] - s[0]


def median(ms):
    """The run with the median makespan stands for the configuration: of an even count, the faster
    of the two middle ones (a run, not their mean)."""
    return statistics.median_low(ms)


def loss_spread_pp(config_ms, base_ms, loss):
    """"the configuration's makespan spread / baseline median plus the baseline's spread x (1 + loss)"
    (the baseline's spread relative to its median), in points."""
    bm = median(base_ms)
    return 100 * (makespan_spread(config_ms) / bm + makespan_spread(base_ms) / bm * (1 + loss))


def verdict_kind(error_pp, spread_pp, target, replays):
    """The verdict's first words: "within target, unconfirmed" with one replay; a miss: beyond the
    target and more than 3 x the spread, whatever the spread; inconclusive: the spread over the
    target; validated: within it; else not validated."""
    if replays == 1:
        return "within target, unconfirmed" if abs(error_pp) <= target else "not validated"
    if abs(error_pp) > target and abs(error_pp) > MISS_FACTOR * spread_pp:
        return "missed"
    if spread_pp > target:
        return "inconclusive"
    return "validated" if abs(error_pp) <= target else "not validated"
