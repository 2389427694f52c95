#!/usr/bin/env python3
"""An outside tester's reading of the communication time of a DDP or FSDP2 capture, written from the
documents alone (docs/advise.md "Communication time: DDP and FSDP2" and "A measured step time";
docs/simulator.md "Settings": Timing, Collectives and reshard_after_forward), sharing no code with
advise/ and none with the other readings.

What it works out, for `mhc advise CAPTURE --setting S [--comm-link L] [--step-time T] --json`:

* the ring model's duration of each collective (base + steps x per step + S x steps / W / busBw),
  its world W (HSDP's shard and replicate groups), its bus bandwidth and per-step latency (the GPU
  table, `ib-ndr`, `ib-hdr`, a measured rate, the default by world size);
* DDP's bucket split: the backward's writes into `DDP gradient bucket` fill buckets of
  `bucket_cap_mb` (the first of 1 MiB when it is 25), an all-reduce inserted after the write that
  fills each, the recorded one carrying the rest;
* the streams: compute ops one after another at their recorded durations after their recorded gaps;
  collectives on an all-gather or a reduction stream, from the latest of their issue (the compute
  stream reaching them, or for FSDP2's all-gathers the previous all-gather's copy-out), their
  stream and the last write of what they access; compute ops wait for the last write of what they
  access;
* the step time (first start to last end of every op), the collectives' time on their streams and
  the part of it not hidden behind compute;
* `reshard_after_forward: false` on a group (its backward copy-in, all-gather and copy-out removed);
* `--step-time`: the factor on the compute kernels solved as docs/advise.md states it.

Library: `predict(path, setting=None, comm_link=None, step_time_ns=None)` returns a dict with
`step_time_ns`, `comm_ns`, `comm_exposed_ns`, `world`, `bus_bw`, `per_step_s`, `calibration`.
Standard library only.
"""
import math
import re
import sqlite3

FWD, BWD, OPT, RECOMPUTE, OTHER = 0, 1, 2, 3, 4
READ, WRITE, READ_WRITE = 1, 2, 3
GRAD = 1
MIB = 1 << 20

BASE_S = 8.4e-6          # NCCL's baseLat (docs/advise.md)
NVLINK_STEP_S = 3.4e-6   # hwLat per ring step over NVLink
NET_STEP_S = 9.6e-6      # over the network
GPU_BUS = {"a100-40g": 235e9, "a100-80g": 235e9, "h100-sxm": 450e9, "h200": 450e9, "h100-pcie": 55e9,
           "l40s": 25e9}
IB = {"ib-ndr": 50e9, "ib-hdr": 25e9}

ALL_GATHER = "c10d::_allgather_base_"
COPY_IN = "fsdp::all_gather_copy_in"
REDUCE_SCATTER = "c10d::_reduce_scatter_base_"
ALL_REDUCE = "c10d::allreduce_"
AG_STREAM, RED_STREAM = 1, 2


class Refused(Exception):
    pass


