#!/usr/bin/env python3
"""Runs `mhc allocator --json` (and its text) and reference_allocator_compare.py (docs/simulator.md,
"Comparing with a recording", read alone) and compares every figure.

Usage: reference_allocator_compare_run.py MHC WORKDIR [--public=DIR] [--runs=N] [--seed=S] [--traces=A.db,B.db]
--public=DIR: every snapshot of DIR/torch-snapshot and every Kineto trace of DIR/kineto that imports
with segments (the others are said to have none: exit 2 checked);
--runs=N: N random recordings (segments made and freed, empty_cache calls, expandable segments,
several streams, private pools, max_split_size_mb and other settings in the recording's meta).
Exit 0 when all agree, 1 otherwise (each difference printed)."""
import json
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_allocator_compare as ref  # noqa: E402
import reference_caching as rc  # noqa: E402

MIB = 1 << 20
KEYS = ["device", "allocations", "seeded_segments", "seeded_bytes", "seeded_blocks", "empty_cache_calls",
        "empty_cache_segment_frees", "empty_cache_span_ns", "blocks_outside_segments",
        "private_pools", "private_pools_exact", "private_pools_given_back", "private_pool_allocations",
        "private_pool_segments"]


def units(b):
    """format_bytes as docs/cli.md says: binary units, two decimals."""
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= n:
            return f"{b / n:.2f} {unit}"
    return f"{b} B"


def compare_one(mhc, db, conf="", device=None):
    extra = (["--allocator-conf", conf] if conf else []) + (["--device", str(device)] if device is not None else [])
    p = subprocess.run([mhc, "allocator", str(db), "--json"] + extra, capture_output=True, text=True)
    if p.returncode != 0:
        return [f"mhc allocator exit {p.returncode}: {p.stderr.strip()}"], None
    got = json.loads(p.stdout)
    want = ref.compare(str(db), device, conf)
    problems = []
    for k in KEYS:
        if got.get(k) != want.get(k):
            problems.append(f"{k}: mhc {got.get(k)}, reference {want.get(k)}")
    for part in ("recorded", "model", "cold_start"):
        for k, v in want[part].items():
            if got[part].get(k) != v:
                problems.append(f"{part}.{k}: mhc {got[part].get(k)}, reference {v}")
    if got["reserved_diff"]["max_abs"] != want["reserved_diff"]["max_abs"]:
        problems.append(f"reserved_diff.max_abs: mhc {got['reserved_diff']['max_abs']}, "
                        f"reference {want['reserved_diff']['max_abs']}")
    a, b = got["reserved_diff"]["mean_abs"], want["reserved_diff"]["mean_abs"]
    if abs(a - b) > 1e-6 * max(1.0, abs(b)):
        problems.append(f"reserved_diff.mean_abs: mhc {a}, reference {b}")
    for k in ("reserved_peak_error", "segment_count_error"):
        if abs(got[k] - want[k]) > 1e-12:
            problems.append(f"{k}: mhc {got[k]}, reference {want[k]}")
    fd, wd = got["first_divergence"], want["first_divergence"]
    if (fd is None) != (wd is None) or (fd and (fd["t"], fd["allocation"]) != (wd["t"], wd["allocation"])):
        problems.append(f"first_divergence: mhc {fd and (fd['t'], fd['allocation'])}, reference "
                        f"{wd and (wd['t'], wd['allocation'])}")
    if fd and wd and (fd["t"], fd["allocation"]) == (wd["t"], wd["allocation"]):
        # the reserved figures the reason quotes: model's at t, then the recording's
        mod = dict(want["samples"])[wd["t"]]
        rec = ref.reserved_at([s for s in ref.load(str(db))[2] if s[1] == want["device"]], wd["t"])
        quoted = f"reserved {units(mod)} (model) vs {units(rec)} (recorded)"
        if quoted not in fd["why"]:
            problems.append(f"first_divergence.why lacks '{quoted}': {fd['why']}")
        # the recording's segment calls since the sample before (reconstructed rows made no call)
        times = [t for t, _ in want["samples"]]
        k = times.index(wd["t"])
        since = times[k - 1] if k else -(1 << 62)
        calls = []
        for row in ref.load(str(db))[2]:
            if row[1] != want["device"]:
                continue
            if since < row[5] <= wd["t"] and not row[8]:
                calls.append(f"{'map' if row[7] else 'cudaMalloc'} {units(row[4])} (stream {row[2]})")
            if row[6] is not None and since < row[6] <= wd["t"]:
                calls.append(f"{'unmap' if row[7] else 'cudaFree'} {units(row[4])} (stream {row[2]})")
        m = re.search(r"; recording (.*?); reserved ", fd["why"])
        said = [] if not m or m.group(1) == "no segment change" else m.group(1).split(", ")
        if sorted(said) != sorted(calls):
            problems.append(f"first_divergence.why: recording {said}, reference {calls}")
    problems += compare_text(mhc, db, extra, got)
    return problems, got


