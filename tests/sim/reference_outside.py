#!/usr/bin/env python3
"""An outside tester's reading of docs/simulator.md: a third simulator, written from the page's
text alone (not from sim/, not from reference_sim.py), for what the other readings leave out:

* the link model in full: each direction's own bandwidth and latency (a link profile file), the
  duplex factor, one or more copy engines, contention with the trace's NCCL kernels and memcpys,
  the swap-operation cap (rule 8);
* the host buffer (rule 5's discarded host copies) and the program's own host allocations;
* prefetch and early swap-out timing (rules 9 and 10, `lookahead:K`);
* the run's derived figures: capacity from a share, host capacity, peak reduction, throughput
  loss, OOM slowdown, kernels reached, the OOM report's fields and the memory timeline with any
  number of samples.

Scope: the `ideal` allocator, the policies `lru`, `largest`, `belady`, the prefetchers `none` and
`lookahead:K`, one device with recorded accesses. Python's standard library only.
"""
import math
import sqlite3

NA, GPU, HOST, H2D, D2H, FREED = range(6)
INF = float("inf")
H2D_Q, D2H_Q = 0, 1


class Link:
    """A link's figures (docs/simulator.md, "Link models")."""

    def __init__(self, h2d_bps=25e9, d2h_bps=25e9, h2d_lat=6e-6, d2h_lat=6e-6, engines=2, duplex=0.5,
                 nccl_share=0.5, memcpy_share=0.5, max_ops=0.0):
        self.bps = [h2d_bps, d2h_bps]
        self.lat = [h2d_lat, d2h_lat]
        self.engines, self.duplex = engines, duplex
        self.nccl_share, self.memcpy_share, self.max_ops = nccl_share, memcpy_share, max_ops


PRESETS = {"pcie3": (12e9, 0.5), "pcie4": (25e9, 0.5), "pcie5": (55e9, 52 / 55), "nvlink-c2c": (320e9, 0.5),
           "nvlink4-peer": (380e9, 375 / 380)}


def preset(name):
    bw, duplex = PRESETS[name]
    return Link(bw, bw, 6e-6, 6e-6, 2, duplex)


