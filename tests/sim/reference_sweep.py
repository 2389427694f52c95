#!/usr/bin/env python3
"""A reading of what `mhc simulate` and `mhc sweep` make of a run's figures, written from the docs
alone (docs/simulator.md "Inputs" (device), "Time" (makespan, loss, OOM slowdown), "Capacity",
"Limits", "Sweep", "Outputs"; docs/cli.md "Sizes", "Environment", "What the commands print"),
sharing no code with the simulator: the device chosen, the baseline peak of each allocator model,
the capacity and host buffer in bytes from what the user wrote (shares with decimals, sizes in
every unit, environment variables), throughput loss, peak reduction and OOM slowdown, the sweep's
grid and bisection (which runs, which answer, what is stored and under which name) and the words
and figures of the text output. The engine under it (which victim, which transfer, when) is the
first reading, reference_sim.py; this file adds what the command does around it.
reference_sweep_compare.py runs it beside `mhc`.
"""
import json
import math
import re
import sqlite3
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_sim as engine  # noqa: E402

UNLIMITED = 1 << 62

# docs/simulator.md "Link models": bandwidth each way, factor while both directions run; 6 us, 2 engines
PRESETS = {"pcie3": (12e9, 0.5), "pcie4": (25e9, 0.5), "pcie5": (55e9, 52 / 55), "nvlink-c2c": (320e9, 0.5),
           "nvlink4-peer": (380e9, 375 / 380)}
ORACLES = ("belady",)   # and lookahead:K (the sweep marks them with *)

# docs/cli.md "Sizes": binary K, KiB, M, MiB, G, GiB, T, TiB; decimal kB, MB, GB, TB; B; any case
UNITS = {"b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
         "t": 1 << 40, "tib": 1 << 40, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}


def link(name):
    """A preset, or a link profile file ("Link models": nccl_share and memcpy_share 0.5 when absent)."""
    if name in PRESETS:
        bw, duplex = PRESETS[name]
        return engine.Link(h2d_bps=bw, d2h_bps=bw, duplex_factor=duplex)
    p = json.loads(Path(name).read_text())
    return engine.Link(h2d_bps=p["h2d"]["bandwidth_Bps"], d2h_bps=p["d2h"]["bandwidth_Bps"],
                       h2d_latency_s=p["h2d"]["latency_s"], d2h_latency_s=p["d2h"]["latency_s"],
                       copy_engines=p["copy_engines"], duplex_factor=p["duplex_factor"],
                       nccl_share=p.get("nccl_share", 0.5), memcpy_share=p.get("memcpy_share", 0.5))


def link_label(name):
    """How a run names its link: the preset's name, or the profile's `name`."""
    return name if name in PRESETS else json.loads(Path(name).read_text())["name"]


def parse_size(text):
    """A number and a unit, to the nearest byte, halves up (0.3KiB = 307 B, 2.5B = 3 B)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]+)\s*", text)
    return math.floor(Fraction(m.group(1)) * UNITS[m.group(2).lower()] + Fraction(1, 2))


def live_peaks(path):
    """Each device's live peak: at one instant frees before allocations, an allocation freed at the
    instant it is made counted with what is alive when it is made (docs/trace-format.md)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT id, device, bytes, t_alloc, t_free FROM allocations ORDER BY id").fetchall()
    db.close()
    out = {}
    for dev in {r[1] for r in rows}:
        ev = []
        for i, d, b, ta, tf in rows:
            if d != dev:
                continue
            ev.append((ta, 1, i, b))
            if tf is not None:
                ev.append((tf, 0 if tf > ta else 2, i, -b))   # a zero-length one right after its allocation
        ev.sort(key=lambda e: (e[0], 0 if e[1] == 0 else 1, e[2], e[1]))
        live = peak = 0
        for _, _, _, b in ev:
            live += b
            peak = max(peak, live)
        out[dev] = peak
    return out


def pick_device(path, device=None):
    """"Inputs": the GPU (>= 0) with the largest live peak, ties the lowest number."""
    if device is not None:
        return device
    peaks = {d: p for d, p in live_peaks(path).items() if d >= 0}
    return min(peaks, key=lambda d: (-peaks[d], d))


def baseline_peak(path, device, allocator, conf=""):
    """"Capacity": the unlimited live peak (ideal) or the unlimited reserved peak (caching)."""
    if allocator == "ideal":
        return live_peaks(path)[device]
    res, _ = engine.simulate(str(path), UNLIMITED, "lru", engine.Link(), device, 0, allocator, 0, conf)
    return res.metrics["simulated_peak_bytes"]


def capacity_bytes(text, peak):
    """"Capacity": a share of the baseline peak rounded down (exact where it divides), a size, or
    unlimited (-1)."""
    if text == "unlimited":
        return -1
    if text.strip().endswith("%"):
        return math.floor(Fraction(text.strip()[:-1].strip()) * peak / 100)
    return parse_size(text)


