#!/usr/bin/env python3
"""A third reading of docs/simulator.md, written from the page alone (Python's standard library,
nothing shared with sim/ or the other readings): the single-GPU engine of "State", "Time" and
"Rules" 1-10 with the `ideal` allocator and the `caching` one (default settings, a profiler's first
reserved figure as held bytes), every eviction policy (`lru`, `largest`, `belady`, and the sampled
`dtr` and `cost_aware` with drops and recursive recomputation), the prefetchers `none` and
`lookahead:K` with early swap-out, any link (copy engines, duplex factor, contention with the
device's NCCL kernels and memcpys, the swap-operation cap), a host buffer and the program's host
memory; and "Coupled ranks" on top of it (arrival delays, slack on the shared clock, receives,
send-receives, coupled waits, stopped ranks, the job's figures).

simulate_job(paths, opts) returns what `mhc simulate --ranks --json` prints ({"ranks": [...],
"job": {...}}) and, per rank, the figures of its stored run (metrics and events).
reference_ranks_engine_compare.py runs it beside mhc."""
import bisect
import math
import sqlite3
from fractions import Fraction

MIB = 1 << 20
INF = float("inf")
BIG = 1 << 62

# "Link models": presets (pinned memory), 6 us per transfer, 2 copy engines, shares 0.5.
PRESETS = {
    "pcie3": (12e9, 0.5), "pcie4": (25e9, 0.5), "pcie5": (55e9, 52 / 55),
    "nvlink-c2c": (320e9, 0.5), "nvlink4-peer": (380e9, 375 / 380),
}


def link_config(name="pcie4", **over):
    bw, duplex = PRESETS[name]
    link = dict(h2d_bw=bw, d2h_bw=bw, h2d_lat=6e-6, d2h_lat=6e-6, engines=2, duplex=duplex,
                nccl_share=0.5, memcpy_share=0.5)
    for k, v in over.items():
        if k == "latency":
            link["h2d_lat"] = link["d2h_lat"] = v
        else:
            link[k] = v
    return link


# ---------------------------------------------------------------------------------------------
# The trace of one rank ("Inputs")

class Trace:
    def __init__(self, path, device=None):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.path = path
        self.meta = dict(con.execute("SELECT key, value FROM meta"))
        names = dict(con.execute("SELECT id, text FROM strings"))
        allocs = con.execute("SELECT id, device, bytes, t_alloc, t_free, stream, category FROM allocations "
                             "ORDER BY id").fetchall()
        kernels = con.execute("SELECT id, device, stream, name, t_start, t_end, step FROM kernels").fetchall()
        if device is None:
            device = self.pick_device(allocs)
        self.device = device
        self.allocs = [a for a in allocs if a[1] == device]
        self.host = [a for a in allocs if a[1] == -1] if device != -1 else []
        ks = sorted((k for k in kernels if k[1] == device), key=lambda k: (k[4], k[0]))
        self.kid = [k[0] for k in ks]
        self.kstream = [k[2] for k in ks]
        self.kname = [names.get(k[3], "") for k in ks]
        self.kstart = [k[4] for k in ks]
        self.kend = [k[5] for k in ks]
        self.kstep_col = [k[6] for k in ks]
        self.seq_of = {k: i for i, k in enumerate(self.kid)}
        self.aidx = {a[0]: i for i, a in enumerate(self.allocs)}
        self.abytes = [a[2] for a in self.allocs]
        self.at_alloc = [a[3] for a in self.allocs]
        self.at_free = [a[4] for a in self.allocs]
        self.astream = [a[5] for a in self.allocs]
        self.acat = [a[6] for a in self.allocs]
        n = len(ks)
        ops = [dict() for _ in range(n)]
        for kernel, alloc, mode in con.execute("SELECT kernel, allocation, mode FROM accesses"):
            s = self.seq_of.get(kernel)
            i = self.aidx.get(alloc)
            if s is not None and i is not None:
                ops[s][i] = ops[s].get(i, 0) | mode
        self.assumed = not any(ops)
        if self.assumed and n and self.allocs:
            self.assume(ops)
        self.ops = [sorted(o.items()) for o in ops]   # (allocation index, mode) in allocation id order
        copies = con.execute("SELECT kind, t_start, t_end FROM copies WHERE device = ?", (device,)).fetchall()
        markers = con.execute("SELECT id, t_start, t_end FROM markers WHERE kind = 0 ORDER BY t_start, id").fetchall()
        con.close()
        self.nccl = self.intervals([(s, e) for nm, s, e in zip(self.kname, self.kstart, self.kend)
                                    if "nccl" in nm.lower() or "rccl" in nm.lower()])
        self.memcpy = {kind: self.intervals([(s, e) for k, s, e in copies if k == kind]) for kind in (0, 1)}
        self.steps(markers)
        self.next_use_tables()
        times = self.at_alloc + [f for f in self.at_free if f is not None] + self.kstart + self.kend
        self.first = min(times) if times else 0
        self.last = max(times) if times else 0
        self.origin = int(self.meta.get("time_origin_ns", 0))
        self.rank = int(self.meta["rank"]) if "rank" in self.meta else None
        # recorded live bytes at each kernel's start (after that instant's frees and allocations)
        self.live_at_start = self.live_at(self.kstart)
        self.sparse = [self.live_at_start]
        k = 1
        while (1 << k) <= len(self.kstart):
            prev = self.sparse[-1]
            h = 1 << (k - 1)
            self.sparse.append([max(prev[j], prev[j + h]) for j in range(len(self.kstart) - (1 << k) + 1)])
            k += 1

    @staticmethod
    def pick_device(allocs):
        peaks = {}
        for dev in sorted({a[1] for a in allocs if a[1] >= 0}):
            peaks[dev] = live_peak([a for a in allocs if a[1] == dev])
        if not peaks:
            return -1
        best = max(peaks.values())
        return min(d for d, p in peaks.items() if p == best)

    @staticmethod
    def intervals(pairs):
        out = []
        for a, b in sorted(p for p in pairs if p[1] > p[0]):
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        return out

    def range_max(self, lo, hi):
        """The largest recorded live bytes at the starts of kernels lo..hi."""
        k = (hi - lo + 1).bit_length() - 1
        return max(self.sparse[k][lo], self.sparse[k][hi - (1 << k) + 1])

    def assume(self, ops):
        """"Accesses": the first kernel starting at or after the allocation writes it, if it ends by
        the free; the latest-starting kernel ending by the free (never freed: the last) reads it,
        if that is later than the writer candidate."""
        n = len(self.kstart)
        for i in range(len(self.allocs)):
            ta, tf = self.at_alloc[i], self.at_free[i]
            cand = bisect.bisect_left(self.kstart, ta)
            while cand < n and self.kstart[cand] < ta:
                cand += 1
            if cand >= n:
                continue
            if tf is None or self.kend[cand] <= tf:
                ops[cand][i] = ops[cand].get(i, 0) | 2
            if tf is None:
                reader = n - 1
            else:
                reader = None
                for s in range(n - 1, cand, -1):
                    if self.kend[s] <= tf:
                        reader = s
                        break
            if reader is not None and reader > cand:
                ops[reader][i] = ops[reader].get(i, 0) | 1

    def steps(self, markers):
        n = len(self.kstart)
        raw = [None] * n
        if n and (sum(1 for s in self.kstep_col if s is not None and s >= 0) * 2 >= n or "steps_from" in self.meta):
            raw = [s if s is not None and s >= 0 else None for s in self.kstep_col]
        elif markers:
            for s in range(n):
                t = self.kstart[s]
                last = None
                for mid, ms, me in markers:
                    if ms <= t:
                        last = (mid, ms, me)
                    else:
                        break
                if last is not None and last[2] > t:
                    raw[s] = last[0]
        # steps: runs of kernels with the same value (kernels of no step in between do not cut)
        self.kstep = [None] * n
        self.step_first = []
        cur, num = None, -1
        for s in range(n):
            if raw[s] is None:
                continue
            if raw[s] != cur:
                cur = raw[s]
                num += 1
                self.step_first.append(s)
            self.kstep[s] = num
        self.step_len = []
        for j, f in enumerate(self.step_first):
            nxt = self.step_first[j + 1] if j + 1 < len(self.step_first) else n
            self.step_len.append(nxt - f)

    def next_use_tables(self):
        uses = {}
        for s, o in enumerate(self.ops):
            for i, _ in o:
                uses.setdefault(i, []).append(s)
        self.uses = uses

    def next_use(self, i, after):
        """The first kernel after seq `after` that accesses allocation i (None: never)."""
        u = self.uses.get(i)
        if not u:
            return None
        j = bisect.bisect_right(u, after)
        return u[j] if j < len(u) else None

    def memory_events(self, allocs):
        """"Events at one instant": frees of earlier allocations, then allocations by row (one freed
        at its own instant right after it)."""
        ev = []
        for i, a in enumerate(allocs):
            ev.append((a[3], 1, a[0], i))
            if a[4] is not None and a[4] != a[3]:
                ev.append((a[4], 0, a[0], i))
        ev.sort()
        return ev

    def live_at(self, times):
        ev = self.memory_events(self.allocs)
        live, j = 0, 0
        order = sorted(range(len(times)), key=lambda k: times[k])
        res = [0] * len(times)
        for k in order:
            t = times[k]
            while j < len(ev) and ev[j][0] <= t:
                _, kind, _, i = ev[j]
                if kind == 1:
                    if self.at_free[i] != self.at_alloc[i]:
                        live += self.abytes[i]
                else:
                    live -= self.abytes[i]
                j += 1
            res[k] = live
        return res


