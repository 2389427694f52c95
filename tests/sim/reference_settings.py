#!/usr/bin/env python3
"""A second reading of docs/simulator.md's "Settings" (`mhc advise`'s transformations of a captured
step), written from the documents alone (docs/simulator.md "Settings", "Link models", "Allocator
models"; docs/trace-format.md's tables; docs/advise.md). It shares no code with advise/: where the
two disagree, one of them does not do what the document says (reference_settings_compare.py runs
both). The caching allocator model is reference_caching.py, itself a reading of the document.

Library: `predict(trace_path, setting, link=..., host_bw=..., host_tensor_cost_ns=...)` returns the
metrics (`peak_bytes`, `reserved_bytes`, `host_peak_bytes`, `step_time_ns`) and the transformed
step's kernels, allocations and copies, as `mhc advise --trace-out` writes them.
"""
import bisect
import json
import math
import sqlite3
import struct
from dataclasses import dataclass

import reference_caching
from reference_sim import Link   # docs/simulator.md "Link models": the first reading's figures

FWD, BWD, OPT, RECOMPUTE, OTHER = 0, 1, 2, 3, 4
READ, WRITE = 1, 2
PARAM, GRAD, OPTSTATE, ACTIVATION, WORKSPACE, COMM, OTHER_CAT = range(7)
H2D, D2H = 0, 1
RANK_GAP = 1 << 256   # between two recorded kernels' ranks (Plan.place): room for 256 insertions at one place
MUST_SAVE = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::convolution")


LINKS = {"pcie3": Link(12e9, 12e9, 6e-6, 6e-6, 2, 0.5), "pcie4": Link(25e9, 25e9, 6e-6, 6e-6, 2, 0.5),
         "pcie5": Link(55e9, 55e9, 6e-6, 6e-6, 2, 52 / 55), "nvlink-c2c": Link(320e9, 320e9, 6e-6, 6e-6, 2, 0.5)}


def link_profile(path):
    """A link profile file (docs/simulator.md "Link models")."""
    with open(path) as f:
        p = json.load(f)
    return Link(p["h2d"]["bandwidth_Bps"], p["d2h"]["bandwidth_Bps"], p["h2d"]["latency_s"], p["d2h"]["latency_s"],
                p["copy_engines"], p["duplex_factor"])


# ---------------------------------------------------------------- the captured step

class Captured:
    def __init__(self, path):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        q = lambda sql: db.execute(sql).fetchall()   # noqa: E731
        self.meta = dict(q("SELECT key, value FROM meta"))
        strings = dict(q("SELECT id, text FROM strings"))
        info = {k: (m, p) for k, m, p in q("SELECT kernel, module, phase FROM kernel_info")}
        rows = q("SELECT id, name, t_start, t_end, step FROM kernels ORDER BY t_start, id")
        self.kernels = []   # in order
        for i, (kid, name, t0, t1, step) in enumerate(rows):
            m, p = info.get(kid, (0, OTHER))
            self.kernels.append(dict(id=kid, i=i, name=strings.get(name, ""), t0=t0, t1=t1, step=step,
                                     module=m, phase=p))
        self.kidx = {k["id"]: k["i"] for k in self.kernels}
        self.allocs = {}
        for aid, dev, b, ta, tf, stream, cat, label in q(
                "SELECT id, device, bytes, t_alloc, t_free, stream, category, label FROM allocations ORDER BY id"):
            self.allocs[aid] = dict(id=aid, device=dev, bytes=b, t_alloc=ta, t_free=tf, stream=stream,
                                    category=cat, label=strings.get(label, ""))
        self.acc = [dict() for _ in self.kernels]    # kernel index -> {alloc: mode}
        self.uses = {a: [] for a in self.allocs}      # alloc -> [(kernel index, mode)] in kernel order
        for kid, a, mode in q("SELECT kernel, allocation, mode FROM accesses"):
            if kid in self.kidx and a in self.allocs:
                self.acc[self.kidx[kid]][a] = mode
        for i, acc in enumerate(self.acc):
            for a, mode in sorted(acc.items()):
                self.uses[a].append((i, mode))
        self.saves = []   # (alloc, kernel index, packs)
        try:
            srows = q("SELECT allocation, kernel, coalesce(packs, 1) FROM saved_tensors")
        except sqlite3.OperationalError:
            srows = q("SELECT allocation, kernel, 1 FROM saved_tensors")
        for a, kid, packs in srows:
            if kid in self.kidx and a in self.allocs:
                self.saves.append((a, self.kidx[kid], packs))
        self.saves_of = {}   # alloc -> the kernels that saved it
        self.saved_at = {}   # kernel index -> the allocations it saved
        for a, i, p in self.saves:
            self.saves_of.setdefault(a, []).append(i)
            self.saved_at.setdefault(i, []).append(a)
        self.modules = {}
        for mid, name, parent, mtype in q("SELECT id, name, parent, type FROM modules"):
            self.modules[mid] = dict(name=strings.get(name, ""), parent=parent, type=strings.get(mtype, ""))
        db.close()
        self._inside = {}
        self.passes = self._passes()
        self.pass_of = {}
        for p, ks in enumerate(self.passes):
            for i in ks:
                self.pass_of[i] = p
        self.caller = self._callers()
        self.made_by = {}   # alloc -> kernel index that made it
        for a, us in self.uses.items():
            if not us:
                continue
            i, mode = us[0]
            if mode & WRITE and self.kernels[i]["t0"] == self.allocs[a]["t_alloc"]:
                self.made_by[a] = i
        self.made = {}      # kernel index -> the allocations it made (in made_by's order)
        for a, i in self.made_by.items():
            self.made.setdefault(i, []).append(a)
        # docs/trace-format.md: the latest kernel before a module's forward returned still holding it
        # docs/simulator.md: where the capture saw a call of a module begin, for modules called
        # more often than the model (capture.module_calls: module name -> kernel ids)
        self.call_starts = set()
        for name, ids in json.loads(self.meta.get("capture.module_calls", "{}")).items():
            m = self.module_id(name)
            self.call_starts.update((m, self.kidx[k]) for k in ids)
        self.frame_hold = {a: self.kidx[k] for a, k in json.loads(self.meta.get("capture.frame_holds", "[]"))
                           if a in self.allocs and k in self.kidx}
        # the kernel that ran right after the backward first unpacked a saved storage, one per backward
        # every save in the order autograd packed it: (allocation, kernel index)
        order = json.loads(self.meta.get("capture.pack_order", "[]"))
        self.pack_order = [(a, self.kidx[k]) for a, k in order if a in self.allocs and k in self.kidx]
        # beside each save of capture.pack_order, the kernel that ran right after that save's own
        # first unpack (0: none): (allocation, saving kernel index) -> the earliest such kernel index
        self.save_unpacks = {}
        for (a, k), u in zip(order, json.loads(self.meta.get("capture.save_unpacks", "[]"))):
            if a in self.allocs and k in self.kidx and u in self.kidx:
                key = (a, self.kidx[k])
                self.save_unpacks[key] = min(self.save_unpacks.get(key, self.kidx[u]), self.kidx[u])
        self.unpacks = {}
        self.unpack_list = []   # (allocation, kernel index) in the list's order
        for a, k in json.loads(self.meta.get("capture.unpacks", "[]")):
            if a in self.allocs and k in self.kidx:
                self.unpacks.setdefault(a, []).append(self.kidx[k])
                self.unpack_list.append((a, self.kidx[k]))
        names = {al["label"] for al in self.allocs.values() if al["category"] == GRAD}
        self.has_grads = bool(names)
        self.grad_names = names

    def _callers(self):
        """docs/simulator.md "Settings": per kernel, the module whose call runs it: its own, but for
        a forward kernel of a module not under the model's root, the innermost module holding the
        nearest forward kernels of the model's own modules before and after it in its pass (0 when
        one is missing)."""
        roots = [m for m in self.modules if self.modules[m]["parent"] == 0]
        root = roots[0] if roots else None
        caller = [k["module"] for k in self.kernels]
        def outside(m):
            return m in self.modules and root is not None and not self.inside(m, root)
        for ks in self.passes:
            fwd = [i for i in ks if self.kernels[i]["phase"] == FWD]
            own = [i for i in fwd if self.kernels[i]["module"] in self.modules and not outside(self.kernels[i]["module"])]
            for i in fwd:
                if not outside(self.kernels[i]["module"]):
                    continue
                before = [j for j in own if j < i]
                after = [j for j in own if j > i]
                caller[i] = 0
                if before and after:
                    m, n = self.kernels[before[-1]]["module"], self.kernels[after[0]]["module"]
                    while m and not self.inside(n, m):
                        m = self.modules.get(m, {}).get("parent", 0)
                    caller[i] = m
        return caller

    def _passes(self):
        """A new pass at each step's first kernel and at a forward kernel after a backward one
        (kernels of other phases end neither)."""
        passes, cur, last, step = [], [], None, None
        for k in self.kernels:
            if cur and (k["step"] != step or (k["phase"] == FWD and last == BWD)):
                passes.append(cur)
                cur, last = [], None
            cur.append(k["i"])
            step = k["step"]
            if k["phase"] in (FWD, BWD):
                last = k["phase"]
        if cur:
            passes.append(cur)
        return passes

    def inside(self, mod, target):
        key = (mod, target)
        if key not in self._inside:
            m, r = mod, False
            while m:
                if m == target:
                    r = True
                    break
                m = self.modules.get(m, {}).get("parent", 0)
            self._inside[key] = r
        return self._inside[key]

    def module_id(self, name):
        for mid, m in self.modules.items():
            if m["name"] == name or m["name"].split(".", 1)[-1] == name:
                return mid
        raise ValueError(f"no module {name}")

    def is_param(self, a):
        return self.allocs[a]["category"] == PARAM

    def is_buffer(self, a):
        return self.allocs[a]["label"].startswith("buffer ")

    def trains(self, a):
        """A parameter that trains: it has a gradient `<name>.grad` (any parameter without gradients)."""
        return not self.has_grads or self.allocs[a]["label"] + ".grad" in self.grad_names

    def is_cached_cast(self, a):
        """Autocast's cached parameter copy: aten::_to_copy of a training parameter into <= its bytes."""
        i = self.made_by.get(a)
        if i is None or self.kernels[i]["name"] != "aten::_to_copy":
            return False
        srcs = [b for b, m in self.acc[i].items() if m & READ and self.is_param(b)]
        return any(self.trains(b) and self.allocs[a]["bytes"] <= self.allocs[b]["bytes"] for b in srcs)


# ---------------------------------------------------------------- the plan (the edit model)

class Op:
    """One op of the compute stream: a recorded kernel, an inserted kernel, a synchronous copy, host
    work, or a removed kernel's place (no work)."""

    def __init__(self, kind, name="", dur=0, gap=0, kernel=None, copy=None):
        self.kind = kind          # kernel, inserted, copy, host, removed
        self.name, self.dur, self.gap, self.kernel = name, dur, gap, kernel
        self.copy = copy          # (direction, bytes) of a synchronous copy
        self.acc = {}             # allocation key -> access mode
        self.waits = []           # streamed copies it starts after
        self.issue_start, self.issue_end = [], []   # streamed copies issued at its start / end
        self.after = 0            # ops inserted after it so far
        self.t0 = self.t1 = None
        self.anchor = kernel      # the recorded kernel it belongs to (docs/advise.md's windows)
        self.rank = None          # its place in the plan's order, as a number (Plan.place)


@dataclass
class Copy:
    direction: int
    nbytes: int
    issue_op: object = None
    at_end: bool = False
    t0: int = None
    t1: int = None


@dataclass
class Alloc:
    device: int
    nbytes: int
    stream: int
    category: int
    made: tuple            # (op, "before"|"after", offset)
    freed: tuple = None    # None: alive at the end
    order: tuple = (1, 0)  # ties of one instant: added copies (0) before recorded allocations (1)
    label: str = ""


