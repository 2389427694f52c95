"""An outside reading of `mhc check` (docs/trace-format.md: "Checks", "Value ranges", "Events at one
instant", "Content digest", "Multi-rank traces"), written from the document alone and sharing no
code with trace/: random trace files with random defects, and the problems the document says
`mhc check` lists for them, as (table, row, rule) triples.

Standard library only. reference_check_compare.py runs `mhc check` on the same files.
"""

import random
import sqlite3
import struct

M64 = (1 << 64) - 1
T62 = 1 << 62
S56 = 1 << 56
I31 = (1 << 31) - 1
S60 = 1 << 60


# ---- content digest v2 ("Content digest") ----------------------------------------------------

def fmix(k):
    k &= M64
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    k ^= k >> 33
    return k


def value_word(v):
    """(value word, SQLite type code) of one cell."""
    if v is None:
        return 0, 5
    if isinstance(v, int):
        return v & M64, 1
    if isinstance(v, float):
        return struct.unpack("<Q", struct.pack("<d", v))[0], 2
    if isinstance(v, str):
        data, t = v.encode("utf-8"), 3
    else:
        data, t = bytes(v), 4
    h = fmix(len(data) * 0x9E3779B97F4A7C15 + 0x8EBC6AF09C88C6E3)
    for i in range(0, len(data), 8):
        h = fmix(h ^ int.from_bytes(data[i:i + 8].ljust(8, b"\0"), "little"))
    return h, t


DIGEST_TABLES = [("strings", ("id",)), ("allocations", ("id",)), ("kernels", ("id",)),
                 ("accesses", ("kernel", "allocation")), ("copies", ("id",)), ("markers", ("id",)),
                 ("segments", ("id",)), ("modules", ("id",)), ("kernel_info", ("kernel",)),
                 ("saved_tensors", ("allocation", "kernel"))]


def digest_v2(con):
    lane_a = lane_b = 0
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for number, (table, key) in enumerate(DIGEST_TABLES, 1):
        if table not in tables:
            continue
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        for row in con.execute(f"SELECT * FROM {table}"):
            k1 = value_word(row[cols.index(key[0])])[0]
            k2 = value_word(row[cols.index(key[1])])[0] if len(key) > 1 else 0
            ka = fmix(fmix(number * 0x9E3779B97F4A7C15 + k1) + k2)
            kb = fmix(ka ^ 0xE7037ED1A0B428DB)
            for c, v in enumerate(row):
                w, t = value_word(v)
                x = 8 * c + t
                lane_a = (lane_a + fmix(w ^ ((ka + x * 0xD6E8FEB86659FD93) & M64))) & M64
                lane_b = (lane_b + fmix((w + (kb ^ ((x * 0xA0761D6478BD642F) & M64))) & M64)) & M64
    return "v2:%016x%016x" % (lane_a, lane_b)


# ---- random traces ------------------------------------------------------------------------------

def schema_sections(schema_text, names):
    out, keep = [], False
    for line in schema_text.splitlines():
        if line.startswith("-- section:"):
            keep = line.split(":", 1)[1].strip() in names
            continue
        if keep:
            out.append(line)
    return "\n".join(out)


def odd_integer(rng):
    """A value that is not an INTEGER once SQLite's column affinity has had it."""
    return rng.choice(["abc", 1.5, b"\x00\x01", "12abc", -0.25])


