"""`mhc allocator` (docs/simulator.md, "Comparing with a recording") read from the documents alone:
the recorded figures of a trace's `segments` rows, the caching model replayed over its
allocations (reference_caching.py, the independent reading of "Allocator models"), warm and cold
start, the recording's empty_cache() calls, private pools, and reserved bytes over time compared
outside the calls' spans. Standard library only; shares no code with mhc.

compare(path, device=None, conf="") returns a dict with the figures `mhc allocator --json` prints,
under the same keys."""
import bisect
import math
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_caching as rc  # noqa: E402

UNLIMITED = 1 << 62


class Model(rc.CachingAllocator):
    """The caching model at unlimited capacity, counting its cudaMalloc/map and cudaFree/unmap calls,
    with the warm start's cached segments and blocks placed at recorded offsets."""

    def __init__(self, conf_text):
        super().__init__(UNLIMITED, conf_text)
        self.mallocs = 0
        self.frees = 0

    def _draw(self, n):
        ok = super()._draw(n)
        self.mallocs += ok
        return ok

    def _release_segment(self, seg):
        self.frees += 1
        super()._release_segment(seg)

    def _unmap_free_pages(self, seg):
        page = self._page(seg.small)
        for b in seg.blocks:
            if b.free and b.mapped and page * ((b.offset + b.size) // page) > page * math.ceil(b.offset / page):
                self.frees += 1   # one unmap per free block's whole pages
        super()._unmap_free_pages(seg)

    @staticmethod
    def key(stream, pool):
        return stream if not pool else (stream, pool)

    def add_cached(self, nbytes, stream, pool):
        """A segment held before recording: cached, free, not a cudaMalloc of the trace."""
        small = nbytes == rc.SMALL_SEGMENT
        k = self.key(stream, pool)
        seg = rc.Segment(self.next_id, k, small, nbytes, False, self._free_list(k, small))
        self.next_id += 1
        self.segments.append(seg)
        self._index(seg.blocks[0])
        self.reserved += nbytes
        return seg

    def place(self, a, seg, offset, nbytes):
        """Allocation a at `offset` of seeded segment seg; False when no free block holds it there."""
        size = self.round(nbytes)
        if seg not in self.segments:
            return False
        for i, b in enumerate(seg.blocks):
            if b.free and b.mapped and b.offset <= offset and offset + size <= b.offset + b.size:
                before = list(seg.blocks)
                parts = []
                if offset > b.offset:
                    parts.append(rc.Block(seg, b.offset, offset - b.offset, True))
                mine = rc.Block(seg, offset, size, False)
                parts.append(mine)
                if b.offset + b.size > offset + size:
                    parts.append(rc.Block(seg, offset + size, b.offset + b.size - offset - size, True))
                seg.blocks[i:i + 1] = parts
                self._reindex(seg, before)
                self.block_of[a] = mine
                return True
        return False


def load(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    allocs = db.execute("SELECT id, device, address, bytes, t_alloc, t_free, stream FROM allocations ORDER BY id"
                        ).fetchall()
    segs = db.execute("SELECT id, device, stream, address, bytes, t_alloc, t_free, expandable, reconstructed "
                      "FROM segments ORDER BY id").fetchall()
    db.close()
    return meta, allocs, segs


def reserved_at(segs, t):
    return sum(s[4] for s in segs if s[5] <= t and (s[6] is None or t < s[6]))


def recorded_peak(segs):
    times = sorted({s[5] for s in segs})
    return max((reserved_at(segs, t) for t in times), default=0)


def parse_rows(meta, key):
    """FIRST,SECOND:ID-ID,ID ... per pool -> [((first, second), [(lo, hi)])]"""
    out = []
    for entry in meta.get(key, "").split():
        head, rows = entry.split(":", 1)
        first, second = map(int, head.split(","))
        ranges = []
        for r in rows.split(","):
            lo, _, hi = r.partition("-")
            ranges.append((int(lo), int(hi or lo)))
        out.append(((first, second), ranges))
    return out


def pools_of(meta, allocs, segs, device):
    """(allocation id -> pool number, segment id -> pool number, pools, exact, given_back {pool: t})"""
    a_pool, s_pool, number = {}, {}, {}
    num = lambda pid: number.setdefault(pid, len(number) + 1)   # noqa: E731
    if meta.get("snapshot.pools_from", "").startswith("trace events"):
        ids = {a[0] for a in allocs if a[1] == device}
        for pid, ranges in parse_rows(meta, "snapshot.allocation_pools"):
            for lo, hi in ranges:
                for i in range(lo, hi + 1):
                    if i in ids:
                        a_pool[i] = num(pid)
        sids = {s[0]: s for s in segs}
        for pid, ranges in parse_rows(meta, "snapshot.segment_row_pools"):
            for lo, hi in ranges:
                for i in range(lo, hi + 1):
                    if i in sids:
                        s_pool[i] = num(pid)
        given = {}
        for p in set(s_pool.values()):
            rows = [sids[i] for i, q in s_pool.items() if q == p]
            if all(r[6] is not None for r in rows):
                given[p] = max(r[6] for r in rows)
        return a_pool, s_pool, len(number), True, given
    ranges = []
    for entry in meta.get("snapshot.segment_pools", "").split():
        dev, pid, addr, nbytes = entry.split(":")
        if int(dev) != device:
            continue
        ranges.append([int(addr), int(nbytes), num(tuple(map(int, pid.split(",")))), None])
    for s in segs:
        if s[6] is not None and not s[7]:
            continue   # only rows held at the end, and an expandable segment's ranges unmapped before
        for r in ranges:
            if r[0] <= s[3] < r[0] + r[1]:
                s_pool[s[0]] = r[2]
                r[3] = s[5] if r[3] is None else min(r[3], s[5])
    for a in allocs:
        if a[1] != device:
            continue
        for r in ranges:
            if r[0] <= a[2] < r[0] + r[1] and r[3] is not None and a[4] >= r[3]:
                a_pool[a[0]] = r[2]
    return a_pool, s_pool, len(number), False, {}


def outside(allocs, segs):
    """Allocations whose bytes lie in no segment alive when made (adjacent rows as one range)."""
    n = 0
    for a in allocs:
        at, hi = a[2], a[2] + a[3]
        alive = [s for s in segs if s[5] <= a[4] and (s[6] is None or a[4] < s[6])]
        while at < hi:
            nxt = next((s[3] + s[4] for s in alive if s[3] <= at < s[3] + s[4]), None)
            if nxt is None:
                break
            at = nxt
        n += at < hi
    return n


def settings(meta, segs, conf):
    if "allocator.conf" in meta:
        base = meta["allocator.conf"]
    elif any(s[7] for s in segs):
        base = "expandable_segments:True"
    else:
        base = ""
    return ",".join(x for x in (base, conf) if x)   # the override's keys come last: they win


def empty_cache_calls(segs, alloc_times, s_pool):
    """[(first, last, frees, of_default, private pools)]: segment frees at times with no allocation,
    those with no allocation between them one call."""
    frees = sorted((s[6], s_pool.get(s[0], 0)) for s in segs if s[6] is not None and s[6] not in alloc_times)
    at = sorted(alloc_times)
    calls = []
    for t, pool in frees:
        if calls and (calls[-1][1] == t or bisect.bisect_right(at, calls[-1][1]) == bisect.bisect_left(at, t)):
            c = calls[-1]
            c[1] = t
        else:
            c = [t, t, 0, False, set()]
            calls.append(c)
        c[2] += 1
        if pool:
            c[4].add(pool)
        else:
            c[3] = True
    return calls


def run_model(conf_text, events, seeded, a_pool, allocs_by_id, warm):
    """Replays `events`; returns (peak, mallocs, frees, seeded count, seeded bytes, placed blocks,
    [(t, reserved after t's events, first allocation id made at t or 0)])."""
    m = Model(conf_text)
    where = []   # (address, bytes, segment) of seeded segments
    n_seeded = seeded_bytes = placed = 0
    if warm:
        for s in seeded:
            where.append((s["address"], s["bytes"], m.add_cached(s["bytes"], s["stream"], s["pool"])))
            n_seeded += 1
            seeded_bytes += s["bytes"]
    peak = m.reserved
    samples = []
    for t, evs in events:
        first = 0
        for kind, x in evs:
            if kind == "free":
                if x in m.block_of:
                    m.free(x)
            elif kind == "empty":
                of_default, pools = x
                if of_default or not pools:
                    m._release_cached()
                for p in sorted(pools):
                    m.release_pool(p)
            elif kind == "release":
                m.release_pool(x)
            else:
                a = allocs_by_id[x]
                first = first or x
                done = False
                if warm and a[4] == 0:
                    for addr, nbytes, seg in where:
                        if addr <= a[2] and a[2] + a[3] <= addr + nbytes:
                            done = m.place(x, seg, a[2] - addr, a[3])
                            placed += done
                            break
                if not done:
                    ok = m.allocate(x, a[3], a[6], a_pool.get(x))
                    assert ok
            peak = max(peak, m.reserved)
        samples.append((t, m.reserved, first))
    return peak, m.mallocs, m.frees, n_seeded, seeded_bytes, placed, samples


def compare(path, device=None, conf=""):
    meta, allocs, segs_all = load(path)
    if device is None:
        devs = sorted({s[1] for s in segs_all})
        device = max(devs, key=lambda d: (recorded_peak([s for s in segs_all if s[1] == d]), -d))
    segs = [s for s in segs_all if s[1] == device]
    allocs = [a for a in allocs if a[1] == device]
    by_id = {a[0]: a for a in allocs}
    a_pool, s_pool, n_pools, exact, given = pools_of(meta, allocs, segs, device)
    conf_text = settings(meta, segs, conf)

    alloc_times = {a[4] for a in allocs}
    calls = empty_cache_calls(segs, alloc_times, s_pool)
    # events per time: frees of earlier allocations (id order), the empty_cache calls and pools
    # given back, then the allocations (id order), one freed at once right after it is made
    per = {}
    for a in allocs:
        if a[5] is not None and a[5] != a[4]:
            per.setdefault(a[5], [[], [], []])[0].append(("free", a[0]))
    for c in calls:
        per.setdefault(c[1], [[], [], []])[1].append(("empty", (c[3], c[4])))
    for p, t in sorted(given.items()):
        per.setdefault(t, [[], [], []])[1].append(("release", p))
    for a in allocs:
        lst = per.setdefault(a[4], [[], [], []])[2]
        lst.append(("alloc", a[0]))
        if a[5] == a[4]:
            lst.append(("free", a[0]))
    events = [(t, v[0] + v[1] + v[2]) for t, v in sorted(per.items())]
    last_seg_event = max([s[5] for s in segs] + [s[6] for s in segs if s[6] is not None])
    if not events or last_seg_event > events[-1][0]:
        events.append((last_seg_event, []))

    seeded = [dict(address=s[3], bytes=s[4], stream=s[2], pool=s_pool.get(s[0], 0))
              for s in segs if s[8] and not s[7] and s[5] == 0]
    w = run_model(conf_text, events, seeded, a_pool, by_id, True)
    c = run_model(conf_text, events, seeded, a_pool, by_id, False)

    spans = [(x[0], x[1]) for x in calls]
    inside = lambda t: any(f <= t < l for f, l in spans)   # noqa: E731
    samples = w[6]
    max_diff, weighted, covered, plain, compared, first = 0, 0.0, 0.0, 0.0, 0, None
    for k, (t, model, alloc) in enumerate(samples):
        if inside(t):
            continue
        d = abs(model - reserved_at(segs, t))
        max_diff = max(max_diff, d)
        plain += d
        compared += 1
        if k + 1 < len(samples):
            # the diff holds until the next sample; the calls' spans are left out
            span = samples[k + 1][0] - t
            for f, l in spans:
                span -= max(0, min(l, samples[k + 1][0]) - max(f, t))
            weighted += d * span
            covered += span
        if d and first is None:
            first = dict(t=t, allocation=alloc)
    rec_peak = recorded_peak(segs)
    out = dict(device=device, allocations=len(allocs), seeded_segments=w[3], seeded_bytes=w[4],
               seeded_blocks=w[5], empty_cache_calls=len(calls),
               empty_cache_segment_frees=sum(x[2] for x in calls),
               empty_cache_span_ns=sum(x[1] - x[0] for x in calls),
               blocks_outside_segments=outside(allocs, segs),
               recorded=dict(reserved_peak=rec_peak, segments=len(segs),
                             device_allocs=sum(1 for s in segs if not s[8]),
                             device_frees=sum(1 for s in segs if s[6] is not None)),
               model=dict(reserved_peak=w[0], segments=w[3] + w[1], device_allocs=w[1], device_frees=w[2]),
               reserved_diff=dict(max_abs=max_diff,
                                  mean_abs=weighted / covered if covered > 0 else
                                  (plain / compared if compared else 0)),
               first_divergence=first,
               cold_start=dict(reserved_peak=c[0], segments=c[1]),
               samples=[(t, m) for t, m, _ in samples])
    out["reserved_peak_error"] = (w[0] - rec_peak) / rec_peak if rec_peak else 0
    out["segment_count_error"] = (w[3] + w[1] - len(segs)) / len(segs) if segs else 0
    if n_pools:
        out.update(private_pools=n_pools, private_pools_exact=exact, private_pools_given_back=len(given),
                   private_pool_allocations=len(a_pool),
                   private_pool_segments=sum(1 for s in segs if s[0] in s_pool and s[6] is None))
    return out
