#!/usr/bin/env python3
"""An outside reading of docs/simulator.md "Coupled ranks" (and of docs/trace-format.md "Multi-rank
traces" for the matching), written from the documents alone, sharing no code with sim/ or the other
references: the per-rank and job columns of `mhc simulate --ranks --json` (capacity, peaks,
makespans, throughput loss, stall time and count, coupled wait time and count, OOM and stopped
ranks, the job's makespan on the shared clock, its loss, limiting, last and OOM rank, cross-rank
kernel count).

Each rank runs the single-GPU rules ("State", "Time", rules 1-8) under the `ideal` allocator, an
eviction policy `lru`, `largest` or `belady`, prefetch `none` (so rules 9 and 10 never fire), an
unlimited host buffer and any link figures (copy engines, duplex factor, NCCL and memcpy shares,
the swap-operation cap). The device of each rank is its own choice ("Inputs": the GPU with the
largest live peak, ties the lowest number), so ranks on device 1, or beside a smaller device, count.

simulate_job(paths, cfg) -> the dict `--json` prints (keys as there), and the exit status."""
import math
import sqlite3
from fractions import Fraction

GPU, HOST, H2D, D2H, FREED, NOT_YET = "gpu", "host", "h2d", "d2h", "freed", "not_yet"
READ, WRITE, READ_WRITE = 1, 2, 3
COMM = 5  # allocation category of communication memory
COPY_H2D, COPY_D2H = 0, 1

PRESETS = {  # "Link models": bandwidth each way, both-directions factor; 6 us, 2 engines, shares 0.5
    "pcie3": (12e9, 0.5), "pcie4": (25e9, 0.5), "pcie5": (55e9, 52 / 55),
    "nvlink-c2c": (320e9, 0.5), "nvlink4-peer": (380e9, 375 / 380),
}


def link_config(name="pcie4", **over):
    bw, duplex = PRESETS[name]
    link = {"h2d_bw": bw, "d2h_bw": bw, "latency": 6e-6, "engines": 2, "duplex": duplex,
            "nccl_share": 0.5, "memcpy_share": 0.5}
    link.update(over)
    return link


class Stop(Exception):
    """The rank ran out of memory (rule 7)."""


# ---------------------------------------------------------------------------------------------
# Reading a rank's trace
# ---------------------------------------------------------------------------------------------

def memory_events(allocs):
    """(time, order, id, +/-bytes) in docs/trace-format.md "Events at one instant" order."""
    ev = []
    for a in allocs:
        ev.append((a["t_alloc"], 1, a["id"], 0, a["bytes"]))
        if a["t_free"] is not None:
            if a["t_free"] == a["t_alloc"]:
                ev.append((a["t_alloc"], 1, a["id"], 1, -a["bytes"]))
            else:
                ev.append((a["t_free"], 0, a["id"], 0, -a["bytes"]))
    ev.sort()
    return ev


def live_peak(allocs):
    live = peak = 0
    for e in memory_events(allocs):
        live += e[4]
        peak = max(peak, live)
    return peak