class Trace:
    def __init__(self, path, device):
        db = sqlite3.connect(path)
        q = lambda sql, *a: db.execute(sql, a).fetchall()   # noqa: E731
        if device is None:   # the GPU with the largest live peak, ties the lowest number
            devs = [d for (d,) in q("SELECT DISTINCT device FROM allocations WHERE device >= 0 ORDER BY device")]
            device = max(devs, key=lambda d: (Trace(path, d).live_walk()[0], -d))
        self.device = device
        rows = q("SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device = ? ORDER BY id", device)
        self.ids = [r[0] for r in rows]
        self.index = {r[0]: i for i, r in enumerate(rows)}
        self.bytes = [r[1] for r in rows]
        self.t_alloc = [r[2] for r in rows]
        self.t_free = [r[3] for r in rows]   # None: lives to the end
        self.host = [] if device == -1 else q("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = -1 "
                                               "ORDER BY id")   # the program's host memory
        names = dict(q("SELECT id, text FROM strings"))
        self.order_only = q("SELECT value FROM meta WHERE key = 'timing'") == [("order-only",)]
        ks = q("SELECT id, name, t_start, t_end FROM kernels WHERE device = ? ORDER BY t_start, id", device)
        self.kid = [k[0] for k in ks]
        self.kname = [names.get(k[1], "") for k in ks]
        self.kstart = [k[2] for k in ks]
        self.kend = [k[3] for k in ks]
        seq = {k[0]: s for s, k in enumerate(ks)}
        self.ops = [[] for _ in ks]   # (allocation index, mode) in allocation id order
        for kern, alloc, mode in q("SELECT kernel, allocation, mode FROM accesses ORDER BY kernel, allocation"):
            if kern in seq and alloc in self.index:
                self.ops[seq[kern]].append((self.index[alloc], mode))
        self.assumed = not any(self.ops) and bool(ks) and bool(rows)
        if self.assumed:
            self.assume_accesses()
        for o in self.ops:
            o.sort(key=lambda x: self.ids[x[0]])
        self.nccl = [(self.kstart[s], self.kend[s]) for s in range(len(ks))
                     if "nccl" in self.kname[s].lower() or "rccl" in self.kname[s].lower()]
        self.memcpy = {d: [(a, b) for a, b in q("SELECT t_start, t_end FROM copies WHERE device = ? AND kind = ?",
                                                device, d)] for d in (0, 1)}
        db.close()
        times = self.t_alloc + [t for t in self.t_free if t is not None] + self.kstart + self.kend
        self.first, self.last = min(times), max(times)
        # uses[a]: the kernels (seq) that access a, ascending
        self.uses = [[] for _ in rows]
        for s, o in enumerate(self.ops):
            for a, _ in o:
                self.uses[a].append(s)

    def assume_accesses(self):
        """"Inputs", Accesses: no kernel of the device accesses one of its allocations. Written by the
        first kernel (seq) starting at or after the allocation if it ends by the free; read by the
        latest-starting kernel ending by the free (never freed: the last kernel) if later than that
        first kernel."""
        n = len(self.kstart)
        for a in range(len(self.ids)):
            w = next((s for s in range(n) if self.kstart[s] >= self.t_alloc[a]), None)
            if w is None:
                continue
            tf = self.t_free[a]
            if tf is None or self.kend[w] <= tf:
                self.ops[w].append((a, 2))
            r = n - 1 if tf is None else max((s for s in range(n) if self.kend[s] <= tf), default=None)
            if r is not None and r > w:
                self.ops[r].append((a, 1))

    def events(self):
        """(recorded time, kind, payload) in the documented order: kernel ends, frees, allocations,
        kernel starts; a zero-length kernel's end right after its start; an allocation freed at its
        instant freed right after it."""
        ev = []
        for s in range(len(self.kid)):
            if self.kend[s] > self.kstart[s]:
                ev.append((self.kend[s], 0, s, ("end", s)))
            ev.append((self.kstart[s], 3, s, ("start", s)))
        for a in range(len(self.ids)):
            ev.append((self.t_alloc[a], 2, a, ("alloc", a)))
            if self.t_free[a] is not None and self.t_free[a] > self.t_alloc[a]:
                ev.append((self.t_free[a], 1, a, ("free", a)))
        ev.sort(key=lambda e: e[:3])
        out = []
        for r, _, _, (kind, x) in ev:
            out.append((r, kind, x))
            if kind == "alloc" and self.t_free[x] == self.t_alloc[x]:
                out.append((r, "free", x))
            if kind == "start" and self.kend[x] == self.kstart[x]:
                out.append((r, "end", x))
        return out

    def live_walk(self):
        """Baseline peak and the recorded live bytes at each kernel's start."""
        live = peak = 0
        at_start = [0] * len(self.kid)
        for _, kind, x in self.events():
            if kind == "alloc":
                live += self.bytes[x]
                peak = max(peak, live)
            elif kind == "free":
                live -= self.bytes[x]
            elif kind == "start":
                at_start[x] = live
        return peak, at_start


class Transfer:
    def __init__(self, a, direction, start, end, order):
        self.a, self.dir, self.start, self.end, self.order = a, direction, start, end, order
        self.cancelled = False


class OOM(Exception):
    pass


