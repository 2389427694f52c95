#!/usr/bin/env python3
"""A second reading of docs/simulator.md, written from the document alone.

It simulates one device of a trace file (SQLite, docs/trace-format.md) with the `ideal` allocator
or the `caching` one with the trace's allocator settings and any given over them
(reference_caching.py), the eviction policies `lru`,
`largest` and `belady`, the sampled `dtr` and `cost_aware` with drops and recursive recomputation
(reference_dtr.py), the prefetchers `none` and `lookahead:K` (with early swap-out), `periodic:K`
(reference_periodic.py), `capuchin` (reference_capuchin.py) and `forecast:H` (reference_forecast.py), a host
buffer of any size and a cap on swap operations, over a link given by its figures (rule 8), with
assumed accesses where a device records none, and returns the metrics
and the events a stored run holds. It shares no code with the simulator: where the two disagree,
one of them does not do what the document says (tests/sim/reference_compare.py runs both).
"""
import bisect
import heapq
import math
import sqlite3
from dataclasses import dataclass, field

import reference_caching
from reference_dtr import D2H, DROPPED, FREED, GPU, H2D, HOST, NOT_YET, SampledPolicies
from reference_capuchin import CapuchinPrefetch
from reference_forecast import ForecastPrefetch
from reference_periodic import PeriodicPrefetch

NEVER = 1 << 62
MEMORY_SAMPLES = 4096   # --memory-samples' default



@dataclass
class Link:
    h2d_bps: float = 25e9
    d2h_bps: float = 25e9
    h2d_latency_s: float = 6e-6
    d2h_latency_s: float = 6e-6
    copy_engines: int = 2
    duplex_factor: float = 0.5
    nccl_share: float = 0.5
    memcpy_share: float = 0.5
    max_ops_per_sec: float = 0   # --max-swap-ops-per-sec (0: no cap)


@dataclass
class Transfer:
    end: int
    alloc: int
    to_gpu: bool
    live: bool = True   # False: cancelled, or its allocation freed: its completion changes nothing


@dataclass
class Result:
    metrics: dict
    events: list = field(default_factory=list)   # (kind, t_start, t_end, allocation id, kernel id, bytes)
    oom: bool = False
    kernel_times: list = field(default_factory=list)   # (kernel id, t_start, t_end): run_kernels
    memory: list = field(default_factory=list)         # (t, device bytes, host bytes): run_memory