def _plan_base(cap):
    """What every plan of a capture starts from, worked out once per capture: the recorded kernels
    (index, name, duration, gap to the one before), their start and end orders, and each recorded
    allocation's anchors as (kernel index, side, offset) (Plan.anchor)."""
    base = getattr(cap, "_plan_base", None)
    if base is not None:
        return base
    ks = cap.kernels
    kernels, prev_end = [], None
    for k in ks:
        kernels.append((k["i"], k["name"], k["t1"] - k["t0"], 0 if prev_end is None else k["t0"] - prev_end))
        prev_end = k["t1"]
    end_order = sorted(range(len(ks)), key=lambda i: (ks[i]["t1"], i))
    base = dict(kernels=kernels, first_t=ks[0]["t0"] if ks else 0, starts=[k["t0"] for k in ks],
                end_order=end_order, ends=[ks[i]["t1"] for i in end_order])
    probe = Plan.__new__(Plan)
    probe.cap, probe.starts, probe.end_order, probe.ends = cap, base["starts"], end_order, base["ends"]
    probe.op_of = {k["i"]: k["i"] for k in ks}   # anchors by kernel index
    allocs = []
    for a, al in cap.allocs.items():
        made = probe.anchor(al["t_alloc"], alloc=True)
        freed = None if al["t_free"] is None else probe.anchor(al["t_free"], alloc=False)
        allocs.append((a, al["device"], al["bytes"], al["stream"], al["category"], made, freed, al["label"]))
    base["allocs"] = allocs
    cap._plan_base = base
    return base


class Plan:
    def __init__(self, cap):
        self.cap = cap
        base = _plan_base(cap)
        self.ops = []
        self.op_of = {}     # kernel index -> Op
        for rank, (i, name, dur, gap) in enumerate(base["kernels"]):
            op = Op("kernel", name, dur, gap, i)
            op.acc = dict(cap.acc[i])
            op.rank = rank * RANK_GAP
            self.ops.append(op)
            self.op_of[i] = op
        self.first_t, self.starts, self.end_order, self.ends = base["first_t"], base["starts"], base["end_order"], \
            base["ends"]
        self.allocs = {}    # key -> Alloc; recorded allocations keyed by id, added ones by ("add", n)
        self.copies = []
        self.n_added = 0
        self.rec_first = {}   # (checkpointed module, the call's first kernel) -> the recomputation's first op
        op_of = self.op_of
        for a, dev, nbytes, stream, category, (mi, mside, moff), freed, label in base["allocs"]:
            self.allocs[a] = Alloc(dev, nbytes, stream, category, (op_of.get(mi), mside, moff),
                                   None if freed is None else (op_of.get(freed[0]), freed[1], freed[2]), (1, a),
                                   label)
        self._timeline = None   # (link, the run's figures but the reserved peak): see result

    def anchor(self, t, alloc):
        """An allocation is made just before a kernel starts (else after the last one ends); a free is
        just after a kernel ends (else before the first one starts); the recorded gap is an offset."""
        ks = self.cap.kernels
        if not ks:
            return (None, "before", t)
        if alloc:
            j = bisect.bisect_left(self.starts, t)     # the first kernel starting at or after t
            if j < len(ks):
                return (self.op_of[ks[j]["i"]], "before", t - ks[j]["t0"])
            return (self.op_of[ks[-1]["i"]], "after", t - ks[-1]["t1"])
        j = bisect.bisect_right(self.ends, t) - 1        # the last kernel ending at or before t
        if j >= 0:
            k = ks[self.end_order[j]]
            return (self.op_of[k["i"]], "after", t - k["t1"])
        return (self.op_of[ks[0]["i"]], "before", t - ks[0]["t0"])

    def index(self, op):
        """op's place in self.ops. Ranks grow along the list (place), so a binary search finds it
        where list.index scanned the plan from its start at every insertion."""
        ops, lo, hi = self.ops, 0, len(self.ops)
        if op.rank is None:
            return ops.index(op)   # never placed: ValueError, as the scan said
        while lo < hi:
            mid = (lo + hi) // 2
            if ops[mid].rank < op.rank:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(ops) and ops[lo] is op else ops.index(op)

    def place(self, n, op):
        """Puts op at self.ops[n], its rank (the order of ops, as numbers: see pos) between its
        neighbours'; every op is ranked again when they leave no room."""
        self.ops.insert(n, op)
        lo = self.ops[n - 1].rank if n > 0 else None
        hi = self.ops[n + 1].rank if n + 1 < len(self.ops) else None
        if lo is None or hi is None:
            op.rank = (hi - RANK_GAP) if lo is None else lo + RANK_GAP
        elif hi - lo >= 2:
            op.rank = (lo + hi) // 2
        else:
            for m, o in enumerate(self.ops):
                o.rank = m * RANK_GAP

    def insert_before(self, at, op):
        op.anchor = at.anchor
        self.place(self.index(at), op)
        return op

    def insert_after(self, at, op):
        op.anchor = at.anchor
        self.place(self.index(at) + 1 + at.after, op)
        at.after += 1
        return op

    def add_alloc(self, device, nbytes, stream, category, made, freed=None, label=""):
        self.n_added += 1
        key = ("add", self.n_added)
        self.allocs[key] = Alloc(device, nbytes, stream, category, made, freed, (0, self.n_added), label)
        return key

    def redirect(self, kset, a, key, phase=BWD, since=None):
        """The pass's kernels (kset, a set of kernel indices) of that phase access `key` instead of
        the recorded allocation `a` (those at or after the point `since` only, when given); returns
        them in kernel order. Only a kernel that accessed `a` in the capture can access it here (a
        recorded kernel gains an access only by a redirect)."""
        moved = []
        for i, _m in self.cap.uses[a]:
            op = self.op_of[i]
            if since is not None and self.pos((op, "before", 0)) < self.pos(since):
                continue
            if i in kset and self.cap.kernels[i]["phase"] == phase and a in op.acc:
                op.acc[key] = op.acc.pop(a)
                moved.append(i)
        return moved

    def remove(self, op):
        op.kind = "removed"
        op.dur = 0
        op.gap = 0

    def pos(self, anchor):
        """A sortable position of an anchor in the op order (before an op < after it): an op's rank
        grows with its index in self.ops."""
        op, side, off = anchor
        return (op.rank, 1 if side == "after" else 0, off)

    def later(self, a, b):
        if a is None or b is None:
            return None
        return a if self.pos(a) >= self.pos(b) else b

    # ------------------------------------------------------------ timing

    def run(self, link):
        t = self.first_t
        busy = {H2D: self.first_t - 1, D2H: self.first_t - 1}   # each queue's end

        def start_copy(c, at):
            q = c.direction if link.copy_engines >= 2 else H2D
            other = D2H if c.direction == H2D else H2D
            s = max(at, busy[q])
            bw = link.h2d_bps if c.direction == H2D else link.d2h_bps
            lat = link.h2d_latency_s if c.direction == H2D else link.d2h_latency_s
            if link.copy_engines >= 2 and busy[other] > s:
                bw *= link.duplex_factor
            c.t0 = s
            c.t1 = s + max(1, math.ceil((lat + c.nbytes / bw) * 1e9))
            busy[q] = c.t1

        for op in self.ops:
            s = t + op.gap
            for c in op.issue_start:     # issued when the stream reaches the op
                start_copy(c, s)
            for c in op.waits:
                if c.t1 is None:
                    raise RuntimeError("an op waits for a copy issued after it")
                s = max(s, c.t1)
            if op.kind == "copy":
                c = Copy(op.copy[0], op.copy[1])
                start_copy(c, s)
                op.sync_copy = c
                op.t0, op.t1 = c.t0, c.t1
            else:
                op.t0, op.t1 = s, s + op.dur
            t = op.t1
            for c in op.issue_end:
                start_copy(c, op.t1)
            for c in getattr(op, "waits_end", []):
                if c.t1 is None:
                    raise RuntimeError("an op waits for a copy issued after it")
                t = max(t, c.t1)

    def time_of(self, anchor):
        op, side, off = anchor
        if op is None:
            return off
        return (op.t0 if side == "before" else op.t1) + off

    # ------------------------------------------------------------ results

    def result(self, link, conf_text, accesses=True):
        """The transformed step's figures under the allocator setting conf_text (accesses=False: without
        the list of accesses, which only a comparison with --trace-out reads). The plan is finished
        when asked (no edit after): its timeline on a link is worked out once, and each allocator
        setting adds only its reserved peak."""
        key = repr(link)
        if self._timeline is None or self._timeline[0] != key or (accesses and self._timeline[1]["accesses"] is None):
            self._timeline = (key, self._timed(link, accesses))
        t = self._timeline[1]
        conf = ",".join(x for x in (self.cap.meta.get("allocator.conf", ""), conf_text) if x)
        return dict(peak_bytes=t["peak_bytes"], reserved_bytes=reserved_peak(t["device_rows"], conf),
                    host_peak_bytes=t["host_peak_bytes"], step_time_ns=t["step_time_ns"],
                    device_rows=t["device_rows"], conf=conf, steps=t["steps"], second_step_at=t["second_step_at"],
                    allocations=t["allocations"], kernels=t["kernels"], copies=t["copies"], accesses=t["accesses"])

    def alloc_times(self):
        """key -> (device, bytes, t_alloc, t_free) as the last run placed them (a free before its
        allocation's time at that time)."""
        times = {}
        for key, al in self.allocs.items():
            ta = self.time_of(al.made)
            tf = None if al.freed is None else max(ta, self.time_of(al.freed))
            times[key] = (al.device, al.nbytes, ta, tf)
        return times

    def invalid_accesses(self):
        """The accesses of the last run outside their allocation's life: (name, kernel, t0, t1, key,
        the allocation's times); none in a right transformation."""
        times = self.alloc_times()
        return [(op.name, op.kernel, op.t0, op.t1, k, times[k]) for op in self.ops
                if op.kind in ("kernel", "inserted") for k in op.acc if k in times and
                (times[k][2] > op.t0 or (times[k][3] is not None and times[k][3] < op.t1))]

    def _timed(self, link, with_accesses):
        """The run on the link: everything result gives but the allocator setting's figures."""
        self.run(link)
        times = self.alloc_times()
        allocs = []
        for key, al in self.allocs.items():
            _dev, _n, ta, tf = times[key]
            allocs.append((ta, al.order, al.device, al.nbytes, tf, al.stream, al.category, al.label))
        allocs.sort(key=lambda r: (r[0], r[1]))
        kernels = [(op.name, op.t0, op.t1) for op in self.ops if op.kind in ("kernel", "inserted")]
        accesses = [(op.name, op.t0) + times[k] + (m,) for op in self.ops if op.kind in ("kernel", "inserted")
                    for k, m in op.acc.items() if k in times] if with_accesses else None
        copies = []
        for op in self.ops:
            if op.kind == "copy":
                copies.append((op.copy[0], op.copy[1], op.t0, op.t1, 0))
        for c in self.copies:
            copies.append((c.direction, c.nbytes, c.t0, c.t1, 1 if c.direction == H2D else 2))
        copies.sort(key=lambda c: (c[2], c[4], c[0]))
        ends = [op.t1 for op in self.ops if op.kind != "removed"]     # the compute stream's ops
        starts = [op.t0 for op in self.ops if op.kind != "removed"]
        step = (max(ends) - min(starts)) if ends else 0
        dev = [(i, r) for i, r in enumerate(allocs) if r[2] >= 0]
        host = [(i, r) for i, r in enumerate(allocs) if r[2] < 0]
        # the capture's steps (of its kernels, the inserted ones by the kernel they belong to), and
        # where the second begins: its first kernel's start (docs/advise.md "What running at the
        # capacity costs": a steady step's share is what the steps after the first do)
        marked = sorted((op.t0, self.cap.kernels[op.kernel if op.kernel is not None else op.anchor]["step"])
                        for op in self.ops if op.kind in ("kernel", "inserted")
                        and (op.kernel if op.kernel is not None else op.anchor) is not None)
        marked = [(t, st) for t, st in marked if st is not None and st >= 0]
        steps = len({st for _t, st in marked})
        second = next((t for t, st in marked if st != marked[0][1]), None) if marked else None
        return dict(peak_bytes=live_peak(dev), host_peak_bytes=live_peak(host), step_time_ns=step, device_rows=dev,
                    steps=steps, second_step_at=second, allocations=[(r[2], r[3], r[0], r[4]) for r in allocs],
                    kernels=kernels, copies=copies, accesses=accesses)


_EVENTS = {}   # id(rows) -> (rows, events): the latest rows' events (a plan's rows go to several walks)


def memory_events(rows):
    """docs/trace-format.md, "Events at one instant": frees of earlier allocations, then the
    allocations of that time by row, one freed at the same instant right after it is made. A rows
    list is never changed once made (Plan.result's), so its events are kept for the next walk."""
    got = _EVENTS.get(id(rows))
    if got is not None and got[0] is rows:
        return got[1]
    ev = []
    for i, r in rows:
        ta, tf = r[0], r[4]
        if tf is not None and tf > ta:
            ev.append((tf, 0, i, -1))
        ev.append((ta, 1, i, +1))
        if tf is not None and tf == ta:
            ev.append((ta, 1, i, -2))
    ev.sort(key=lambda e: (e[0], e[1], e[2], -e[3]))
    if len(_EVENTS) >= 64:
        _EVENTS.clear()
    _EVENTS[id(rows)] = (rows, ev)
    return ev