def live_peak(allocs):
    ev = []
    for a in allocs:
        ev.append((a[3], 1, a[0], a[2], a[4] == a[3]))
        if a[4] is not None and a[4] != a[3]:
            ev.append((a[4], 0, a[0], a[2], False))
    ev.sort()
    live = peak = 0
    for _, kind, _, b, instant in ev:
        if kind == 1:
            live += b
            peak = max(peak, live)
            if instant:
                live -= b
        else:
            live -= b
    return peak


# ---------------------------------------------------------------------------------------------
# The caching allocator ("Allocator models", default settings)

def round_size(b):
    return max(512, (b + 511) // 512 * 512)


class Caching:
    def __init__(self, cap):
        self.cap = cap           # None: unlimited
        self.segs = []           # [seq, pool key, size, blocks: list of [offset, size, free]]
        self.nseg = 0
        self.seg_bytes = 0
        self.held = 0

    @property
    def reserved(self):
        return self.seg_bytes + self.held

    @staticmethod
    def pool(stream, r):
        return (stream, r <= MIB)

    def fits(self, size):
        if self.cap is None:
            return True
        return self.seg_bytes + self.held - min(self.held, size) + size <= self.cap

    def best_fit(self, key, r):
        best = None
        for seg in self.segs:
            if seg[1] != key:
                continue
            for blk in seg[3]:
                if blk[2] and blk[1] >= r:
                    c = (blk[1], seg[0], blk[0])
                    if best is None or c < best[0]:
                        best = (c, seg, blk)
        return best

    def split(self, seg, blk, r):
        rest = blk[1] - r
        small = seg[1][1]
        if (small and rest >= 512) or (not small and rest > MIB):
            k = seg[3].index(blk)
            seg[3].insert(k + 1, [blk[0] + r, rest, True])
            blk[1] = r
        blk[2] = False
        return (seg, blk)

    def seg_size(self, r):
        if r <= MIB:
            return 2 * MIB
        if r < 10 * MIB:
            return 20 * MIB
        return (r + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)

    def malloc(self, b, stream):
        r = round_size(b)
        key = self.pool(stream, r)
        f = self.best_fit(key, r)
        if f:
            return self.split(f[1], f[2], r)
        size = self.seg_size(r)
        if not self.fits(size):
            self.release()
            if not self.fits(size):
                return None
        take = min(self.held, size)
        self.held -= take
        seg = [self.nseg, key, size, [[0, size, True]]]
        self.nseg += 1
        self.segs.append(seg)
        self.seg_bytes += size
        return self.split(seg, seg[3][0], r)

    def release(self):
        keep = []
        for seg in self.segs:
            if len(seg[3]) == 1 and seg[3][0][2]:
                self.seg_bytes -= seg[2]
            else:
                keep.append(seg)
        self.segs = keep
        self.held = 0

    def free(self, h):
        seg, blk = h
        blk[2] = True
        bl = seg[3]
        k = bl.index(blk)
        if k + 1 < len(bl) and bl[k + 1][2]:
            blk[1] += bl[k + 1][1]
            del bl[k + 1]
        if k > 0 and bl[k - 1][2]:
            bl[k - 1][1] += blk[1]
            del bl[k]

    def largest_free(self):
        return max((blk[1] for seg in self.segs for blk in seg[3] if blk[2]), default=0)

    @staticmethod
    def round(b):
        return round_size(b)

    @staticmethod
    def block_bytes(h):
        return h[1][1]

    def top_up(self, figure):
        want = figure if self.cap is None else min(figure, self.cap)
        if want > self.reserved:
            self.held += want - self.reserved


class SettingsCaching:
    """The caching model under settings (`expandable_segments`, `max_split_size_mb`,
    `roundup_power2_divisions`, `garbage_collection_threshold`, ...): the allocator's outside
    reading (reference_allocator_outside.py, every setting of "Allocator models") behind the
    interface of Caching. Private pools are left out (the traces this reading runs name none)."""

    def __init__(self, conf, cap):
        import reference_allocator_outside as ra
        self.a = ra.Allocator(conf, ra.UNLIMITED if cap is None else cap)

    @property
    def reserved(self):
        return self.a.reserved

    def malloc(self, b, stream):
        return self.a.malloc(b, stream)

    def free(self, h):
        self.a.free(h)

    def largest_free(self):
        return max((b.size for seg in self.a.segs for b in seg.blocks if b.state == "free"), default=0)

    def top_up(self, figure):
        self.a.top_up(figure)

    def round(self, b):
        return self.a.round_size(b)

    @staticmethod
    def block_bytes(h):
        return h.size


def caching_model(trace, cap, conf=""):
    """The recorded settings (meta allocator.conf) with `--allocator-conf` over them: the default
    settings' model (Caching), or, with any setting, SettingsCaching."""
    text = ",".join(c for c in (trace.meta.get("allocator.conf", ""), conf) if c)
    return SettingsCaching(text, cap) if text else Caching(cap)


def first_reserved(trace):
    v = trace.meta.get(f"kineto.reserved_first.device{trace.device}")
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def baseline_peak(trace, allocator):
    if allocator == "ideal":
        return live_peak(trace.allocs)
    c = caching_model(trace, None)   # "Capacity": under the recorded settings, whatever --allocator-conf says
    first = first_reserved(trace)
    topped = first is None
    peak = 0
    blocks = {}
    for t, kind, _, i in trace.memory_events(trace.allocs):
        if kind == 1:
            if not topped and t > 0:
                c.top_up(first)
                topped = True
                peak = max(peak, c.reserved)
            blocks[i] = c.malloc(trace.abytes[i], trace.astream[i])
            peak = max(peak, c.reserved)
            if trace.at_free[i] == trace.at_alloc[i]:
                c.free(blocks.pop(i))
        else:
            c.free(blocks.pop(i))
    return peak


# ---------------------------------------------------------------------------------------------
# One rank's run (rules 1-10)

NOT, GPU, HOST, H2D, D2H, FREED, DROP = range(7)   # reference_outside.py's numbers, and DROP
EV = {"swap_out": 0, "swap_in": 1, "evict_clean": 2, "drop": 3, "recompute": 4, "stall": 5, "oom": 6,
      "prefetch": 7}


# Other readings of sentences this page once left open, each the engine's behaviour's alternative
# (reference_ranks_engine_compare.py --toggles counts the jobs on which mhc tells them apart):
#   complete_alloc_only   transfers complete before an allocation only (not a free, kernel start or end)
#   prefetch_stop_round   a protected victim ends the whole prefetch round, not one allocation's
#   discard_check_first   host copies are discarded only when discarding them all would make room
#   early_host_first      rule 10: the host-buffer test before a victim the policy would drop is skipped
EXP = {k: True for k in __import__("os").environ.get("MHC_REF_EXP", "").split(",") if k}


class OOM(Exception):
    pass


class Transfer:
    __slots__ = ("kind", "a", "start", "end", "cancelled", "n")

    def __init__(self, kind, a, start, end, n):
        self.kind, self.a, self.start, self.end, self.cancelled, self.n = kind, a, start, end, False, n


class Engine:
    def __init__(self, trace, cfg, capacity):
        self.tr = trace
        self.cfg = cfg
        self.cap = capacity                       # None: unlimited
        self.policy = cfg["policy"]
        self.caching = cfg["allocator"] == "caching"
        self.alloc = caching_model(trace, capacity, cfg.get("allocator_conf", "")) if self.caching else None
        ratio = cfg.get("host_ratio", 0)
        self.host_cap = None if not ratio or capacity is None else int(Fraction(str(ratio)) * capacity)
        self.link = cfg["link"]
        n = len(trace.allocs)
        self.state = [NOT] * n
        self.live_bytes = 0
        self.resident_bytes = 0
        self.host_valid = [False] * n
        self.pins = [0] * n
        self.rpins = [0] * n
        self.block = [None] * n
        self.producer = [None] * n
        self.last_use_t = [0] * n
        self.clock = [0] * n
        self.tick = 0
        self.xfer = [None] * n
        self.cache_order = {}                     # host copies that are caches: allocation -> order
        self.cache_n = 0
        self.evl = []                             # the evictable list (order kept for the samplers)
        self.evpos = {}
        self.used = 0
        self.peak = 0
        self.host = 0                             # swap space: valid copies + reservations
        self.prog_host = 0
        self.host_peak = 0
        self.inflight = []
        self.qfree = {0: -INF, 1: -INF}           # 0: H2D queue, 1: D2H queue (shared with one engine)
        self.last_start = None
        self.gpu_free = -INF                      # recomputations run one after another
        self.shift = 0
        self.started = -1                         # seq of the kernel started last
        self.m = dict(stall_ns=0, stalls=0, swap_in_bytes=0, swap_ins=0, swap_out_bytes=0, swap_outs=0,
                      clean_evictions=0, early_evictions=0, prefetches=0, drops=0, recomputations=0,
                      recompute_ns=0, recompute_depth_max=0, recompute_inputs_assumed=0)
        self.events = []
        self.kt = {}
        self.x = 0x9E3779B97F4A7C15
        self.coupled_wait = 0
        self.coupled_waits = 0
        self.reached = trace.first
        pre = cfg.get("prefetch", "none")
        self.K = int(pre.split(":")[1]) if pre.startswith("lookahead") and ":" in pre else (8 if pre.startswith("lookahead") else 0)
        self.lookahead = pre.startswith("lookahead")
        self.early = self.lookahead and not cfg.get("no_early")
        self.window = set()
        # nanoseconds per byte, computed once ("The sampled policies")
        self.ns_in = 1e9 / self.link["h2d_bw"]
        self.ns_out = 1e9 / self.link["d2h_bw"]
        self.oom = None
        self.samples_n = cfg.get("memory_samples", 4096)
        self.buckets = {}

    # -- bookkeeping
    def note_used(self):
        if self.used > self.peak:
            self.peak = self.used

    def note_host(self):
        h = self.host + self.prog_host
        if h > self.host_peak:
            self.host_peak = h

    def ev(self, kind, t0, t1, a=None, k=None, b=0):
        self.events.append((EV[kind], t0, t1, self.tr.allocs[a][0] if a is not None else 0,
                            self.tr.kid[k] if k is not None else 0, b))

    def ev_add(self, i):
        if i not in self.evpos:
            self.evpos[i] = len(self.evl)
            self.evl.append(i)

    def ev_remove(self, i):
        p = self.evpos.pop(i, None)
        if p is None:
            return
        last = self.evl.pop()
        if last != i:
            self.evl[p] = last
            self.evpos[last] = p

    def set_state(self, i, new):
        old = self.state[i]
        b = self.tr.abytes[i]
        self.live_bytes += (new not in (NOT, FREED)) * b - (old not in (NOT, FREED)) * b
        self.resident_bytes += (new in (GPU, H2D)) * b - (old in (GPU, H2D)) * b
        self.state[i] = new

    def evictable(self, i):
        return self.state[i] == GPU and self.pins[i] == 0 and self.rpins[i] == 0

    def sample(self, r):
        """"Outputs": after each recorded event, the device bytes are offered to the bucket of its
        recorded time; a bucket keeps the first offer of its highest value."""
        tr = self.tr
        span = max(1, tr.last - tr.first)
        b = min(self.samples_n - 1, max(0, (r - tr.first) * self.samples_n // (span + 1)))
        cur = self.buckets.get(b)
        if cur is None or self.used > cur[1]:
            self.buckets[b] = (r + self.shift, self.used, self.host + self.prog_host)

    # -- GPU bytes
    def place(self, i):
        b = self.tr.abytes[i]
        if self.caching:
            h = self.alloc.malloc(b, self.tr.astream[i])
            self.used = self.alloc.reserved
            self.note_used()
            if h is None:
                return False
            self.block[i] = h
            return True
        if self.cap is not None and self.used + b > self.cap:
            return False
        self.used += b
        self.note_used()
        return True

    def release(self, i):
        if self.caching:
            self.alloc.free(self.block[i])
            self.block[i] = None
            self.used = self.alloc.reserved
        else:
            self.used -= self.tr.abytes[i]

    # -- transfers (rule 8)
    @staticmethod
    def busy_at(iv, x):
        """Whether a recorded interval [start, end) holds x (the intervals merged, sorted)."""
        j = bisect.bisect_right(iv, (x, INF)) - 1
        return j >= 0 and iv[j][0] <= x < iv[j][1]

    def transfer(self, kind, i, t):
        L = self.link
        q = kind if L["engines"] >= 2 else 0
        s = max(t, self.qfree[q])
        if self.cfg.get("max_ops"):
            gap = math.ceil(1e9 / self.cfg["max_ops"])
            if self.last_start is not None:
                s = max(s, self.last_start + gap)
        bw = L["h2d_bw"] if kind == 0 else L["d2h_bw"]
        if L["engines"] >= 2 and self.qfree[1 - kind] > s:
            bw *= L["duplex"]
        x = s - self.shift
        if self.busy_at(self.tr.nccl, x):
            bw *= 1 - L["nccl_share"]
        if self.busy_at(self.tr.memcpy[kind], x):
            bw *= 1 - L["memcpy_share"]
        lat = L["h2d_lat"] if kind == 0 else L["d2h_lat"]
        n = self.tr.abytes[i]
        d = max(1, math.ceil(lat * 1e9 + n / bw * 1e9))
        tr = Transfer(kind, i, s, s + d, n)
        self.qfree[q] = s + d
        self.last_start = s
        self.inflight.append(tr)
        self.xfer[i] = tr
        if kind == 0:
            self.m["swap_ins"] += 1
            self.m["swap_in_bytes"] += n
            self.ev("swap_in", s, s + d, i, None, n)
        else:
            self.m["swap_outs"] += 1
            self.m["swap_out_bytes"] += n
            self.ev("swap_out", s, s + d, i, None, n)
        return tr

    def complete(self, t):
        done = sorted((tr for tr in self.inflight if tr.end <= t), key=lambda tr: tr.end)
        if not done:
            return
        ids = set(map(id, done))
        self.inflight = [tr for tr in self.inflight if id(tr) not in ids]
        for tr in done:
            i = tr.a
            if self.xfer[i] is tr:
                self.xfer[i] = None
            if tr.cancelled:
                continue
            if tr.kind == 1:
                self.set_state(i, HOST)
                self.host_valid[i] = True
                self.release(i)
            else:
                self.set_state(i, GPU)
                self.cache_n += 1
                self.cache_order[i] = self.cache_n
                if self.pins[i] == 0 and self.rpins[i] == 0:
                    self.ev_add(i)

    def meaningful(self):
        return [tr for tr in self.inflight if not tr.cancelled and self.state[tr.a] != FREED]

    def pending(self, i):
        return sum(self.tr.abytes[tr.a] for tr in self.inflight
                   if tr.kind == 1 and not tr.cancelled and self.state[tr.a] == D2H)

    def not_enough(self, i):
        if self.caching:
            return self.pending(i) < self.alloc.round(self.tr.abytes[i])
        return self.used - self.pending(i) + self.tr.abytes[i] > self.cap

    # -- host buffer (rule 5)
    def host_can_take(self, v):
        return self.host_room(self.tr.abytes[v])

    def host_room(self, b):
        if self.host_cap is None:
            return True
        if EXP.get("discard_check_first"):
            if self.host + b - sum(self.tr.abytes[c] for c in self.cache_order) > self.host_cap:
                return False
        while self.host + b > self.host_cap and self.cache_order:
            c = max(self.cache_order, key=self.cache_order.get)
            del self.cache_order[c]
            self.host_valid[c] = False
            self.host -= self.tr.abytes[c]
        return self.host + b <= self.host_cap

    # -- eviction policies
    def next_use_now(self, i):
        return self.tr.next_use(i, self.started)

    def recompute_cost(self, i):
        """A recorded duration of the kernel that last wrote it, for an activation whose producer's
        other operands are all freed after the recorded start of its next use (else infinite)."""
        p = self.producer[i]
        if p is None or self.tr.acat[i] != 3:
            return INF
        nu = self.next_use_now(i)
        if nu is not None:
            t = self.tr.kstart[nu]
            for j, _ in self.tr.ops[p]:
                if j == i:
                    continue
                f = self.tr.at_free[j]
                if f is not None and f <= t:
                    return INF
        return self.tr.kend[p] - self.tr.kstart[p]

    def swap_out_ns(self, i):
        return self.link["d2h_lat"] * 1e9 + self.tr.abytes[i] * self.ns_out

    def swap_in_ns(self, i):
        return self.link["h2d_lat"] * 1e9 + self.tr.abytes[i] * self.ns_in

    def would_drop(self, i):
        if self.policy == "dtr":
            rc = self.recompute_cost(i)
            return rc != INF and rc <= self.swap_out_ns(i) + self.swap_in_ns(i)
        if self.policy == "cost_aware":
            rc = self.recompute_cost(i)
            return rc != INF and rc < self.swap_in_ns(i)
        return False

    def score(self, i, now):
        if self.policy == "dtr":
            cost = min(self.recompute_cost(i), self.swap_out_ns(i) + self.swap_in_ns(i))
            return -cost / (self.tr.abytes[i] * (now - self.last_use_t[i] + 1))
        # cost_aware
        nu = self.next_use_now(i)
        base = self.tr.kstart[self.started] if self.started >= 0 else (self.tr.kstart[0] if self.tr.kstart else 0)
        if nu is None:
            ttnu = 1e18
        else:
            ttnu = max(1, self.tr.kstart[nu] - base)
        reload = max(1, min(self.swap_in_ns(i), self.recompute_cost(i)))
        q = 1 if self.link["engines"] >= 2 else 0
        backlog = max(0, self.qfree[q] - now)
        hide = 1 if ttnu >= backlog + self.swap_out_ns(i) + reload else 0.1
        p = self.producer[i]
        if p is None or self.tr.kstep[p] is None:
            depth = 0.5
        else:
            st = self.tr.kstep[p]
            depth = (p - self.tr.step_first[st]) / self.tr.step_len[st]
        return ttnu / reload * hide * (1.25 - depth / 2)

    def xorshift(self):
        x = self.x
        x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 7
        x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
        self.x = x
        return x

    def victim(self, now):
        cands = self.evl
        if not cands:
            return None
        p = self.policy
        if p == "lru":
            return min(cands, key=lambda i: self.clock[i])
        if p == "largest":
            return min(cands, key=lambda i: (-self.tr.abytes[i], self.clock[i]))
        if p == "belady":
            def key(i):
                nu = self.next_use_now(i)
                return (-(INF if nu is None else nu), i)
            return min(cands, key=key)
        n = len(cands)
        if n <= 64:
            pick = list(cands)
        else:
            pick = [cands[self.xorshift() % n] for _ in range(64)]
        best = None
        for i in pick:
            s = self.score(i, now)
            if best is None or s > best[0] or (s == best[0] and i < best[1]):
                best = (s, i)
        return best[1]

    # -- rule 5
    def evict(self, v, t, early=False):
        self.ev_remove(v)
        if self.host_valid[v]:
            self.set_state(v, HOST)
            self.cache_order.pop(v, None)
            self.release(v)
            self.m["clean_evictions"] += 1
            self.ev("evict_clean", t, t, v, None, self.tr.abytes[v])
            return
        if self.would_drop(v):
            self.set_state(v, DROP)
            self.release(v)
            self.m["drops"] += 1
            self.ev("drop", t, t, v, None, self.tr.abytes[v])
            return
        self.host += self.tr.abytes[v]
        self.note_host()
        self.set_state(v, D2H)
        self.transfer(1, v, t)
        if early:
            self.m["early_evictions"] += 1

    # -- rule 6
    def make_room(self, i, t, prefetch=False):
        """Returns the time room was made (None: a prefetch that gives up); raises OOM."""
        aside = []
        self.protected_stop = False
        try:
            while True:
                self.complete(t)
                if self.place(i):
                    return t
                if self.not_enough(i):
                    v = None
                    while True:
                        v = self.victim(t)
                        if v is None:
                            break
                        if prefetch and v in self.window:
                            self.protected_stop = True
                            return None
                        if not self.host_valid[v] and not self.would_drop(v) and not self.host_can_take(v):
                            aside.append(v)
                            self.ev_remove(v)
                            continue
                        break
                    if v is not None:
                        self.evict(v, t)
                        continue
                if prefetch:
                    return None
                waits = self.meaningful()
                if not waits:
                    raise OOM(t, i)
                t = min(tr.end for tr in waits)
        finally:
            for v in aside:
                if self.evictable(v):
                    self.ev_add(v)

    def oom_figures(self, i, t, kernel=None):
        b = self.tr.abytes[i]
        on = [j for j in range(len(self.state)) if self.state[j] in (GPU, H2D, D2H)]
        pinned = sum(self.tr.abytes[j] for j in on if self.pins[j] > 0)
        if self.caching:
            need = self.alloc.round(b)
            in_use = sum(self.alloc.block_bytes(self.block[j]) for j in on if self.block[j] is not None)
            free = self.cap - in_use
            frag = free >= need
            if frag:
                short = max(0, need - max(self.alloc.largest_free(), self.cap - self.alloc.reserved))
            else:
                short = need - free
            return dict(alloc=i, kernel=kernel, t=t, needed=need, pinned=pinned, short=short, frag=frag,
                        in_use=in_use, largest=self.alloc.largest_free(), reserved=self.alloc.reserved)
        need, short = b, self.used + b - self.cap
        return dict(alloc=i, kernel=kernel, t=t, needed=need, pinned=pinned, short=short, held=self.used)

    # -- the run
    def run(self):
        """A generator: yields ("wait", seq) at the end of a cross-rank kernel, to be resumed with
        the bound (or None when a rank it waits for stopped)."""
        tr = self.tr
        evs = []
        for t, kind, aid, i in tr.memory_events(tr.allocs):
            evs.append((t, 2 if kind == 1 else 1, aid, i))
        n = len(tr.kstart)
        for s in range(n):
            evs.append((tr.kstart[s], 3, s, s))
            if tr.kend[s] != tr.kstart[s]:
                evs.append((tr.kend[s], 0, s, s))
        evs.sort()
        host_ev = tr.memory_events(tr.host)
        hj = 0
        first = first_reserved(tr) if self.caching else None
        topped = first is None
        for r, cls, _, i in evs:
            while hj < len(host_ev) and host_ev[hj][0] <= r:
                _, hk, _, hi = host_ev[hj]
                b = tr.host[hi][2]
                if hk == 1:
                    self.prog_host += b
                    self.note_host()
                    if tr.host[hi][4] == tr.host[hi][3]:
                        self.prog_host -= b
                else:
                    self.prog_host -= b
                hj += 1
            try:
                if cls == 2:
                    if not topped and r > 0:
                        self.alloc.top_up(first)
                        self.used = self.alloc.reserved
                        self.note_used()
                        topped = True
                    self.allocate(i, r)
                    self.sample(r)
                    if tr.at_free[i] == r:
                        self.free(i, r)
                        self.sample(r)
                elif cls == 1:
                    self.free(i, r)
                    self.sample(r)
                elif cls == 3:
                    self.start(i)
                    self.sample(r)
                    if tr.kend[i] == tr.kstart[i]:
                        yield from self.end(i)
                        if self.oom == "stopped":
                            return
                        self.sample(r)
                else:
                    yield from self.end(i)
                    if self.oom == "stopped":
                        return
                    self.sample(r)
            except OOM as e:
                self.oom = self.oom_info
                self.reached = max(self.reached, e.args[0])
                o = self.oom
                self.ev("oom", o["t"], o["t"], o["alloc"], o["kernel"], o["short"])
                return

    def allocate(self, i, r):
        t = r + self.shift
        self.complete(t)
        self.last_use_t[i] = t
        try:
            t2 = self.make_room(i, t)
        except OOM as e:
            self.oom_info = self.oom_figures(e.args[1], e.args[0])
            self.oom_info["recorded"] = r
            raise
        if t2 > t:
            self.stall(t, t2 - t, a=i)
        self.set_state(i, GPU)
        self.host_valid[i] = False
        self.tick += 1
        self.clock[i] = self.tick
        self.ev_add(i)
        self.reached = max(self.reached, r + self.shift)
        self.allocated(i, t2)

    def stall(self, t, w, a=None, k=None):
        self.shift += w
        self.m["stall_ns"] += w
        self.m["stalls"] += 1
        self.ev("stall", t, t + w, a, k, 0)

    def free(self, i, r):
        if not EXP.get("complete_alloc_only"):
            self.complete(r + self.shift)
        st = self.state[i]
        if self.xfer[i] is not None:
            tr = self.xfer[i]
            if tr.kind == 1 and not tr.cancelled:
                self.host -= self.tr.abytes[i]
            tr.cancelled = True
            self.xfer[i] = None
        if st in (GPU, H2D, D2H):
            self.release(i)
        if self.host_valid[i]:
            self.host -= self.tr.abytes[i]
            self.host_valid[i] = False
        self.cache_order.pop(i, None)
        self.ev_remove(i)
        self.set_state(i, FREED)
        self.reached = max(self.reached, r + self.shift)

    def start(self, s):
        tr = self.tr
        r = tr.kstart[s]
        t = r + self.shift
        self.started = s
        if not EXP.get("complete_alloc_only"):
            self.complete(t)
        ops = tr.ops[s]
        for i, _ in ops:
            self.pins[i] += 1
            self.ev_remove(i)
        cursor = t
        ready = t
        self.rec_pinned = []
        try:
            for k, (i, _) in enumerate(ops):
                st = self.state[i]
                if st == GPU or st == FREED:
                    continue
                if st == H2D:
                    ready = max(ready, self.xfer[i].end)
                    self.operand_wait(s, k, self.xfer[i].end - t)
                elif st == D2H:
                    x = self.xfer[i]
                    x.cancelled = True
                    self.xfer[i] = None
                    self.host -= tr.abytes[i]
                    self.set_state(i, GPU)
                elif st == HOST:
                    cursor = self.make_room(i, cursor)
                    self.set_state(i, H2D)
                    x = self.transfer(0, i, cursor)
                    x_end = x.end
                    ready = max(ready, x_end)
                    self.operand_wait(s, k, x_end - t)
                elif st == DROP:
                    end, cursor = self.recompute(i, cursor, 1, set(), s)
                    ready = max(ready, end)
                    self.operand_wait(s, k, end - t)
        except OOM as e:
            for j in self.rec_pinned:
                self.rpins[j] -= 1
            self.rec_pinned = []
            self.oom_info = self.oom_figures(e.args[1], e.args[0], s)
            self.oom_info["recorded"] = r
            self.reached = max(self.reached, e.args[0])
            raise
        for j in self.rec_pinned:
            self.rpins[j] -= 1
            if self.evictable(j):
                self.ev_add(j)
        begin = max(cursor, ready)
        if begin > t:
            self.stall(t, begin - t, k=s)
        self.complete(begin)
        for k, (i, mode) in enumerate(ops):
            if self.state[i] != FREED:   # a skipped operand is no access
                self.accessed(s, k, i, mode)
            self.tick += 1
            self.clock[i] = self.tick
            self.last_use_t[i] = begin
            if mode & 2:
                if self.host_valid[i]:
                    self.host_valid[i] = False
                    self.host -= tr.abytes[i]
                    self.cache_order.pop(i, None)
                self.producer[i] = s
        self.kt[s] = begin
        self.reached = max(self.reached, begin + tr.kend[s] - tr.kstart[s])
        self.after_launch(s, begin)

    # -- a prefetcher's hooks (lookahead here; reference_learning_engine.py the learning ones)
    def allocated(self, i, t):
        """Allocation i was placed at simulated t."""

    def operand_wait(self, s, k, d):
        """Operand k of kernel s is ready d ns after the kernel's time."""

    def accessed(self, s, k, i, mode):
        """Kernel s, started, accesses allocation i as its operand k."""

    def after_launch(self, s, t):
        if self.lookahead:
            self.prefetch_round(s, t)
            if self.early:
                self.early_round(s, t)

    def recompute(self, a, t, depth, chain, s):
        """Rule 2's recursive recomputation of a dropped allocation; returns (ready, make room end)."""
        tr = self.tr
        p = self.producer[a]
        self.m["recompute_depth_max"] = max(self.m["recompute_depth_max"], depth)
        inputs_ready = t
        cursor = t
        chain = chain | {a}
        for j, mode in tr.ops[p]:
            if j == a or not mode & 1:
                continue
            st = self.state[j]
            if st == FREED or st == NOT or j in chain or (st == DROP and depth >= 32):
                self.m["recompute_inputs_assumed"] += 1
                continue
            self.rpins[j] += 1
            self.rec_pinned.append(j)
            self.ev_remove(j)
            if st == GPU:
                continue
            if st == H2D:
                inputs_ready = max(inputs_ready, self.xfer[j].end)
            elif st == D2H:
                land = self.xfer[j].end
                cursor = max(cursor, land)
                self.complete(land)
                cursor = self.make_room(j, cursor)
                self.set_state(j, H2D)
                inputs_ready = max(inputs_ready, self.transfer(0, j, cursor).end)
            elif st == HOST:
                cursor = self.make_room(j, cursor)
                self.set_state(j, H2D)
                inputs_ready = max(inputs_ready, self.transfer(0, j, cursor).end)
            elif st == DROP:
                end, cursor = self.recompute(j, cursor, depth + 1, chain, s)
                inputs_ready = max(inputs_ready, end)
        cursor = self.make_room(a, cursor)
        self.set_state(a, GPU)
        dur = tr.kend[p] - tr.kstart[p]
        start = max(inputs_ready, cursor, self.gpu_free)
        end = start + dur
        self.gpu_free = end
        self.m["recomputations"] += 1
        self.m["recompute_ns"] += dur
        self.ev("recompute", start, end, a, p, tr.abytes[a])
        return end, cursor

    def end(self, s):
        tr = self.tr
        if self.cross is not None and s in self.cross:
            bound = yield ("wait", s)
            if bound is None:
                self.oom = "stopped"
                return
            if bound > self.shift:
                w = bound - self.shift
                t0 = tr.kend[s] + self.shift
                self.shift = bound
                self.coupled_wait += w
                self.coupled_waits += 1
                self.ev("stall", t0, t0 + w, None, s, 0)
        t = tr.kend[s] + self.shift
        self.reached = max(self.reached, t)
        if not EXP.get("complete_alloc_only"):
            self.complete(t)
        for i, _ in tr.ops[s]:
            self.pins[i] -= 1
            if self.evictable(i):
                self.ev_add(i)

    cross = None

    # -- rule 9
    def prefetch_round(self, s, t):
        tr = self.tr
        n = len(tr.kstart)
        last = min(n - 1, s + self.K)
        self.window = set()
        for k in range(s, last + 1):
            for i, _ in tr.ops[k]:
                self.window.add(i)
        for k in range(s + 1, last + 1):
            for i, _ in tr.ops[k]:
                if self.state[i] != HOST:
                    continue
                if not self.prefetch(i, t) and EXP.get("prefetch_stop_round") and self.protected_stop:
                    return

    def prefetch(self, i, t):
        """Rule 9 for allocation i (on the host): swap it in if room is made without waiting."""
        if self.make_room(i, t, prefetch=True) is None:
            return False
        self.set_state(i, H2D)
        self.m["prefetches"] += 1
        self.ev("prefetch", t, t, i, None, self.tr.abytes[i])
        self.transfer(0, i, t)
        return True

    # -- rule 10 (lookahead's demand)
    def early_demand(self, v, s):
        """Rule 10.4 for lookahead: the largest recorded live bytes at the starts of kernels s+1 .. e."""
        tr = self.tr
        nu = self.next_use_now(v)
        e = (nu - 1) if nu is not None else len(tr.kstart) - 1
        f = tr.at_free[v]
        if f is not None:
            e = min(e, bisect.bisect_left(tr.kstart, f) - 1)
        return tr.range_max(s + 1, e) if e > s else None

    def early_round(self, s, t):
        tr = self.tr
        if s + 1 >= len(tr.kstart):
            return
        q = 1 if self.link["engines"] >= 2 else 0
        nxt = tr.kstart[s + 1] + self.shift
        skipped = 0
        aside = []
        try:
            while True:
                if self.qfree[q] > nxt:
                    return
                v = self.victim(t)
                if v is None or v in self.window:
                    return
                if not self.host_valid[v] and not (not EXP.get("early_host_first") and self.would_drop(v)) \
                        and not self.host_can_take(v):
                    aside.append(v)
                    self.ev_remove(v)
                    continue
                skip = self.host_valid[v] or self.would_drop(v)
                demand = None
                if not skip:
                    demand = self.early_demand(v, s)
                    off = self.live_bytes - self.resident_bytes
                    if demand is None or demand - off <= self.cap:
                        skip = True
                if skip:
                    if skipped == 4:
                        return
                    skipped += 1
                    aside.append(v)
                    self.ev_remove(v)
                    continue
                self.evict(v, t, early=True)
        finally:
            for v in aside:
                if self.evictable(v):
                    self.ev_add(v)


# ---------------------------------------------------------------------------------------------
# Coupled ranks

def op_of(name):
    k = name.find("Kernel_")
    j = k + len("Kernel_")
    e = j
    while e < len(name) and name[e].isascii() and name[e].isalnum():
        e += 1
    return name[j:e]


def is_cross(name):
    return name.startswith("nccl") and "Kernel_" in name


def capacity_of(share, peak):
    if share == "unlimited":
        return None
    if share.endswith("%"):
        return int(Fraction(share[:-1]) * peak / 100)
    return int(share)


def plan(traces, given):
    """For every rank's cross-rank kernels: the members' kernels it waits for (rules 2-3)."""
    ranks = [t.rank if t.rank is not None else k for k, t in enumerate(traces)]
    comms = {}   # rank -> seq -> (comm, kind, peer info)
    streams_with = {}
    for r, t in zip(ranks, traces):
        for s, nm in enumerate(t.kname):
            if is_cross(nm):
                streams_with.setdefault(t.kstream[s], set()).add(r)
    queues = {}
    for r, t in zip(ranks, traces):
        for s, nm in enumerate(t.kname):
            if not is_cross(nm):
                continue
            st = t.kstream[s]
            v = t.meta.get(f"nccl.stream.{st}")
            if v:
                name, mem = v.rsplit(":", 1)
                members = tuple(int(x) for x in mem.split(","))
            else:
                name, members = f"stream {st}", tuple(sorted(streams_with[st]))
            op = op_of(nm)
            if op in ("Send", "Recv", "SendRecv"):
                peer = [m for m in members if m != r][0]
                role = {"Send": "send", "Recv": "recv"}.get(op)
                if role is None:
                    role = "sendrecv"
                    if not t.assumed:
                        w = rd = False
                        for i, mode in t.ops[s]:
                            if t.acat[i] == 5:
                                continue
                            if mode & 2:
                                w = True
                            elif mode & 1:
                                rd = True
                        if w and not rd:
                            role = "recv"
                        elif rd and not w:
                            role = "send"
                if role == "sendrecv":
                    key = (name, "sr", min(r, peer), max(r, peer))
                elif role == "send":
                    key = (name, "p2p", r, peer)
                else:
                    key = (name, "p2p", peer, r)
                queues.setdefault((key, r), []).append(s)
                comms.setdefault(r, {})[s] = (key, role, members, peer)
            else:
                key = (name, "coll")
                queues.setdefault((key, r), []).append(s)
                comms.setdefault(r, {})[s] = (key, "coll", members, None)
    deps = {}
    for r, t in zip(ranks, traces):
        for s, (key, role, members, peer) in comms.get(r, {}).items():
            k = queues[(key, r)].index(s)
            if role == "coll":
                parts = [(p, queues[(key, p)][k]) for p in members]
            elif role == "sendrecv":
                parts = [(r, s), (peer, queues[(key, peer)][k])]
            elif role == "recv":
                parts = [(r, s), (peer, queues[(key, peer)][k])]
            else:
                parts = [(r, s)]
            deps[(r, s)] = (role, parts)
    return ranks, deps


def simulate_job(paths, opts):
    """opts: share, allocator, policy, prefetch, link, max_ops, host_ratio, no_early, device, and
    engine: the class each rank runs (Engine; reference_learning_engine.Sim for the learning prefetchers)."""
    traces = [Trace(p, opts.get("device")) for p in paths]
    ranks, deps = plan(traces, paths)
    by_rank = dict(zip(ranks, traces))
    engines = {}
    for r, t in zip(ranks, traces):
        base = baseline_peak(t, opts["allocator"])
        cap = capacity_of(opts["share"], base)
        e = opts.get("engine", Engine)(t, opts, cap)
        e.base_peak = base
        e.cross = {s for (rr, s) in deps if rr == r}
        e.rank_id = r
        engines[r] = e
    T = {r: {s: by_rank[r].origin + by_rank[r].kstart[s] for s in range(len(by_rank[r].kstart))} for r in ranks}
    arrivals = {}
    gens = {r: engines[r].run() for r in ranks}
    waiting = {}
    status = {r: "running" for r in ranks}

    def bound_for(r, s):
        role, parts = deps[(r, s)]
        if role == "send" or len(parts) <= 1:
            return "none"
        latest = max(T[p][k] for p, k in parts)
        vals = []
        for p, k in parts:
            if p == r:
                continue
            if (p, k) not in arrivals:
                if status[p] in ("oom", "stopped", "done"):
                    return None
                return "pending"
            vals.append(arrivals[(p, k)] - (latest - T[p][k]))
        return max(vals)

    def step(r, send):
        try:
            msg = gens[r].send(send) if send is not False else next(gens[r])
        except StopIteration:
            e = engines[r]
            status[r] = "oom" if isinstance(e.oom, dict) else ("stopped" if e.oom == "stopped" else "done")
            return
        waiting[r] = msg[1]

    for r in ranks:
        orig_start = engines[r].start

        def start(s, e=engines[r], rr=r, orig=orig_start):
            orig(s)
            if (rr, s) in deps:
                arrivals[(rr, s)] = e.kt[s] - e.tr.kstart[s]
        engines[r].start = start
    for r in ranks:
        step(r, False)
    while True:
        progress = False
        for r in ranks:
            if status[r] != "running" or r not in waiting:
                continue
            b = bound_for(r, waiting[r])
            if b == "pending":
                continue
            del waiting[r]
            progress = True
            step(r, -INF if b == "none" else b)
        if not progress:
            if any(status[r] == "running" and r in waiting for r in ranks):
                # waits on ranks that are themselves waiting: only a stopped dependency ends this
                raise RuntimeError("deadlock in the reading")
            break
    out_ranks = []
    for r in ranks:
        e = engines[r]
        t = e.tr
        oom = isinstance(e.oom, dict)
        stopped = e.oom == "stopped"
        if oom:
            mk = e.oom["t"] - t.first
        elif stopped:
            mk = e.reached - t.first
        else:
            mk = t.last + e.shift - t.first
        base_mk = t.last - t.first
        e.sim_mk = mk
        loss = None if oom or stopped or base_mk == 0 else mk / base_mk - 1
        out_ranks.append(dict(rank=r, trace=t.path, device=t.device, capacity=-1 if e.cap is None else e.cap,
                              baseline_peak=e.base_peak, simulated_peak=e.peak, baseline_makespan=base_mk,
                              simulated_makespan=mk, throughput_loss=loss, stall_time=e.m["stall_ns"],
                              stall_count=e.m["stalls"], coupled_wait_time=e.coupled_wait,
                              coupled_wait_count=e.coupled_waits, oom=oom, stopped=stopped))
    starts = {r: engines[r].tr.origin + engines[r].tr.first for r in ranks}
    ends_b = {r: engines[r].tr.origin + engines[r].tr.last for r in ranks}
    ends_s = {r: starts[r] + engines[r].sim_mk for r in ranks}
    jb = max(ends_b.values()) - min(starts.values())
    js = max(ends_s.values()) - min(starts.values())
    bad = any(x["oom"] or x["stopped"] for x in out_ranks)
    stalls = {x["rank"]: x["stall_time"] for x in out_ranks}
    lim = -1
    if any(v > 0 for v in stalls.values()):
        best = max(stalls.values())
        lim = min(r for r, v in stalls.items() if v == best)
    last_end = max(ends_s.values())
    last = min(r for r in ranks if ends_s[r] == last_end)
    oom_rank = -1
    ooms = [(engines[r].tr.origin + engines[r].oom["t"], r) for r in ranks if isinstance(engines[r].oom, dict)]
    if ooms:
        oom_rank = min(ooms)[1]
    job = dict(peak=max(x["simulated_peak"] for x in out_ranks),
               baseline_peak=max(x["baseline_peak"] for x in out_ranks), baseline_makespan=jb,
               simulated_makespan=js, throughput_loss=None if bad or jb == 0 else js / jb - 1,
               limiting_rank=lim, last_rank=last, oom_rank=oom_rank,
               cross_events=sum(1 for t in traces for nm in t.kname if is_cross(nm)))
    return dict(ranks=out_ranks, job=job), engines
