"""An outside reading of docs/simulator.md's "Link models" and rule 8 ("Transfers"), written from the
page alone: which figures a preset, a link profile and the overriding options give a run, and what
every transfer a run stores must then satisfy.

It does not re-run the policies: it reads the events `mhc simulate` stored (swap_out = a D2H copy,
swap_in = an H2D copy, in the order the run stored them, which is the order it started them) and
checks each against the page:

* its time: `ceil(latency_s × 1e9 + n / bw × 1e9)` ns, at least 1, where `bw` is the direction's
  bandwidth × `duplex_factor` when the other direction's queue is busy at its start (that queue's
  last transfer ends after it; never with one copy engine), × (1 − `nccl_share`) when a recorded
  NCCL/RCCL kernel of the device runs at recorded time `s − shift`, × (1 − `memcpy_share`) when a
  recorded memcpy of the device in the same direction does;
* its queue: one per direction (two or more copy engines) or one shared by both (one engine), each
  first in, first out: a transfer starts no earlier than the one before it in its queue ends;
* the swap-operation cap: a transfer starts at least `ceil(1e9 / max_ops)` ns after the previous
  transfer's start, of either direction;
* a prefetch is an instant at its request, its transfer the swap_in beside it: that transfer starts
  exactly at max(request, its queue free, the cap's earliest);
* a profile's `by_chunk` rows are for `mhc validate` only: the run's figures are the profile's own.

`shift` is the run's global shift (docs/simulator.md "Time"), rebuilt from the stored stalls (see
check_run). Stdlib only; shares no code with sim/.
"""
import math
import re

GB = 1e9

# "Link models": the presets' figures (pinned memory), 6 µs per transfer, 2 copy engines, shares 0.5.
PRESETS = {
    "pcie3": (12 * GB, 0.5),          # its duplex factor is not measured: assumed like pcie4
    "pcie4": (25 * GB, 0.5),
    "pcie5": (55 * GB, 52 / 55),
    "nvlink-c2c": (320 * GB, 0.5),
    "nvlink4-peer": (380 * GB, 375 / 380),
}


class Link:
    def __init__(self, name, h2d, d2h, h2d_lat, d2h_lat, engines, duplex, nccl=0.5, memcpy=0.5):
        self.name = name
        self.bw = {"h2d": h2d, "d2h": d2h}
        self.lat = {"h2d": h2d_lat, "d2h": d2h_lat}
        self.engines, self.duplex, self.nccl, self.memcpy = engines, duplex, nccl, memcpy
        self.max_ops = 0.0

    def config(self):
        """The run's link as `--json`'s config holds it (figures, not text)."""
        return {"link": self.name, "link.h2d_Bps": self.bw["h2d"], "link.d2h_Bps": self.bw["d2h"],
                "link.h2d_latency_s": self.lat["h2d"], "link.d2h_latency_s": self.lat["d2h"],
                "link.copy_engines": self.engines, "link.duplex_factor": self.duplex,
                "link.nccl_share": self.nccl, "link.memcpy_share": self.memcpy,
                "max_swap_ops_per_sec": self.max_ops}


def preset(name):
    bw, duplex = PRESETS[name]
    return Link(name, bw, bw, 6e-6, 6e-6, 2, duplex)


def profile(doc):
    """A profile file's figures: its own (never a `by_chunk` row); shares 0.5 when absent."""
    return Link(doc["name"], doc["h2d"]["bandwidth_Bps"], doc["d2h"]["bandwidth_Bps"],
                doc["h2d"]["latency_s"], doc["d2h"]["latency_s"], doc["copy_engines"], doc["duplex_factor"],
                doc.get("nccl_share", 0.5), doc.get("memcpy_share", 0.5))


def override(link, opts):
    """The overriding options (values already in B/s, s, counts). A run given any of them is named
    `LINK-custom`, except the values that stand for the link's own figure: `--copy-engines 0`,
    `--duplex-factor 0`, `--nccl-share -1`, `--memcpy-share -1`. `--max-swap-ops-per-sec` is no
    figure of the link."""
    custom = False
    for key, value in opts.items():
        if key == "max_ops":
            link.max_ops = value
            continue
        if (key, value) in (("engines", 0), ("duplex", 0), ("nccl", -1), ("memcpy", -1)):
            continue
        custom = True
        if key == "h2d":
            link.bw["h2d"] = value
        elif key == "d2h":
            link.bw["d2h"] = value
        elif key == "latency":
            link.lat = {"h2d": value, "d2h": value}
        else:
            setattr(link, key, value)
    if custom:
        link.name += "-custom"
    return link


def duration(link, direction, n, duplex, nccl, memcpy):
    """Rule 8's time of one transfer, in ns."""
    bw = link.bw[direction]
    if duplex:
        bw *= link.duplex
    if nccl:
        bw *= 1 - link.nccl
    if memcpy:
        bw *= 1 - link.memcpy
    return max(1, math.ceil(link.lat[direction] * 1e9 + n / bw * 1e9))


def running(intervals, r):
    """Whether a recorded interval [t_start, t_end) holds recorded time r."""
    return any(a <= r < b for a, b in intervals)