def host_capacity_bytes(ratio, cap):
    """"Capacity": R x the capacity, rounded the same way; -1 when unlimited (R = 0)."""
    r = Fraction(ratio)
    return -1 if r == 0 or cap < 0 else math.floor(r * cap)


def first_recorded(path, device):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t = [db.execute("SELECT min(t_alloc) FROM allocations WHERE device = ?", (device,)).fetchone()[0],
         db.execute("SELECT min(t_start) FROM kernels WHERE device = ?", (device,)).fetchone()[0]]
    db.close()
    return min(x for x in t if x is not None)


def recorded_time_of(path, alloc, kernel):
    """The recorded time of what failed: the kernel's start, or the allocation's."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    row = (db.execute("SELECT t_start FROM kernels WHERE id = ?", (kernel,)).fetchone() if kernel else
           db.execute("SELECT t_alloc FROM allocations WHERE id = ?", (alloc,)).fetchone())
    db.close()
    return row[0]


def prefetch_args(prefetch):
    """reference_sim.simulate's arguments for a --prefetch name."""
    name, _, k = prefetch.partition(":")
    if name == "lookahead":
        return dict(lookahead=int(k or 8))
    if name == "periodic":
        return dict(periodic=int(k or 8))
    if name == "capuchin":
        return dict(capuchin=True)
    if name == "forecast":
        return dict(forecast=int(k or 8))
    return {}


def parse_rate(text):
    """A bandwidth: a size per second (25GB/s; "/s" may be left out)."""
    return parse_size(text.strip().removesuffix("/s"))