def parse_rate(text):
    """A bandwidth as docs/cli.md "Sizes" writes one: a number (no sign, no exponent), a unit (K, KiB,
    M, MiB, G, GiB, T, TiB in powers of 1024; kB, MB, GB, TB in powers of 1000; B; any case, spaces
    around it), "/s" optional: 200GB/s, 12.5GiB/s, 25 GB/s, 80g."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]?)(i?b?)\s*(?:/s)?", text.strip().lower())
    if not m or (m.group(2) == "" and m.group(3) != "b"):
        raise Refused(f"--comm-link: '{text}' is no rate")
    power = "kmgt".find(m.group(2)) + 1 if m.group(2) else 0
    binary = m.group(3) in ("", "ib")   # a letter alone or KiB: binary; kB: decimal
    rate = float(m.group(1)) * ((1024 if binary else 1000) ** power)
    if not 1e3 <= rate <= 1e15:   # the link's bounds (docs/simulator.md "Link models")
        raise Refused(f"--comm-link: '{text}' is outside [1kB/s, 1000TB/s]")
    return rate


class Capture:
    def __init__(self, path):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        q = lambda sql: db.execute(sql).fetchall()   # noqa: E731
        self.meta = dict(q("SELECT key, value FROM meta"))
        strings = dict(q("SELECT id, text FROM strings"))
        info = {k: p for k, _m, p in q("SELECT kernel, module, phase FROM kernel_info")}
        self.allocs = {}
        for aid, b, cat, label in q("SELECT id, bytes, category, label FROM allocations"):
            self.allocs[aid] = dict(bytes=b, category=cat, label=strings.get(label, ""))
        acc = {}
        for k, a, mode in q("SELECT kernel, allocation, mode FROM accesses ORDER BY kernel, allocation"):
            acc.setdefault(k, []).append((a, mode))
        self.kernels = []
        for kid, name, t0, t1, step in q("SELECT id, name, t_start, t_end, step FROM kernels ORDER BY t_start, id"):
            self.kernels.append(dict(id=kid, name=strings.get(name, ""), t0=t0, t1=t1, step=step,
                                     phase=info.get(kid, OTHER), acc=acc.get(kid, [])))
        db.close()


# ---------------------------------------------------------------- the ring model

def worlds(meta):
    """(world for all-gathers and reduce-scatters, world for all-reduces, whole world, said?)."""
    text = meta.get("capture.fsdp2") or meta.get("capture.ddp") or ""
    m = re.match(r"world (\d+)(?: \(shard (\d+) x replicate (\d+)\))?", text)
    if not m:
        return 8, 8, 8, False
    whole = int(m.group(1))
    if m.group(2):
        return int(m.group(2)), int(m.group(3)), whole, True
    return whole, whole, whole, True


def comm_figures(meta, comm_link):
    """(bus bandwidth B/s, per-step latency s) of the collectives' link."""
    _ag, _ar, whole, _said = worlds(meta)
    link = comm_link if comm_link is not None else ("nvlink" if whole <= 8 else "ib-ndr")
    if link == "nvlink":
        gpu = meta.get("capture.gpu") or "h100-sxm"
        return GPU_BUS.get(gpu, GPU_BUS["h100-sxm"]), NVLINK_STEP_S
    if link in IB:
        return IB[link], NET_STEP_S
    # a measured bus bandwidth: the document names no latency for it; one node's ring up to 8
    # ranks, the network's above (the reading of "a world of up to 8 ranks is taken as one node")
    return parse_rate(link), (NVLINK_STEP_S if whole <= 8 else NET_STEP_S)


def ring_ns(nbytes, world, all_reduce, bw, per_step):
    """Whole nanoseconds rounded up (a value within 1e-6 ns above a whole number is that number); a
    group of one rank, or nothing to send, takes no time (docs/advise.md, "The model")."""
    if world <= 1 or nbytes <= 0:
        return 0
    steps = 2 * (world - 1) if all_reduce else world - 1
    t = BASE_S + steps * per_step + nbytes * steps / world / bw
    return math.ceil(t * 1e9 - 1e-6)


# ---------------------------------------------------------------- the ops of the step

def passes(kernels):
    """Pass number of each kernel (docs/simulator.md "checkpoint": a pass starts at each step's first
    kernel and at every forward kernel whose nearest earlier forward or backward kernel of the step is
    a backward one)."""
    out, p, step, last = [], -1, object(), None
    for k in kernels:
        if k["step"] != step:
            p, step, last = p + 1, k["step"], None
        elif k["phase"] == FWD and last == BWD:
            p += 1
        if k["phase"] in (FWD, BWD):
            last = k["phase"]
        out.append(p)
    return out


def ddp_cap(meta):
    m = re.search(r"bucket_cap_mb ([0-9.eE+-]+)", meta.get("capture.ddp", ""))
    cap_mb = float(m.group(1)) if m else 25.0
    cap = int(cap_mb * MIB)
    first = MIB if cap_mb == 25 else cap
    return first, cap