def make_trace(rng, path, schema_text):
    """Write a random trace to `path` and return nothing: the reading is `expected(path)`."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA synchronous = OFF")   # scratch files: no waits for the disk
    con.execute("PRAGMA journal_mode = OFF")
    con.executescript(schema_sections(schema_text, {"trace_tables", "run_tables", "lookups",
                                                    "run_event_rows", "content_digest_triggers"}))
    con.execute("PRAGMA user_version = 1")
    # Each table in turn: the random draws come in this order, so that a seed makes one file.
    t = TraceMaker(rng, con)
    t.strings()
    t.time_scale()
    t.segments()
    t.allocations()
    t.kernels()
    t.rows_with_bad_values()
    con.executemany("INSERT INTO allocations VALUES (?,?,?,?,?,?,?,?,?,?)", t.allocs)
    con.executemany("INSERT INTO kernels VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", t.kernel_rows)
    t.accesses()
    t.copies()
    t.markers()
    if t.capture:
        t.capture_tables()
    if rng.random() < 0.4:
        make_runs(rng, con, [k[0] for k in t.kernel_rows], [a[0] for a in t.allocs])
    t.job_meta()
    con.executemany("INSERT INTO meta VALUES (?, ?)", t.meta.items())
    t.content_digest()
    con.commit()
    con.close()


class TraceMaker:
    """The random choices of one trace and the rows they make, table by table."""

    def __init__(self, rng, con):
        self.rng, self.con = rng, con
        self.meta = {"format": "mhc-trace", "schema_version": "1", "source": "generate"}
        self.capture = rng.random() < 0.2
        # values out of their ranges in two traces of five: the row checks are read on the others
        self.vb = 1.0 if rng.random() < 0.4 else 0.0
        # otherwise good traces now and then at the ends of the value rules: all allocations together
        # over 2^62 bytes, or times more than 2^62 ns apart
        self.edge = rng.choice(["total", "span"]) if not self.vb and rng.random() < 0.15 else None
        self.with_segments = rng.random() < 0.35
        self.hold = self.with_segments and rng.random() < 0.6
        self.n_strings = rng.randint(2, 6)
        self.seg_rows, self.allocs, self.kernel_rows = [], [], []

    def strings(self):
        rng, vb = self.rng, self.vb
        for i in range(1, self.n_strings + 1):
            self.con.execute("INSERT INTO strings VALUES (?, ?)", (i, "name%d" % i))
        if rng.random() < 0.1 * vb:   # a sparse string id, or a name that is no text
            if rng.random() < 0.5:
                self.con.execute("INSERT INTO strings VALUES (?, ?)", (self.n_strings + 5, "sparse"))
            else:
                self.con.execute("UPDATE strings SET text = ? WHERE id = 1", (rng.choice([7, b"\x01", 2.5]),))

    def time_scale(self):
        # Time scale: small, so that ties happen; one trace in eight far towards the range's ends.
        self.base = self.rng.choice([0, 0, 0, 0, 0, 0, -T62 + 50, T62 - 400])
        self.tmax = self.rng.choice([20, 60, 200])
        # a trace whose allocations lie in segments has them on device 0; now and then one on the
        # host or on device 1 (no segments there) or at address 0 (not known), which the rule leaves be
        self.devices = [0, 0, 0, 0, 0, 0, -1, 1] if self.hold else [0, 0, 1]

    def name_id(self):
        rng = self.rng
        r = rng.random()
        if r < 0.04:
            return self.n_strings + rng.randint(1, 3)  # names no string
        if r < 0.04 + 0.02 * self.vb:
            return -rng.randint(1, 3)
        return rng.randint(0, self.n_strings)

    def segments(self):
        """Segments on device 0, a few regions; the allocations are inside them or not."""
        if not self.with_segments:
            return
        rng, base, tmax = self.rng, self.base, self.tmax
        addr = 1 << 20
        for sid in range(1, rng.randint(2, 6) + 1):
            size = rng.choice([4096, 8192, 16384])
            t0 = base + rng.randint(0, tmax // 2)
            t1 = None if rng.random() < 0.5 else t0 + rng.randint(1, tmax)
            if rng.random() < 0.06:
                t1 = t0 - rng.randint(1, 5)  # freed before made
            a = addr if rng.random() < 0.8 else addr - rng.choice([4096, 2048])  # overlaps now and then
            self.seg_rows.append((sid, 0, rng.choice([0, 7]), a, size, t0, t1, rng.randint(0, 1), rng.randint(0, 1)))
            addr = a + size if rng.random() < 0.7 else a + size + 4096
        self.con.executemany("INSERT INTO segments VALUES (?,?,?,?,?,?,?,?,?)", self.seg_rows)
        self.meta["segments"] = str(len(self.seg_rows))
        if self.hold:
            self.meta["segments.hold_allocations"] = "true"

    def allocations(self):
        rng, base, tmax, vb, allocs = self.rng, self.base, self.tmax, self.vb, self.allocs
        self.n_alloc = rng.randint(4, 30)
        region = [(s[3], s[4]) for s in self.seg_rows] or [(0x10000, 16384)]
        for aid in range(1, self.n_alloc + 1):
            dev = rng.choice(self.devices)
            seg_addr, seg_size = rng.choice(region)
            size = rng.choice([512, 1024, 2048, 4096])
            address = seg_addr + rng.randrange(0, seg_size, 512)
            if rng.random() < (0.04 if self.hold else 0.15):
                address = 0
            t0 = base + rng.randint(0, tmax)
            r = rng.random()
            t1 = None if r < 0.2 else t0 + rng.randint(0, tmax // 2)
            if r > 0.96:
                t1 = t0 - rng.randint(1, 3)
            req = None
            r = rng.random()
            if r < 0.4:
                req = size - rng.randint(0, size - 1)
            elif r < 0.46:
                req = size + rng.randint(1, 100)
            category = rng.randint(0, 6) if rng.random() > 0.04 * vb else rng.choice([7, 9, -1])
            label = self.name_id()
            bytes_ = size
            if rng.random() < 0.03 * vb:
                bytes_ = rng.choice([0, -512])
            if allocs and rng.random() < 0.08:
                # one free applied twice: an earlier allocation's address and free time
                prev = rng.choice(allocs)
                if prev[5] is not None and prev[2] != 0 and prev[4] <= prev[5]:
                    address, t1, dev = prev[2], prev[5], prev[1]
                    t0 = rng.randint(prev[4], prev[5])
            allocs.append([aid, dev, address, bytes_, t0, t1, rng.choice([0, 7, 8]), category, label, req])

    def kernels(self):
        rng = self.rng
        self.n_kern = rng.randint(3, 25)
        for kid in range(1, self.n_kern + 1):
            dev = rng.choice(self.devices)
            stream = rng.choice([7, 8]) if not self.capture or rng.random() < 0.3 else 7
            t0 = self.base + rng.randint(0, self.tmax)
            t1 = t0 + rng.randint(0, 8)
            if rng.random() < 0.05:
                t1 = t0 - rng.randint(1, 3)
            step = rng.randint(-1, 3)
            self.kernel_rows.append([kid, dev, stream, self.name_id(), t0, t1, step, 1, 1, 1, 32, 1, 1, 0, 16, kid])

    def rows_with_bad_values(self):
        """Isolated rows that break a value rule and nothing else (address 0, a stream of their own,
        never accessed): every other rule reads rows whose values are good. And now and then
        allocations over 2^62 bytes together."""
        rng, base, vb, allocs, kernels = self.rng, self.base, self.vb, self.allocs, self.kernel_rows
        if not self.hold and rng.random() < 0.8 * vb:
            for _ in range(rng.randint(1, 3)):
                aid = len(allocs) + 1
                row = [aid, 0, 0, 512, base + 1, None, 0, 3, 0, None]
                col, val = rng.choice([
                    (1, rng.choice([-2, I31 + 1])), (3, S56 + 1), (4, odd_integer(rng)),
                    (4, rng.choice([T62 + 1, -T62 - 1])), (6, rng.choice([S60 + 1, -S60 - 1])),
                    (9, rng.choice([0, -4, S56 + 1])), (7, odd_integer(rng)), (5, "abc"),
                    (2, odd_integer(rng))])
                row[col] = val
                allocs.append(row)
        if not self.capture and rng.random() < 0.8 * vb:
            for _ in range(rng.randint(1, 3)):
                kid = len(kernels) + 1
                row = [kid, 0, 1000 + kid, 0, base + 2, base + 3, -1, 1, 1, 1, 32, 1, 1, 0, 16, 0]
                col, val = rng.choice([
                    (6, rng.choice([-2, I31 + 1])), (7, -1), (10, I31 + 1), (13, -5), (14, odd_integer(rng)),
                    (1, -3), (2, S60 + 1), (15, odd_integer(rng)), (4, T62 + 5), (12, odd_integer(rng))])
                row[col] = val
                kernels.append(row)
        if not self.hold and (rng.random() < 0.1 * vb or self.edge == "total"):
            for _ in range(rng.choice([63, 64, 65])):
                allocs.append([len(allocs) + 1, 0, 0, S56, base + 1, None, 0, 3, 0, None])

    def accesses(self):
        rng, allocs, kernels = self.rng, self.allocs, self.kernel_rows
        acc = {}
        for _ in range(rng.randint(0, 3 * self.n_kern)):
            k = rng.randint(1, self.n_kern)
            # mostly an allocation alive while the kernel runs, as a trace's accesses are
            ks, ke = kernels[k - 1][4], kernels[k - 1][5]
            fits = [r[0] for r in allocs[:self.n_alloc] if r[4] <= ks and (r[5] is None or ke <= r[5])]
            a = rng.choice(fits) if fits and rng.random() < 0.9 else rng.randint(1, self.n_alloc)
            if rng.random() < 0.03:
                k = len(kernels) + rng.randint(1, 3)
            if rng.random() < 0.03:
                a = len(allocs) + rng.randint(1, 3)
            mode = rng.randint(1, 3) if rng.random() > 0.03 * self.vb else rng.choice([0, 4])
            acc[(k, a)] = mode
        self.con.executemany("INSERT INTO accesses VALUES (?,?,?)", [(k, a, m) for (k, a), m in acc.items()])

    def copies(self):
        rng, vb = self.rng, self.vb
        copies = []
        for cid in range(1, rng.randint(0, 5) + 1):
            t0 = self.base + rng.randint(0, self.tmax)
            t1 = t0 + rng.randint(0, 5) if rng.random() > 0.08 else t0 - 1
            kind = rng.randint(0, 5) if rng.random() > 0.08 * vb else rng.choice([6, -1])
            b = rng.choice([0, 4096, 65536]) if rng.random() > 0.08 * vb else rng.choice([-1, S56 + 1])
            copies.append((cid, rng.choice([0, -1]), 0, kind, b, t0, t1))
        self.con.executemany("INSERT INTO copies VALUES (?,?,?,?,?,?,?)", copies)

    def markers(self):
        rng, vb = self.rng, self.vb
        markers = []
        for mid in range(1, rng.randint(0, 4) + 1):
            t0 = self.base + rng.randint(0, self.tmax)
            t1 = t0 + rng.randint(0, self.tmax) if rng.random() > 0.08 else t0 - 2
            kind = rng.randint(0, 2) if rng.random() > 0.08 * vb else 3
            idx = rng.randint(-1, 4) if rng.random() > 0.05 * vb else -2
            markers.append((mid, self.name_id(), t0, t1, kind, idx))
        # the whole trace more than 2^62 ns from its first time to its last (base 0 only)
        if self.base == 0 and (rng.random() < 0.1 * vb or self.edge == "span"):
            markers.append((len(markers) + 1, 0, -T62 + 10, -T62 + 20, 2, -1))
            if not self.seg_rows or rng.random() < 0.5:
                markers.append((len(markers) + 1, 0, T62 - 20, T62 - rng.choice([10, 20]), 2, -1))
            if self.seg_rows and rng.random() < 0.7:   # a segment held to the far end
                far = rng.choice([T62 - 10, T62 - 20])
                self.con.execute("UPDATE segments SET t_free = ? WHERE id = 1", (far,))
        self.con.executemany("INSERT INTO markers VALUES (?,?,?,?,?,?)", markers)

    def capture_tables(self):
        """A capture's modules, kernel info and saved tensors, now and then naming rows that do not exist."""
        rng, con, n_strings = self.rng, self.con, self.n_strings
        n_alloc, n_kern, kernels = self.n_alloc, self.n_kern, self.kernel_rows
        con.execute("INSERT INTO strings VALUES (?, ?)", (n_strings + 1, "Model"))
        con.execute("INSERT INTO modules VALUES (1, ?, 0, ?)", (n_strings + 1, n_strings + 1))
        n_mod = rng.randint(1, 3)
        for mid in range(2, n_mod + 1):   # children of the root; now and then a parent or name of no row
            parent = 1 if rng.random() > 0.1 else 9
            name = n_strings + 1 if rng.random() > 0.08 else n_strings + 9
            con.execute("INSERT INTO modules VALUES (?, ?, ?, ?)", (mid, name, parent, n_strings + 1))
        info = []
        for k in kernels:
            if rng.random() > 0.1:
                module = rng.randint(0, n_mod) if rng.random() > 0.05 else n_mod + 4
                phase = rng.randint(0, 4) if rng.random() > 0.05 * self.vb else rng.choice([5, -1])
                info.append((k[0], module, phase, 0, 0))
        if rng.random() < 0.1:
            info.append((len(kernels) + 3, 1, 0, 0, 0))   # the row of no kernel
        con.executemany("INSERT INTO kernel_info VALUES (?,?,?,?,?)", info)
        saved = {}
        for _ in range(rng.randint(0, 6)):
            a = rng.randint(1, n_alloc) if rng.random() > 0.05 else n_alloc + 50
            k = rng.randint(1, n_kern) if rng.random() > 0.05 else n_kern + 50
            packs = rng.choice([None, 1, 2, 3]) if rng.random() > 0.05 * self.vb else rng.choice([0, -2])
            saved[(a, k)] = packs
        con.executemany("INSERT INTO saved_tensors VALUES (?, ?, ?)", [(a, k, p) for (a, k), p in saved.items()])

    def job_meta(self):
        """A multi-rank job's meta, device memory and allocator settings, now and then out of their grammar."""
        rng, meta = self.rng, self.meta
        r = rng.random()
        if r < 0.7:
            ws = rng.randint(1, 4)
            meta.update({"job.id": "job-x", "world_size": str(ws), "rank": str(rng.randint(0, ws - 1)),
                         "time_origin_ns": "0"})
            if rng.random() < 0.35:
                key = rng.choice(["world_size", "rank", "time_origin_ns"])
                meta[key] = rng.choice(["-1", "1.5", "x", "", " 2", "+1", "2 ", "1e3", "٣", "0x10",
                                        "99999999999999999999", str(ws + rng.randint(0, 2))])
        if rng.random() < 0.2:
            meta["device_memory"] = rng.choice(["85899345920", "0", "-1", "1e400", "abc", str(S56), str(S56 + 1)])
        if rng.random() < 0.15:
            meta["allocator.conf"] = rng.choice([
                "expandable_segments:True", "max_split_size_mb:64", "max_split_size_mb:abc",
                "garbage_collection_threshold:0.8", "garbage_collection_threshold:2",
                "roundup_power2_divisions:4", "expandable_segments:maybe", "max_split_size_mb:٣٣"])

    def content_digest(self):
        """The digest of the whole file, right, wrong by one digit, or none."""
        r = self.rng.random()
        if r < 0.7:
            self.con.execute("INSERT INTO meta VALUES ('content_digest', ?)", (digest_v2(self.con),))
        elif r < 0.85:
            d = digest_v2(self.con)
            wrong = d[:-1] + ("0" if d[-1] != "0" else "1")
            self.con.execute("INSERT INTO meta VALUES ('content_digest', ?)", (wrong,))