def load_rank(path, position, device=None):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    strings = dict(db.execute("SELECT id, text FROM strings"))
    all_allocs = [dict(zip(("id", "device", "bytes", "t_alloc", "t_free", "category"), r)) for r in
                  db.execute("SELECT id, device, bytes, t_alloc, t_free, category FROM allocations ORDER BY id")]
    devices = sorted({a["device"] for a in all_allocs if a["device"] >= 0})
    peaks = {d: live_peak([a for a in all_allocs if a["device"] == d]) for d in devices}
    if device is None:  # the largest live peak, ties the lowest number
        device = max(devices, key=lambda d: (peaks[d], -d))
    allocs = [a for a in all_allocs if a["device"] == device]
    kernels = [dict(zip(("id", "stream", "name", "t_start", "t_end"), (r[0], r[1], strings.get(r[2], ""), r[3], r[4])))
               for r in db.execute("SELECT id, stream, name, t_start, t_end FROM kernels WHERE device = ?", (device,))]
    kernels.sort(key=lambda k: (k["t_start"], k["id"]))
    kid = {k["id"]: k for k in kernels}
    aid = {a["id"]: a for a in allocs}
    for k in kernels:
        k["ops"] = []
    for kernel, alloc, mode in db.execute("SELECT kernel, allocation, mode FROM accesses ORDER BY kernel, allocation"):
        if kernel in kid and alloc in aid:
            kid[kernel]["ops"].append((alloc, mode))
    copies = db.execute("SELECT kind, t_start, t_end FROM copies WHERE device = ?", (device,)).fetchall()
    db.close()
    assumed = bool(kernels) and bool(allocs) and not any(k["ops"] for k in kernels)
    if assumed:
        assume_accesses(kernels, allocs)
    times = [a["t_alloc"] for a in allocs] + [a["t_free"] for a in allocs if a["t_free"] is not None]
    times += [k["t_start"] for k in kernels] + [k["t_end"] for k in kernels]
    return {"path": str(path), "position": position, "meta": meta, "device": device, "allocs": allocs,
            "aid": aid, "kernels": kernels, "copies": copies, "peak": peaks[device], "first": min(times),
            "last": max(times), "assumed": assumed,
            "rank": int(meta["rank"]) if "rank" in meta else position,
            "origin": int(meta.get("time_origin_ns", 0))}


def assume_accesses(kernels, allocs):
    """"Accesses": written by the first kernel starting at or after the allocation if it ends by
    the free, read by the latest-starting kernel ending by the free if later than that."""
    last_seq = len(kernels) - 1
    for a in allocs:
        free = a["t_free"]
        cand = next((s for s, k in enumerate(kernels) if k["t_start"] >= a["t_alloc"]), None)
        if cand is None:
            continue
        if free is None or kernels[cand]["t_end"] <= free:
            kernels[cand]["ops"].append((a["id"], WRITE))
        reader = last_seq if free is None else next(
            (s for s in range(last_seq, -1, -1) if kernels[s]["t_end"] <= free), None)
        if reader is not None and reader > cand:
            kernels[reader]["ops"].append((a["id"], READ))
    for k in kernels:
        k["ops"].sort()


# ---------------------------------------------------------------------------------------------
# Cross-rank kernels and their matching (docs/trace-format.md "Multi-rank traces")
# ---------------------------------------------------------------------------------------------

def cross_op(name):
    """The operation of a cross-rank kernel, or None."""
    if not name.startswith("nccl") or "Kernel_" not in name:
        return None
    rest = name[name.index("Kernel_") + len("Kernel_"):]
    n = 0
    while n < len(rest) and rest[n].isascii() and rest[n].isalnum():
        n += 1
    return rest[:n]


def p2p_role(rank, k):
    op = k["op"]
    if op == "Send":
        return "send"
    if op == "Recv":
        return "recv"
    if rank["assumed"]:
        return "sendrecv"
    writes = reads = False
    for alloc, mode in k["ops"]:
        if rank["aid"][alloc]["category"] == COMM:
            continue
        if mode & WRITE:
            writes = True
        else:
            reads = True
    if writes and not reads:
        return "recv"
    if reads and not writes:
        return "send"
    return "sendrecv"


def match(ranks):
    """Sets each cross-rank kernel's 'needs': the (rank, seq) arrivals its end waits for, with the
    slack of each ("Coupled ranks" rules 2-3)."""
    by_rank = {r["rank"]: r for r in ranks}
    comms = {}  # name -> (members, {rank: [seq...]})
    for r in ranks:
        for s, k in enumerate(r["kernels"]):
            k["op"] = cross_op(k["name"])
            k["needs"] = []
            if k["op"] is None:
                continue
            key = r["meta"].get(f"nccl.stream.{k['stream']}")
            if key is not None:
                name, members = key.rsplit(":", 1)
                members = tuple(sorted(int(m) for m in members.split(",")))
            else:
                name, members = f"stream {k['stream']}", None
            comms.setdefault(name, [members, {}])[1].setdefault(r["rank"], []).append(s)
    for name, (members, seqs) in comms.items():
        if members is None:
            members = tuple(sorted(seqs))
        if len(members) == 2 and all(by_rank[m]["kernels"][s]["op"] in ("Send", "Recv", "SendRecv")
                                     for m in members for s in seqs.get(m, [])):
            match_p2p(by_rank, members, seqs)
            continue
        lists = [seqs.get(m, []) for m in members]
        assert len({len(x) for x in lists}) == 1, f"{name}: counts differ"
        for i in range(len(lists[0])):
            group = [(m, seqs[m][i]) for m in members]
            arrive = {m: by_rank[m]["origin"] + by_rank[m]["kernels"][s]["t_start"] for m, s in group}
            last = max(arrive.values())
            for m, s in group:
                by_rank[m]["kernels"][s]["needs"] = [(p, sp, last - arrive[p]) for p, sp in group if p != m]