def build_ops(cap, groups_kept, bw, per_step):
    """The ops in launch order: dicts with kind, dur, acc (allocation, writes), step, gap."""
    ks = [dict(k) for k in cap.kernels]
    # reshard_after_forward false: remove the backward's copy-in, all-gather and copy-out of the group
    removed = set()
    if groups_kept:
        removed = reshard_removed(cap, ks, groups_kept)
    ag_w, ar_w, _whole, _ = worlds(cap.meta)
    pass_of = passes(ks)
    bucket = [a for a, v in cap.allocs.items() if v["label"].startswith("DDP gradient bucket")]
    bucket = set(bucket)
    inserted_after = {}   # index of kernel -> list of sizes of all-reduces inserted after it
    rest_of = {}          # index of the recorded all-reduce -> bytes it carries
    if bucket:
        first, each = ddp_cap(cap.meta)
        by_pass = {}
        for i, k in enumerate(ks):
            by_pass.setdefault(pass_of[i], []).append(i)
        for _p, idx in by_pass.items():
            ar = [i for i in idx if ks[i]["name"] == ALL_REDUCE and any(a in bucket for a, _ in ks[i]["acc"])]
            if not ar:
                continue
            r = ar[-1]
            writes = []
            for i in idx:
                k = ks[i]
                if i >= r or k["phase"] != BWD:
                    continue
                if any(a in bucket and mode & WRITE for a, mode in k["acc"]):
                    n = sum(cap.allocs[a]["bytes"] for a, mode in k["acc"]
                            if mode & READ and cap.allocs[a]["category"] == GRAD and a not in bucket)
                    writes.append((i, n))
            # a gradient is never split between buckets (docs/advise.md, "Streams and overlap"): a
            # bucket holds the writes up to the one that takes it to bucket_cap_mb or more, and is
            # all-reduced after that write unless it would hold the whole rest
            rest = max(cap.allocs[a]["bytes"] for a, _ in ks[r]["acc"])
            filled, limit = 0, first
            for i, n in writes:
                filled += n
                if filled <= 0 or filled < limit or filled >= rest:   # a bucket holds a gradient at least
                    continue
                inserted_after.setdefault(i, []).append(filled)
                rest -= filled
                filled, limit = 0, each
            rest_of[r] = rest
    ops = []
    prev_end = None
    for i, k in enumerate(ks):
        gap = 0 if prev_end is None else k["t0"] - prev_end
        prev_end = k["t1"]
        if i in removed:
            continue
        name = k["name"]
        acc = [(a, bool(mode & WRITE)) for a, mode in k["acc"]]
        largest = max((cap.allocs[a]["bytes"] for a, _ in k["acc"]), default=0)
        op = dict(i=i, id=k["id"], name=name, step=k["step"], acc=acc, gap=gap, rec=k["t1"] - k["t0"],
                  phase=k["phase"])
        if name == COPY_IN:
            op.update(kind="copyin", stream=AG_STREAM, dur=k["t1"] - k["t0"], comm=True)
        elif name == ALL_GATHER:
            op.update(kind="ag", stream=AG_STREAM, dur=ring_ns(largest, ag_w, False, bw, per_step), comm=True)
        elif name == REDUCE_SCATTER:
            op.update(kind="rs", stream=RED_STREAM, dur=ring_ns(largest, ag_w, False, bw, per_step), comm=True)
        elif name == ALL_REDUCE:
            nbytes = rest_of.get(i, largest)
            op.update(kind="ar", stream=RED_STREAM, dur=ring_ns(nbytes, ar_w, True, bw, per_step), comm=True)
        else:
            op.update(kind="compute", dur=k["t1"] - k["t0"], comm=False)
        ops.append(op)
        for size in inserted_after.get(i, []):
            ops.append(dict(i=i, id=0, name="bucket all-reduce", step=k["step"], acc=[], gap=0, rec=0,
                            phase=BWD, kind="ar", stream=RED_STREAM, comm=True,
                            dur=ring_ns(size, ar_w, True, bw, per_step)))
    return ops


def group_of(label):
    m = re.fullmatch(r"FSDP2 all-gather output \((.*)\)", label)
    return m.group(1) if m else None