RUN_KINDS = ("simulated", "replayed")
RUN_STATUSES = ("complete", "oom", "incomplete", "failed")


def make_runs(rng, con, kernel_ids, alloc_ids):
    """Stored runs ("Run tables"), now and then with a flaw a reader of runs refuses."""
    n = rng.randint(1, 4)
    kinds = {}
    for rid in range(1, n + 1):
        kind = rng.choice(RUN_KINDS) if rng.random() > 0.08 else rng.choice(["sim", "Replayed", ""])
        status = rng.choice(RUN_STATUSES) if rng.random() > 0.08 else rng.choice(["done", "OOM"])
        kinds[rid] = kind
        base = 0
        if kind == "replayed":
            sims = [r for r, k in kinds.items() if k == "simulated"]
            base = rng.choice(sims) if sims else 0
        if rng.random() < 0.1:
            base = rng.choice([rid, n + 5, rng.randint(1, n)])
        con.execute("INSERT INTO runs (id, kind, name, status, created, base_run) VALUES (?, ?, ?, ?, ?, ?)",
                    (rid, kind, "run%d" % rid, status, "2026-12-06T00:00:00Z", base))
        con.execute("INSERT INTO run_config VALUES (?, 'policy', 'lru')", (rid,))
        metrics = {"peak_bytes": float(rng.randint(0, 1 << 30)), "throughput_loss": rng.uniform(-1, 5),
                   "stalls": float(rng.randint(0, 9))}
        if rng.random() < 0.1:
            key = rng.choice(list(metrics))
            metrics[key] = rng.choice([float("inf"), -5.0, 1.5, "abc"])
        con.executemany("INSERT INTO run_metrics VALUES (?, ?, ?)", [(rid, k, v) for k, v in metrics.items()])
        for _ in range(rng.randint(0, 4)):
            kind_e = rng.randint(0, 7) if rng.random() > 0.05 else 9
            alloc = rng.choice(alloc_ids) if alloc_ids and rng.random() > 0.05 else rng.choice([0, 999])
            kern = rng.choice(kernel_ids) if kernel_ids and rng.random() > 0.05 else rng.choice([0, 998])
            b = rng.randint(0, 4096) if rng.random() > 0.05 else -1
            t0 = rng.randint(0, 100)
            t1 = t0 + rng.randint(0, 10) if rng.random() > 0.04 else T62 + 1
            con.execute("INSERT INTO run_events VALUES (?, ?, ?, ?, ?, ?, ?)", (rid, kind_e, t0, t1, alloc, kern, b))
        for k in rng.sample(kernel_ids, min(len(kernel_ids), rng.randint(0, 3))):
            con.execute("INSERT INTO run_kernels VALUES (?, ?, ?, ?)", (rid, k, 5, 6))
        if rng.random() < 0.05:
            con.execute("INSERT INTO run_kernels VALUES (?, ?, ?, ?)", (rid, 997, 5, 6))
        for t in range(rng.randint(0, 3)):
            dev = rng.randint(0, 1 << 20) if rng.random() > 0.05 else -1
            con.execute("INSERT INTO run_memory VALUES (?, ?, ?, ?)", (rid, t, dev, 0))
    if rng.random() < 0.1:   # rows of a run that has no runs row
        con.execute("INSERT INTO run_config VALUES (?, 'policy', 'lru')", (n + 7,))
        con.execute("INSERT INTO run_metrics VALUES (?, 'peak_bytes', 1.0)", (n + 7,))