class Trace:
    """The rows of one device, read with sqlite3 only."""

    def __init__(self, path, device=None):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        allocs = db.execute("SELECT id, device, bytes, t_alloc, t_free FROM allocations ORDER BY id").fetchall()
        kernels = db.execute("SELECT k.id, k.device, k.t_start, k.t_end, s.text, k.step FROM kernels k "
                             "LEFT JOIN strings s ON s.id = k.name ORDER BY k.id").fetchall()
        if device is None:
            device = self.largest_peak_device(allocs)
        self.device = device
        self.allocs = [a for a in allocs if a[1] == device]
        self.alloc_index = {a[0]: i for i, a in enumerate(self.allocs)}
        stream = dict(db.execute("SELECT id, stream FROM allocations"))
        self.streams = [stream[a[0]] for a in self.allocs]
        self.pools, self.pools_given_back = Trace.private_pools(db, device, self.allocs)
        category = dict(db.execute("SELECT id, category FROM allocations"))
        self.categories = [category[a[0]] for a in self.allocs]
        own = [k for k in kernels if k[1] == device]
        own.sort(key=lambda k: (k[2], k[0]))   # seq: by (t_start, row)
        self.kernels = own
        self.kernel_seq = {k[0]: s for s, k in enumerate(own)}
        markers = db.execute("SELECT t_start, t_end FROM markers WHERE kind = 0 ORDER BY id").fetchall()
        stepped = db.execute("SELECT 1 FROM meta WHERE key = 'steps_from'").fetchone() is not None   # an importer's
        self.kernel_steps, self.step_span = Trace.steps(own, markers, stepped)
        self.operands = [[] for _ in own]   # (alloc index, mode) by allocation id
        for kid, aid, mode in db.execute("SELECT kernel, allocation, mode FROM accesses ORDER BY kernel, allocation"):
            if kid in self.kernel_seq and aid in self.alloc_index:
                self.operands[self.kernel_seq[kid]].append((self.alloc_index[aid], mode))
        self.assumed = bool(own) and bool(self.allocs) and not any(self.operands)
        if self.assumed:
            self.assume_accesses()
        # the program's own host memory (device -1): counted in the host bytes, never placed
        self.host_events = Trace.memory_events([a for a in allocs if a[1] == -1]) if device != -1 else []
        # recorded contention (rule 8): the device's kernels whose name holds "nccl", its memcpys by
        # direction (other devices are ignored, "Inputs": a second GPU's AllReduce slowed this one's link)
        self.nccl = sorted((k[2], k[3]) for k in own if k[4] and ("nccl" in k[4].lower() or "rccl" in k[4].lower()))
        row = db.execute("SELECT value FROM meta WHERE key = 'allocator.conf'").fetchone()
        self.allocator_conf = row[0] if row else ""   # the settings the recording ran with
        # a Kineto trace's Total Reserved at its first memory event: the caching model starts there
        row = db.execute("SELECT value FROM meta WHERE key = ?", (f"kineto.reserved_first.device{self.device}",)).fetchone()
        self.reserved_first = int(row[0]) if row and row[0].strip().isdigit() else 0
        self.copies = {0: [], 1: []}
        for kind, t0, t1 in db.execute("SELECT kind, t_start, t_end FROM copies WHERE device = ?", (device,)):
            if kind in (0, 1):
                self.copies[kind].append((t0, t1))
        db.close()

    @staticmethod
    def pool_rows(db, key):
        """meta snapshot.allocation_pools or snapshot.segment_row_pools: {row id: (first, second)}."""
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        out = {}
        for entry in (row[0].split() if row else []):
            pool_id, ids = entry.split(":")
            pool_id = tuple(map(int, pool_id.split(",")))
            for r in ids.split(","):
                lo, _, hi = r.partition("-")
                for i in range(int(lo), int(hi or lo) + 1):
                    out[i] = pool_id
        return out

    @staticmethod
    def private_pools(db, device, allocs):
        """docs/simulator.md, "Comparing with a recording", private pools: each allocation's pool,
        None for the default one, else its (first, second) id; and {pool id: recorded time} of the
        pools given back during the trace. When the trace events named the pools (meta
        snapshot.pools_from "trace events ..."), the lists snapshot.allocation_pools and
        snapshot.segment_row_pools say them; a pool none of whose segment rows is held at the end
        was given back when its last one was freed. Else the id meta snapshot.segment_pools gives the
        end-state segment range its first byte lies in, once a segment row of that range held at
        the end (or an expandable one) had been made; such pools are never given back."""
        pools = [None] * len(allocs)
        row = db.execute("SELECT value FROM meta WHERE key = 'snapshot.pools_from'").fetchone()
        if row and row[0].startswith("trace events"):
            of_alloc = Trace.pool_rows(db, "snapshot.allocation_pools")
            for i, a in enumerate(allocs):
                pools[i] = of_alloc.get(a[0])
            of_seg = Trace.pool_rows(db, "snapshot.segment_row_pools")
            held, last_free = set(), {}
            for sid, t_free in db.execute("SELECT id, t_free FROM segments WHERE device = ?", (device,)):
                if sid not in of_seg:
                    continue
                if t_free is None:
                    held.add(of_seg[sid])
                else:
                    last_free[of_seg[sid]] = max(last_free.get(of_seg[sid], t_free), t_free)
            return pools, {p: t for p, t in last_free.items() if p not in held}
        row = db.execute("SELECT value FROM meta WHERE key = 'snapshot.segment_pools'").fetchone()
        if not row:
            return pools, {}
        ranges = []   # [address, end, pool id, earliest row's t_alloc]
        for entry in row[0].split():
            dev, pool_id, address, size = entry.split(":")
            if int(dev) == device:
                ranges.append([int(address), int(address) + int(size), tuple(map(int, pool_id.split(","))), None])

        def range_of(address):
            return next((r for r in ranges if r[0] <= address < r[1]), None)

        for address, t_alloc, t_free, expandable in db.execute(
                "SELECT address, t_alloc, t_free, expandable FROM segments WHERE device = ?", (device,)):
            r = range_of(address)
            if r is not None and (t_free is None or expandable):
                r[3] = t_alloc if r[3] is None else min(r[3], t_alloc)
        address = dict(db.execute("SELECT id, address FROM allocations"))
        for i, a in enumerate(allocs):
            r = range_of(address[a[0]])
            if r is not None and r[3] is not None and a[3] >= r[3]:
                pools[i] = r[2]
        return pools, {}

    @staticmethod
    def steps(kernels, markers, stepped=False):
        """docs/simulator.md, "Steps": each kernel's step (-1: none) and step -> (first seq, kernels);
        `stepped`: meta steps_from is set (the column decides)."""
        n = len(kernels)
        if 2 * sum(k[5] >= 0 for k in kernels) >= n or stepped:
            raw = [k[5] for k in kernels]
        else:   # the step marker (in start order; markers starting together: the later row) holding the kernel's start
            markers = sorted(markers, key=lambda m: m[0])   # stable: rows in id order
            raw = []
            for k in kernels:
                i = bisect.bisect_right([m[0] for m in markers], k[2]) - 1
                raw.append(i if i >= 0 and k[2] < markers[i][1] else -1)
        step_of, begins, last = [], [], None
        for s, r in enumerate(raw):
            if r >= 0 and r != last:
                begins.append(s)
                last = r
            step_of.append(len(begins) - 1 if r >= 0 else -1)
        begins.append(n)
        return step_of, {i: (begins[i], begins[i + 1] - begins[i]) for i in range(len(begins) - 1)}

    def assume_accesses(self):
        """docs/simulator.md, "Accesses": written by the first kernel starting at or after the
        allocation if it ends by the free; read by the latest-starting kernel that ends by the
        free (never freed: the last kernel) if that is later than the writer candidate."""
        starts = [k[2] for k in self.kernels]
        n = len(self.kernels)
        by_end = sorted((k[3], q) for q, k in enumerate(self.kernels))
        ends = [e for e, _ in by_end]
        best, prefix = -1, []
        for _, q in by_end:
            best = max(best, q)
            prefix.append(best)

        def latest_ending_by(t):
            i = bisect.bisect_right(ends, t)
            return prefix[i - 1] if i else -1

        for i, (_, _, _, t0, t1) in enumerate(self.allocs):
            w = bisect.bisect_left(starts, t0)   # kernels are in seq order: starts sorted
            if w >= n:
                continue
            if t1 is None or self.kernels[w][3] <= t1:
                self.operands[w].append((i, 2))
            if t1 is None:
                r = n - 1
            else:   # the latest-starting (highest seq) kernel that ends by the free
                r = latest_ending_by(t1)
            if r > w:
                self.operands[r].append((i, 1))
        for ops in self.operands:
            ops.sort()

    @staticmethod
    def largest_peak_device(allocs):
        best = None
        for dev in sorted({a[1] for a in allocs if a[1] >= 0}):
            peak = Trace.live_peak([a for a in allocs if a[1] == dev])
            if best is None or peak > best[0]:
                best = (peak, dev)
        return best[1]

    @staticmethod
    def live_peak(allocs):
        live = peak = 0
        for _, _, b, kind in Trace.memory_events(allocs):
            live += b if kind == "alloc" else -b
            peak = max(peak, live)
        return peak

    @staticmethod
    def memory_events(allocs):
        """docs/trace-format.md, "Events at one instant": frees of earlier allocations, then the
        allocations of t by row, each freed right after it when it dies at t too."""
        ev = []
        for i, a in enumerate(allocs):
            _, _, b, t0, t1 = a
            ev.append((t0, 1, i, 0, b, "alloc"))
            if t1 is not None:
                ev.append((t1, 0 if t1 > t0 else 1, i, 1, b, "free"))
        ev.sort()
        return [(t, i, b, kind) for t, _, i, _, b, kind in ev]