def reshard_removed(cap, ks, kept):
    """Indexes of the kernels `reshard_after_forward: false` removes (docs/simulator.md
    "reshard_after_forward"): per pass with a forward and a backward all-gather of the group, the
    backward's copy-in (the op that made its output), all-gather and copy-out (the first op after it
    that reads the output)."""
    pass_of = passes(ks)
    removed = set()
    gathers = []   # (index, group, output)
    for i, k in enumerate(ks):
        if k["name"] != ALL_GATHER:
            continue
        outs = [a for a, _ in k["acc"] if group_of(cap.allocs[a]["label"]) is not None]
        if outs:
            out = max(outs, key=lambda a: cap.allocs[a]["bytes"])
            gathers.append((i, group_of(cap.allocs[out]["label"]), out))
    for g in kept:
        name = g.split(".", 1)[1] if g not in {x[1] for x in gathers} and "." in g else g
        for p in set(pass_of):
            fw = [x for x in gathers if x[1] == name and pass_of[x[0]] == p and ks[x[0]]["phase"] == FWD]
            bw = [x for x in gathers if x[1] == name and pass_of[x[0]] == p and ks[x[0]]["phase"] != FWD]
            if not fw or not bw:
                continue
            for i, _g, out in bw:
                removed.add(i)
                maker = [j for j in range(i) if ks[j]["name"] == COPY_IN
                         and any(a == out and m & WRITE for a, m in ks[j]["acc"])]
                if maker:
                    removed.add(maker[-1])
                for j in range(i + 1, len(ks)):
                    if any(a == out for a, _ in ks[j]["acc"]):
                        removed.add(j)
                        break
    return removed


# ---------------------------------------------------------------- the timeline

def timeline(ops, t0, scale=None):
    """Runs the ops; returns (step time, first start, per op (start, end)). scale(op) gives a
    compute op's duration under a factor."""
    write_end = {}
    stream_free = {AG_STREAM: -math.inf, RED_STREAM: -math.inf}
    cursor = None          # the compute stream: end of its last op
    times = []
    # FSDP2: an all-gather (and its copy-in) is issued when the step's previous all-gather's
    # copy-out ends: the last compute op before the copy-in that reads that all-gather's output
    gate = gates(ops)
    for n, op in enumerate(ops):
        waits = max((write_end.get(a, -math.inf) for a, _ in op["acc"]), default=-math.inf)
        if op["comm"]:
            reach = t0 if cursor is None else cursor
            issue = reach
            if n in gate:
                g = gate[n]
                issue = times[g][1] if g is not None else reach
            start = max(issue, stream_free[op["stream"]], waits)
            # FSDP2's copy-in is a kernel as any other (a measured step time scales it)
            end = start + (op["dur"] if scale is None or op["kind"] != "copyin" else scale(op))
            stream_free[op["stream"]] = end
        else:
            dur = op["dur"] if scale is None else scale(op)
            start = max((t0 if cursor is None else cursor) + op["gap"], waits)
            end = start + dur
            cursor = end
        for a, w in op["acc"]:
            if w:
                write_end[a] = end
        times.append((start, end))
    first = min(s for s, _ in times)
    last = max(e for _, e in times)
    return last - first, first, times


def gates(ops):
    """For each FSDP2 copy-in and all-gather, the op whose end issues it (None: the first of its
    step, issued when the compute stream reaches it)."""
    out = {}
    prev_ag = None    # (op index, output allocations, step)
    for n, op in enumerate(ops):
        if op["kind"] not in ("copyin", "ag"):
            continue
        mine = prev_ag
        g = None
        if mine is not None and mine[2] == op["step"]:
            outs = mine[1]
            # the copy-in that precedes this all-gather gates with it: look before the copy-in
            limit = n
            if op["kind"] == "ag":
                j = n - 1
                while j >= 0 and ops[j]["kind"] != "copyin":
                    j -= 1
                limit = j if j >= 0 else n
            for j in range(limit - 1, mine[0], -1):
                if ops[j]["kind"] == "compute" and any(a in outs and not w for a, w in ops[j]["acc"]):
                    g = j
                    break
        out[n] = g   # None: no earlier gather in the step, or no reader of it: at the compute stream
        if op["kind"] == "ag":
            prev_ag = (n, {a for a, w in op["acc"] if w}, op["step"])
    return out