def live_peak(rows):
    size = {i: r[3] for i, r in rows}
    live = peak = 0
    for _t, _k, i, d in memory_events(rows):
        live += size[i] if d > 0 else -size[i]
        peak = max(peak, live)
    return peak


def reserved_peak(rows, conf):
    by = dict(rows)
    ca = reference_caching.CachingAllocator(reference_caching.NO_LIMIT, conf)
    peak = 0
    for _t, _k, i, d in memory_events(rows):
        if d > 0:
            ca.allocate(i, by[i][3], by[i][5])
            peak = max(peak, ca.reserved)
        else:
            ca.free(i)
    return peak


class _GivingBack(reference_caching.CachingAllocator):
    """The caching model, noting whether cached memory went back to the GPU during a request, and
    counting the full releases, the cudaMalloc calls (or mapped ranges) and cudaFree calls (or
    unmapped ranges) with their bytes."""
    gave_back = False

    def __init__(self, capacity, conf_text=""):
        super().__init__(capacity, conf_text)
        self.releases = self.mallocs = self.frees = self.malloc_bytes = self.free_bytes = 0

    def _release_oversize(self, stream, small, size):
        before = self.reserved
        out = super()._release_oversize(stream, small, size)
        self.gave_back |= self.reserved < before
        return out

    def _release_cached(self):
        self.releases += 1
        before = self.reserved
        super()._release_cached()
        self.gave_back |= self.reserved < before

    def _draw(self, n):
        ok = super()._draw(n)
        if ok:
            self.mallocs += 1
            self.malloc_bytes += n
        return ok

    def _release_segment(self, seg):
        self.frees += 1
        self.free_bytes += seg.size
        super()._release_segment(seg)

    def _unmap_free_pages(self, seg):
        page = self._page(seg.small)
        for b in seg.blocks:   # each free mapped block's whole pages: one unmap
            lo, hi = page * math.ceil(b.offset / page), page * ((b.offset + b.size) // page)
            if b.free and b.mapped and hi > lo:
                self.frees += 1
                self.free_bytes += hi - lo
        super()._unmap_free_pages(seg)


def _counts(ca):
    return dict(releases=ca.releases, mallocs=ca.mallocs, frees=ca.frees, malloc_bytes=ca.malloc_bytes,
                free_bytes=ca.free_bytes)


def _walk(rows, conf, capacity, second_at=None):
    """The walk at the capacity; ca.at_second: its counts when the first allocation at or after
    `second_at` (the second step's start) is made, None before."""
    by = dict(rows)
    ca = _GivingBack(capacity, conf)
    ca.at_second = None
    peak = retries = 0
    for t, _k, i, d in memory_events(rows):
        if d > 0:
            if second_at is not None and ca.at_second is None and t >= second_at:
                ca.at_second = _counts(ca)
            ca.gave_back = False
            if not ca.allocate(i, by[i][3], by[i][5]):
                return False, peak, retries, ca
            retries += ca.gave_back
            peak = max(peak, ca.reserved)
        else:
            ca.free(i)
    return True, peak, retries, ca


def runs_at(rows, conf, capacity):
    """docs/advise.md "What fits": the caching model with the capacity as the GPU's limit, the release
    of cached memory and the retry on a failed cudaMalloc included (reference_caching's allocate); a
    request it cannot place is PyTorch's OutOfMemoryError. Returns (runs, the reserved peak there up to
    a failure, requests served only after memory went back)."""
    runs, peak, retries, _ca = _walk(rows, conf, capacity)
    return runs, peak, retries


# docs/advise.md "What running at the capacity costs": the constants
SYNC_NS = 50_000        # a full release: a device synchronisation
CALL_NS = 50_000        # a cudaMalloc or cudaFree (a map or unmap of pages)
NS_PER_GIB = 500_000    # the pages made or given back


def _cost(c):
    pages = (c["bytes_freed"] + c["bytes_remade"]) / 2 ** 30
    return (c["releases"] * SYNC_NS + (c["segments_freed"] + c["segments_remade"]) * CALL_NS
            + math.floor(pages * NS_PER_GIB + 0.5))


_FREE_WALKS = {}   # (id(rows), conf, second_at) -> (rows, the counts of the walk without a limit)


class _Counted:
    """What retry_cost reads of a walk: its counts at the end and at the second step's start."""

    def __init__(self, ca):
        self.releases, self.mallocs, self.frees = ca.releases, ca.mallocs, ca.frees
        self.malloc_bytes, self.free_bytes, self.at_second = ca.malloc_bytes, ca.free_bytes, ca.at_second


def _free_walk(rows, conf, second_at):
    """The walk without a limit's counts, once per rows list (never changed once made), setting and
    second step: the searches at other capacities ask for it again."""
    key = (id(rows), conf, second_at)
    got = _FREE_WALKS.get(key)
    if got is None or got[0] is not rows:
        if len(_FREE_WALKS) >= 256:
            _FREE_WALKS.clear()
        got = _FREE_WALKS[key] = (rows, _Counted(_walk(rows, conf, reference_caching.NO_LIMIT, second_at)[3]))
    return got[1]


def retry_cost(rows, conf, capacity, steps=0, second_at=None):
    """docs/advise.md "What running at the capacity costs": (runs, reserved peak there, retries, the
    counts against the walk without a limit, the cost in ns) of the caching model at the capacity; and
    a steady step's: with `steps` >= 2 (the second beginning at `second_at`) the counts from the second
    step on against the same without a limit, over steps - 1; with one step the captured step's; either
    way every segment given back made again. steady_cost: a steady step's cost (rounded) times the steps."""
    runs, peak, retries, ca = _walk(rows, conf, capacity, second_at if steps >= 2 else None)
    out = dict(runs=runs, reserved_at=peak, retries=retries, releases=0, segments_freed=0, bytes_freed=0,
               segments_remade=0, bytes_remade=0, cost=0, steady=None, steady_cost=0)
    if runs and ca.frees > 0:
        free = _free_walk(rows, conf, second_at if steps >= 2 else None)
        out.update(releases=ca.releases, segments_freed=max(0, ca.frees - free.frees),
                   bytes_freed=max(0, ca.free_bytes - free.free_bytes),
                   segments_remade=max(0, ca.mallocs - free.mallocs),
                   bytes_remade=max(0, ca.malloc_bytes - free.malloc_bytes))
        out["cost"] = _cost(out)
        if steps >= 2:
            zero = dict(releases=0, mallocs=0, frees=0, malloc_bytes=0, free_bytes=0)
            a0, f0 = ca.at_second or _counts(ca), free.at_second or _counts(free)
            a1, f1 = _counts(ca), _counts(free)
            later = {k: a1[k] - a0[k] for k in zero}
            later_free = {k: f1[k] - f0[k] for k in zero}
            steady = dict(steps=steps - 1, releases=later["releases"],
                          segments_freed=max(0, later["frees"] - later_free["frees"]),
                          bytes_freed=max(0, later["free_bytes"] - later_free["free_bytes"]),
                          segments_remade=max(0, later["mallocs"] - later_free["mallocs"]),
                          bytes_remade=max(0, later["malloc_bytes"] - later_free["malloc_bytes"]))
        else:
            steady = dict(steps=1, releases=out["releases"], segments_freed=out["segments_freed"],
                          bytes_freed=out["bytes_freed"], segments_remade=out["segments_remade"],
                          bytes_remade=out["bytes_remade"])
        # a steady step ends where it began: what it gives back it makes again
        steady["segments_remade"] = max(steady["segments_remade"], steady["segments_freed"])
        steady["bytes_remade"] = max(steady["bytes_remade"], steady["bytes_freed"])
        per_step = (_cost(steady) + steady["steps"] // 2) // steady["steps"]
        out.update(steady=steady, steady_cost=per_step * max(1, steps))
    return out


def gc_threshold(conf):
    """The garbage_collection_threshold a conf text sets (0: none; a later key wins)."""
    return reference_caching.Conf(conf).gc_threshold if conf else 0.0


# ---------------------------------------------------------------- checkpoint

def is_must_save(name):
    return name in MUST_SAVE or "scaled_dot_product" in name


def calls_of(cap, ks, mod):
    """Maximal runs of a pass's forward kernels inside the module, cut where a call of it began."""
    runs, cur = [], []
    for i in ks:
        k = cap.kernels[i]
        if k["phase"] == FWD and cap.inside(cap.caller[i], mod):
            if cur and (mod, i) in cap.call_starts:
                runs.append(cur)
                cur = []
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return runs


def call_inputs(cap, mod, call):
    """The storages torch.utils.checkpoint packs for a call of the module (docs/simulator.md,
    offload): capture.call_args's for the call, in order, made before it and neither a parameter,
    a buffer nor an autocast cast; without that key, those read by the call's first kernel that
    reads one."""
    if not hasattr(cap, "call_args"):
        cap.call_args = {}
        for name, k, ids in json.loads(cap.meta.get("capture.call_args", "null") or "null") or []:
            if k in cap.kidx:
                cap.call_args[(name, cap.kidx[k])] = [a for a in ids if a in cap.allocs]
        cap.has_call_args = "capture.call_args" in cap.meta
    t0 = cap.kernels[call[0]]["t0"]

    def arg(a):   # made before the call (one no kernel made: allocated before its first kernel starts)
        al, mb = cap.allocs[a], cap.made_by.get(a)
        return (al["t_alloc"] <= t0 if mb is None else mb < call[0]) and not cap.is_param(a) and not cap.is_buffer(a) and not cap.is_cached_cast(a)
    if cap.has_call_args:
        return [a for a in cap.call_args.get((cap.modules[mod]["name"], call[0]), []) if arg(a)]
    for i in call:
        got = [a for a, m in sorted(cap.acc[i].items()) if m & READ and arg(a)]
        if got:
            return got
    return []


def last_forward_use(cap, plan, a, kset):
    """After the last forward kernel of the pass (kset, a set of kernel indices) that accesses the
    storage."""
    last = None
    for i, _m in cap.uses[a]:
        if i in kset and cap.kernels[i]["phase"] == FWD:
            last = i
    return None if last is None else (plan.op_of[last], "after", 0)


def end_of_forward(cap, plan, ks):
    """The end of the pass's forward autocast region (docs/simulator.md): after its last forward
    kernel, or the one before when that is the gradient seed, an aten::ones_like right before the
    pass's first backward kernel (loss.backward() makes it outside the region)."""
    fwd = [i for i in ks if cap.kernels[i]["phase"] == FWD]
    last = fwd[-1]
    after = [i for i in ks if i > last]
    if (len(fwd) > 1 and fwd[-2] == last - 1 and cap.kernels[last]["name"] == "aten::ones_like"
            and after and after[0] == last + 1 and cap.kernels[last + 1]["phase"] == BWD):
        last = fwd[-2]
    return (plan.op_of[last], "after", 0)


def past_sums(cap, i):
    """The last of the backward aten::sum kernels right after kernel i (i itself when none)."""
    while i + 1 < len(cap.kernels) and cap.kernels[i + 1]["name"] == "aten::sum" \
            and cap.kernels[i + 1]["phase"] == BWD:
        i += 1
    return i


def before_sums(cap, plan, anchor):
    """A free just after a kernel, moved before the aten::sum and aten::_to_copy kernels that end
    right there (the engine's checks of a node's gradients: shape, then dtype)."""
    engine = ("aten::sum", "aten::_to_copy")
    op, side, off = anchor
    if op.kernel is None:
        return anchor
    i = op.kernel if side == "after" else op.kernel - 1
    if i < 0 or cap.kernels[i]["name"] not in engine:
        return anchor
    while i > 0 and cap.kernels[i]["name"] in engine:
        i -= 1
    return (plan.op_of[i], "after", 0)


def autograd_workspace(plan, a, op):
    """docs/simulator.md: a main thread's cuBLAS or cuBLASLt workspace that a recomputed kernel used
    is the autograd thread's instead: the one already there (made at `op` if it came later), else
    one made at `op` and kept to the end."""
    al = plan.allocs[a]
    if al.freed is not None or not al.label.startswith("cuBLAS") or not al.label.endswith(" (main thread)"):
        return a
    own = al.label[:-len(" (main thread)")] + " (autograd thread)"
    here = (op, "before", 0)
    for key, w in plan.allocs.items():
        if w.label == own and w.device == al.device:
            if plan.pos(w.made) > plan.pos(here):
                w.made = here
            return key
    return plan.add_alloc(al.device, al.nbytes, al.stream, al.category, here, label=own)


BATCHNORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")


def stats_calls(cap, call):
    """docs/advise.md "BatchNorm inside checkpointed modules": the calls of a BatchNorm module in a
    checkpointed call (a forward kernel of the BatchNorm's own module whose kernel before is not
    one): (the call's first kernel, its batch-norm op (the first whose name holds `batch_norm`),
    the copies' bytes: each buffer that op accesses in id order, then the buffer another op of the
    call writes, num_batches_tracked). A call whose batch-norm op reads no buffer has none."""
    out, callset = [], set(call)
    for i in call:
        m = cap.kernels[i]["module"]
        if cap.modules.get(m, {}).get("type") not in BATCHNORMS or cap.kernels[i]["phase"] != FWD:
            continue
        if i - 1 in callset and cap.kernels[i - 1]["module"] == m:
            continue
        bn, nbytes, batches = None, [], 0
        q = i
        while q in callset and cap.kernels[q]["module"] == m:
            norm = "batch_norm" in cap.kernels[q]["name"]
            for a, mode in sorted(cap.acc[q].items()):
                if not (cap.is_buffer(a) and cap.allocs[a]["category"] == OTHER_CAT):
                    continue
                if norm and bn is None:
                    nbytes.append(cap.allocs[a]["bytes"])
                elif not norm and mode != READ:
                    batches = cap.allocs[a]["bytes"]
            if norm and bn is None:
                bn = q
            q += 1
        if bn is None or not nbytes:
            continue
        out.append((i, bn, nbytes + ([batches] if batches else [])))
    return out


def insert_clones(plan, cap, at, bn, nbytes):
    """The statistics copies: one aten::clone each (the launch overhead), before `at`, each making
    its copy, all dropped at the last one's end; returns the copies' keys."""
    launch = int(float(cap.meta.get("capture.launch_overhead_ns", 2000)))
    mod = cap.modules[cap.kernels[bn]["module"]]["name"]
    keys, op = [], None
    for nb in nbytes:
        op = plan.insert_before(at, Op("inserted", "aten::clone", launch))
        dev = next(cap.allocs[a]["device"] for a in cap.acc[bn])
        key = plan.add_alloc(dev, nb, 0, WORKSPACE, (op, "before", 0), label=f"{mod}:aten::clone")
        op.acc[key] = WRITE
        keys.append(key)
    for key in keys:
        plan.allocs[key].freed = (op, "after", 0)
    return keys


def checkpoint_call(plan, cap, ks, mod, call, policy, recasts):
    callset = set(call)
    # BatchNorm's statistics copies in the forward: made before each call, dropped at once
    stats = stats_calls(cap, call)
    for first, bn, nbytes in stats:
        insert_clones(plan, cap, plan.op_of[first], bn, nbytes)
    saved = {a for i in call for a in cap.saved_at.get(i, [])}
    if not saved:
        return
    stop = max(i for i in call if i in cap.saved_at)
    kset = set(ks)
    bwd_users = lambda a: [i for i, _m in cap.uses[a] if i in kset and cap.kernels[i]["phase"] == BWD]  # noqa: E731
    only = [a for a in saved if all(i in callset for i in cap.saves_of.get(a, []))]
    # a module called several times a pass: only what this call alone saved says when its
    # backward begins and ends (every call saves the shared weights)
    repeated = any(m == mod for m, _i in cap.call_starts)
    users = sorted({i for a in (only if repeated else saved) for i in bwd_users(a)})
    trig = next((i for i in users if cap.inside(cap.kernels[i]["module"], mod)), None)
    if trig is None:
        return
    # what only the call saved is read from its recomputed copy: recomputed before any backward use of it
    trig = min([trig] + [i for a in only for i in bwd_users(a)])
    if repeated:   # the node unpacking the call's own saves may read the shared weights first
        trig = min([trig] + [i for a in only for i in cap.unpacks.get(a, [])
                             if i in kset and cap.kernels[i]["phase"] == BWD])
    # the frame: until the last backward read of a saved storage; of one that kernels outside the
    # call saved too, only the reads inside the module (the others' nodes read it later)
    frame_users = [i for a in saved for i in bwd_users(a)
                   if a in only or (not repeated and cap.inside(cap.kernels[i]["module"], mod))]
    # the node holding a save only the call made releases it (and its hold on the frame) when it
    # returns, which the capture's free of that save says, when in this pass's backward after its
    # last read (RMSNorm's pow node: its read, then two multiplies of the gradient)
    for a in only:
        reads, rec = bwd_users(a), plan.allocs[a].freed
        if not reads or rec is None or rec[0].kernel is None:
            continue
        i = rec[0].kernel if rec[1] == "after" else rec[0].kernel - 1
        if i >= max(reads) and i in kset and cap.kernels[i]["phase"] == BWD:
            frame_users.append(i)
    # a storage the call made and saved that kernels outside it saved too (an output the call's last
    # op saves, which the next block's first kernel saves as its input): the backward reads not
    # inside an outside saver's module are the call's nodes', which unpack the checkpoint's holder
    # (the trigger no later than the first) and read the recomputed copy; not told apart when an
    # outside saver's module holds the call's module
    shared = {}   # alloc -> (the call's reads, the outside savers' reads)
    for a in ([] if repeated else sorted(saved)):
        if a in only or cap.made_by.get(a) not in callset:
            continue
        outs = [cap.kernels[i]["module"] for i in cap.saves_of.get(a, []) if i not in callset]
        if any(not o or cap.inside(mod, o) for o in outs):
            continue
        own = [i for i in bwd_users(a) if not any(cap.inside(cap.kernels[i]["module"], o) for o in outs)]
        if own:
            shared[a] = (own, [i for i in bwd_users(a) if i not in own])
            trig = min(trig, own[0])
            frame_users.append(own[-1])
    frame_last = max(frame_users + [trig])
    frame_end = (plan.op_of[frame_last], "after", 0)
    # the stop saves a storage it writes (made, or in place: an in-place ReLU saves its result)
    stop_reruns = any(cap.acc[stop].get(a, 0) & WRITE for a in cap.saved_at[stop])
    rerun = [i for i in call if i < stop] + ([stop] if stop_reruns else [])
    trig_op = plan.op_of[trig]
    copy_of = {}
    last_use = {}     # alloc key -> last recompute op that accesses it
    placed = {}       # kernel index -> its op in the recomputation
    keep = set()      # matmul outputs not copied
    last_op = None    # the recomputation's last op
    stats_copies = []  # (the recompute's statistics copies, the batch-norm op)

    # the recomputation's autocast region starts with an empty cache: a cached weight cast an
    # earlier call made is cast again by the first op reading it (the stop too: autocast casts
    # before the op packs its inputs; a kept matmul too), before the input casts right before that
    # op; the casts made one after another in the call that made them go together, at the earliest
    # of their places, in their order
    is_cast = lambda i: cap.kernels[i]["name"] == "aten::_to_copy"  # noqa: E731
    again = {}   # cast -> [place, creator]
    for i in [i for i in call if i <= stop]:
        if cap.kernels[i]["name"] is None:
            continue
        for a in sorted(cap.acc[i]):
            mb = cap.made_by.get(a)
            if mb is None or mb in callset or a in again or not cap.is_cached_cast(a):
                continue
            at = i
            while at - 1 in callset and is_cast(at - 1):
                at -= 1
            again[a] = [at, mb]
    order = sorted(again, key=lambda a: again[a][1])
    groups = []
    for a in order:
        if groups and all(is_cast(q) for q in range(again[groups[-1][-1]][1] + 1, again[a][1])):
            groups[-1].append(a)
        else:
            groups.append([a])
    for g in groups:
        at = min(again[a][0] for a in g)
        for a in g:
            again[a][0] = at

    def cast_again(a, i):
        nonlocal last_op
        mb = again[a][1]
        ck = cap.kernels[mb]
        op = plan.insert_before(trig_op, Op("inserted", ck["name"], ck["t1"] - ck["t0"]))
        op.recompute = True
        al = plan.allocs[a]
        copy_of[a] = plan.add_alloc(al.device, al.nbytes, al.stream, al.category, (op, "before", 0),
                                    label=al.label)
        for b, m in sorted(cap.acc[mb].items()):
            use = copy_of[a] if b == a else autograd_workspace(plan, b, op)
            op.acc[use] = m
        last_use[copy_of[a]] = op
        last_op = op

    for i in [i for i in call if i <= stop]:
        for a in sorted(again, key=lambda a: again[a][1]):
            if again[a][0] == i:
                cast_again(a, i)
        for first, bn, nbytes in stats:   # the recompute's statistics copies, before the call
            if first == i and i <= max(rerun, default=-1):
                stats_copies.append((insert_clones(plan, cap, trig_op, bn, nbytes), bn))
        if i not in rerun:
            continue
        k = cap.kernels[i]
        matmul = policy == "save_matmuls" and is_must_save(k["name"])
        op = plan.insert_before(trig_op, Op("removed" if matmul else "inserted", k["name"],
                                           0 if matmul else k["t1"] - k["t0"]))
        op.recompute = True
        placed[i] = op
        last_op = op
        if matmul:
            for a in cap.made.get(i, []):
                keep.add(a)
                last_use[a] = op
            continue
        for a in sorted(cap.acc[i]):
            if cap.made_by.get(a) == i and cap.allocs[a]["t_free"] is not None:   # kept ones not made again
                al = plan.allocs[a]
                copy_of[a] = plan.add_alloc(al.device, al.nbytes, al.stream, al.category, (op, "before", 0),
                                            label=al.label)
        for a, m in sorted(cap.acc[i].items()):
            use = copy_of[a] if a in copy_of else autograd_workspace(plan, a, op)
            last_use[use] = op
            op.acc[use] = m
    rec_end = (last_op, "after", 0) if last_op is not None else None
    # where the recomputation starts (torch.utils.checkpoint unpacks the call's inputs there: an
    # offload's hook around the checkpoint brings them back then)
    first_rec = list(placed.values()) + [plan.allocs[copy_of[a]].made[0] for a in again if a in copy_of]
    first_rec += [plan.allocs[k].made[0] for ks_, _bn in stats_copies for k in ks_]
    if first_rec:
        plan.rec_first[(mod, call[0])] = min(first_rec, key=lambda op: op.rank)
    for a, key in copy_of.items():
        only_call = a in saved and all(i in callset for i in cap.saves_of.get(a, []))
        recorded = plan.allocs[a].freed
        if a in shared:   # the call's reads take the copy, handed over at their unpack; the original
            own, other = shared[a]   # lives past its forward use, frame hold and the outside reads
            plan.redirect(set(own), a, key)
            end = (plan.op_of[own[-1]], "after", 0)
            if recorded is not None and (not other or own[-1] > other[-1]):
                end = plan.later(end, before_sums(cap, plan, recorded))
            plan.allocs[key].freed = end
            early = last_forward_use(cap, plan, a, kset)
            held = cap.frame_hold.get(a)
            if early is not None and held in kset:
                early = plan.later(early, (plan.op_of[held], "after", 0))
            if early is not None and other:
                early = plan.later(early, (plan.op_of[other[-1]], "after", 0))
            if early is not None and (recorded is None or plan.later(early, recorded) is recorded):
                plan.allocs[a].freed = early
        elif only_call:
            if cap.is_cached_cast(a):
                early = end_of_forward(cap, plan, ks)
            else:
                early = last_forward_use(cap, plan, a, kset)
                held = cap.frame_hold.get(a)   # the model's code held it longer (in this pass's forward)
                if early is not None and held in kset and cap.kernels[held]["phase"] == FWD:
                    early = plan.later(early, (plan.op_of[held], "after", 0))
            reads = plan.redirect(kset, a, key)   # the backward reads the copy
            freed = None if recorded is None else before_sums(cap, plan, recorded)
            if reads:
                freed = plan.later(freed, (plan.op_of[max(reads)], "after", 0))
            plan.allocs[key].freed = freed
            if early is not None:
                plan.allocs[a].freed = early
        elif cap.is_cached_cast(a):
            # other calls saved it too: apply_checkpoint hands this call's backward reads to the copy
            plan.allocs[key].freed = rec_end
            recasts.append((a, key, trig, kset, mod))
        else:   # after its last recomputed use, or where the captured forward freed it in the call
            # (at the recomputation's end when that was after the stop, in the call or after it)
            end = (last_use[key], "after", 0)
            j = recorded[0].kernel if recorded is not None else None
            if j is None or j > max(callset):   # it outlived the call, or was never freed: the
                end = plan.later(end, rec_end)   # stop unwinds its frame, or drops the returned value
            elif j in callset:
                if j > rerun[-1]:
                    end = rec_end
                elif j in placed and placed[j].kind != "removed":
                    end = plan.later(end, (placed[j], recorded[1], 0))
                elif j in placed:   # a kept matmul's place
                    end = plan.later(end, (placed[j], "after", 0))
            plan.allocs[key].freed = end
    # matmul outputs (save_matmuls): at least until their place and their last recomputed reader
    # torch's cache lets go of it at its replay: then it is the recomputation's tensor, dying as a
    # recomputed copy does (only the call saved it: when the node that unpacked it returns; nothing
    # saved it: where the captured forward freed it, moved to that kernel's place in the recomputation)
    for a in keep:
        need = (last_use[a], "after", 0)
        recorded = plan.allocs[a].freed
        if recorded is None:
            continue
        j = recorded[0].kernel
        if a in saved and all(i in callset for i in cap.saves_of.get(a, [])):
            freed = before_sums(cap, plan, recorded)
            reads = [i for i, _m in cap.uses[a] if i in kset and cap.kernels[i]["phase"] == BWD]
            if reads:
                freed = plan.later(freed, (plan.op_of[max(reads)], "after", 0))
            plan.allocs[a].freed = plan.later(need, freed)
        elif not cap.saves_of.get(a) and j in callset:
            end = need
            if j > rerun[-1]:
                end = plan.later(end, rec_end)
            elif j in placed:
                end = plan.later(end, (placed[j], recorded[1] if placed[j].kind != "removed" else "after", 0))
            plan.allocs[a].freed = end
        else:
            plan.allocs[a].freed = plan.later(recorded, need)
    for i in call:
        if i in placed or cap.kernels[i]["name"] is None:
            continue
        if policy == "save_matmuls" and is_must_save(cap.kernels[i]["name"]):
            for a in cap.made.get(i, []):
                plan.allocs[a].freed = plan.later(plan.allocs[a].freed, frame_end)
    # inputs made before the call, except parameters: at least until the frame dies and past the
    # aten::sum kernels right after it
    input_end = (plan.op_of[past_sums(cap, frame_last)], "after", 0)
    t_first = cap.kernels[call[0]]["t0"]
    for i in call:
        for a, m in cap.acc[i].items():
            al = cap.allocs[a]
            if not cap.is_param(a) and not cap.is_cached_cast(a) and al["t_alloc"] < t_first:
                plan.allocs[a].freed = plan.later(plan.allocs[a].freed, input_end)
    # the recompute's statistics copies: running_mean's and running_var's as long as what the
    # recomputed batch-norm op made (its saved outputs), num_batches_tracked's to the op's end
    for keys, bn in stats_copies:
        op = placed.get(bn)
        if op is None:
            continue
        held = (op, "after", 0)
        for key, al in plan.allocs.items():
            if isinstance(key, tuple) and al.made[0] is op and al.freed is not None:
                held = plan.later(held, al.freed)
        for n, key in enumerate(keys):
            plan.allocs[key].freed = (op, "after", 0) if len(keys) == 3 and n == 2 else held


def apply_checkpoint(plan, cap, groups):
    in_calls = set()
    recasts = []   # (cast, its copy, trigger, the pass's kernels, module) of casts other calls saved too
    # every call in forward order, whatever order the setting names the modules in (a call's
    # saved storages die at their last forward use; a later call keeps its inputs: that one last)
    calls = [(call, mod, policy, ks) for mods, policy in groups for mod in mods
             for ks in cap.passes for call in calls_of(cap, ks, mod)]
    for call, mod, policy, ks in sorted(calls, key=lambda c: c[0][0]):
        in_calls.update(call)
        checkpoint_call(plan, cap, ks, mod, call, "full" if policy == "mhc" else policy, recasts)
    # a backward kernel of the module reading such a cast reads the copy of the call whose
    # recomputation came last before it (the calls' backwards run one after another)
    for a in {r[0] for r in recasts}:
        for i, _m in cap.uses[a]:
            if cap.kernels[i]["phase"] != BWD or a not in plan.op_of[i].acc:
                continue
            owners = [r for r in recasts if r[0] == a and r[2] <= i and i in r[3]
                      and cap.inside(cap.kernels[i]["module"], r[4])]
            if not owners:
                continue
            key = max(owners, key=lambda r: r[2])[1]
            plan.op_of[i].acc[key] = plan.op_of[i].acc.pop(a)
            plan.allocs[key].freed = plan.later(plan.allocs[key].freed, (plan.op_of[i], "after", 0))
    # autocast's cached weight casts that only checkpointed calls saved: nothing keeps them past the
    # forward's autocast region (each recomputation casts anew), but reads no recomputation took over
    for a, mb in cap.made_by.items():
        al = plan.allocs[a]
        savers = cap.saves_of.get(a, [])
        if not savers or not all(i in in_calls for i in savers) or al.freed is None or al.device < 0 \
                or not cap.is_cached_cast(a):
            continue
        ks = next(ks for ks in cap.passes if mb in ks)
        end = end_of_forward(cap, plan, ks)
        for i, _m in cap.uses[a]:
            if a in plan.op_of[i].acc:
                end = plan.later(end, (plan.op_of[i], "after", 0))
        if plan.pos(end) < plan.pos(al.freed):
            al.freed = end


def kept_output_mutated(cap, i):
    """docs/advise.md: an output of kept op i written again later in its pass's forward (selective
    checkpointing's cache stops in the backward: 'Tensor cached ... has been mutated')."""
    return any(t > i and mode & WRITE and cap.kernels[t]["phase"] == FWD and
               cap.pass_of.get(t) == cap.pass_of.get(i)
               for a in cap.made.get(i, []) if cap.allocs[a]["category"] != WORKSPACE   # not its output:
               for t, mode in cap.uses[a])                                            # the cuBLAS workspace


def called_several_times(cap, block):
    """docs/advise.md: the block is, holds or is inside a module called several times a pass (one
    capture.module_calls names: called more often than the model)."""
    return any(cap.inside(m, block) or cap.inside(block, m) for m, _i in cap.call_starts)


def under_autocast(cap):
    """The step's forward ran under autocast (meta capture.autocast, docs/torch.md: `none` when not)."""
    return cap.meta.get("capture.autocast", "none") not in ("", "none")


def selective_refusal(cap, block):
    """docs/advise.md: why PyTorch stops on selective checkpointing of the block (None when it
    does not): under autocast, a block that is, holds or is inside a module called several times a
    pass; a forward that writes in place into the output of an op the save list keeps."""
    if under_autocast(cap) and called_several_times(cap, block):
        return "called several times a pass under autocast"
    kept = [k["i"] for k in cap.kernels
            if k["phase"] == FWD and cap.inside(k["module"], block) and is_must_save(k["name"])]
    if any(kept_output_mutated(cap, i) for i in kept):
        return "its forward writes in place into an output the save list keeps"
    return None


def reread_refusal(cap, block):
    """docs/advise.md "Limits": a storage a forward kernel inside the block made is accessed by a
    backward or recompute kernel of another pass (a graph a later backward goes through again):
    neither checkpointed nor offloaded; nor a module that is, holds or is inside one whose forward ran
    inside torch.func's grad (meta capture.torch_func_modules), which refuses saved-tensor hooks.
    None when there is none."""
    for name in json.loads(cap.meta.get("capture.torch_func_modules", "[]")):
        inside = cap.module_id(name)
        if cap.inside(block, inside) or cap.inside(inside, block):
            return f"its forward runs inside torch.func's grad ({name})"
    for k in cap.kernels:
        if k["phase"] != FWD or not cap.inside(k["module"], block):
            continue
        for a in cap.made.get(k["i"], []):
            for t, _m in cap.uses[a]:
                if cap.kernels[t]["phase"] in (BWD, RECOMPUTE) and cap.pass_of.get(t) != cap.pass_of.get(k["i"]):
                    return f"what its forward saves is read again by a later backward ({cap.kernels[t]['name']})"
    return None


def check_reread(cap, names, field):
    for n in names:
        why = reread_refusal(cap, cap.module_id(n))
        if why:
            raise ValueError(f"field '{field}': module {n}: {why}")


def checkpoint_groups(cap, setting):
    cp = setting.get("checkpoint")
    if cp is None:
        return []
    groups = []
    for g in (cp if isinstance(cp, list) else [cp]):
        policy = g.get("policy", "full")
        check_reread(cap, g["modules"], "checkpoint.modules")
        mods = [cap.module_id(n) for n in g["modules"]]
        if policy == "mhc":
            for x in mods:
                if not any(cap.modules[m]["type"] == "HcMaps" and cap.inside(m, x) for m in cap.modules):
                    raise ValueError(f"policy mhc: module {cap.modules[x]['name']} holds no HcMaps")
            mods = [m for m in cap.modules if cap.modules[m]["type"] == "HcMaps"
                    and any(cap.inside(m, x) for x in mods)]
        if policy == "save_matmuls":
            for x in mods:
                why = selective_refusal(cap, x)
                if why:
                    raise ValueError(f"policy save_matmuls: module {cap.modules[x]['name']}: {why}")
        groups.append((mods, policy))
    every = [m for mods, _p in groups for m in mods]
    for i, a in enumerate(every):
        for b in every[i + 1:]:
            if cap.inside(a, b) or cap.inside(b, a):
                raise ValueError("checkpoint: modules overlap (checkpoint each module once)")
    return groups


# ---------------------------------------------------------------- offload

def apply_offload(plan, cap, off, checkpointed, selective=()):
    mode = off.get("mode", "sync")
    mods = off.get("modules")
    mods = None if mods is None else [cap.module_id(n) for n in mods]
    min_bytes = off.get("min_bytes", 1024)
    stash = off.get("max_fwd_stash", 5)
    prefetch = off.get("prefetch", 2) if mode == "streamed" else 0
    streamed = mode == "streamed"
    for ks in cap.passes:
        kset = set(ks)
        # each storage's place among this pass's pairs of the list (a parameter has one per pass)
        rank = {}
        for n, (a, i) in enumerate(cap.unpack_list):
            if i in kset:
                rank.setdefault(a, n)
        place = {}   # (allocation, saving kernel) -> its first place in capture.pack_order
        for n, (a, i) in enumerate(cap.pack_order):
            if i in kset:
                place.setdefault((a, i), n)
        packs = []
        for a, i, n in cap.saves:
            k = cap.kernels[i]
            if i not in kset or k["phase"] != FWD:
                continue
            if mods is None and not cap.caller[i]:   # the model's forward only, not the loss after it
                continue
            if mods is not None and not any(cap.inside(cap.caller[i], m) for m in mods):
                continue
            if any(cap.inside(cap.caller[i], m) for m in checkpointed):
                continue
            out = cap.made_by.get(a) == i
            packs += [(i, place.get((a, i), float("inf")), 1 if out else 0, rank.get(a, float("inf")), a)] * n
        # with every save's place recorded, the hook's order across ops too (a non-differentiable
        # output, flash attention's logsumexp, is credited to the next kernel yet packed with its op)
        if all(p[1] != float("inf") for p in packs):
            packs.sort(key=lambda p: (p[1],) + p)
        else:
            packs.sort()
        packs = [(i, o, a) for i, _place, o, _rank, a in packs]
        # the inputs a full checkpoint inside the hook packs before its call's first kernel, and
        # unpacks where its recomputation starts: pack place -> (the op its D2H goes before, the
        # recomputation's first op)
        ck = {}
        for m in checkpointed:
            if m in selective or (mods is not None and not any(cap.inside(m, s) for s in mods)):
                continue
            for call in calls_of(cap, ks, m):
                rec = plan.rec_first.get((m, call[0]))
                if rec is None:
                    continue
                args = call_inputs(cap, m, call)
                if not args:
                    continue
                # before what the setting adds at the call's start (BatchNorm's statistics copies)
                n = plan.index(plan.op_of[call[0]])
                while n > 0 and plan.ops[n - 1].kind == "inserted" and plan.ops[n - 1].anchor == call[0] \
                        and not getattr(plan.ops[n - 1], "recompute", False):
                    n -= 1
                start = plan.ops[n]
                at = next((q for q, p in enumerate(packs) if p[0] >= call[0]), len(packs))
                moved = {q + (len(args) if q >= at else 0): v for q, v in ck.items()}
                ck = moved
                ck.update({at + x: (start, rec) for x in range(len(args))})
                packs[at:at] = [(call[0], 0, a) for a in args]
        if not packs:
            continue
        ck_inputs = {packs[q][2] for q in ck}
        rec_ops = [op for op in plan.ops if getattr(op, "recompute", False)] if ck else []

        def eligible(a):
            al = cap.allocs[a]
            return al["device"] >= 0 and al["bytes"] >= min_bytes and not cap.is_param(a) and not cap.is_buffer(a)

        def first_bwd_read(a):
            return next((i for i, m in cap.uses[a] if m & READ and i in kset and cap.kernels[i]["phase"] == BWD),
                        None)

        def unpack(a):
            """The first backward kernel of the pass that ran right after the backward unpacked it
            (capture.unpacks), or its first backward read when that is earlier or none is recorded."""
            us = [i for i in cap.unpacks.get(a, []) if i in kset and cap.kernels[i]["phase"] == BWD]
            r = first_bwd_read(a)
            us += [] if r is None else [r]
            return min(us) if us else None

        recomputed = {k for op in plan.ops if getattr(op, "recompute", False) or
                      (op.kernel is not None and cap.kernels[op.kernel]["phase"] == RECOMPUTE) for k in op.acc}
        recomputed -= ck_inputs   # the recomputation reads the device copy the hook brings back

        def unpack_at(a):
            """Its unpack as a point: the captured one, or, for a checkpoint's input the hook packs, the
            recomputation's start, or the unpack of a captured save the hook packs when that is earlier."""
            u = unpack(a)
            if a not in ck_inputs:
                return None if u is None else (plan.op_of[u], "before", 0)
            pts = [(rec, "before", 0) for q, (_s, rec) in ck.items() if packs[q][2] == a]
            if u is not None and any(i in kset and in_hook(i) and cap.kernels[i]["phase"] == FWD
                                     for i in cap.saves_of.get(a, [])):
                pts.append((plan.op_of[u], "before", 0))
            return min(pts, key=plan.pos)

        def hook_unpack_at(a):
            if a in ck_inputs:
                return unpack_at(a)
            hu = hook_unpack(a)
            return None if hu is None else (plan.op_of[hu], "before", 0)
        first = {}
        for j, (i, out, a) in enumerate(packs):
            if eligible(a) and a not in first:
                first[a] = j
        def kept_by_policy(a):
            """An output a selective checkpoint's policy keeps (save_matmuls) is held by the
            checkpoint's cache until the recomputation replays its op: when that is after the
            hook's unpack, the hook finds it on the device and uses it as it is (its longest holder)."""
            mb = cap.made_by.get(a)
            u = unpack(a)
            if mb is None or u is None or not is_must_save(cap.kernels[mb]["name"] or "") \
                    or not any(cap.inside(cap.caller[mb], m) for m in selective):
                return False
            freed = plan.allocs[a].freed
            return freed is None or plan.pos(freed) > plan.pos((plan.op_of[u], "before", 0))

        def in_hook(i):
            return (bool(cap.caller[i]) if mods is None else any(cap.inside(cap.caller[i], m) for m in mods)) and \
                not any(cap.inside(cap.caller[i], m) for m in checkpointed)

        def hook_unpack(a):
            """Where the hook itself first unpacks it: a storage that an op outside the hook saved
            too may be unpacked first by that op's node, which the hook does not see; then the
            first backward kernel inside the hook that reads it."""
            u = unpack(a)
            outside = any(i in kset and cap.kernels[i]["phase"] == FWD and not in_hook(i)
                          for i in cap.saves_of.get(a, []))
            if not outside or u is None:
                return u
            r = next((i for i, _m in cap.uses[a] if i >= u and i in kset and cap.kernels[i]["phase"] == BWD
                      and in_hook(i)), None)
            return u if r is None else r

        def cached(a):
            """Made by a kernel a selective checkpoint's policy keeps (save_matmuls)."""
            mb = cap.made_by.get(a)
            return mb is not None and is_must_save(cap.kernels[mb]["name"] or "") and \
                any(cap.inside(cap.caller[mb], m) for m in selective)

        def in_checkpoint(i):
            return any(cap.inside(cap.caller[i], m) for m in checkpointed)

        def savers_of(a):
            """Its saves the step makes: one inside a checkpointed module is the checkpoint's holder
            unless the policy keeps the storage (the recomputation saves a storage of its own)."""
            return [i for i in cap.saves_of.get(a, []) if cached(a) or not in_checkpoint(i)]

        # checkpoints the hook is not around (docs/simulator.md, offload): the call's first kernel
        # for each storage one of their calls takes as an input, which that checkpoint's frame holds
        uncovered = [m for m in checkpointed if mods is not None and not any(cap.inside(m, s) for s in mods)]

        def in_uncovered(i):
            return any(cap.inside(cap.caller[i], m) for m in uncovered)
        frame_inputs = {}
        for m in uncovered:
            for call in calls_of(cap, ks, m):
                for a in call_inputs(cap, m, call) or []:
                    frame_inputs[a] = min(frame_inputs.get(a, call[0]), call[0])

        def released_outside(a):
            """Saves outside the hook, all made in the pass's forward after every save inside it, whose
            backward reads all come before the hook's unpack: their nodes run first and let go of it
            (the caller's mul of a module's output). The last of those reads, else None. Reads by
            kernels inside a checkpoint are the recomputation's, unless the policy keeps it; a
            checkpoint the hook is not around that takes it as an input holds it in its frame: its
            backward's reads that still read it and its recomputation's reads count (None when that
            recomputation reads it after the hook's unpack)."""
            savers = savers_of(a)
            inside = [i for i in savers if i in kset and cap.kernels[i]["phase"] == FWD and in_hook(i)]
            inside += [packs[q][0] for q in ck if packs[q][2] == a]   # a checkpoint's input pack
            outside = [i for i in savers if i not in inside] + ([frame_inputs[a]] if a in frame_inputs else [])
            hu = hook_unpack_at(a)
            if not inside or not outside or hu is None or \
                    any(i not in kset or cap.kernels[i]["phase"] != FWD or i < max(inside) for i in outside):
                return None
            reads = [i for i, _m in cap.uses[a] if i in kset and cap.kernels[i]["phase"] == BWD and not in_hook(i)
                     and ((a in plan.op_of[i].acc) if in_uncovered(i) else (cached(a) or not in_checkpoint(i)))]
            rereads = [op for op in plan.ops if getattr(op, "recompute", False) and op.anchor in kset
                       and in_uncovered(op.anchor) and a in op.acc]
            if any(plan.pos((op, "before", 0)) >= plan.pos(hu) for op in rereads):
                return None
            if not reads or plan.pos((plan.op_of[max(reads)], "before", 0)) >= plan.pos(hu):
                return None
            # released after the engine's checks of the node's gradients (the aten::sum and
            # aten::_to_copy kernels right after it)
            i = max(reads)
            while i + 1 < len(cap.kernels) and cap.kernels[i + 1]["phase"] == BWD and \
                    cap.kernels[i + 1]["name"] in ("aten::sum", "aten::_to_copy"):
                i += 1
            last = max(rereads, key=lambda op: plan.pos((op, "before", 0)), default=None)
            if last is not None and plan.pos((last, "after", 0)) > plan.pos((plan.op_of[i], "after", 0)):
                return last
            return i

        dies, released = {}, {}
        for a, j in first.items():
            mb = cap.made_by.get(a)
            made_fwd = mb is not None and mb in kset and cap.kernels[mb]["phase"] == FWD
            all_packs = all(i in kset and cap.kernels[i]["phase"] == FWD
                            and (bool(cap.caller[i]) if mods is None else any(cap.inside(cap.caller[i], m) for m in mods))
                            and not in_checkpoint(i)
                            for i in savers_of(a)) and a not in frame_inputs
            if not all_packs and made_fwd:
                r = released_outside(a)
                if r is not None:
                    released[a], all_packs = r, True
            held = any(i not in kset for i, _m in cap.uses[a])   # a kernel of another pass uses it
            dies[a] = made_fwd and all_packs and not held and a not in recomputed and not kept_by_policy(a)
        def comes_back(a):   # it dies and the backward unpacks it
            return a in first and dies[a] and unpack_at(a) is not None

        def save_unpack(i, a):
            """Where the save of `a` by kernel i is unpacked: its unpack, but when several forward
            kernels of the pass saved it, the one the capture recorded for this save (capture.
            save_unpacks), else the first backward kernel at or after that of kernel i's
            module that reads it; as a point (a checkpoint's input the hook packs is unpacked where a
            recomputation starts)."""
            u = unpack_at(a)
            savers = [s for s in cap.saves_of.get(a, []) if s in kset and cap.kernels[s]["phase"] == FWD]
            if u is None or len(savers) <= 1:
                return u
            own = cap.save_unpacks.get((a, i))   # the capture recorded this save's own unpack
            if own is not None and own in kset and cap.kernels[own]["phase"] == BWD:
                return (plan.op_of[own], "before", 0)
            mod = cap.kernels[i]["module"]
            # other savers' modules inside it are theirs (a ReLU in an MLP's forward, the Linear after it)
            inner = [cap.kernels[s]["module"] for s in savers
                     if s != i and cap.kernels[s]["module"] != mod and cap.inside(cap.kernels[s]["module"], mod)]
            r = next((k for k, _m in cap.uses[a] if plan.pos((plan.op_of[k], "before", 0)) >= plan.pos(u)
                      and k in kset and cap.kernels[k]["phase"] == BWD
                      and cap.inside(cap.kernels[k]["module"], mod)
                      and not any(cap.inside(cap.kernels[k]["module"], m) for m in inner)), None)
            return u if r is None else (plan.op_of[r], "before", 0)

        moved_reads = [hook_unpack_at(a) for a in first]   # every storage it copied to the host
        moved_reads = [r for r in moved_reads if r is not None]
        first_unpack = min(moved_reads, key=plan.pos) if moved_reads else None
        d2h = {}
        backs = []
        for a, j in sorted(first.items(), key=lambda x: x[1]):
            i = packs[j][0]
            kop = plan.op_of[i]
            al = plan.allocs[a]
            issued = (kop, "after", 0)
            if j in ck:   # a checkpoint's input: copied before the call's first kernel
                kop = ck[j][0]
                issued = (kop, "before", 0)
            if streamed:
                c = Copy(D2H, al.nbytes, kop, j not in ck)
                (kop.issue_start if j in ck else kop.issue_end).append(c)
                plan.copies.append(c)
                d2h[a] = c
                made = issued
            elif j in ck:   # the host copy is made at the call's start, after the D2H copies before it
                d2h[a] = plan.insert_before(kop, Op("copy", "D2H", copy=(D2H, al.nbytes)))
                made = issued
            else:
                cop = plan.insert_after(kop, Op("copy", "D2H", copy=(D2H, al.nbytes)))
                made = (kop, "after", 0)
                d2h[a] = cop
            host = plan.add_alloc(-1, al.nbytes, al.stream, al.category, made, label=al.label)
            u = unpack_at(a) if a not in released else hook_unpack_at(a)
            if not comes_back(a):   # stays on the GPU; without an unpack, as recorded
                hu = hook_unpack_at(a)   # the host copy is dropped at the hook's own unpack
                plan.allocs[host].freed = al.freed if hu is None else hu
                continue
            early = end_of_forward(cap, plan, ks) if cap.is_cached_cast(a) else last_forward_use(cap, plan, a, kset)
            held = cap.frame_hold.get(a)   # the model's code held it longer (in this pass's forward)
            if held in kset and cap.kernels[held]["phase"] == FWD:
                early = plan.later(early, (plan.op_of[held], "after", 0))
            if streamed:
                # let go of at the first pack it offloads stash or more packs later (torchtune)
                j2 = next((q for q in range(j + stash, len(packs)) if eligible(packs[q][2])), len(packs))
                if j2 < len(packs):
                    i2, out2, _ = packs[j2]
                    at = (ck[j2][0], "before", 0) if j2 in ck else (plan.op_of[i2], "after" if out2 else "before", 0)
                else:
                    at = first_unpack
                if at is not None:
                    early = plan.later(early, at)
                    at = plan.later(at, issued)   # not before its D2H is issued
                    wop, side, _ = at
                    if side == "before":
                        wop.waits.append(d2h[a])
                    else:
                        wop.waits_end = getattr(wop, "waits_end", []) + [d2h[a]]
            if a in released:   # the saves outside hold it to their last backward read
                r = released[a]
                early = plan.later(early, (r if isinstance(r, Op) else plan.op_of[r], "after", 0))
            recorded_free = al.freed
            al.freed = early
            x = u
            by = j   # the pack whose unpack brings it back
            distance = 0

            def pack_unpack(q):
                if q in ck:   # unpacked where that call's recomputation starts
                    return (ck[q][1], "before", 0)
                return save_unpack(packs[q][0], packs[q][2])
            places = [q for q, (_i, _o, b) in enumerate(packs) if b == a]
            # on demand: in the order of the first of its saves unpacked there (the node's own order)
            by = next((q for q in places if pack_unpack(q) == x), j)
            if streamed and prefetch > 0:   # only a pack whose storage also comes back prefetches
                # any pack of the storage looks back: a save up to `prefetch` packs after any of them
                cands = {(pack_unpack(q), q)
                         for pl in places for q in range(pl + 1, min(pl + 1 + prefetch, len(packs)))
                         if comes_back(packs[q][2])}
                cands = [c for c in cands if c[0] is not None]
                if cands:
                    best = min(cands, key=lambda c: (plan.pos(c[0]), c[1]))
                    if plan.pos(best[0]) < plan.pos(x):
                        x, by = best   # the earliest unpack; of equal ones the earliest pack
                        distance = by - max(pl for pl in places if pl < by)   # from the nearest pack before it
            xop = x[0]
            if streamed:
                c = Copy(H2D, al.nbytes, xop, False)
                xop.issue_start.append(c)
                plan.copies.append(c)
                u[0].waits.append(c)
                made = (xop, "before", 0)
            cop = None
            if not streamed:   # placed right before the unpack below, in the hook's order
                cop = Op("copy", "H2D", copy=(H2D, al.nbytes))
                made = (cop, "before", 0)
            plan.allocs[host].freed = made
            backs.append((by, distance, a, al, made, recorded_free, cop, u[0]))
        # the device copies in the hook's order: by the pack whose unpack brings them, that pack's
        # own storage first, then the prefetched ones nearest first
        for _by, _d, a, al, made, recorded_free, cop, before in sorted(backs, key=lambda b: (b[0], b[1])):
            if cop is not None:
                plan.insert_before(before, cop)
            if a in ck_inputs:   # the recomputation reads the copy from its making on
                for op in rec_ops:
                    if a in op.acc and plan.pos((op, "before", 0)) >= plan.pos(made):
                        op.acc[("ck", a)] = op.acc.pop(a)
            dev = plan.add_alloc(al.device, al.nbytes, al.stream, al.category, made, label=al.label)
            for op in rec_ops if a in ck_inputs else []:
                if ("ck", a) in op.acc:
                    op.acc[dev] = op.acc.pop(("ck", a))
            reads = plan.redirect(kset, a, dev, since=made if a in released else None)   # the backward reads the device copy
            if a in ck_inputs:   # kept as the checkpoint keeps its input without the hook
                plan.allocs[dev].freed = plan.later(recorded_free, (plan.op_of[max(reads)], "after", 0)) \
                    if reads and recorded_free is not None else recorded_free
                continue
            # the hook lets go of it at its last unpack: freed when that node returns, as a
            # checkpoint's recomputed copy (the recorded free less the aten::sum kernels before it,
            # not before its last backward read)
            freed = recorded_free    # at the recorded free when the backward does not read it
            if reads and recorded_free is not None:
                freed = plan.later(before_sums(cap, plan, recorded_free), (plan.op_of[max(reads)], "after", 0))
            plan.allocs[dev].freed = freed


# ---------------------------------------------------------------- optimizer

def optimizer_steps(cap):
    steps = {}
    for k in cap.kernels:
        if k["phase"] == OPT:
            steps.setdefault(k["step"], []).append(k["i"])
    return [steps[s] for s in sorted(steps)]


def optimizer_calls(cap):
    """docs/simulator.md "optimizer": each optimizer.step() call, a run of optimizer kernels with no
    forward, backward or recompute kernel between them (a step may step once per mini-batch)."""
    calls, last = [], None
    for k in cap.kernels:
        if k["phase"] == OPT:
            if last is None or last["step"] != k["step"] or any(
                    cap.kernels[j]["phase"] in (FWD, BWD, RECOMPUTE) for j in range(last["i"] + 1, k["i"])):
                calls.append([])
            calls[-1].append(k["i"])
            last = k
    return calls


def touched(cap, ks):
    grads, params, state = set(), set(), set()
    for i in ks:
        for a in cap.acc[i]:
            c = cap.allocs[a]["category"]
            (grads if c == GRAD else params if c == PARAM else state if c == OPTSTATE else set()).add(a)
    return grads, params, state


def apply_fused(plan, cap):
    bw = float(cap.meta["capture.gpu.hbm_bw"])
    launch = int(float(cap.meta.get("capture.launch_overhead_ns", 0)))
    for ks in optimizer_calls(cap):
        if any("_fused_adam" in cap.kernels[i]["name"] for i in ks):
            continue   # already fused: as captured
        grads, params, state = touched(cap, ks)
        stay = [i for i in ks if cap.acc[i] and all(m == WRITE and cap.allocs[a]["category"] == OPTSTATE
                                                   for a, m in cap.acc[i].items())]
        removed = [i for i in ks if i not in stay]
        if not removed:
            continue
        nbytes = sum(cap.allocs[a]["bytes"] for a in grads) + 2 * sum(
            cap.allocs[a]["bytes"] for a in params | state)
        dur = int(nbytes / bw * 1e9) + launch
        fop = plan.insert_before(plan.op_of[removed[0]], Op("inserted", "aten::_fused_adamw_", dur))
        fop.acc = {a: READ for a in grads}
        fop.acc.update({a: READ | WRITE for a in params | state})
        rset = set(removed)
        for a, i in cap.made_by.items():
            if i in rset:
                del plan.allocs[a]
        for a, al in cap.allocs.items():
            if a in plan.allocs and a not in cap.made_by and cap.uses[a] and cap.uses[a][0][0] in rset \
                    and plan.allocs[a].made[0] is plan.op_of[cap.uses[a][0][0]]:
                del plan.allocs[a]
        for i in removed:
            plan.remove(plan.op_of[i])


def reads_gradients_between(cap):
    """docs/advise.md: a step that reads the gradients on the GPU between the backward and the
    optimizer step gets no host optimizer: a kernel outside the backward and the optimizer reads a
    gradient after the step's last backward access of it, and before the optimizer step
    (clip_grad_norm_, GradScaler's unscale, PCGrad's flattening of each task's gradients); nor one
    whose gradients come from torch.func's grad (meta capture.torch_func_modules: it sets .grad
    itself)."""
    if json.loads(cap.meta.get("capture.torch_func_modules", "[]")):
        raise ValueError("the step computes its gradients with torch.func's grad and sets .grad itself")
    for ks in optimizer_steps(cap):
        step, first = cap.kernels[ks[0]]["step"], ks[0]
        in_step = [k for k in cap.kernels if k["step"] == step]
        written = {}   # a gradient -> the step's last backward kernel that accessed it
        for k in in_step:
            if k["phase"] == BWD:
                for a in cap.acc[k["i"]]:
                    if cap.allocs[a]["category"] == GRAD:
                        written[a] = k["i"]
        for k in in_step:
            if k["i"] < first and k["phase"] not in (BWD, OPT) and any(
                    m & READ and a in written and written[a] < k["i"] for a, m in cap.acc[k["i"]].items()):
                raise ValueError(f"the step reads the gradients on the GPU between the backward and the "
                                 f"optimizer step ({k['name']} (kernel {k['id']}))")


def host_factor(cap):
    """docs/simulator.md: the host holds fp32 copies; with 16-bit parameters (capture.optimizer_dtype,
    else capture.weights_dtype) they take twice the trace's bytes, with float64 half."""
    dtype = cap.meta.get("capture.optimizer_dtype", cap.meta.get("capture.weights_dtype",
                                                                 cap.meta.get("capture.param_dtype", "")))
    return 2.0 if dtype in ("bfloat16", "float16") else 0.5 if dtype == "float64" else 1.0


# torch.optim's classes that mhc_torch.apply steps with their for-loop on the host whatever the
# user's foreach ("" : a capture that did not record its class, read as AdamW)
LOOPED_ON_HOST = {""} | {f"torch.optim.{n.lower()}.{n}" for n in (
    "SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "RMSprop", "Adadelta", "Adagrad", "Rprop")}


def _runs_forloop(d, impl, cls):
    """The host step runs torch's for-loop: the setting asks for it; or asks for nothing, the
    captured optimizer is not fused, and it is one of torch.optim's looped classes (its foreach
    is not kept on the host) or its foreach is not true (foreach=None on CPU tensors)."""
    if impl is not None:
        return impl == "forloop"
    return d.get("fused") is not True and (cls in LOOPED_ON_HOST or d.get("foreach") is not True)


def _optimizer_defaults(cap):
    try:
        d = json.loads(cap.meta.get("capture.optimizer_defaults", ""))
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def _radam_rectified(d, step):
    """RAdam's rho_t > 5 in its step-th step (torch/optim/radam.py), None where beta2 is no
    number in (0, 1)."""
    betas = d.get("betas", [0.9, 0.999])
    if not isinstance(betas, list) or len(betas) != 2 or isinstance(betas[1], bool) \
            or not isinstance(betas[1], (int, float)) or not 0 < betas[1] < 1:
        return None
    b2 = float(betas[1])
    rho_inf = 2 / (1 - b2) - 1
    return rho_inf - 2 * step * b2 ** step / (1 - b2 ** step) > 5.0


def _asgd_mu_not_one(d, step):
    """ASGD's `mu.item() != 1` in its step-th step: mu is 1 until a step ends with mu =
    1 / max(1, step - t0), held in fp32; None where t0 is no number."""
    t0 = d.get("t0", 1e6)
    if isinstance(t0, bool) or not isinstance(t0, (int, float)):
        return None
    mu = struct.unpack("f", struct.pack("f", 1 / max(1, step - 1 - t0)))[0]
    return step > 1 and mu != 1.0


def host_forloop_lines(cap, impl, step):
    """docs/simulator.md: the lines of torch's for-loop step (other than SGD's) that make tensors,
    per parameter, as (name, what): "new" binds a new tensor of the parameter's bytes to the name
    (its old one freed after), "gone" frees the name's tensor, ("to", other) hands it to another
    name; "mask" binds a bool tensor of the fp32 copy's elements, a quarter of its bytes; "scalar"
    one fp32 element (4 B); None where not modelled (differentiable, weight decay no number, SGD,
    another class).
    Read from torch/optim/*.py's _single_tensor_* functions."""
    cls = cap.meta.get("capture.optimizer_class", "")
    d = _optimizer_defaults(cap)
    # capturable is off on the host (torch refuses it for CPU tensors)
    if d is None or not _runs_forloop(d, impl, cls) or d.get("differentiable") is True:
        return None
    wd = d.get("weight_decay", 0)
    if isinstance(wd, bool) or not isinstance(wd, (int, float)):
        return None
    maximize = d.get("maximize") is True
    # torch.optim's own classes only (a class of another module by the same name runs its own code)
    short = {"": "AdamW", **{f"torch.optim.{n.lower()}.{n}": n for n in
                             ("Adam", "AdamW", "NAdam", "RAdam", "Adamax", "RMSprop", "Adadelta", "Adagrad",
                              "Rprop", "ASGD")}}.get(cls)
    if short in ("Adam", "AdamW", "NAdam", "RAdam"):
        decoupled = short == "AdamW" or d.get("decoupled_weight_decay") is True
        lines = [("grad", "new") if maximize else ("grad", "gone")]   # grads[i] or -grads[i]
        if wd != 0 and not decoupled:
            lines.append(("grad", "new"))                            # grad.add(param, alpha=wd)
        if short == "RAdam":
            rect = _radam_rectified(d, step)
            if rect is None:
                return None
            lines.append(("bcea", "new"))                            # exp_avg / bias_correction1
            if rect:   # bcea * lr * (bc2 ** 0.5 / sqrt) * rect: the division by a tensor makes two
                lines += [("t1", "new"), ("s", "new"), ("r0", "new"), ("r", "new"), ("s", "gone"),
                          ("r0", "gone"), ("t2", "new"), ("t1", "gone"), ("r", "gone"), ("t3", "new"),
                          ("t2", "gone"), ("t3", "gone")]
            else:
                lines += [("t1", "new"), ("t1", "gone")]
        else:   # Adam: sqrt then / c; NAdam: .div(c) then sqrt(): two tensors, the first dies
            lines += [("a", "new"), ("b", "new"), ("a", "gone"), ("b", ("to", "denom"))]
        return lines
    if short is None:
        return None
    if short == "ASGD":   # _single_tensor_asgd, not capturable
        averaging = _asgd_mu_not_one(d, step)
        if averaging is None:
            return None
        lines = [("grad", "gone")] + [("grad", "new")] * (int(maximize) + int(wd != 0))
        if averaging:   # ax.add_(param.sub(ax).mul_(mu))
            lines += [("avg", "new"), ("avg", "gone")]
        return lines + [("eta", "scalar"), ("mu", "scalar")]   # torch.as_tensor(new_eta), (new_mu)
    if short == "Rprop":   # no weight decay; sign = grad.mul(prev).sign(), the old sign freed at the rebinding
        lines = [("grad", "gone")] + [("grad", "new")] * int(maximize)
        lines += [("p", "new"), ("s", "new"), ("p", "gone"), ("s", ("to", "sign"))]
        lines += [("m", "mask"), ("m", "gone")] * 3          # sign[sign.gt(0)] = etaplus, lt, eq
        lines += [("grad", "new"), ("m", "mask"), ("m", "gone"),   # grad.clone(); grad[sign.eq(etaminus)] = 0
                  ("gs", "new"), ("gs", "gone")]             # param.addcmul_(grad.sign(), step_size)
        return lines
    lines = [("grad", "gone")] + [("grad", "new")] * (int(maximize) + int(wd != 0))
    lines += {"Adamax": [("abs", "new"), ("abs", "gone")],   # grad.abs().add_(eps)
              "Adagrad": [("std", "new")],                   # state_sum.sqrt().add_(eps)
              "RMSprop": [("avg", "new")],                   # square_avg.sqrt()
              "Adadelta": [("std", "new"), ("delta", "new")]}[short]
    return lines


def loop_most(sizes, lines):
    """The most bytes the loop's names hold at once, parameter after parameter."""
    names, live, peak = {}, 0, 0
    for b in sizes:
        for name, what in lines:
            if what in ("new", "mask", "scalar"):
                made = b if what == "new" else b // 4 if what == "mask" else 4
                live += made
                peak = max(peak, live)
                live -= names.get(name, 0)
                names[name] = made
            elif what == "gone":
                live -= names.pop(name, 0)
            else:
                live -= names.get(what[1], 0)
                names[what[1]] = names.pop(name, 0)
    return peak


def host_forloop_sgd(cap, impl):
    """docs/simulator.md: the host step is torch's for-loop SGD (not differentiable, its decay and
    momentum numbers) when the for-loop runs as for Adam; returns what makes a new tensor per
    parameter: (maximize, weight decay, momentum, nesterov), else None."""
    if cap.meta.get("capture.optimizer_class", "") != "torch.optim.sgd.SGD":
        return None
    try:
        d = json.loads(cap.meta.get("capture.optimizer_defaults", ""))
    except ValueError:
        return None
    if not isinstance(d, dict) or d.get("differentiable") is True:
        return None
    if any(k in d and (isinstance(d[k], bool) or not isinstance(d[k], (int, float))) for k in ("weight_decay", "momentum")):
        return None
    if not _runs_forloop(d, impl, "torch.optim.sgd.SGD"):
        return None
    momentum = d.get("momentum", 0) != 0
    return (d.get("maximize") is True, d.get("weight_decay", 0) != 0, momentum, momentum and d.get("nesterov") is True)


def sgd_loop_above_state(sizes, flags, makes_state):
    """The for-loop's most bytes (state and its new tensors) less the state it ends with, never
    below 0: -grad, grad + decay x param, grad + momentum x buf each new, a reassigned name's old
    tensor freed, the last held until the next parameter; in the step that makes the momentum
    buffers each is cloned as its parameter comes."""
    maximize, decay, momentum, nesterov = flags
    end_state = sum(sizes) if momentum else 0
    state = 0 if makes_state else end_state
    peak, held = state, 0
    for b in sizes:
        var = 0
        if maximize:
            peak = max(peak, state + held + b)
            var = b
        if decay:
            peak = max(peak, state + var + b)
            var = b
        if momentum:
            if makes_state:
                state += b
                peak = max(peak, state + var)
            if nesterov:
                peak = max(peak, state + var + b)
                var = b
            else:
                var = 0
        held = var
    return max(0, peak - end_state)


# docs/advise.md "Host step implementations": the fused host step's bytes' time against the
# for-loop's, by class (others: AdamW's); the for-loop and foreach take the for-loop's
FUSED_HOST_FACTOR = {"torch.optim.adam.Adam": 0.20, "torch.optim.sgd.SGD": 0.53, "torch.optim.adagrad.Adagrad": 0.20}


def host_impl_factor(cap, impl):
    """The implementation the host step runs (the for-loop as _runs_forloop says; fused where the
    setting or the captured optimizer asks for it; else foreach), as its factor."""
    d = _optimizer_defaults(cap) or {}
    cls = cap.meta.get("capture.optimizer_class", "")
    if _runs_forloop(d, impl, cls) or not (impl == "fused" or (impl is None and d.get("fused") is True)):
        return 1.0
    return FUSED_HOST_FACTOR.get(cls, 0.18)


def apply_host_optimizer(plan, cap, host_bw, tensor_cost_ns, impl=None):
    steps = optimizer_steps(cap)
    gradient_buffer = {}
    master = False
    factor = host_factor(cap)
    on_host = set()
    for si, ks in enumerate(steps):
        step = cap.kernels[ks[0]]["step"]
        grads, params, state = touched(cap, ks)
        rset = set(ks)
        first_op = plan.op_of[ks[0]]
        param_sizes = {cap.allocs[a]["bytes"] for a in params}

        def to_host(a):
            al = plan.allocs[a]
            if a not in on_host and al.nbytes in param_sizes:   # moments: the host copy's dtype
                al.nbytes = int(al.nbytes * factor)
            on_host.add(a)
            al.device = -1
        # the host step's temporaries: the most bytes the recorded step's temporaries (made by its
        # kernels, other than state and parameters) held at once
        temps = [a for a, i in cap.made_by.items() if i in rset and a in plan.allocs
                 and cap.allocs[a]["category"] not in (OPTSTATE, PARAM)]
        most = 0
        for k in range(ks[0], ks[-1] + 1):
            live = 0
            for a in temps:
                al = plan.allocs[a]
                if al.made[0].anchor <= k and (al.freed is None or al.freed[0].anchor >= k):
                    live += al.nbytes
            most = max(most, live)
        temporaries = int(most * factor)
        lines = host_forloop_lines(cap, impl, si + 1)
        if lines is not None:
            temporaries = loop_most([int(cap.allocs[a]["bytes"] * factor) for a in sorted(params)], lines)
        # state moves to the host (the first step's moments are made by the host step)
        made_here = []
        for a, i in list(cap.made_by.items()):
            if i in rset and a in plan.allocs:
                if cap.allocs[a]["category"] == OPTSTATE:
                    to_host(a)
                    made_here.append(a)
                elif cap.allocs[a]["category"] != PARAM:
                    del plan.allocs[a]
        for a in state:
            to_host(a)
        sgd = host_forloop_sgd(cap, impl)
        if sgd is not None:
            sizes = [int(cap.allocs[a]["bytes"] * factor) for a in sorted(params)]
            temporaries = sgd_loop_above_state(sizes, sgd, bool(made_here))
        copies = []
        passes = [ks_ for ks_ in cap.passes if any(cap.kernels[i]["step"] == step and
                                                   cap.kernels[i]["phase"] == BWD for i in ks_)]
        pass_sets = [set(pks) for pks in passes]
        accumulated = {}   # op -> the largest host copy added to a buffer there (passes after the first)
        for g in sorted(grads):
            for pn, pset in enumerate(pass_sets):
                # the pass's backward kernels that accessed it in the capture, in order
                bw_acc = [i for i, _m in cap.uses[g] if i in pset and cap.kernels[i]["phase"] == BWD]
                if not bw_acc:
                    continue
                last = plan.op_of[bw_acc[-1]]
                al = plan.allocs[g]
                if pn == 0:
                    key = g
                else:
                    key = plan.add_alloc(al.device, al.nbytes, al.stream, al.category,
                                         (plan.op_of[bw_acc[0]], "before", 0), label=al.label)
                    plan.redirect(pset, g, key)
                    accumulated[id(last)] = (last, max(accumulated.get(id(last), (None, 0))[1],
                                                       int(al.nbytes * factor)))
                plan.allocs[key].freed = (last, "after", 0)
                c = Copy(D2H, al.nbytes, last, True)
                last.issue_end.append(c)
                plan.copies.append(c)
                copies.append(c)
                if al.label not in gradient_buffer:   # one per parameter, kept
                    gradient_buffer[al.label] = plan.add_alloc(-1, int(al.nbytes * factor), al.stream, GRAD,
                                                               (last, "after", 0), label=al.label)
        for op, nbytes in accumulated.values():   # held around that op
            plan.add_alloc(-1, nbytes, 0, WORKSPACE, (op, "before", 0), (op, "after", 0),
                           label="gradient accumulation on the host")
        pbytes = sum(cap.allocs[a]["bytes"] for a in params)
        nbytes = sum(cap.allocs[a]["bytes"] for a in grads) + 2 * (pbytes + sum(cap.allocs[a]["bytes"]
                                                                              for a in state))
        dur = int(int(nbytes * factor) / host_bw * 1e9 * host_impl_factor(cap, impl)) + len(params) * tensor_cost_ns
        hop = plan.insert_before(first_op, Op("host", "host optimizer step", dur))
        hop.waits += copies
        for a in made_here:
            plan.allocs[a].made = (hop, "before", 0)
        if temporaries > 0:   # held while the host step runs
            plan.add_alloc(-1, temporaries, 0, WORKSPACE, (hop, "before", 0), (hop, "after", 0),
                           label="host optimizer step temporaries")
        if not master:
            for a in sorted(params):
                al = plan.allocs[a]
                plan.add_alloc(-1, int(al.nbytes * factor), al.stream, PARAM, (plan.ops[0], "before", 0),
                               label=al.label)
            master = True
        plan.insert_after(hop, Op("copy", "H2D", copy=(H2D, pbytes)))
        for i in ks:
            plan.remove(plan.op_of[i])
        for op in plan.ops:   # every optimizer kernel, the fused one a setting put there too
            if op.kind == "inserted" and op.name == "aten::_fused_adamw_" and op.anchor in rset:
                plan.remove(op)


# ---------------------------------------------------------------- entry

def transform(path, setting, host_bw=100e9, host_tensor_cost_ns=15000, cap=None):
    """The setting's edits of the captured step: (the captured step, the plan), not yet timed."""
    if isinstance(setting, str):
        setting = json.loads(setting)
    cap = cap or Captured(path)
    if not cap.saves:
        raise ValueError("no saved tensors recorded: not a captured training step")
    plan = Plan(cap)
    groups = checkpoint_groups(cap, setting)
    apply_checkpoint(plan, cap, groups)
    if setting.get("offload"):
        check_reread(cap, setting["offload"].get("modules") or [], "offload.modules")
        apply_offload(plan, cap, setting["offload"], [m for mods, _p in groups for m in mods],
                      [m for mods, p in groups if p == "save_matmuls" for m in mods])
    opt = setting.get("optimizer") or {}
    if opt and not optimizer_steps(cap):
        raise ValueError("the capture has no optimizer step")
    if opt.get("impl") == "fused" and not any(
            c in cap.meta.get("capture.optimizer_class", "AdamW") for c in ("Adam", "AdamW")):
        raise ValueError("the fused model is Adam's and AdamW's")
    if opt.get("state") == "host":
        reads_gradients_between(cap)
    if opt.get("impl") == "fused":
        apply_fused(plan, cap)
    if opt.get("state") == "host":
        apply_host_optimizer(plan, cap, host_bw, host_tensor_cost_ns, opt.get("impl"))
    return cap, plan


def predict(path, setting, link=LINKS["pcie5"], host_bw=100e9, host_tensor_cost_ns=15000, cap=None):
    if isinstance(setting, str):
        setting = json.loads(setting)
    _cap, plan = transform(path, setting, host_bw, host_tensor_cost_ns, cap)
    return plan.result(link, setting.get("allocator", ""))

if __name__ == "__main__":
    import sys
    r = predict(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "{}")
    print(json.dumps({k: r[k] for k in ("peak_bytes", "reserved_bytes", "host_peak_bytes", "step_time_ns")}))