_COVERS = {}   # id(intervals) -> (intervals, their starts in order, the latest end up to each)


def intervals_cover(intervals, t):
    """Whether a recorded interval [t_start, t_end) holds t: of those starting at or before t, the
    latest end is after t. A trace's interval lists are never changed once read, so each is sorted
    once."""
    got = _COVERS.get(id(intervals))
    if got is None or got[0] is not intervals:
        spans = sorted(intervals)
        ends, most = [], None
        for _t0, t1 in spans:
            most = t1 if most is None else max(most, t1)
            ends.append(most)
        if len(_COVERS) >= 256:
            _COVERS.clear()
        got = _COVERS[id(intervals)] = (intervals, [t0 for t0, _t1 in spans], ends)
    j = bisect.bisect_right(got[1], t) - 1
    return j >= 0 and got[2][j] > t


class Sim(SampledPolicies, PeriodicPrefetch, CapuchinPrefetch, ForecastPrefetch):
    def __init__(self, tr, capacity, policy="lru", link=Link(), lookahead=0, allocator="ideal", host_cap=0,
                 allocator_conf="", periodic=0, capuchin=False, forecast=0):
        self.tr, self.cap, self.policy, self.link = tr, capacity, policy, link
        self.host_cap = host_cap   # the host buffer ("Limits"); 0: unlimited
        self.cached = []           # resident allocations whose host copy is valid, in the order cached
        # `caching`: device bytes are the model's reserved bytes ("Allocator models")
        self.given_back = set()   # private pools given back so far (pools_due)
        self.caching = (reference_caching.CachingAllocator(capacity, ",".join(
            c for c in (tr.allocator_conf, allocator_conf) if c)) if allocator == "caching" else None)
        self.warmed = False          # the caching model's warm start made (or nothing to make)
        self.lookahead = lookahead   # K of `lookahead:K`; 0: `none`
        self.protected = set()
        self.live_table = None
        self.starts = [k[2] for k in tr.kernels]
        n = len(tr.allocs)
        self.state = [NOT_YET] * n
        self.host_valid = [False] * n
        self.pins = [0] * n
        self.stamp = [0] * n
        self.key_next = [NEVER] * n   # belady: next use when it became evictable
        self.transfer = [None] * n    # the live transfer of an allocation
        self.gen = [0] * n            # entries of the victim heap are of a's generation
        self.heap = []
        self.clock = 0
        self.used = self.host = self.program_host = 0
        self.off = 0
        self.peak = self.host_peak = 0
        self.shift = 0
        self.flight = []   # transfers in flight
        self.next_done = None   # the earliest end of those in flight (None: none)
        # rule 8: free until their first transfer, at any time (times may be negative, to -2^62 ns);
        # the first transfer has no previous one for the cap on swap operations
        self.queue_free = {True: -math.inf, False: -math.inf}
        self.last_op = None
        self.events = []
        self.kernel_times = []
        self.m = dict(coupled_wait_time=0, coupled_wait_count=0, stalls=0, stall_ns=0, swap_ins=0, swap_in_bytes=0,
                      swap_outs=0, swap_out_bytes=0,
                      clean_evictions=0, prefetches=0, early_evictions=0)
        self.build_next_uses()
        self.producer = [None] * n   # the kernel that last wrote it (rule 2)
        self.last_use = [0] * n      # simulated time of its last access or its allocation (dtr)
        self.recompute_pins = []
        self.init_sampled()
        self.live_now = 0   # live bytes of the run: allocated and not freed
        self.arrivals = {}  # coupled ranks: cross-rank event -> the shift at its start
        self.init_periodic(periodic)
        self.init_capuchin(capuchin)
        self.d2h_end = -math.inf   # the end of the last swap-out (forecast's backlog)
        self.init_forecast(forecast)

    def build_next_uses(self):
        tr = self.tr
        uses = [[] for _ in tr.allocs]
        for s, ops in enumerate(tr.operands):
            for a, _ in ops:
                if not uses[a] or uses[a][-1] != s:
                    uses[a].append(s)
        self.uses = uses

    def next_use_after(self, a, s):
        # the first kernel seq > s that accesses a (s = -1: its first use)
        u = self.uses[a]
        i = bisect.bisect_right(u, s)
        return u[i] if i < len(u) else NEVER

    # -- memory
    def note_used(self):
        if self.caching:
            self.used = self.caching.reserved
        self.peak = max(self.peak, self.used)
        self.host_peak = max(self.host_peak, self.host + self.program_host)

    def set_state(self, a, st):
        """Keeps `off` (live bytes not resident: on the host or in D2H, rule 10.5) with the state."""
        b = self.tr.allocs[a][2]
        self.off += (st in (HOST, D2H, DROPPED)) * b - (self.state[a] in (HOST, D2H, DROPPED)) * b
        self.live_now += (self.state[a] == NOT_YET) * b - (st == FREED) * b
        self.state[a] = st

    def evictable(self, a):
        return self.state[a] == GPU and self.pins[a] == 0

    def key(self, a):
        if self.policy == "lru":
            return (self.stamp[a],)
        if self.policy == "largest":
            return (-self.tr.allocs[a][2], self.stamp[a])
        if self.policy == "belady":
            return (-self.key_next[a], a)
        raise ValueError(self.policy)

    def refresh(self, a):
        """a's state, pins or key changed: a heap entry of what it is now, when evictable (older
        entries of it go stale)."""
        self.gen[a] += 1
        if self.sampled:
            if self.evictable(a):
                self.list_add(a)
            else:
                self.list_remove(a)
        elif self.evictable(a):
            heapq.heappush(self.heap, (self.key(a), a, self.gen[a]))

    def victim(self, aside, t, window=False):
        """Rule 5's candidate: the policy's first evictable allocation not set aside; a dirty one
        the host buffer cannot take (even after discarding cached host copies) is set aside. With
        `window` (a prefetch, early swap-out) one the prefetch window protects ends the search."""
        if self.sampled:
            return self.sampled_victim(aside, window, t)
        stash, found = [], None
        while self.heap:
            _, a, g = self.heap[0]
            if g != self.gen[a] or not self.evictable(a):
                heapq.heappop(self.heap)
            elif a in aside:
                stash.append(heapq.heappop(self.heap))
            elif window and a in self.protected:
                break
            elif self.host_valid[a] or self.host_room(self.tr.allocs[a][2]):
                found = a
                break
            else:
                aside[a] = True
        for e in stash:
            heapq.heappush(self.heap, e)
        return found

    def host_room(self, b):
        """Room for b more host bytes, discarding valid host copies of resident allocations
        (caches) if needed, the one cached last first."""
        while self.host_cap and self.host + b > self.host_cap and self.cached:
            a = self.cached.pop()
            self.host_valid[a] = False
            self.host -= self.tr.allocs[a][2]
        return not self.host_cap or self.host + b <= self.host_cap

    def uncache(self, a):
        if a in self.cached:
            self.cached.remove(a)

    # -- transfers (rule 8)
    def start_transfer(self, a, to_gpu, t):
        q = True if self.link.copy_engines == 1 else to_gpu
        other = (not to_gpu) if self.link.copy_engines >= 2 else None
        s = max(t, self.queue_free[q])
        if self.link.max_ops_per_sec > 0:   # "Limits": transfers at least 1/N s apart, both directions
            if self.last_op is not None:
                s = max(s, self.last_op + math.ceil(1e9 / self.link.max_ops_per_sec))
            self.last_op = s
        bw = self.link.h2d_bps if to_gpu else self.link.d2h_bps
        lat = self.link.h2d_latency_s if to_gpu else self.link.d2h_latency_s
        if other is not None and self.queue_free[other] > s:
            bw *= self.link.duplex_factor
        r = s - self.shift
        if intervals_cover(self.tr.nccl, r):
            bw *= 1 - self.link.nccl_share
        if intervals_cover(self.tr.copies[0 if to_gpu else 1], r):
            bw *= 1 - self.link.memcpy_share
        b = self.tr.allocs[a][2]
        dur = max(1, int(math.ceil(lat * 1e9 + b / bw * 1e9)))   # in doubles, as rule 8 writes it
        end = s + dur
        self.queue_free[q] = end
        if not to_gpu:
            self.d2h_end = end
        tf = Transfer(end, a, to_gpu)
        self.flight.append(tf)
        if self.next_done is None or end < self.next_done:
            self.next_done = end
        self.transfer[a] = tf
        if to_gpu:
            self.m["swap_ins"] += 1
            self.m["swap_in_bytes"] += b
        else:
            self.m["swap_outs"] += 1
            self.m["swap_out_bytes"] += b
        self.events.append(("swap_in" if to_gpu else "swap_out", s, end, a, None, b))
        return tf

    def complete_by(self, t):
        if self.next_done is None or self.next_done > t:   # none done yet: the common case
            return
        done = sorted((tf for tf in self.flight if tf.end <= t), key=lambda tf: (tf.end, tf.alloc))
        for tf in done:
            self.flight.remove(tf)
            self.next_done = min((x.end for x in self.flight), default=None)
            if not tf.live:
                continue
            a = tf.alloc
            self.transfer[a] = None
            if tf.to_gpu:
                self.set_state(a, GPU)
                self.cached.append(a)   # its host copy stays valid: a cache while resident
            else:
                self.set_state(a, HOST)
                self.host_valid[a] = True
                self.release(a)
            self.refresh(a)

    def place(self, a):
        """Places a's bytes now if the allocator can (ideal: they fit; caching: a block)."""
        b = self.tr.allocs[a][2]
        if self.caching:
            # the warm start: before the first allocation recorded after t = 0
            if not self.warmed and (self.tr.reserved_first <= 0 or self.tr.allocs[a][3] > 0):
                self.caching.top_up(self.tr.reserved_first)
                self.warmed = True
                self.note_used()   # held from here: in the peak even if this call fails and gives them back
            return self.caching.allocate(a, b, self.tr.streams[a], self.tr.pools[a])
        if self.used + b > self.cap:
            return False
        self.used += b
        return True

    def release(self, a):
        """a's device bytes go (a free, a clean eviction, a swap-out that landed)."""
        if self.caching:
            self.caching.free(a)
        else:
            self.used -= self.tr.allocs[a][2]

    def needs_victim(self, a):
        """Rule 6: will the swap-outs in flight not free enough? (Caching: only those of a's pool.)"""
        b = self.tr.allocs[a][2]
        if self.caching:
            return self.pending_out(self.tr.pools[a]) < self.caching.round(b)
        return self.used - self.pending_out() + b > self.cap

    def short_by(self, a):
        """Rule 7's *short by*."""
        b = self.tr.allocs[a][2]
        if not self.caching:
            return self.used + b - self.cap
        ca = self.caching
        needed = self.caching.round(b)
        in_use = sum(ca.block_bytes(i) for i, st in enumerate(self.state) if st in (GPU, H2D, D2H))
        if self.cap - in_use >= needed:   # fragmentation
            return max(0, needed - max(ca.largest_free_block(), self.cap - ca.reserved))
        return needed - (self.cap - in_use)

    def oom_figures(self, a):
        """Rule 7's other figures, as the metrics oom_bytes_needed, oom_bytes_pinned and
        oom_fragmentation hold them."""
        held = [i for i, st in enumerate(self.state) if st in (GPU, H2D, D2H)]
        # pinned by kernels (running, or the one starting): a recomputation's inputs are unpinned first
        pinned = sum(self.tr.allocs[i][2] for i in held if self.pins[i] - self.recompute_pins.count(i) > 0)
        b = self.tr.allocs[a][2]
        if not self.caching:
            return dict(oom_bytes_needed=b, oom_bytes_pinned=pinned, oom_fragmentation=0)
        needed = self.caching.round(b)
        in_use = sum(self.caching.block_bytes(i) for i in held)
        return dict(oom_bytes_needed=needed, oom_bytes_pinned=pinned,
                    oom_fragmentation=int(self.cap - in_use >= needed))

    def pending_out(self, pool=False):
        """Rule 6's pending: the allocation bytes of the swap-outs in flight (of pool `pool` only,
        None the default one, when given)."""
        return sum(self.tr.allocs[tf.alloc][2] for tf in self.flight
                   if tf.live and not tf.to_gpu and (pool is False or self.tr.pools[tf.alloc] == pool))

    def pools_due(self, r):
        """Private pools the recording gave back before recorded time r go (caching model)."""
        if not self.caching:
            return
        for pool, when in sorted(self.tr.pools_given_back.items(), key=lambda kv: (kv[1], kv[0])):
            if when < r and pool not in self.given_back:
                self.given_back.add(pool)
                self.caching.release_pool(pool)

    def restore_aside(self, aside):
        """The sampled policies' victims set aside become evictable again, in the order set aside."""
        if not self.sampled:
            return
        for a in aside:
            self.refresh(a)

    def evict(self, v, t):
        b = self.tr.allocs[v][2]
        self.gen[v] += 1
        if self.sampled:
            self.list_remove(v)
        if self.host_valid[v]:
            self.set_state(v, HOST)
            self.uncache(v)
            self.release(v)
            self.m["clean_evictions"] += 1
            self.events.append(("evict_clean", t, t, v, None, b))
        elif self.sampled and self.drops(v):
            self.drop(v, t)
        else:
            self.set_state(v, D2H)
            self.host += b
            self.note_used()
            self.start_transfer(v, False, t)

    def make_room(self, a, t):
        """Rule 6: places a; returns the time it is placed, None for an OOM."""
        aside = {}   # dirty victims the host could not take, until make room returns (in order)
        while True:
            self.complete_by(t)
            if self.place(a):
                self.note_used()
                self.restore_aside(aside)
                return t
            if self.needs_victim(a):
                v = self.victim(aside, t)
                if v is not None:
                    self.evict(v, t)
                    continue
            live = [tf.end for tf in self.flight if tf.live]
            if not live:
                self.oom_at = t
                self.oom_alloc = a
                self.oom_short = self.short_by(a)
                self.oom_report = self.oom_figures(a)
                self.restore_aside(aside)
                return None
            t = max(t, min(live))

    # -- the run
    def run(self):
        """The whole run (a single rank: no kernel waits for another rank)."""
        steps = self.steps({})
        for _ in steps:
            pass
        return self.result

    def steps(self, gates):
        """The run as a generator: at the end of a kernel seq in `gates` (a cross-rank kernel,
        "Coupled ranks") it yields gates[seq] and takes the delay the other ranks impose (None:
        a rank it waits for stopped, so this one stops there); self.arrivals[g] = the shift at
        that kernel's start. The result is left in self.result."""
        tr = self.tr
        self.t_last = -(1 << 62)   # the latest simulated time reached (a stopped rank's end)
        self.halted = False
        ev = []   # (recorded t, order, tie, kind, payload)
        for s, k in enumerate(tr.kernels):
            ev.append((k[2], 3, s, 0, "start", s))
            # a zero-length kernel's end right after its start, before the next start of that instant
            ev.append((k[3], 0 if k[3] > k[2] else 3, s, 1, "end", s))
        for order, (t, i, b, kind) in enumerate(Trace.memory_events(tr.allocs)):
            ev.append((t, 1 if kind == "free" and tr.allocs[i][3] < t else 2, order, 0, kind, i))
        ev.sort(key=lambda e: e[:4])
        self.result = None
        if not ev:
            return
        first = ev[0][0]
        last = max(e[0] for e in ev)
        self.first, self.last = first, last   # the device's first and last recorded events
        self.buckets = {}   # the memory timeline ("Outputs"): bucket -> [device bytes, simulated t, host bytes]
        oom = False
        host_i = 0
        for r, _, _, _, kind, x in ev:
            if kind == "end" and x in gates:
                delay = yield gates[x]
                if delay is None:
                    self.halted = True
                    break
                if delay > self.shift:   # a coupled wait: the kernel ends when the others let it
                    k = tr.kernels[x]
                    self.events.append(("stall", k[3] + self.shift, k[3] + delay, None, k[0], 0))
                    self.m["coupled_wait_time"] += delay - self.shift
                    self.m["coupled_wait_count"] += 1
                    self.shift = delay
                    self.t_last = max(self.t_last, k[3] + self.shift)
            while host_i < len(tr.host_events) and tr.host_events[host_i][0] <= r:
                _, _, b, hk = tr.host_events[host_i]
                self.program_host += b if hk == "alloc" else -b
                host_i += 1
                self.host_peak = max(self.host_peak, self.host + self.program_host)
            t = r + self.shift
            self.complete_by(t)
            if kind in ("alloc", "free"):
                self.pools_due(r)
            if kind == "alloc":
                self.last_use[x] = t   # dtr: its allocation's time, before any wait
                t2 = self.make_room(x, t)
                if t2 is None:
                    oom = True
                    oom_r = r
                    self.events.append(("oom", self.oom_at, self.oom_at, x, None, self.oom_short))
                    break
                self.stall(t, t2, None)
                self.t_last = max(self.t_last, t2)
                self.set_state(x, GPU)
                self.host_valid[x] = False
                self.clock += 1
                self.stamp[x] = self.clock
                self.key_next[x] = self.next_use_after(x, -1)
                self.refresh(x)
                if self.periodic:
                    self.periodic_on_alloc(x)
                if self.forecast:
                    self.forecast_on_alloc(x)
                self.note_used()
            elif kind == "free":
                self.free(x)
                self.t_last = max(self.t_last, t)
            elif kind == "start":
                if not self.kernel_start(x, t):
                    oom = True
                    oom_r = r
                    break
                if x in gates:
                    self.arrivals[gates[x]] = self.shift
            else:
                self.kernel_end(x)
            self.sample(r)
        if self.forecast:
            self.forecast_finish()
        m = self.m
        m["baseline_makespan_ns"] = last - first
        # an OOM run ends at its OOM (docs/simulator.md, "Time")
        m["simulated_makespan_ns"] = (self.oom_at if oom else max(self.t_last, first) if self.halted
                                      else last + self.shift) - first
        m["simulated_peak_bytes"] = self.peak
        m["host_peak_bytes"] = self.host_peak
        m["oom"] = 1 if oom else 0
        # "Time": loss = simulated / baseline - 1, not defined when the baseline is 0 ("Inputs",
        # events all at one instant: None, null in --json); an OOM run has none, its oom_slowdown
        # is over the recorded time of the event that failed (0 when that was the first instant)
        base = last - first
        if oom:
            failed = oom_r - first
            m["oom_slowdown"] = m["simulated_makespan_ns"] / failed - 1 if failed > 0 else 0.0
            m["throughput_loss"] = None
        elif not self.halted:
            m["throughput_loss"] = m["simulated_makespan_ns"] / base - 1 if base > 0 else None
        memory = sorted((t, dev, host) for dev, t, host in self.buckets.values())
        self.result = Result(m, self.events, oom, self.kernel_times, memory)

    def sample(self, r):
        """After each event: the bucket of recorded time r keeps its highest device bytes."""
        nb = MEMORY_SAMPLES
        span = max(self.last - self.first, 1)
        b = min(max((r - self.first) * nb // (span + 1), 0), nb - 1)
        used = self.caching.reserved if self.caching else self.used   # a failed prefetch may have released
        if used > self.buckets.get(b, [-1])[0]:
            self.buckets[b] = [used, r + self.shift, self.host + self.program_host]

    def stall(self, t, t2, kernel):
        if t2 > t:
            self.m["stalls"] += 1
            self.m["stall_ns"] += t2 - t
            self.events.append(("stall", t, t2, None, kernel, 0))
            self.shift += t2 - t

    def free(self, a):
        b = self.tr.allocs[a][2]
        st = self.state[a]
        if st in (GPU, D2H, H2D):
            self.release(a)
        if st == D2H:
            self.host -= b   # the swap-out's host reservation
        if self.transfer[a] is not None:
            self.transfer[a].live = False
            self.transfer[a] = None
        if self.host_valid[a]:
            self.host -= b
            self.host_valid[a] = False
        self.uncache(a)
        self.set_state(a, FREED)
        self.gen[a] += 1
        if self.sampled:
            self.list_remove(a)

    def kernel_start(self, s, t):
        ops = self.tr.operands[s]
        self.last_started = s
        self.any_started = True
        for a, _ in ops:
            self.pins[a] += 1
            self.gen[a] += 1
            if self.sampled:
                self.list_remove(a)
        for a, _ in ops:
            self.clock += 1
            self.stamp[a] = self.clock
        ready = now = gpu_free = t   # operands are restored in access order, each from where the last make room ended
        for k, (a, _) in enumerate(ops):
            st = self.state[a]
            b = self.tr.allocs[a][2]
            need = t   # when this operand is ready
            if st == H2D:
                need = self.transfer[a].end
            elif st == D2H:
                self.transfer[a].live = False   # cancelled: its link time is still spent
                self.transfer[a] = None
                self.set_state(a, GPU)
                self.host -= b
            elif st == HOST:
                now = self.make_room(a, now)
                if now is None:
                    self.events.append(("oom", self.oom_at, self.oom_at, a, self.tr.kernels[s][0], self.oom_short))
                    return False
                self.set_state(a, H2D)
                tf = self.start_transfer(a, True, now)
                self.note_used()
                need = tf.end
            elif st == DROPPED:
                got = self.recompute(a, now, gpu_free, 1, frozenset())
                if got is None:   # the allocation whose make room failed: an input or a
                    self.events.append(("oom", self.oom_at, self.oom_at, self.oom_alloc, self.tr.kernels[s][0],
                                        self.oom_short))
                    return False
                need, now, gpu_free = got
            if self.capuchin and need > t:
                self.capuchin_wait(s, k, need - t)
            ready = max(ready, need)
        for i in self.recompute_pins:   # the recomputations' inputs stay pinned until here
            self.pins[i] -= 1
            self.refresh(i)
        self.recompute_pins = []
        start = max(ready, now)
        k = self.tr.kernels[s]
        self.kernel_times.append((k[0], start, start + k[3] - k[2]))   # run_kernels: reached, at its time
        self.t_last = max(self.t_last, start + k[3] - k[2])
        self.complete_by(start)
        self.stall(t, start, self.tr.kernels[s][0])
        for k, (a, mode) in enumerate(ops):
            if self.periodic and self.state[a] != FREED:
                self.periodic_on_access(s, k, a)
            if self.forecast and self.state[a] != FREED:
                self.forecast_on_access(s, k, a)
            self.last_use[a] = start
            if mode & 2:
                self.producer[a] = s
            if mode & 2 and self.host_valid[a]:   # write: the host copy is stale
                self.host_valid[a] = False
                self.host -= self.tr.allocs[a][2]
                self.uncache(a)
        if self.lookahead:
            self.prefetch_round(s, start)
            self.early_swap_out(s, start)
        elif self.periodic:
            self.periodic_round(s, start)
        elif self.capuchin:
            self.capuchin_round(s, start)
        elif self.forecast:
            self.observe(s)
            self.periodic_round(s, start, window=8, early=self.forecast_early)
        return True

    # -- lookahead:K (rules 9 and 10)
    def prefetch_round(self, s, t):
        n = len(self.tr.kernels)
        last = min(n - 1, s + self.lookahead)
        self.protected = {a for q in range(s, last + 1) for a, _ in self.tr.operands[q]}
        for q in range(s + 1, last + 1):
            for a, _ in self.tr.operands[q]:
                if self.state[a] == HOST:
                    self.prefetch(a, t)

    def prefetch(self, a, t):
        """Rule 9: never waits; evicts the policy's victims but not what the window needs."""
        b = self.tr.allocs[a][2]
        aside = {}
        while not self.place(a):
            if not self.needs_victim(a):
                self.restore_aside(aside)
                return   # the room comes only with a wait: skipped
            v = self.victim(aside, t, window=True)
            if v is None:
                self.restore_aside(aside)
                return
            self.evict(v, t)
        self.restore_aside(aside)
        self.set_state(a, H2D)
        self.gen[a] += 1
        self.m["prefetches"] += 1
        self.events.append(("prefetch", t, t, a, None, b))
        self.start_transfer(a, True, t)
        self.note_used()

    def live_max(self, lo, hi):
        """The largest recorded live bytes at the starts of kernels lo .. hi (a sparse table)."""
        if self.live_table is None:
            # live at a kernel's start: allocated at or before it and not freed by then
            delta = []
            for _, _, b, t0, t1 in self.tr.allocs:
                delta.append((t0, b))
                if t1 is not None:
                    delta.append((t1, -b))
            delta.sort()
            live, i, row = 0, 0, []
            for k in self.tr.kernels:
                while i < len(delta) and delta[i][0] <= k[2]:
                    live += delta[i][1]
                    i += 1
                row.append(live)
            self.live_table = [row]
            while 2 * len(self.live_table[-1]) > len(row) and len(self.live_table[-1]) > 1:
                prev, w = self.live_table[-1], 1 << (len(self.live_table) - 1)
                self.live_table.append([max(prev[i], prev[i + w]) for i in range(len(prev) - w)])
        j = (hi - lo + 1).bit_length() - 1
        level = self.live_table[j]
        return max(level[lo], level[hi - (1 << j) + 1])

    def live_at(self, s):
        return self.live_max(s, s)

    def lookahead_demand(self, v, s):
        """Rule 10.4, `lookahead`: the recorded live bytes while v would be away."""
        tr = self.tr
        nu = self.next_use_after(v, s)
        e = len(tr.kernels) - 1 if nu == NEVER else nu - 1
        t_free = tr.allocs[v][4]
        if t_free is not None:   # the last kernel starting before the free
            e = min(e, bisect.bisect_left(self.starts, t_free) - 1)
        return self.live_max(s + 1, e) if e > s else None

    def early_swap_out(self, s, t, demand_of=None):
        tr = self.tr
        n = len(tr.kernels)
        if s + 1 >= n:
            return
        next_start = tr.kernels[s + 1][2] + self.shift
        d2h = True if self.link.copy_engines == 1 else False
        skipped = 0
        aside = {}
        while self.queue_free[d2h] <= next_start:
            v = self.victim(aside, t, window=True)
            if v is None:
                break
            demand = None
            if not self.host_valid[v] and not (self.sampled and self.drops(v)):
                demand = (demand_of or (lambda x: self.lookahead_demand(x, s)))(v)
            # off: live (allocated, not freed) minus resident (on the GPU or in H2D)
            if demand is None or demand - self.off <= self.cap:
                skipped += 1
                if skipped > 4:   # "the round stops after 4 skips"
                    break
                aside[v] = True
                if self.sampled:
                    self.list_remove(v)
                continue
            self.evict(v, t)
            self.m["early_evictions"] += 1
        self.restore_aside(aside)

    def kernel_end(self, s):
        for a, _ in self.tr.operands[s]:
            self.pins[a] -= 1
            # the next use after the kernel started last (the next-use table's entry of a's latest
            # access): with two streams a later kernel may have started and used it already
            self.key_next[a] = self.next_use_after(a, max(s, self.last_started))
            self.refresh(a)


def simulate(path, capacity, policy="lru", link=Link(), device=None, lookahead=0, allocator="ideal", host_cap=0,
             allocator_conf="", periodic=0, capuchin=False, forecast=0, tr=None):
    """tr: the trace's rows on that device, read before (a run only reads them), else read here."""
    tr = tr if tr is not None else Trace(path, device)
    sim = Sim(tr, capacity, policy, link, lookahead, allocator, host_cap, allocator_conf, periodic, capuchin,
              forecast)
    return sim.run(), tr