def expected_runs(con, kernel_ids, alloc_ids):
    """The run rules ("Run tables", "Value ranges", "Checks": run, base-run, unknown-id, unknown-run),
    each problem named by its table and its run."""
    out = []
    runs = {r[0]: r for r in con.execute("SELECT id, kind, status, base_run FROM runs")}
    for rid, kind, status, base in runs.values():
        if kind not in RUN_KINDS or status not in RUN_STATUSES:
            out.append(("runs", rid, "run"))
        if base != 0:
            if base not in runs:
                out.append(("runs", rid, "unknown-id"))
            elif base == rid or kind != "replayed" or runs[base][1] != "simulated":
                out.append(("runs", rid, "base-run"))
    # A run its readers refuse (a kind or status not of "Run tables", a metric not finite or out
    # of its domain, an event or memory row out of its range) is one problem: the first thing
    # its reader meets, named by that reader; the comparison counts runs, as ("run", id, "run").
    refused = {rid for rid, kind, status, _ in runs.values() if kind not in RUN_KINDS or status not in RUN_STATUSES}
    out = [p for p in out if p[2] != "run"]
    for rid, key, value in con.execute("SELECT run, key, value FROM run_metrics"):
        if rid not in runs:
            continue
        if not isinstance(value, float) or value != value or value in (float("inf"), float("-inf")):
            refused.add(rid)
        elif (key.endswith("_bytes") and value < 0) or (key == "stalls" and (value < 0 or value != int(value))):
            refused.add(rid)
    for rowid, rid, kind, t0, t1, alloc, kern, b in con.execute("SELECT rowid, * FROM run_events ORDER BY rowid"):
        if rid not in runs:
            continue
        if not 0 <= kind <= 7 or not -T62 <= t0 <= T62 or not -T62 <= t1 <= T62 or not 0 <= b <= T62:
            refused.add(rid)
        # references: each field, the row named by its rowid
        if alloc != 0 and alloc not in alloc_ids:
            out.append(("run_events", rowid, "unknown-id"))
        if kern != 0 and kern not in kernel_ids:
            out.append(("run_events", rowid, "unknown-id"))
    for rid, kern in con.execute("SELECT run, kernel FROM run_kernels"):
        if rid in runs and kern not in kernel_ids:
            out.append(("run_kernels", rid, "unknown-id"))
    for rid, dev in con.execute("SELECT run, device_bytes FROM run_memory"):
        if rid in runs and not 0 <= dev <= T62:
            refused.add(rid)
    out += [("run", rid, "run") for rid in sorted(refused)]
    for table in ("run_config", "run_metrics", "run_events", "run_kernels", "run_memory"):
        for (rid,) in con.execute(f"SELECT DISTINCT run FROM {table}"):
            if rid not in runs:
                out.append((table, rid, "unknown-run"))
    return out