BUCKET_NAME = "c10d::allreduce_ (DDP bucket)"   # an inserted bucket's kernel in --trace-out


def written_step(ops, t0, scale=None):
    """The kernels `--trace-out` writes (docs/simulator.md "Collectives"): every op on the compute
    stream in launch order, each after its recorded gap (a collective has none), the collectives for
    their modelled durations: [(name, start, end)]."""
    out, cursor = [], t0
    for op in ops:
        if scale is not None and (op["kind"] in ("compute", "copyin")):
            dur = scale(op)
        else:
            dur = op["dur"]
        start = cursor + (0 if op["comm"] else op["gap"])
        out.append((op["name"] if op["id"] else BUCKET_NAME, start, start + dur))
        cursor = start + dur
    return out


def figures(ops, t0):
    total, first, times = timeline(ops, t0)
    comm = sum(op["dur"] for op in ops if op["comm"])
    # not hidden behind compute: how long the compute stream waits for what collectives write
    waited, cursor = 0, None
    for op, (s, _e) in zip(ops, times):
        if op["comm"]:
            continue
        ready = (t0 if cursor is None else cursor) + op["gap"]
        waited += s - ready
        cursor = _e
    return total, comm, waited, times


# ---------------------------------------------------------------- --step-time

def round_half_away(x):
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def last_step_time(ops, times):
    steps = sorted({op["step"] for op in ops})
    last = steps[-1]
    end_last = max(e for op, (_s, e) in zip(ops, times) if op["step"] == last)
    if len(steps) == 1:
        return end_last - min(s for s, _ in times)
    prev = steps[-2]
    return end_last - max(e for op, (_s, e) in zip(ops, times) if op["step"] == prev)


def calibrate(ops, t0, measured):
    def step_at(f):
        total, _f, times = timeline(ops, t0, scale=lambda op: round_half_away(op["dur"] * f))
        return last_step_time(ops, times), total

    _t, _f, times = timeline(ops, t0)
    estimated = last_step_time(ops, times)
    f = measured / estimated
    for _ in range(50):
        if not 0.01 <= f <= 100:
            raise Refused(f"factor {f} out of [0.01, 100]")
        s, total = step_at(f)
        if abs(s - measured) <= 0.001 * measured:
            return dict(factor=f, estimated_step_ns=estimated, measured_step_ns=measured, calibrated_step_ns=s,
                        total=total)
        s2, _ = step_at(2 * f)
        compute = (s2 - s) / f
        fixed = s - f * compute
        if compute <= 0:
            raise Refused("the step does not scale")
        f = (measured - fixed) / compute
    raise Refused("no factor within 50 rounds")


# ---------------------------------------------------------------- the prediction

def predict(path, setting=None, comm_link=None, step_time_ns=None):
    cap = Capture(path)
    bw, per_step = comm_figures(cap.meta, comm_link)
    kept = [g for g, v in ((setting or {}).get("reshard_after_forward") or {}).items() if v is False]
    t0 = cap.kernels[0]["t0"]
    base_ops = build_ops(cap, [], bw, per_step)
    ops = build_ops(cap, kept, bw, per_step) if kept else base_ops
    out = dict(bus_bw=bw, per_step_s=per_step, world=worlds(cap.meta), calibration=None,
               world_text=cap.meta.get("capture.fsdp2") or cap.meta.get("capture.ddp") or "")
    if step_time_ns is not None:
        c = calibrate(base_ops, t0, step_time_ns)
        f = c["factor"]

        def scale(op):
            return round_half_away(op["dur"] * f)
        base_total, _, _ = timeline(base_ops, t0, scale)
        total, _, _ = timeline(ops, t0, scale)
        out.update(calibration=c, baseline_step_time_ns=base_total, step_time_ns=total)
        return out
    base_total, comm, exposed, _ = figures(base_ops, t0)
    total, _c, _e, _t = figures(ops, t0)
    out.update(baseline_step_time_ns=base_total, comm_ns=comm, comm_exposed_ns=exposed, step_time_ns=total,
               written=written_step(ops, t0))
    return out