class Sim:
    def __init__(self, tr, capacity, policy="lru", link=Link(), lookahead=0, host_cap=0, early=True,
                 samples=4096):
        self.tr, self.cap, self.policy, self.link, self.k = tr, capacity, policy, link, lookahead
        self.host_cap, self.early, self.samples = host_cap, early and lookahead > 0, samples
        n = len(tr.ids)
        self.state = [NA] * n
        self.valid = [False] * n
        self.pins = [0] * n
        self.clock = [0] * n
        self.cache_stamp = [0] * n
        self.xfer = [None] * n
        self.lastk = -1   # the kernel started last (seq)
        self.tick = self.stamp = 0
        self.used = self.sim_host = self.shift = 0
        self.peak = 0
        self.host_peak = 0
        self.inflight = []
        # rule 8: a queue is free until its first transfer, at any time (a trace's times may be
        # negative, down to -2^62 ns)
        self.qfree = [-math.inf, -math.inf] if link.engines >= 2 else [-math.inf]
        self.last_start = None
        self.norder = 0
        self.m = dict(stall_ns=0, stalls=0, swap_ins=0, swap_in_bytes=0, swap_outs=0, swap_out_bytes=0,
                      clean_evictions=0, early_evictions=0, prefetches=0)
        self.events = []
        self.seen = {}   # how often the rarer rules ran (what a comparison exercised)
        self.kernel_times = {}
        self.buckets = {}
        self.oom = None
        self.protect = set()
        self.baseline_peak, self.live_at_start = tr.live_walk()
        # in docs/trace-format.md's order at one instant: frees of earlier allocations, then the
        # allocations, one freed at that instant right after it is made
        self.host_events = sorted([(b[1], 1, i, 0, b[0]) for i, b in enumerate(tr.host)] +
                                  [(b[2], 0 if b[2] > b[1] else 1, i, 1, -b[0]) for i, b in enumerate(tr.host)
                                   if b[2] is not None])
        self.host_pos = 0
        self.host_live = 0

    # ---- host allocations of the program (device -1), by recorded time ----
    def host_advance(self, r):
        while self.host_pos < len(self.host_events) and self.host_events[self.host_pos][0] <= r:
            self.host_live += self.host_events[self.host_pos][4]
            self.host_pos += 1
            self.note_host()

    def note_host(self):
        self.host_peak = max(self.host_peak, self.sim_host + self.host_live)

    def note_used(self):
        self.peak = max(self.peak, self.used)

    def saw(self, what):
        self.seen[what] = self.seen.get(what, 0) + 1

    # ---- policy ----
    def next_use(self, a):
        for s in self.tr.uses[a]:
            if s > self.lastk:
                return s
        return INF

    def evictable(self, a):
        return self.state[a] == GPU and self.pins[a] == 0

    def pick(self, aside):
        cands = [a for a in range(len(self.state)) if self.evictable(a) and a not in aside]
        if not cands:
            return None
        if self.policy == "lru":
            return min(cands, key=lambda a: self.clock[a])
        if self.policy == "largest":
            return min(cands, key=lambda a: (-self.tr.bytes[a], self.clock[a]))
        if self.policy == "belady":
            return min(cands, key=lambda a: (-self.next_use(a), a))
        raise ValueError(self.policy)

    def host_room(self, b):
        """Rule 5: room on the host for a swap-out of b bytes, discarding host caches if needed."""
        if not self.host_cap or self.sim_host + b <= self.host_cap:
            return True
        caches = sorted((a for a in range(len(self.state)) if self.state[a] == GPU and self.valid[a]),
                        key=lambda a: -self.cache_stamp[a])
        for a in caches:
            if self.sim_host + b <= self.host_cap:
                break
            self.saw("host copy discarded")
            self.valid[a] = False
            self.sim_host -= self.tr.bytes[a]
        return self.sim_host + b <= self.host_cap

    def victim(self, aside, window=False):
        """The policy's victim; dirty ones the host cannot take are set aside. For a prefetch or an
        early swap-out (window), None at the first victim the window protects, before the host
        buffer is looked at (rules 9 and 10.2)."""
        while True:
            v = self.pick(aside)
            if v is None or (window and v in self.protect):
                return None
            if self.valid[v] or self.host_room(self.tr.bytes[v]):
                return v
            self.saw("victim set aside (host full)")
            aside.add(v)

    # ---- transfers ----
    def queue(self, direction):
        return direction if len(self.qfree) == 2 else 0

    def start_transfer(self, a, direction, t):
        link, b = self.link, self.tr.bytes[a]
        q = self.queue(direction)
        s = max(t, self.qfree[q])
        if link.max_ops and self.last_start is not None:
            s = max(s, self.last_start + math.ceil(1e9 / link.max_ops))
        bw = link.bps[direction]
        if len(self.qfree) == 2 and self.qfree[1 - q] > s:
            bw *= link.duplex
        rec = s - self.shift
        if any(x <= rec < y for x, y in self.tr.nccl):
            bw *= 1 - link.nccl_share
        if any(x <= rec < y for x, y in self.tr.memcpy[direction]):
            bw *= 1 - link.memcpy_share
        d = max(1, math.ceil(link.lat[direction] * 1e9 + b / bw * 1e9))
        self.qfree[q] = s + d
        self.last_start = s
        self.norder += 1
        x = Transfer(a, direction, s, s + d, self.norder)
        self.inflight.append(x)
        self.xfer[a] = x
        if direction == H2D_Q:
            self.m["swap_ins"] += 1
            self.m["swap_in_bytes"] += b
            self.events.append(("swap_in", s, s + d, a, None, b))
        else:
            self.m["swap_outs"] += 1
            self.m["swap_out_bytes"] += b
            self.events.append(("swap_out", s, s + d, a, None, b))
        return x

    def complete_by(self, t):
        done = sorted((x for x in self.inflight if x.end <= t), key=lambda x: (x.end, x.order))
        for x in done:
            self.inflight.remove(x)
            if x.cancelled:
                continue
            a = x.a
            self.xfer[a] = None
            if x.dir == H2D_Q:
                self.state[a] = GPU
                self.stamp += 1
                self.cache_stamp[a] = self.stamp
            else:
                self.state[a] = HOST
                self.used -= self.tr.bytes[a]
                self.valid[a] = True

    def pending(self):
        return sum(self.tr.bytes[x.a] for x in self.inflight if x.dir == D2H_Q and not x.cancelled)

    def evict(self, v, t):
        b = self.tr.bytes[v]
        if self.valid[v]:
            self.state[v] = HOST
            self.used -= b
            self.m["clean_evictions"] += 1
            self.events.append(("evict_clean", t, t, v, None, b))
        else:
            self.state[v] = D2H
            self.sim_host += b
            self.note_host()
            self.start_transfer(v, D2H_Q, t)

    def make_room(self, b, t, where):
        aside = set()
        while True:
            self.complete_by(t)
            if self.used + b <= self.cap:
                return t
            if self.used - self.pending() + b > self.cap:
                v = self.victim(aside)
                if v is not None:
                    self.evict(v, t)
                    continue
            useful = [x.end for x in self.inflight if not x.cancelled]
            if useful:
                t = min(useful)
                continue
            pinned = sum(self.tr.bytes[a] for a in range(len(self.state))
                         if self.state[a] in (GPU, H2D, D2H) and self.pins[a] > 0)
            self.oom = dict(time_ns=t, bytes_needed=b, bytes_pinned=pinned, bytes_short=self.used + b - self.cap,
                            allocation=where[0], kernel=where[1])
            raise OOM()

    # ---- the memory timeline ----
    def sample(self, r):
        span = max(1, self.tr.last - self.tr.first)
        i = min(self.samples - 1, max(0, (r - self.tr.first) * self.samples // (span + 1)))
        cur = self.buckets.get(i)
        if cur is None or self.used > cur[1]:
            self.buckets[i] = (r + self.shift, self.used, self.sim_host + self.host_live)

    # ---- events ----
    def stall(self, t, w, kernel, alloc=None):
        if w > 0:
            self.shift += w
            self.m["stall_ns"] += w
            self.m["stalls"] += 1
            self.events.append(("stall", t, t + w, alloc, kernel, 0))

    def alloc(self, a, r):
        t = r + self.shift
        t2 = self.make_room(self.tr.bytes[a], t, (self.tr.ids[a], 0))
        self.stall(t, t2 - t, None, a)
        self.used += self.tr.bytes[a]
        self.note_used()
        self.state[a] = GPU
        self.valid[a] = False
        self.tick += 1
        self.clock[a] = self.tick
        self.allocated(a, t2)

    def allocated(self, a, t):
        """A prefetcher's hook: allocation a was placed at simulated t (reference_learning.py)."""

    def free(self, a, r):
        self.complete_by(r + self.shift)
        b, st = self.tr.bytes[a], self.state[a]
        if st in (GPU, H2D, D2H):
            self.used -= b
        if self.xfer[a] is not None:
            self.saw("free in transfer")
            self.xfer[a].cancelled = True
            self.xfer[a] = None
        if self.valid[a] or st == D2H:
            self.sim_host -= b
        self.valid[a] = False
        self.state[a] = FREED

    def kernel_start(self, s, r):
        tr = self.tr
        t = r + self.shift
        self.complete_by(t)
        ops = tr.ops[s]
        for a, _ in ops:
            self.pins[a] += 1
        cursor = ready = t
        for k, (a, _) in enumerate(ops):
            st, b = self.state[a], tr.bytes[a]
            if st == H2D:
                ready = max(ready, self.xfer[a].end)
                self.operand_wait(s, k, self.xfer[a].end - t)
            elif st == D2H:
                self.saw("swap-out cancelled")
                self.xfer[a].cancelled = True
                self.xfer[a] = None
                self.state[a] = GPU
                self.sim_host -= b
            elif st == HOST:
                cursor = self.make_room(b, cursor, (tr.ids[a], tr.kid[s]))
                self.state[a] = H2D
                self.used += b
                self.note_used()
                end = self.start_transfer(a, H2D_Q, cursor).end
                ready = max(ready, end)
                self.operand_wait(s, k, end - t)
        start = max(cursor, ready)
        self.complete_by(start)   # its operands land (and anything else due by then)
        self.stall(t, start - t, tr.kid[s])
        self.lastk = s
        for k, (a, mode) in enumerate(ops):
            if self.state[a] == FREED:   # skipped: no access (no clock, nothing learnt)
                self.saw("freed operand skipped")
                continue
            self.accessed(s, k, a, mode)
            self.tick += 1
            self.clock[a] = self.tick
            if mode in (2, 3) and self.valid[a]:
                self.valid[a] = False
                self.sim_host -= tr.bytes[a]
        self.kernel_times[tr.kid[s]] = (start, start + tr.kend[s] - tr.kstart[s])
        self.after_launch(s, start)

    # ---- a prefetcher's hooks (lookahead:K here; reference_learning.py the learning ones) ----
    def operand_wait(self, s, k, d):
        """Operand k of kernel s is ready d ns after the kernel's time (d > 0: it waits)."""

    def accessed(self, s, k, a, mode):
        """Kernel s, started, accesses allocation a as its operand k."""

    def after_launch(self, s, start):
        """Rules 9 and 10 after kernel s started at simulated `start`."""
        tr = self.tr
        if self.k:
            self.protect = {a for j in range(s, min(len(tr.kid), s + self.k + 1)) for a, _ in tr.ops[j]}
            for j in range(s + 1, min(len(tr.kid), s + self.k + 1)):
                for a, _ in tr.ops[j]:
                    if self.state[a] == HOST:
                        self.prefetch(a, start)
            if self.early:
                self.early_round(s, start)

    def early_demand(self, v, s):
        """Rule 10.4 for lookahead: the largest recorded live bytes at the starts of kernels s+1 .. e."""
        tr = self.tr
        nu = self.next_use(v)
        last_before_free = len(tr.kid) - 1
        if tr.t_free[v] is not None:
            last_before_free = max((j for j in range(len(tr.kid)) if tr.kstart[j] < tr.t_free[v]), default=-1)
        e = min(nu - 1, last_before_free)
        return max(self.live_at_start[s + 1:e + 1]) if e > s else None

    def prefetch(self, a, t):
        b = self.tr.bytes[a]
        aside = set()
        self.complete_by(t)
        while self.used + b > self.cap and self.used - self.pending() + b > self.cap:
            v = self.victim(aside, window=True)
            if v is None:
                break
            self.evict(v, t)
        if self.used + b <= self.cap:
            self.state[a] = H2D
            self.used += b
            self.note_used()
            self.m["prefetches"] += 1
            self.start_transfer(a, H2D_Q, t)
            self.events.append(("prefetch", t, t, a, None, b))

    def early_round(self, s, t):
        tr = self.tr
        if s + 1 >= len(tr.kid):
            return
        aside, skipped = set(), 0
        q = self.queue(D2H_Q)
        while self.qfree[q] <= tr.kstart[s + 1] + self.shift:
            v = self.victim(aside, window=True)
            if v is None:
                break
            demand = None if self.valid[v] else self.early_demand(v, s)
            if demand is not None:
                if demand - self.off() > self.cap:
                    self.evict(v, t)
                    self.m["early_evictions"] += 1
                    continue
            if skipped == 4:
                break
            skipped += 1
            aside.add(v)

    def live(self):
        """Allocated and not freed bytes (rule 10.5)."""
        return sum(self.tr.bytes[a] for a in range(len(self.state)) if self.state[a] not in (NA, FREED))

    def off(self):
        """Rule 10.5: live bytes less resident ones (on the GPU or in H2D)."""
        return self.live() - sum(self.tr.bytes[a] for a in range(len(self.state)) if self.state[a] in (GPU, H2D))

    def kernel_end(self, s):
        self.complete_by(self.tr.kend[s] + self.shift)
        for a, _ in self.tr.ops[s]:
            self.pins[a] -= 1

    def run(self):
        tr = self.tr
        reached = 0
        last_reached = None
        failed_r = None
        for r, kind, x in tr.events():
            self.host_advance(r)
            try:
                if kind == "alloc":
                    failed_r = r
                    self.alloc(x, r)
                elif kind == "free":
                    self.free(x, r)
                elif kind == "start":
                    failed_r = r
                    self.kernel_start(x, r)
                    reached += 1
                    last_reached = tr.kid[x]
                else:
                    self.kernel_end(x)
            except OOM:
                self.events.append(("oom", self.oom["time_ns"], self.oom["time_ns"],
                                    tr.index[self.oom["allocation"]], self.oom["kernel"] or None,
                                    self.oom["bytes_short"]))
                break
            self.note_host()
            self.sample(r)
        m = dict(self.m)
        m.update(baseline_peak_bytes=self.baseline_peak, simulated_peak_bytes=self.peak,
                 host_peak_bytes=self.host_peak, kernels_reached=reached,
                 baseline_makespan_ns=tr.last - tr.first, capacity_bytes=self.cap)
        if last_reached is not None:
            m["last_kernel_reached"] = last_reached
        if self.oom:
            mk = self.oom["time_ns"] - tr.first
            m["simulated_makespan_ns"] = mk
            m["oom"] = 1
            base = failed_r - tr.first
            m["oom_slowdown"] = mk / base - 1 if base > 0 else 0.0
            m["throughput_loss"] = m["peak_reduction"] = None
        else:
            m["simulated_makespan_ns"] = tr.last + self.shift - tr.first
            m["oom"] = 0
            base = tr.last - tr.first
            # "Inputs", events all at one instant: a share of a zero baseline is not defined
            m["throughput_loss"] = m["simulated_makespan_ns"] / base - 1 if base else None
            m["peak_reduction"] = 1 - self.peak / self.baseline_peak if self.baseline_peak else 0.0
        self.metrics = m
        self.memory = [self.buckets[i] for i in sorted(self.buckets)]
        return self