# ---- the reading ---------------------------------------------------------------------------------

def is_int(v):
    return isinstance(v, int)


def whole(text, least=0):
    """A whole number >= least, as the document's "a whole number >= 0" reads: decimal digits."""
    if not text or not all("0" <= c <= "9" for c in text):
        return False
    return int(text) >= least and int(text) < (1 << 63)


def whole_signed(text):
    body = text[1:] if text[:1] == "-" else text
    return whole(body) or (text[:1] == "-" and body.isascii() and body.isdigit() and int(body) <= (1 << 63))


def expected(path):
    """The problems the document says `mhc check` lists: a list of (table, row, rule)."""
    con = sqlite3.connect(path)
    r = Reading(con)
    r.value_rules()
    r.total_size()
    r.allocator_conf()
    # ---- row checks: only on a file whose values are all good ----
    if r.bad:
        return r.out
    r.span()
    r.allocation_rows()
    r.segment_rows()
    r.times_and_names()
    r.capture_references()
    r.kernel_rows()
    r.access_rows()
    r.capture_kernels()
    r.job_meta()
    r.out += expected_runs(con, {k["id"] for k in r.kernels}, {a["id"] for a in r.allocs})
    d = r.meta.get("content_digest")
    if d is not None and d.startswith("v2:") and d != digest_v2(con):
        r.out.append(("meta", "content_digest", "content-digest"))
    con.close()
    return r.out