def parse_duration(text):
    """A number and ns, us, ms or s, in seconds."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(ns|us|ms|s)\s*", text)
    return float(Fraction(m.group(1)) / {"ns": 10 ** 9, "us": 10 ** 6, "ms": 10 ** 3, "s": 1}[m.group(2)])


def link_with(name, over):
    """A preset with the options that override its figures ("Link models"): over maps an option's
    name (h2d-bandwidth, d2h-bandwidth, latency, copy-engines, duplex-factor, nccl-share, memcpy-share,
    max-swap-ops-per-sec) to its text."""
    lk = link(name)
    for key, text in over.items():
        if key == "h2d-bandwidth":
            lk.h2d_bps = parse_rate(text)
        elif key == "d2h-bandwidth":
            lk.d2h_bps = parse_rate(text)
        elif key == "latency":   # both directions
            lk.h2d_latency_s = lk.d2h_latency_s = parse_duration(text)
        elif key == "copy-engines":
            lk.copy_engines = int(text)
        elif key == "duplex-factor":
            lk.duplex_factor = float(text)
        elif key == "nccl-share":
            lk.nccl_share = float(text)
        elif key == "memcpy-share":
            lk.memcpy_share = float(text)
        elif key == "max-swap-ops-per-sec":
            lk.max_ops_per_sec = float(text)
    return lk


class Run:
    """One run as `mhc simulate` reports it: the engine's figures and the command's around them."""

    def __init__(self, path, cap_text, policy="lru", prefetch="none", link_name="pcie4", allocator="caching",
                 ratio="0", device=None, share=None, over=None, samples=engine.MEMORY_SAMPLES, conf=""):
        self.device = pick_device(path, device)
        # "Capacity": the caching baseline is the recorded settings' (without --allocator-conf), so that a
        # share is the same bytes under every what-if and the peak reduction is against what was recorded
        self.baseline_peak = baseline_peak(path, self.device, allocator)
        self.cap = (math.floor(share * self.baseline_peak) if share is not None
                    else capacity_bytes(cap_text, self.baseline_peak))
        self.host_cap = host_capacity_bytes(ratio, self.cap)
        tr = engine.Trace(str(path), self.device)
        sim = engine.Sim(tr, UNLIMITED if self.cap < 0 else self.cap, policy, link_with(link_name, over or {}),
                         allocator=allocator, host_cap=max(self.host_cap, 0), allocator_conf=conf,
                         **prefetch_args(prefetch))
        kept, engine.MEMORY_SAMPLES = engine.MEMORY_SAMPLES, samples   # --memory-samples
        try:
            res = sim.run()
        finally:
            engine.MEMORY_SAMPLES = kept
        self.memory = res.memory
        m = dict(res.metrics)
        m["baseline_peak_bytes"] = self.baseline_peak
        m["capacity_bytes"] = self.cap
        m["host_capacity_bytes"] = self.host_cap
        self.oom = res.oom
        self.oom_report = None
        base, sim_ns = m["baseline_makespan_ns"], m["simulated_makespan_ns"]
        if res.oom:
            ev = next(e for e in res.events if e[0] == "oom")
            alloc = tr.allocs[ev[3]][0] if ev[3] is not None else None
            ran = recorded_time_of(path, alloc, ev[4]) - first_recorded(path, self.device)
            m["oom_slowdown"] = sim_ns / ran - 1 if ran > 0 else 0.0
            m["throughput_loss"] = m["peak_reduction"] = None
            # rule 7: where, when and the figures (the state is the OOM's: the run stopped there)
            self.oom_report = dict(sim.oom_report, oom_time_ns=ev[1], oom_bytes_short=ev[5], allocation=alloc,
                                   kernel=ev[4] or 0)
            if sim.caching:
                self.oom_report["largest_free_block"] = sim.caching.largest_free_block()
            m.update({k: v for k, v in self.oom_report.items() if k.startswith("oom_")})
        else:
            # "Inputs", events all at one instant: a share of a zero baseline is not defined
            m["throughput_loss"] = sim_ns / base - 1 if base > 0 else None
            m["peak_reduction"] = 1 - m["simulated_peak_bytes"] / self.baseline_peak
        self.metrics = m


def within(run, budget):
    """"Sweep": finishes (no OOM) with a throughput loss <= the budget."""
    return not run.oom and run.metrics["throughput_loss"] is not None and run.metrics["throughput_loss"] <= budget


def bisect(path, policy, prefetch, link_name, allocator, ratio, budget, steps, over=None, conf=""):
    """"Sweep": the run at 100% first; then lo = 0, hi = 1, `steps` midpoints. Returns (answer share
    or None, the run at it or None, runs made, 'not within' when even 100% is not)."""
    top = Run(path, "100%", policy, prefetch, link_name, allocator, ratio, share=1.0, over=over, conf=conf)
    if not within(top, budget):
        return None, None, 1, "not within"
    lo, hi, at, runs = 0.0, 1.0, top, 1
    for _ in range(steps):
        mid = (lo + hi) / 2
        r = Run(path, None, policy, prefetch, link_name, allocator, ratio, share=mid, over=over, conf=conf)
        runs += 1
        if within(r, budget):
            hi, at = mid, r
        else:
            lo = mid
    return (None, None, runs, "no saving") if hi == 1.0 else (hi, at, runs, "answer")


# docs/cli.md "What the commands print": binary sizes with two decimals, times ns/us/ms with two
# decimals and s with three, peak reduction one decimal, loss two decimals.
def fmt_size(b):
    if b < 1024:
        return f"{int(b)} B"
    for unit in ["KiB", "MiB", "GiB", "TiB"]:
        b /= 1024
        if b < 1024 or unit == "TiB":
            return f"{b:.2f} {unit}"


def fmt_time(ns):
    if ns < 1000:
        return f"{int(ns)} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} us"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


def cap_name(cap_text):
    """The capacity as a run's name writes it: a share with at most six significant digits (87.50% and
    87.5 % are 87.5%), a size as the output writes sizes (700MiB: 700.00 MiB), or unlimited."""
    t = cap_text.strip()
    if t == "unlimited":
        return t
    if t.endswith("%"):
        return f"{float(t[:-1].strip()):g}%"
    return fmt_size(parse_size(t))


def run_name(policy, prefetch, cap_text, link_name, allocator, over=None, conf=""):
    """The stored run's name (the text output's first line): policy+prefetch@capacity/link, then
    /caching for the caching allocator (the ideal one is not named) with [CONF], the --allocator-conf
    given, as given; a link whose figures an option
    overrides (any of them given, whatever its value; --max-swap-ops-per-sec is no figure of the
    link) is LINK-custom."""
    custom = any(k != "max-swap-ops-per-sec" for k in (over or {}))
    return (f"{policy}+{prefetch}@{cap_name(cap_text)}/{link_label(link_name)}" + ("-custom" if custom else "") +
            ("/caching" if allocator == "caching" else "") + (f"[{conf}]" if conf else ""))


def share_text(share):
    """A bisection answer's share as its name writes it (`@96.875%`)."""
    return f"{share * 100:g}%"


def grid_figures(run, cap_text):
    """A grid row after policy and prefetch: capacity, peak, reduction, loss, stall, swap-in, swap-out."""
    m = run.metrics
    cap = cap_text if cap_text.endswith("%") or cap_text == "unlimited" else fmt_size(parse_size(cap_text))
    if run.oom:
        head = [cap, "-", "-", "OOM"]
    else:
        head = [cap, fmt_size(m["simulated_peak_bytes"]), f"{m['peak_reduction'] * 100:.1f}%",
                f"{m['throughput_loss'] * 100:.2f}%"]
    return head + [fmt_time(m["stall_ns"]), fmt_size(m["swap_in_bytes"]), fmt_size(m["swap_out_bytes"])]


def answer_figures(share, run):
    """`lru none 96.9% = 980.81 MiB: peak 980.45 MiB, peak reduction 3.2%, throughput loss 20.34%`
    after the names (the figures named as simulate names them)."""
    m = run.metrics
    return (f"{share * 100:.1f}% = {fmt_size(m['capacity_bytes'])}: peak {fmt_size(m['simulated_peak_bytes'])}, "
            f"peak reduction {m['peak_reduction'] * 100:.1f}%, throughput loss {m['throughput_loss'] * 100:.2f}%")
