"""An outside reading of docs/simulator.md "Comparing with a recording" (`mhc allocator`), written
from that section (and docs/trace-format.md's "Events at one instant" and rule `outside-segment`)
alone: what the recording says — the device compared, the warm start, the `empty_cache()` calls,
the recorded reserved peak, segments and calls, the allocations outside every segment — and how the
model's reserved bytes over time are compared with the recorded ones (the samples, max and
time-weighted mean |diff|, the first divergence).

The caching model itself is not read again here (three readings cover it): `compare()` takes the
model's reserved bytes after each of its events from elsewhere (the driver takes them from `mhc
simulate --allocator caching --capacity unlimited`'s memory timeline, one sample per nanosecond,
where the section says the two replay the same: no warm start, no `empty_cache()` call to mirror).
Stdlib only; shares no code with sim/.
"""
import sqlite3


class Recording:
    def __init__(self, path):
        con = sqlite3.connect(str(path))
        self.allocs = con.execute("SELECT id, device, address, bytes, t_alloc, t_free FROM allocations "
                                  "ORDER BY id").fetchall()
        self.segs = con.execute("SELECT id, device, address, bytes, t_alloc, t_free, expandable, reconstructed "
                                "FROM segments ORDER BY id").fetchall()
        self.meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        con.close()

    def devices(self):
        return sorted({s[1] for s in self.segs})

    def seg_rows(self, dev):
        return [s for s in self.segs if s[1] == dev]

    def alloc_rows(self, dev):
        return [a for a in self.allocs if a[1] == dev]

    def recorded_at(self, dev, t):
        """Reserved bytes once the segment events at times <= t happened."""
        return sum(s[3] for s in self.seg_rows(dev) if s[4] <= t and (s[5] is None or s[5] > t))

    def recorded_peak(self, dev):
        """The largest reserved bytes after an instant's events (frees first at one time)."""
        times = sorted({s[4] for s in self.seg_rows(dev)})
        return max([self.recorded_at(dev, t) for t in times] + [0])

    def device(self):
        """auto: the one with the largest recorded reserved peak (the lowest number of equals)."""
        devs = self.devices()
        return max(devs, key=lambda d: (self.recorded_peak(d), -d)) if devs else None

    def warm(self, dev):
        """Non-expandable segments held before recording began (reconstructed, made at 0: a snapshot
        import's time before recording), and the allocations made at 0 that lie inside one of them."""
        rows = [s for s in self.seg_rows(dev) if s[7] and not s[6] and s[4] == 0]
        # placed in the instant's order (by row, one freed at 0 gone before the next), each where
        # its bytes are free: one overlapping a block placed before it is the model's to place
        blocks, held = [], []
        for a in self.alloc_rows(dev):
            if a[4] != 0 or not any(s[2] <= a[2] and a[2] + a[3] <= s[2] + s[3] for s in rows):
                continue
            if any(lo < a[2] + a[3] and a[2] < hi for lo, hi, _ in held):
                continue
            blocks.append(a)
            if a[5] != 0:
                held.append((a[2], a[2] + a[3], a[0]))
        return rows, blocks

    def empty_cache_calls(self, dev):
        """Segment frees at times when no allocation of the device is made; a run of them with no
        allocation between them is one call. Returns [(first free, last free, frees)]."""
        made = sorted({a[4] for a in self.alloc_rows(dev)})
        frees = sorted(s[5] for s in self.seg_rows(dev) if s[5] is not None and s[5] not in set(made))
        calls = []
        for t in frees:
            if calls and not any(calls[-1][1] < m < t for m in made):
                calls[-1] = (calls[-1][0], t, calls[-1][2] + 1)
            else:
                calls.append((t, t, 1))
        return calls

    def outside(self, dev):
        """Allocations whose bytes lie in no recorded segment alive when they were made (segments made
        at t hold a block made at t, and so do segments freed at t); adjacent rows are one range."""
        rows = self.seg_rows(dev)
        if not rows:
            return 0
        n = 0
        for a in self.alloc_rows(dev):
            if a[2] == 0:
                continue
            alive = sorted((s[2], s[2] + s[3]) for s in rows if s[4] <= a[4] and (s[5] is None or s[5] >= a[4]))
            ranges = []
            for lo, hi in alive:
                if ranges and lo <= ranges[-1][1]:
                    ranges[-1][1] = max(ranges[-1][1], hi)
                else:
                    ranges.append([lo, hi])
            if not any(lo <= a[2] and a[2] + a[3] <= hi for lo, hi in ranges):
                n += 1
        return n

    def figures(self, dev):
        """What the section says of the recording alone, in `--json`'s names."""
        rows = self.seg_rows(dev)
        warm_rows, warm_blocks = self.warm(dev)
        calls = self.empty_cache_calls(dev)
        return {
            "device": dev,
            "allocations": len(self.alloc_rows(dev)),
            "seeded_segments": len(warm_rows),
            "seeded_bytes": sum(s[3] for s in warm_rows),
            "seeded_blocks": len(warm_blocks),
            "empty_cache_calls": len(calls),
            "empty_cache_segment_frees": sum(c[2] for c in calls),
            "empty_cache_span_ns": sum(c[1] - c[0] for c in calls),
            "blocks_outside_segments": self.outside(dev),
            "recorded.reserved_peak": self.recorded_peak(dev),
            "recorded.segments": len(rows),
            # calls during the trace: a reconstructed row existed before it
            "recorded.device_allocs": sum(1 for s in rows if not s[7]),
            "recorded.device_frees": sum(1 for s in rows if s[5] is not None),
        }

    def model_times(self, dev):
        """The times of the model's events (allocations and frees) and the recording's last segment event."""
        times = {a[4] for a in self.alloc_rows(dev)} | {a[5] for a in self.alloc_rows(dev) if a[5] is not None}
        segs = [t for s in self.seg_rows(dev) for t in (s[4], s[5]) if t is not None]
        return sorted(times), (max(segs) if segs else None)

    def compare(self, dev, model_after):
        """The comparison over time, given the model's reserved bytes after its events of each time
        (model_after: time -> bytes). Returns max |diff|, the time-weighted mean |diff| and the first
        time they differ (None: never)."""
        times, last_seg = self.model_times(dev)
        samples = []
        for t in times:
            samples.append((t, model_after[t] - self.recorded_at(dev, t)))
        if last_seg is not None and (not times or last_seg > times[-1]):
            # a segment event counts at the next model event: only those after the last one are
            # sampled on their own, at the last of them
            samples.append((last_seg, (model_after[times[-1]] if times else 0) - self.recorded_at(dev, last_seg)))
        samples.sort(key=lambda x: x[0])
        if not samples:
            return 0, 0.0, None
        mx = max(abs(d) for _, d in samples)
        span = samples[-1][0] - samples[0][0]
        weighted = sum(abs(samples[i][1]) * (samples[i + 1][0] - samples[i][0]) for i in range(len(samples) - 1))
        first = next((t for t, d in samples if d != 0), None)
        # all samples at one instant (no time to weigh by): the plain mean of their |diff|
        mean = weighted / span if span > 0 else sum(abs(d) for _, d in samples) / len(samples)
        return mx, mean, first

    def expandable(self, dev, conf):
        """Whether the model runs with expandable segments: the what-if settings' word, else the
        recorded settings', else whether the recorded segments are expandable."""
        for text in (conf, self.meta.get("allocator.conf")):
            words = [w.split(":", 1)[1] for w in (text or "").split(",") if w.startswith("expandable_segments:")]
            if words:
                return words[-1] == "True"
        return any(s[6] for s in self.seg_rows(dev))

    def model_calls(self, dev, model_after):
        """The model's segments, cudaMalloc and cudaFree calls from its reserved bytes after each
        time, where each rise is one segment and each fall one segment given back: without expandable
        segments, at unlimited capacity and with at most one allocation a time. None otherwise."""
        made = [a[4] for a in self.alloc_rows(dev)]
        if len(made) != len(set(made)):
            return None
        times, _ = self.model_times(dev)
        prev, up, down = 0, 0, 0
        for t in times:
            up += model_after[t] > prev
            down += model_after[t] < prev
            prev = model_after[t]
        return {"model.segments": up, "model.device_allocs": up, "model.device_frees": down,
                "cold_start.segments": up}