def compare_text(mhc, db, extra, got):
    """The text output says what --json says (the table's figures, counts)."""
    p = subprocess.run([mhc, "allocator", str(db)] + extra, capture_output=True, text=True)
    if p.returncode != 0:
        return [f"mhc allocator (text) exit {p.returncode}"]
    text, problems = p.stdout, []
    rows = {"reserved peak": (units(got["recorded"]["reserved_peak"]), units(got["model"]["reserved_peak"])),
            "segments": (str(got["recorded"]["segments"]), str(got["model"]["segments"])),
            "cudaMalloc/map": (str(got["recorded"]["device_allocs"]), str(got["model"]["device_allocs"])),
            "cudaFree/unmap": (str(got["recorded"]["device_frees"]), str(got["model"]["device_frees"]))}
    for name, (r, m) in rows.items():
        line = next((x for x in text.splitlines() if x.startswith(name + " ")), "")
        cells = re.split(r"\s{2,}", line.strip())
        if cells[1:3] != [r, m]:
            problems.append(f"text row '{name}': {cells[1:3]}, --json {[r, m]}")
    want = (f"cold start (the model from an empty cache): reserved peak {units(got['cold_start']['reserved_peak'])}, "
            f"{got['cold_start']['segments']} segments")
    if want not in text:
        problems.append(f"text lacks '{want}'")
    if f"max |diff| {units(got['reserved_diff']['max_abs'])}" not in text:
        problems.append("text's max |diff| differs from --json's")
    if f"replayed      {got['allocations']} allocations" not in text:
        problems.append("text's allocation count differs")
    if f"{got['empty_cache_calls']} empty_cache calls mirrored" not in text:
        problems.append("text's empty_cache count differs")
    return problems


# -- random recordings: a recording is made by the reference caching model itself under the
# recording's settings (so that its segments hold its blocks), with empty_cache calls, segments
# held before recording, private pools given back, and then read under other settings too.