def match_p2p(by_rank, members, seqs):
    a, b = members
    roles = {m: [(s, p2p_role(by_rank[m], by_rank[m]["kernels"][s])) for s in seqs.get(m, [])] for m in members}

    def pair(x, y):  # the k-th send from x to y with the k-th receive on y from x
        sends = [s for s, role in roles[x] if role == "send"]
        recvs = [s for s, role in roles[y] if role == "recv"]
        assert len(sends) == len(recvs), "sends and receives differ"
        for ss, rs in zip(sends, recvs):
            t_send = by_rank[x]["origin"] + by_rank[x]["kernels"][ss]["t_start"]
            t_recv = by_rank[y]["origin"] + by_rank[y]["kernels"][rs]["t_start"]
            by_rank[y]["kernels"][rs]["needs"] = [(x, ss, max(t_send, t_recv) - t_send)]

    pair(a, b)
    pair(b, a)
    sra = [s for s, role in roles[a] if role == "sendrecv"]
    srb = [s for s, role in roles[b] if role == "sendrecv"]
    assert len(sra) == len(srb), "send-receives differ"
    for x, y in zip(sra, srb):
        ta = by_rank[a]["origin"] + by_rank[a]["kernels"][x]["t_start"]
        tb = by_rank[b]["origin"] + by_rank[b]["kernels"][y]["t_start"]
        last = max(ta, tb)
        by_rank[a]["kernels"][x]["needs"] = [(b, y, last - tb)]
        by_rank[b]["kernels"][y]["needs"] = [(a, x, last - ta)]


# ---------------------------------------------------------------------------------------------
# One rank's engine (rules 1-8), a generator that yields at a cross-rank kernel's end
# ---------------------------------------------------------------------------------------------

class Transfer:
    __slots__ = ("alloc", "dir", "start", "end", "cancelled")

    def __init__(self, alloc, direction, start, end):
        self.alloc, self.dir, self.start, self.end, self.cancelled = alloc, direction, start, end, False