def rng_time(v):
    return -T62 <= v <= T62


def rng_dev(v):
    return -1 <= v <= I31


def rng_stream(v):
    return -S60 <= v <= S60


def rng_31(v):
    return 0 <= v <= I31


def rng_step(v):
    return -1 <= v <= I31


def any_value(v):
    return True


class Reading:
    """The reading of one file: its rows, and the problems found so far (`out`, in the order the
    document's rules come); `bad` holds the (table, id) of rows with a value problem."""

    def __init__(self, con):
        self.con = con
        self.out = []
        self.bad = set()
        self.meta = dict(con.execute("SELECT key, value FROM meta"))
        self.strings = {r[0] for r in con.execute("SELECT id FROM strings")}
        self.names = self.strings | {0}

    def value(self, table, rid, ok, rule="range"):
        if not ok:
            self.out.append((table, rid, rule))
            self.bad.add((table, rid))

    def rows(self, table):
        c = [r[1] for r in self.con.execute(f"PRAGMA table_info({table})")]
        return [dict(zip(c, r)) for r in self.con.execute(f"SELECT * FROM {table} ORDER BY rowid")]

    def good(self, table, rows):
        return [r for r in rows if (table, r["id"]) not in self.bad]

    def check_row(self, table, r, rules):
        """rules: column -> predicate on an INTEGER; type first, then range."""
        rid = r["id"]
        for col, pred in rules.items():
            v = r[col]
            nullable = col in ("t_free", "requested_bytes")
            if v is None and nullable:
                continue
            if not is_int(v):
                self.out.append((table, rid, "type"))
                self.bad.add((table, rid))
                continue
            res = pred(v)
            if res is not True:
                self.out.append((table, rid, res or "range"))
                self.bad.add((table, rid))

    # ---- value rules ("Value ranges"), every row ----

    def value_rules(self):
        self.string_values()
        self.allocs = self.rows("allocations")
        for r in self.allocs:
            self.check_row("allocations", r, {
                "device": rng_dev, "address": any_value,
                "bytes": lambda v: 1 <= v <= S56 or "size",
                "t_alloc": rng_time, "t_free": rng_time, "stream": rng_stream,
                "category": lambda v: 0 <= v <= 6 or "invalid-code",
                "label": lambda v: v >= 0, "requested_bytes": lambda v: 1 <= v <= S56 or "size"})
        self.kernels = self.rows("kernels")
        for r in self.kernels:
            rules = {"device": rng_dev, "stream": rng_stream, "name": lambda v: v >= 0,
                     "t_start": rng_time, "t_end": rng_time, "step": rng_step, "correlation": any_value}
            for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_mem", "registers"):
                rules[c] = rng_31
            self.check_row("kernels", r, rules)
        self.copies = self.rows("copies")
        for r in self.copies:
            self.check_row("copies", r, {"device": rng_dev, "stream": rng_stream,
                                         "kind": lambda v: 0 <= v <= 5 or "invalid-code",
                                         "bytes": lambda v: 0 <= v <= S56 or "size",
                                         "t_start": rng_time, "t_end": rng_time})
        self.markers = self.rows("markers")
        for r in self.markers:
            self.check_row("markers", r, {"name": lambda v: v >= 0, "t_start": rng_time, "t_end": rng_time,
                                          "kind": lambda v: 0 <= v <= 2 or "invalid-code", "idx": rng_step})
        self.segments = self.rows("segments")
        for r in self.segments:
            self.check_row("segments", r, {"device": rng_dev, "stream": rng_stream, "address": any_value,
                                           "bytes": lambda v: 1 <= v <= S56, "t_alloc": rng_time,
                                           "t_free": rng_time, "expandable": any_value,
                                           "reconstructed": any_value})
        self.capture_values()
        self.access_values()

    def string_values(self):
        n_rows = len(self.strings)
        for sid, text in self.con.execute("SELECT id, text FROM strings ORDER BY rowid"):
            if not isinstance(text, str):
                self.value("strings", sid, False, "type")
            elif not 0 <= sid <= n_rows:
                self.value("strings", sid, False, "range")

    def capture_values(self):
        """A capture's tables: ids from 1, phases 0-4, packs 1 or more (NULL: 1)."""
        for (mid,) in self.con.execute("SELECT id FROM modules"):
            if mid < 1:
                self.value("modules", mid, False)
        for kid_, phase in self.con.execute("SELECT kernel, phase FROM kernel_info"):
            if not 0 <= phase <= 4:
                self.value("kernel_info", kid_, False, "invalid-code")
        for a_, k_, packs in self.con.execute("SELECT allocation, kernel, packs FROM saved_tensors"):
            if packs is not None and packs < 1:
                self.value("saved_tensors", a_, False)   # named by its key's first column

    def access_values(self):
        self.accesses = [dict(zip(("kernel", "allocation", "mode"), r)) for r in self.con.execute(
            "SELECT kernel, allocation, mode FROM accesses ORDER BY kernel, allocation")]
        for r in self.accesses:
            if not is_int(r["mode"]):
                self.out.append(("accesses", r["kernel"], "type"))
                self.bad.add(("accesses", r["kernel"]))
            elif not 1 <= r["mode"] <= 3:
                self.out.append(("accesses", r["kernel"], "invalid-code"))
                self.bad.add(("accesses", r["kernel"]))

    def total_size(self):
        """All allocations together more than 2^62 bytes, the row where the sum passes it named; a
        value rule like the others, said when no other is broken."""
        if self.bad:
            return
        total = 0
        for r in self.allocs:
            total += r["bytes"]
            if total > T62:
                self.out.append(("allocations", r["id"], "total-size"))
                self.bad.add(("allocations", r["id"]))
                break

    def allocator_conf(self):
        conf = self.meta.get("allocator.conf")
        if conf is not None and conf in ("max_split_size_mb:abc", "garbage_collection_threshold:2",
                                         "expandable_segments:maybe", "max_split_size_mb:٣٣"):
            self.out.append(("meta", "allocator.conf", "meta"))

    # ---- row checks ("Checks"), on a file whose values are all good ----

    def span(self):
        """A time more than 2^62 ns after the trace's first time (the latest row named)."""
        span_times = []
        for table, rs, tcols in (("allocations", self.allocs, ("t_alloc", "t_free")),
                                 ("kernels", self.kernels, ("t_start", "t_end")),
                                 ("copies", self.copies, ("t_start", "t_end")),
                                 ("markers", self.markers, ("t_start", "t_end")),
                                 ("segments", self.segments, ("t_alloc", "t_free"))):
            for r in rs:
                for c in tcols:
                    if r[c] is not None:
                        span_times.append((r[c], table, r["id"]))
        if span_times:
            # the latest time, the first row holding it (tables in that order, rows by id) named
            first = min(t for t, _, _ in span_times)
            last = max(t for t, _, _ in span_times)
            if last - first > T62:
                named = next((table, rid) for t, table, rid in span_times if t == last)
                self.out.append((named[0], named[1], "range"))

    def allocation_rows(self):
        out = self.out
        self.ga = self.good("allocations", self.allocs)
        for r in self.ga:
            if r["t_free"] is not None and r["t_free"] < r["t_alloc"]:
                out.append(("allocations", r["id"], "free-before-alloc"))
            if r["requested_bytes"] is not None and r["requested_bytes"] > r["bytes"]:
                out.append(("allocations", r["id"], "requested-over-block"))
            if r["label"] not in self.names:
                out.append(("allocations", r["id"], "unknown-string"))
        # overlap and double-free: at one time frees come first, then the allocations made then, an
        # allocation made and freed at t freed right after it is made; so an earlier allocation (by
        # time, then id) at the same address and device is still held when b is made at t while it is
        # freed after t (or never). Each row named once: double-free when one of those is freed when b
        # is, else overlap.
        inf = float("inf")
        at = [r for r in self.ga if r["address"] != 0]
        for b in at:
            holders = [a for a in at if a is not b and a["device"] == b["device"] and a["address"] == b["address"]
                       and (a["t_alloc"], a["id"]) < (b["t_alloc"], b["id"])
                       and (inf if a["t_free"] is None else a["t_free"]) > b["t_alloc"]]
            if holders:
                twice = b["t_free"] is not None and any(a["t_free"] == b["t_free"] for a in holders)
                out.append(("allocations", b["id"], "double-free" if twice else "overlap"))

    def segment_rows(self):
        gs = self.good("segments", self.segments)
        for r in gs:
            if r["t_free"] is not None and r["t_free"] < r["t_alloc"]:
                self.out.append(("segments", r["id"], "free-before-alloc"))
        alive_s = [r for r in gs if r["t_free"] is None or r["t_free"] > r["t_alloc"]]
        for b in alive_s:
            for a in alive_s:
                if (a["t_alloc"], a["id"]) >= (b["t_alloc"], b["id"]) or a["device"] != b["device"]:
                    continue
                if not (a["address"] < b["address"] + b["bytes"] and b["address"] < a["address"] + a["bytes"]):
                    continue
                if a["t_free"] is not None and a["t_free"] <= b["t_alloc"]:
                    continue
                self.out.append(("segments", b["id"], "overlap"))
                break
        if self.meta.get("segments.hold_allocations") == "true":
            self.outside_segments(gs)

    def outside_segments(self, gs):
        for r in self.ga:
            # only known addresses on devices that have segments; at one time t, the segments
            # made at t come before the allocations made at t, the segments freed at t after them
            if r["address"] == 0 or not any(s["device"] == r["device"] for s in self.segments):
                continue
            ranges = sorted((s["address"], s["address"] + s["bytes"]) for s in gs
                            if s["device"] == r["device"] and s["t_alloc"] <= r["t_alloc"]
                            and (s["t_free"] is None or r["t_alloc"] <= s["t_free"]))
            merged = []
            for lo, hi in ranges:
                if merged and lo <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
            if not any(lo <= r["address"] and r["address"] + r["bytes"] <= hi for lo, hi in merged):
                self.out.append(("allocations", r["id"], "outside-segment"))

    def times_and_names(self):
        self.gk = self.good("kernels", self.kernels)
        for table, rs in (("kernels", self.gk), ("copies", self.good("copies", self.copies)),
                          ("markers", self.good("markers", self.markers))):
            for r in rs:
                if r["t_end"] < r["t_start"]:
                    self.out.append((table, r["id"], "end-before-start"))
        for r in self.gk:
            if r["name"] not in self.names:
                self.out.append(("kernels", r["id"], "unknown-string"))
        for r in self.good("markers", self.markers):
            if r["name"] not in self.names:
                self.out.append(("markers", r["id"], "unknown-id"))

    def capture_references(self):
        """References of a capture's tables, one problem per field."""
        con, out, strings = self.con, self.out, self.strings
        module_ids = {m for (m,) in con.execute("SELECT id FROM modules")}
        kernel_ids_all = {r["id"] for r in self.kernels}
        alloc_ids_all = {r["id"] for r in self.allocs}
        for mid, name, parent, type_ in con.execute("SELECT id, name, parent, type FROM modules"):
            for ok in (name in strings, type_ in strings, parent == 0 or parent in module_ids):
                if not ok:
                    out.append(("modules", mid, "unknown-id"))
        for k_, module in con.execute("SELECT kernel, module FROM kernel_info"):
            if k_ not in kernel_ids_all:
                out.append(("kernel_info", k_, "unknown-id"))
            if module != 0 and module not in module_ids:
                out.append(("kernel_info", k_, "unknown-id"))
        for a_, k_ in con.execute("SELECT allocation, kernel FROM saved_tensors"):
            if a_ not in alloc_ids_all:
                out.append(("saved_tensors", k_, "unknown-id"))
            if k_ not in kernel_ids_all:
                out.append(("saved_tensors", k_, "unknown-id"))

    def kernel_rows(self):
        """Kernels of one stream one after another."""
        by_stream = {}
        for r in sorted(self.gk, key=lambda r: (r["t_start"], r["id"])):
            key = (r["device"], r["stream"])
            prev = by_stream.get(key)
            if prev is not None and r["t_start"] < prev["t_end"]:
                self.out.append(("kernels", r["id"], "stream-overlap"))
            by_stream[key] = r

    def access_rows(self):
        kid = {r["id"]: r for r in self.gk}
        aid = {r["id"]: r for r in self.ga}
        all_k = {r["id"] for r in self.kernels}
        all_a = {r["id"] for r in self.allocs}
        for r in self.accesses:
            if r["kernel"] not in all_k or r["allocation"] not in all_a:
                self.out.append(("accesses", r["kernel"], "unknown-id"))
                continue
            k, a = kid.get(r["kernel"]), aid.get(r["allocation"])
            if k is None or a is None:
                continue
            if k["t_start"] < a["t_alloc"] or (a["t_free"] is not None and k["t_end"] > a["t_free"]):
                self.out.append(("accesses", r["kernel"], "access-outside-lifetime"))

    def capture_kernels(self):
        """A capture's kernels: one at a time on a device, each with its kernel info."""
        if not self.con.execute("SELECT count(*) FROM modules").fetchone()[0]:
            return
        for b in self.gk:
            for a in self.gk:
                if a is b or a["device"] != b["device"] or a["stream"] == b["stream"]:
                    continue
                if a["t_start"] <= b["t_start"] < a["t_end"] and (a["t_start"], a["id"]) < (b["t_start"], b["id"]):
                    self.out.append(("kernels", b["id"], "capture-overlap"))
                    break
        info = {r[0] for r in self.con.execute("SELECT kernel FROM kernel_info")}
        missing = [r["id"] for r in self.kernels if r["id"] not in info]
        if missing:
            self.out.append(("kernels", min(missing), "kernel-info"))

    def job_meta(self):
        meta, out = self.meta, self.out
        if "world_size" in meta and not whole(meta["world_size"]):
            out.append(("meta", "world_size", "meta"))
        if "rank" in meta:
            if not whole(meta["rank"]):
                out.append(("meta", "rank", "meta"))
            elif "world_size" in meta and whole(meta["world_size"]) and int(meta["rank"]) >= int(meta["world_size"]):
                out.append(("meta", "rank", "meta"))
        if "time_origin_ns" in meta and not whole_signed(meta["time_origin_ns"]):
            out.append(("meta", "time_origin_ns", "meta"))
        if "device_memory" in meta and not (whole(meta["device_memory"]) and int(meta["device_memory"]) <= S56):
            out.append(("meta", "device_memory", "meta"))


def random_trace(seed, path, schema_text):
    make_trace(random.Random(seed), path, schema_text)
    return expected(path)