def write_trace(path, meta, allocs, segs):
    if path.exists():
        path.unlink()
    db = sqlite3.connect(str(path))
    text = (HERE.parent.parent / "trace" / "schema.sql").read_text()
    db.executescript(text)
    db.execute("PRAGMA user_version = 1")
    for k, v in meta.items():
        db.execute("INSERT INTO meta VALUES (?, ?)", (k, v))
    for row in allocs:
        db.execute("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                   "VALUES (?,?,?,?,?,?,?,6)", row)
    for row in segs:
        db.execute("INSERT INTO segments VALUES (?,?,?,?,?,?,?,?,?)", row)
    db.commit()
    db.close()


class Recorder(rc.CachingAllocator):
    """The reference model as a recording: each segment (or mapped range) a row at an address."""

    def __init__(self, conf, clock):
        super().__init__(1 << 40, conf)
        self.clock = clock
        self.rows = []   # [address, bytes, t_alloc, t_free, stream, expandable, pool]
        self.base = {}   # segment id -> address
        self.next_addr = 1 << 32
        self.open = {}   # (segment id, offset) -> row index

    def _addr(self, seg):
        if seg.id not in self.base:
            self.base[seg.id] = self.next_addr
            self.next_addr += seg.size + (64 << 20)
        return self.base[seg.id]

    def _stream_pool(self, seg):
        return (seg.stream[0], seg.stream[1]) if seg.private else (seg.stream, 0)

    def _new_segment(self, stream, small, size):
        b = super()._new_segment(stream, small, size)
        if b is not None:
            st, pool = self._stream_pool(b.segment)
            self.open[(b.segment.id, 0)] = len(self.rows)
            self.rows.append([self._addr(b.segment), b.segment.size, self.clock(), None, st, 0, pool])
        return b

    def _release_segment(self, seg):
        if not seg.expandable:
            self.rows[self.open.pop((seg.id, 0))][3] = self.clock()
        super()._release_segment(seg)

    def _map_ranges(self, seg, plan):
        for off, n in plan:
            if not self._draw(n):
                return False
            self._draw_back(n)
            st, pool = self._stream_pool(seg)
            self.open[(seg.id, off)] = len(self.rows)
            self.rows.append([self._addr(seg) + off, n, self.clock(), None, st, 1, pool])
            if not super()._map_ranges(seg, [(off, n)]):
                return False
        return True

    def _draw_back(self, n):
        self.reserved -= n

    def _unmap_free_pages(self, seg):
        page = self._page(seg.small)
        for b in seg.blocks:
            if not (b.free and b.mapped):
                continue
            lo, hi = page * -(-b.offset // page), page * ((b.offset + b.size) // page)
            if hi <= lo:
                continue
            t = self.clock()
            for (sid, off), r in list(self.open.items()):   # rows inside [lo, hi) close; rows cut are split
                row = self.rows[r]
                if sid != seg.id or row[3] is not None:
                    continue
                a0, a1 = off, off + row[1]
                if a1 <= lo or a0 >= hi:
                    continue
                del self.open[(sid, off)]
                keep = row[:]
                row[3] = t
                row[0], row[1] = self._addr(seg) + max(a0, lo), min(a1, hi) - max(a0, lo)
                if a0 < lo:
                    self.open[(sid, a0)] = len(self.rows)
                    self.rows.append([self._addr(seg) + a0, lo - a0, keep[2], None, keep[4], 1, keep[6]])
                if a1 > hi:
                    self.open[(sid, hi)] = len(self.rows)
                    self.rows.append([self._addr(seg) + hi, a1 - hi, keep[2], None, keep[4], 1, keep[6]])
        super()._unmap_free_pages(seg)


def random_recording(rng, path):
    """A random recording; returns a label of what it holds."""
    r = RandomRecording(rng)
    r.warm_blocks()
    r.events()
    segs = r.segment_rows()
    meta = r.meta(segs)
    allocs = r.allocs
    if rng.random() < 0.3:   # a second device: one segment and its block (auto picks the larger peak)
        nbytes = rng.choice([20 * MIB, 2 * MIB, max(s[4] for s in segs) * 40])
        segs.append([len(segs) + 1, 1, 0, 1 << 44, nbytes, 5, None, 0, 0, 0])
        allocs.append([len(allocs) + 1, 1, 1 << 44, nbytes // 2, 6, None, 0])
    write_trace(path, meta, [tuple(a) for a in allocs], [tuple(s[:9]) for s in segs])
    wide = rng.random() < 0.15
    if wide:
        widen(rng, path, allocs, segs)
    return f"{'wide ' if wide else ''}conf={r.conf or '-'} pools={'exact' if r.exact else 'derived' if r.pools else 'none'} " \
           f"streams={len(r.streams)} allocs={len(allocs)} segs={len(segs)} warm={r.n_warm}"


def widen(rng, path, allocs, segs):
    """A gap of 2^61 ns after a random time (t = 0, before recording, stays): the spans that weigh
    the mean |diff| near the range's width."""
    times = sorted({x for a in allocs for x in (a[4], a[5]) if x} | {x for s in segs for x in (s[5], s[6]) if x})
    cut = rng.choice(times) if times else 0
    db = sqlite3.connect(str(path))
    for tb, c in (("allocations", "t_alloc"), ("allocations", "t_free"), ("segments", "t_alloc"),
                  ("segments", "t_free")):
        db.execute(f"UPDATE {tb} SET {c} = {c} + ? WHERE {c} > ?", (1 << 61, cut))
    db.commit()
    db.close()


class RandomRecording:
    """The settings of one random recording, drawn first, and the blocks the reference model makes
    and frees under them; the random draws come in the order the methods are called."""

    def __init__(self, rng):
        self.rng = rng
        self.t = 0
        choice = rng.random()
        self.conf = ("expandable_segments:True" if choice < 0.25 else
                     f"max_split_size_mb:{rng.choice([24, 40, 64])}" if choice < 0.5 else
                     "roundup_power2_divisions:4" if choice < 0.6 else
                     "roundup_power2_divisions:[2:8,16:2,>:4],garbage_collection_threshold:0.6" if choice < 0.67 else
                     "expandable_segments:True,max_split_size_mb:40" if choice < 0.72 else "")
        self.pools = rng.random() < 0.5
        self.exact = self.pools and rng.random() < 0.6
        self.rec = Recorder(self.conf, self.clock)
        self.streams = [0, 7] if rng.random() < 0.6 else [0]
        self.live, self.allocs, self.pool_of = {}, [], {}
        self.n_warm = rng.randint(0, 4) if not self.conf.startswith("expandable") else 0
        self.warm_rows = set()
        self.given_pool_time = None
        self.force_alloc = False
        self.last_free = None

    def clock(self):
        self.t += 1
        return self.t

    def warm_blocks(self):
        """Before recording: a few blocks made at time 0 (their segments are reconstructed rows)."""
        rec = self.rec
        for _ in range(self.n_warm):
            size = self.rng.choice([512, 4096, 300_000, 3 * MIB, 12 * MIB, 30 * MIB])
            aid = len(self.allocs) + 1
            rows_before = len(rec.rows)
            rec.clock = lambda: 0
            rec.allocate(aid, size, 0)
            rec.clock = self.clock
            self.warm_rows.update(range(rows_before, len(rec.rows)))
            b = rec.block_of[aid]
            self.allocs.append([aid, 0, rec._addr(b.segment) + b.offset, size, 0, None, 0])
            self.live[aid] = self.allocs[-1]

    def events(self):
        """Allocations, frees, empty_cache calls and a private pool given back, at random."""
        rng = self.rng
        for step in range(rng.randint(20, 160) if rng.random() < 0.9 else rng.randint(1, 3)):   # a few: one event or two
            r = rng.random()
            if r < 0.5 or not self.live or self.force_alloc:
                self.allocate()
            elif r < 0.93:
                aid = rng.choice(sorted(self.live))
                self.rec.free(aid)
                self.live.pop(aid)[5] = self.last_free = self.clock()
            elif r < 0.97:
                if self.last_free == self.t and rng.random() < 0.5:
                    # torch.cuda.empty_cache() right after a free, its first segment free recorded at
                    # that free's nanosecond: frees of an instant come before the call it ends
                    self.t -= 1
                else:
                    self.clock()
                self.rec._release_cached()   # torch.cuda.empty_cache()
            elif self.pools and self.given_pool_time is None:
                self.give_back_pool()

    def allocate(self):
        rng, rec = self.rng, self.rec
        self.force_alloc = False
        size = rng.choice([rng.randint(1, 4096), rng.randint(4097, MIB), rng.randint(MIB, 12 * MIB),
                           rng.randint(12 * MIB, 90 * MIB)])
        stream = rng.choice(self.streams)
        pool = rng.choice([None, None, 1, 2]) if self.pools and self.given_pool_time is None else (
            rng.choice([None, 1]) if self.pools else None)
        aid = len(self.allocs) + 1
        self.clock()   # a segment the allocation needs is recorded 1 ns before it
        rec.allocate(aid, size, stream, pool)
        b = rec.block_of[aid]
        tm = self.clock()
        self.allocs.append([aid, 0, rec._addr(b.segment) + b.offset, size, tm, None, stream])
        self.pool_of[aid] = pool
        self.live[aid] = self.allocs[-1]
        if rng.random() < 0.05:   # alive only at that instant
            rec.free(aid)
            self.allocs[-1][5] = tm
            del self.live[aid]

    def give_back_pool(self):
        """The program lets go of pool 2: its blocks freed, its segments given back."""
        rec = self.rec
        for aid in [a for a in sorted(self.live) if self.pool_of.get(a) == 2]:
            rec.free(aid)
            self.live.pop(aid)[5] = self.clock()
        self.clock()
        if self.rng.random() < 0.5:   # the pool's segments go back at one time, an allocation's
            at = self.clock()
            rec.clock = lambda: at
            rec.release_pool(2)
            rec.clock = self.clock
            self.t = at - 2   # the next allocation (its segment 1 ns before) is made at `at`
            self.force_alloc = True
        else:
            rec.release_pool(2)
        self.given_pool_time = self.t

    def segment_rows(self):
        rec = self.rec
        segs = []
        for i, row in enumerate(sorted(rec.rows, key=lambda r: (r[2], r[0]))):
            segs.append([i + 1, 0, row[4], row[0], row[1], row[2], row[3], row[5], 0, row[6]])
        warm_addrs = {rec.rows[i][0] for i in self.warm_rows}
        for s in segs:
            if s[3] in warm_addrs and s[5] == 0:
                s[8] = 1
        return segs

    def meta(self, segs):
        """The recording's meta: its allocator settings and, with private pools, which rows are whose."""
        meta = {"format": "mhc-trace", "schema_version": "1", "source": "reference_allocator_compare_run.py",
                "segments.hold_allocations": "true"}
        if self.conf or self.rng.random() < 0.5:
            meta["allocator.conf"] = self.conf or "expandable_segments:False"
        if not self.pools:
            return meta
        if self.exact:
            meta["snapshot.pools_from"] = "trace events (pool_id): exact"
            for key, rows in (("snapshot.allocation_pools", [(a[0], self.pool_of.get(a[0])) for a in self.allocs]),
                              ("snapshot.segment_row_pools", [(s[0], s[9]) for s in segs])):
                parts = []
                for p, pid in ((1, "0,1"), (2, "1,0")):
                    ids = [i for i, q in rows if q == p]
                    if ids:
                        parts.append(pid + ":" + ",".join(str(i) for i in ids))
                if parts:
                    meta[key] = " ".join(parts)
        else:
            meta["snapshot.pools_from"] = "end-state segments (segment_pool_id): the events name no pool"
            ends = [f"0:{'0,1' if s[9] == 1 else '1,0'}:{s[3]}:{s[4]}" for s in segs if s[9] and s[6] is None]
            if ends:
                meta["snapshot.segment_pools"] = " ".join(ends)
        return meta


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if "=" in a)
    fails = runs = 0

    def report(tag, problems):
        nonlocal fails, runs
        runs += 1
        fails += bool(problems)
        print(f"{'DIFFER' if problems else 'same  '} {tag}")
        for p in problems[:8]:
            print(f"    {p}")

    dbs = [Path(x) for x in opts.get("traces", "").split(",") if x]
    if "public" in opts:
        for folder in ("torch-snapshot", "kineto"):
            for f in sorted((Path(opts["public"]) / folder).glob("*")):
                db = work / f"public-{f.name}.db"
                if not db.exists():
                    p = subprocess.run([mhc, "import", str(f), "-o", str(db)], capture_output=True, text=True)
                    if p.returncode != 0:
                        continue
                n = sqlite3.connect(str(db)).execute("SELECT count(*) FROM segments").fetchone()[0]
                if n:
                    dbs.append(db)
                else:
                    p = subprocess.run([mhc, "allocator", str(db)], capture_output=True, text=True)
                    if p.returncode != 2 or "no segments recorded" not in p.stderr:
                        report(f"{f.name} (no segments)", [f"exit {p.returncode}: {p.stderr.strip()}"])
    for db in dbs:
        for conf in ("", "expandable_segments:True", "max_split_size_mb:64"):
            problems, _ = compare_one(mhc, db, conf)
            report(f"{db.name} {conf}", problems)
    rng = random.Random(int(opts.get("seed", 1)))
    for k in range(int(opts.get("runs", 0))):
        path = work / f"random-{k}.db"
        label = random_recording(rng, path)
        conf = rng.choice(["", "", "expandable_segments:True", "max_split_size_mb:32"])
        problems, _ = compare_one(mhc, path, conf)
        report(f"random {k} {label} --allocator-conf '{conf}'", problems)
        if sqlite3.connect(str(path)).execute("SELECT count(DISTINCT device) FROM segments").fetchone()[0] > 1:
            for dev in (0, 1):
                problems, _ = compare_one(mhc, path, conf, dev)
                report(f"random {k} --device {dev}", problems)
    print(f"{runs} comparisons, {fails} differ")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