def intervals(pairs):
    """Merged [start, end) intervals, for "runs at recorded time x" tests."""
    out = []
    for s, e in sorted(p for p in pairs if p[1] > p[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def inside(ivs, x):
    lo, hi = 0, len(ivs)
    while lo < hi:
        mid = (lo + hi) // 2
        if ivs[mid][1] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo < len(ivs) and ivs[lo][0] <= x


class Engine:
    def __init__(self, rank, capacity, policy, link, max_ops):
        self.r, self.cap, self.policy, self.link = rank, capacity, policy, link
        self.gap = math.ceil(1e9 / max_ops) if max_ops else 0
        self.shift = 0
        self.used = self.peak = 0
        self.stalls = self.stall_ns = self.waits = self.wait_ns = 0
        self.clock = 0
        self.state = {a["id"]: NOT_YET for a in rank["allocs"]}
        self.valid = {a["id"]: False for a in rank["allocs"]}
        self.pins = {a["id"]: 0 for a in rank["allocs"]}
        self.stamp = {}
        self.xfer = {}
        self.flight = []
        self.queue_end = {}  # queue -> end of its last transfer (cancelled ones too)
        self.last_start = None
        self.last_seq_started = -1
        self.accessed_at = {}  # alloc -> seq of its latest access
        self.reached = None
        self.delta = {}  # seq -> arrival delay
        self.oom_time = None
        ks = rank["kernels"]
        self.nccl = intervals((k["t_start"], k["t_end"]) for k in ks
                              if "nccl" in k["name"].lower() or "rccl" in k["name"].lower())
        self.memcpy = {d: intervals((s, e) for kind, s, e in rank["copies"] if kind == d) for d in (COPY_H2D, COPY_D2H)}
        uses = {}
        for s, k in enumerate(ks):
            for alloc, _ in k["ops"]:
                uses.setdefault(alloc, []).append(s)
        self.uses = uses

    # -- bookkeeping ------------------------------------------------------------------------
    def reach(self, t):
        self.reached = t if self.reached is None else max(self.reached, t)

    def grow(self, b):
        self.used += b
        self.peak = max(self.peak, self.used)

    def complete(self, t):
        keep = []
        for x in sorted(self.flight, key=lambda x: x.end):
            if x.end > t:
                keep.append(x)
                continue
            if x.cancelled:
                continue
            a = x.alloc
            del self.xfer[a]
            if x.dir == D2H:
                self.used -= self.r["aid"][a]["bytes"]
                self.state[a] = HOST
                self.valid[a] = True
            else:
                self.state[a] = GPU
        self.flight = keep

    def meaningful(self):
        return [x for x in self.flight if not x.cancelled]

    def start_transfer(self, a, direction, t):
        link = self.link
        q = direction if link["engines"] >= 2 else "both"
        s = max(t, self.queue_end.get(q, t))
        if self.gap and self.last_start is not None:
            s = max(s, self.last_start + self.gap)
        bw = link["h2d_bw"] if direction == H2D else link["d2h_bw"]
        if link["engines"] >= 2:
            other = D2H if direction == H2D else H2D
            if self.queue_end.get(other, s) > s:
                bw *= link["duplex"]
        if inside(self.nccl, s - self.shift):
            bw *= 1 - link["nccl_share"]
        if inside(self.memcpy[COPY_H2D if direction == H2D else COPY_D2H], s - self.shift):
            bw *= 1 - link["memcpy_share"]
        n = self.r["aid"][a]["bytes"]
        dur = max(1, math.ceil(link["latency"] * 1e9 + n / bw * 1e9))
        x = Transfer(a, direction, s, s + dur)
        self.queue_end[q] = x.end
        self.last_start = s
        self.flight.append(x)
        self.xfer[a] = x
        self.state[a] = direction
        return x

    # -- eviction ---------------------------------------------------------------------------
    def next_use(self, a):
        uses = self.uses.get(a, [])
        after = self.accessed_at.get(a, self.last_seq_started)
        for s in uses:
            if s > after:
                return s
        return math.inf

    def victim(self, aside):
        cands = [a for a, st in self.state.items() if st == GPU and self.pins[a] == 0 and a not in aside]
        if not cands:
            return None
        if self.policy == "lru":
            return min(cands, key=lambda a: self.stamp[a])
        if self.policy == "largest":
            return min(cands, key=lambda a: (-self.r["aid"][a]["bytes"], self.stamp[a]))
        if self.policy == "belady":
            return min(cands, key=lambda a: (-self.next_use(a), a))
        raise ValueError(self.policy)

    def evict(self, a, t):
        if self.valid[a]:
            self.state[a] = HOST
            self.used -= self.r["aid"][a]["bytes"]
        else:
            self.start_transfer(a, D2H, t)

    def make_room(self, b, t):
        while True:
            self.complete(t)
            if self.cap is None or self.used + b <= self.cap:
                return t
            pending = sum(self.r["aid"][x.alloc]["bytes"] for x in self.flight if not x.cancelled and x.dir == D2H)
            if self.used - pending + b > self.cap:
                v = self.victim(())
                if v is not None:
                    self.evict(v, t)
                    continue
            live = self.meaningful()
            if live:
                t = max(t, min(x.end for x in live))
                continue
            self.oom_time = t
            raise Stop()

    # -- events -----------------------------------------------------------------------------
    def allocate(self, a):
        t = a["t_alloc"] + self.shift
        t2 = self.make_room(a["bytes"], t)
        self.stall(t2 - t)
        self.grow(a["bytes"])
        self.state[a["id"]] = GPU
        self.valid[a["id"]] = False
        self.clock += 1
        self.stamp[a["id"]] = self.clock
        self.reach(t2)

    def free(self, a):
        i = a["id"]
        t = a["t_free"] + self.shift
        self.complete(t)
        st = self.state[i]
        if st in (GPU, H2D, D2H):
            self.used -= a["bytes"]
        if i in self.xfer:
            self.xfer.pop(i).cancelled = True
        self.state[i] = FREED
        self.valid[i] = False
        self.reach(t)

    def stall(self, w):
        if w > 0:
            self.stalls += 1
            self.stall_ns += w
            self.shift += w

    def kernel_start(self, s, k):
        t = k["t_start"] + self.shift
        self.complete(t)
        for a, _ in k["ops"]:
            self.pins[a] += 1
        cur = ready = t
        for a, _ in k["ops"]:
            st = self.state[a]
            if st == H2D:
                ready = max(ready, self.xfer[a].end)
            elif st == D2H:
                self.xfer.pop(a).cancelled = True
                self.state[a] = GPU
            elif st == HOST:
                cur = self.make_room(self.r["aid"][a]["bytes"], cur)
                self.grow(self.r["aid"][a]["bytes"])
                ready = max(ready, self.start_transfer(a, H2D, cur).end)
        start = max(cur, ready)
        self.stall(start - t)
        self.complete(start)
        self.last_seq_started = s
        for a, mode in k["ops"]:
            if self.state[a] == FREED:
                continue
            self.clock += 1
            self.stamp[a] = self.clock
            self.accessed_at[a] = s
            if mode & WRITE:
                self.valid[a] = False
        self.reach(start + k["t_end"] - k["t_start"])
        if k["op"] is not None:
            self.delta[s] = self.shift

    def kernel_end(self, s, k, bound):
        if bound is not None and bound > self.shift:
            self.waits += 1
            self.wait_ns += bound - self.shift
            self.shift = bound
            self.reach(k["t_end"] + self.shift)
        self.complete(k["t_end"] + self.shift)
        for a, _ in k["ops"]:
            self.pins[a] -= 1

    def events(self):
        ev = []
        for a in self.r["allocs"]:
            ev.append((a["t_alloc"], 2, a["id"], 0, "alloc", a))
            if a["t_free"] is not None:
                if a["t_free"] == a["t_alloc"]:
                    ev.append((a["t_alloc"], 2, a["id"], 1, "free", a))
                else:
                    ev.append((a["t_free"], 1, a["id"], 0, "free", a))
        for s, k in enumerate(self.r["kernels"]):
            ev.append((k["t_start"], 3, s, 0, "start", k))
            if k["t_end"] == k["t_start"]:
                ev.append((k["t_start"], 3, s, 1, "end", k))
            else:
                ev.append((k["t_end"], 0, s, 0, "end", k))
        ev.sort(key=lambda e: e[:4])
        return ev

    def run(self):
        """Yields ('wait', seq, needs) at each cross-rank kernel end that waits for other ranks and
        expects the bound (or None: the rank stops there); returns 'done' or 'oom'."""
        try:
            for e in self.events():
                kind, s = e[4], e[2]
                if kind == "alloc":
                    self.allocate(e[5])
                elif kind == "free":
                    self.free(e[5])
                elif kind == "start":
                    self.kernel_start(s, e[5])
                else:
                    k = e[5]
                    bound = None
                    if k["needs"]:
                        bound = yield ("wait", s, k["needs"])
                        if bound == "stop":
                            return "stopped"
                    self.kernel_end(s, k, bound)
        except Stop:
            return "oom"
        return "done"


# ---------------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------------

def capacity_bytes(share, peak):
    """A share of the baseline peak in bytes, rounded down ("Capacity"); unlimited: None."""
    if share == "unlimited":
        return None
    return math.floor(Fraction(share) / 100 * peak)


def simulate_job(paths, share, policy="lru", link=None, max_ops=0, device=None):
    """device: --device for every rank (None: each rank's own choice)."""
    link = link or link_config()
    ranks = [load_rank(p, i, device) for i, p in enumerate(paths)]
    match(ranks)
    by_rank = {r["rank"]: r for r in ranks}
    engines, gens, status, pending = {}, {}, {}, {}
    for r in ranks:
        eng = Engine(r, capacity_bytes(share, r["peak"]), policy, link, max_ops)
        engines[r["rank"]] = eng
        gens[r["rank"]] = eng.run()
        pending[r["rank"]] = None  # what the generator is blocked on
    to_send = {g: None for g in gens}

    def step(g, value):
        try:
            pending[g] = gens[g].send(value)
        except StopIteration as fin:
            status[g] = fin.value
            pending[g] = None

    for g in sorted(gens):
        step(g, None)
    while True:
        progressed = False
        for g in sorted(gens):
            if g in status or pending[g] is None:
                continue
            _, s, needs = pending[g]
            known = [(p, sp, slack) for p, sp, slack in needs if sp in engines[p].delta]
            if len(known) == len(needs):
                bound = max(engines[p].delta[sp] - slack for p, sp, slack in needs)
                step(g, bound)
                progressed = True
            elif any(p in status for p, sp, _ in needs if sp not in engines[p].delta):
                step(g, "stop")
                progressed = True
        if not progressed:
            break
    assert all(g in status for g in gens), "deadlock"
    del to_send

    rows = []
    for r in sorted(ranks, key=lambda r: r["position"]):
        g, e = r["rank"], engines[r["rank"]]
        base = r["last"] - r["first"]
        if status[g] == "oom":
            sim = e.oom_time - r["first"]
        elif status[g] == "stopped":
            sim = (e.reached if e.reached is not None else r["first"]) - r["first"]
        else:
            sim = r["last"] + e.shift - r["first"]
        finished = status[g] == "done"
        # an unlimited capacity reads -1, as the stored capacity_bytes of a run ("Capacity")
        rows.append({"rank": g, "trace": r["path"], "capacity": -1 if e.cap is None else e.cap, "baseline_peak": r["peak"],
                     "simulated_peak": e.peak, "baseline_makespan": base, "simulated_makespan": sim,
                     "throughput_loss": (sim / base - 1) if finished and base > 0 else None,
                     "stall_time": e.stall_ns, "stall_count": e.stalls, "coupled_wait_time": e.wait_ns,
                     "coupled_wait_count": e.waits, "oom": status[g] == "oom", "stopped": status[g] == "stopped",
                     "device": r["device"]})
    start = min(by_rank[x["rank"]]["origin"] + by_rank[x["rank"]]["first"] for x in rows)
    base_end = max(by_rank[x["rank"]]["origin"] + by_rank[x["rank"]]["last"] for x in rows)
    ends = {x["rank"]: by_rank[x["rank"]]["origin"] + by_rank[x["rank"]]["first"] + x["simulated_makespan"] for x in rows}
    sim_end = max(ends.values())
    finished = all(status[g] == "done" for g in gens)
    stall = {x["rank"]: x["stall_time"] for x in rows}
    limiting = min((g for g in stall if stall[g] > 0), key=lambda g: (-stall[g], g), default=-1)
    last = min(ends, key=lambda g: (-ends[g], g))
    ooms = [(by_rank[g]["origin"] + engines[g].oom_time, g) for g in gens if status[g] == "oom"]
    job = {"peak": max(x["simulated_peak"] for x in rows), "baseline_peak": max(x["baseline_peak"] for x in rows),
           "baseline_makespan": base_end - start, "simulated_makespan": sim_end - start,
           "throughput_loss": ((sim_end - start) / (base_end - start) - 1) if finished else None,
           "limiting_rank": limiting, "last_rank": last, "oom_rank": min(ooms)[1] if ooms else -1,
           "cross_events": sum(1 for r in ranks for k in r["kernels"] if k["op"] is not None)}
    return {"ranks": rows, "job": job}, (0 if finished else 3)