def check_run(link, events, nccl_kernels, memcpys):
    """Every transfer of one run against rule 8. events: (kind, t_start, t_end, allocation, kernel,
    bytes) in stored order, kinds by name; nccl_kernels: the device's recorded NCCL/RCCL kernels as
    (t_start, t_end); memcpys: {"h2d": [...], "d2h": [...]} of the device. Returns (problems as text,
    transfers checked, transfers whose contention the stored events leave open).

    The shift in force when a transfer was decided is not stored: it is one of the run's shifts (0,
    then the sum of the stalls in the order they end) from the one in force at the decision of the
    transfer before it in its queue up to the one at this transfer's start. Where those shifts put a recorded
    NCCL kernel or memcpy at `s - shift` differently, any of their times is taken."""
    problems = []
    stalls = sorted((e, e - s) for kind, s, e, *_ in events if kind == "stall")
    shifts, ends, total = [0], [None], 0   # shifts[i] in force from ends[i] on
    for end, d in stalls:
        total += d
        shifts.append(total)
        ends.append(end)
    # The run stores its events by start time, not in the order it booked them. Within a queue the
    # two are one order (first in, first out), and with the swap-operation cap across both (each
    # booking starts at least the gap after the one before). Without a cap, whether the other
    # queue's last booking ended after a start is open where some transfer of the other direction
    # ends after it: either rate is taken there.
    transfers = [(s, i, kind, e, alloc, n) for i, (kind, s, e, alloc, kernel, n) in enumerate(events)
                 if kind in ("swap_in", "swap_out")]
    transfers.sort()
    asked = sorted((s, alloc) for kind, s, e, alloc, *_ in events if kind == "prefetch")
    last = {"h2d": None, "d2h": None}   # each queue's last transfer (start, end)
    ends_after = {"h2d": [], "d2h": []}
    for s, i, kind, e, alloc, n in transfers:
        ends_after["h2d" if kind == "swap_in" else "d2h"].append(e)
    prev_start = None
    gap = math.ceil(1e9 / link.max_ops) if link.max_ops > 0 else 0
    # the least shift (an index) the queue's next decision may have had: within a queue the bookings'
    # order is their start's, and the shift only grows
    lo = {"h2d": 0, "d2h": 0}
    count = open_ = 0
    for s, i, kind, e, alloc, n in transfers:
        count += 1
        d = "h2d" if kind == "swap_in" else "d2h"
        other = "d2h" if d == "h2d" else "h2d"
        queue = d if link.engines >= 2 else "h2d"   # one engine: one queue for both
        if link.engines < 2:
            duplexes = [False]
        elif gap:
            duplexes = [last[other] is not None and last[other][1] > s]
        else:
            duplexes = [False, True] if any(x > s for x in ends_after[other]) else [False]
        hi = max(j for j in range(len(shifts)) if j == 0 or ends[j] <= s)
        fits = {}
        for j in range(min(lo[queue], hi), hi + 1):
            r = s - shifts[j]
            key = (running(nccl_kernels, r), running(memcpys[d], r))
            for busy in duplexes:
                fits.setdefault(duration(link, d, n, busy, *key), []).append(j)
        where = f"event {i} ({kind} of allocation {alloc}, {n} B at {s})"
        if e - s not in fits:
            problems.append(f"{where}: takes {e - s} ns, the page {sorted(fits)} ns (other queue busy "
                            f"{duplexes}, shifts {shifts[min(lo[queue], hi)]}..{shifts[hi]})")
        else:
            lo[queue] = max(lo[queue], min(fits[e - s]))
        open_ += len(fits) > 1
        free_at = last[queue][1] if last[queue] is not None else None
        if free_at is not None and s < free_at:
            problems.append(f"{where}: starts before its queue is free ({free_at})")
        earliest_cap = prev_start + gap if (gap and prev_start is not None) else None
        if earliest_cap is not None and s < earliest_cap:
            problems.append(f"{where}: starts before the swap-operation cap allows ({earliest_cap})")
        mine = [x for x in asked if x[1] == alloc and x[0] <= s]
        if kind == "swap_in" and mine:
            t = mine[-1][0]   # a prefetch asked at t books at once: its start is exact
            asked.remove(mine[-1])
            start = max([t] + [x for x in (free_at, earliest_cap) if x is not None])
            if s != start:
                problems.append(f"{where}: a prefetch asked at {t} starts at {s}, the page {start}")
        last[queue] = (s, e)
        if link.engines < 2:
            last["d2h"] = last["h2d"]
        prev_start = s
    return problems, count, open_


def too_slow(link, stderr):
    """A run stopped for a link too slow ("Link models": a transfer whose time leaves the simulator's
    range, 2^62 ns): the bytes and seconds it names must be one direction's time under some of the
    factors, past the range. Returns a problem (text) or None."""
    m = re.search(r"link (.+): a transfer of (\d+) bytes takes ([0-9.]+(?:e[+-]?[0-9]+)?) s, past the simulator's time range "
                  r"\(2\^62 ns\): the link is too slow for this trace", stderr)
    if not m:
        return f"refused as too slow, not in the page's words: {stderr.strip()[:200]}"
    name, n, secs = m.group(1), int(m.group(2)), float(m.group(3))
    if name != link.name:
        return f"too slow: names link {name!r}, the run's is {link.name!r}"
    times = set()
    for d in ("h2d", "d2h"):
        bws = [link.bw[d]]
        for f in (link.duplex, 1 - link.nccl, 1 - link.memcpy):
            bws += [b * f for b in bws]
        for bw in bws:
            times.add(link.lat[d] * 1e9 + n / bw * 1e9)
    if not any(abs(math.ceil(t) / 1e9 - secs) <= 1e-6 * secs and math.ceil(t) >= 2 ** 62 for t in times):
        return f"too slow: {n} B in {secs} s is no time of this link past 2^62 ns"
    return None
