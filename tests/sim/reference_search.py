#!/usr/bin/env python3
"""A second reading of docs/advise.md's "Search" (how `mhc advise` combines the settings and ranks
them), written from the documents alone (docs/advise.md "Search" and "Settings",
docs/simulator.md "Settings"). Each setting is predicted by reference_settings.py, the second
reading of the transformations; nothing is shared with advise/. reference_search_compare.py runs
it beside `mhc advise --json` on captured steps.

Library: `search(trace_path, capacity, budget=None, top=3, link=..., host_bw=..., cost=...)` returns
the baseline, the ranked answers (setting, peak, reserved, host peak, step time, loss) and the
number of DP runs, or raises NothingFits with the closest candidate.
"""
import json

import reference_caching
import reference_settings as ref

QUANTUM = 1 << 20            # "sums compared in 1 MiB quanta"
ROUNDS = 6                   # "at most 6 rounds"
MARGIN_STEP = 16 << 20       # the margin grows by the excess and 16 MiB more
REFINE_ROUNDS = 64           # "at most 64 rounds" of the exact search
# "full_offload": checkpointed, and the offload's hooks around it (what it saves: its inputs)
CHOICES = ["keep", "full", "save_matmuls", "mhc", "offload", "full_offload"]
OFFLOADING = ("offload", "full_offload")
# the offload the block choices turn on, in each mode searched (one per combination): streamed with
# torchtune's OffloadActivations defaults, then sync (as its JSON spells it: no stash, no prefetch)
BLOCK_OFFLOADS = [{"mode": "streamed", "min_bytes": 1024, "max_fwd_stash": 5, "prefetch": 2},
                  {"mode": "sync", "min_bytes": 1024}]
# families of block choices: all of them, each alone, none (the global setting alone)
FAMILIES = [set(CHOICES), {"keep", "full"}, {"keep", "save_matmuls"}, {"keep", "mhc"}, {"keep", "offload"},
            {"keep", "full_offload"}, {"keep"}]
ALLOCATORS = ["", "expandable_segments:True"]
MIB = 1 << 20
SPLIT_VALUES = 8    # "at most 8 values" of max_split_size_mb
LEAST_SPLIT = 20    # max_split_size_mb is more than 20 (MiB)
ROUNDUP_VALUES = 4  # "at most 4 values" of roundup_power2_divisions


class NothingFits(Exception):
    pass


def offers_selective(cap, block):
    """Keep matmuls is offered on a block whose forward runs an op the save list keeps (on one that
    runs none, cuDNN's RNN, it is full checkpointing) and writes into no kept op's output."""
    kept = [kk["i"] for kk in cap.kernels
            if kk["phase"] == ref.FWD and cap.inside(kk["module"], block) and ref.is_must_save(kk["name"])]
    return bool(kept) and ref.selective_refusal(cap, block) is None


def setting_json(s):
    """The setting as mhc prints it: compact, keys sorted."""
    return json.dumps(s, separators=(",", ":"), sort_keys=True)


# ---------------------------------------------------------------- blocks

def blocks(cap):
    """docs/advise.md "Search": the numbered children of the module path with the most forward
    kernels (else its named children when they are two or more of one type); when those are all of
    one module type, also every other such stack of one type neither inside nor around it, in
    forward order; never a module the forward makes on each call, of another model the step runs,
    or that only ran under no_grad."""
    fwd_kernels = {}
    for k in cap.kernels:
        if k["phase"] == ref.FWD:
            m = k["module"]
            while m:
                fwd_kernels[m] = fwd_kernels.get(m, 0) + 1
                m = cap.modules.get(m, {}).get("parent", 0)
    # never a module the forward makes on each call (meta capture.unregistered_modules)
    made = json.loads(cap.meta.get("capture.unregistered_modules", "") or "{}")
    # never a layer of another model the step runs (outside the model's root, the first root)
    roots = [m for m in cap.modules if cap.modules[m]["parent"] == 0]
    root = roots[0] if roots else None
    # never a module that only ran under no_grad (nothing saved, no backward), in a step with saves
    trained = set()
    for k in cap.kernels:
        if k["phase"] == ref.BWD or cap.saved_at.get(k["i"]):
            m = k["module"]
            while m:
                trained.add(m)
                m = cap.modules.get(m, {}).get("parent", 0)
    no_grad_only = lambda mid: cap.saved_at and mid in fwd_kernels and mid not in trained  # noqa: E731
    children = {}
    for mid, m in cap.modules.items():
        if m["name"] not in made and (root is None or cap.inside(mid, root)) and not no_grad_only(mid):
            children.setdefault(m["parent"], []).append(mid)
    numbered = {p: [c for c in cs if cap.modules[c]["name"].rpartition(".")[2].isdigit()]
                for p, cs in children.items()}
    stacks = {p: cs for p, cs in numbered.items() if cs}
    if not stacks:   # an nn.ModuleDict: named children, two or more of one type
        for p, cs in children.items():
            by_type = {}
            for c in cs:
                by_type.setdefault(cap.modules[c]["type"], []).append(c)
            for t, g in by_type.items():
                if len(g) >= 2 and len(g) == len(cs):
                    stacks[p] = g
    if not stacks:
        return []
    work = lambda p: sum(fwd_kernels.get(c, 0) for c in stacks[p])   # noqa: E731
    best = max(stacks, key=work)
    chosen = [best]
    one_type = lambda p: len({cap.modules[c]["type"] for c in stacks[p]}) == 1   # noqa: E731
    if one_type(best):
        for p in stacks:
            if p != best and one_type(p) and work(p) > 0 and not any(
                    cap.inside(p, q) or cap.inside(q, p) for q in chosen):
                chosen.append(p)
    first_fwd = {}
    for k in cap.kernels:
        if k["phase"] == ref.FWD:
            for p in chosen:
                for c in stacks[p]:
                    if c not in first_fwd and cap.inside(k["module"], c):
                        first_fwd[c] = k["i"]
    mods = [c for p in chosen for c in stacks[p] if c in first_fwd]
    return sorted(mods, key=lambda c: first_fwd[c])


def has_type(cap, block, mtype):
    return any(m["type"] == mtype and cap.inside(mid, block) for mid, m in cap.modules.items())


# ---------------------------------------------------------------- windows

def windows(plan):
    """The live device bytes at each op's start (the frees at the earlier op's end and its own
    start, then the allocations there), the largest per window: the ops anchored at a recorded
    kernel; 'end' after the last op."""
    made_s, made_e, freed_s, freed_e = {}, {}, {}, {}
    for al in plan.allocs.values():
        if al.device < 0:
            continue
        op, side, _off = al.made
        d = made_e if side == "after" else made_s
        d[id(op)] = d.get(id(op), 0) + al.nbytes
        if al.freed is not None:
            op, side, _off = al.freed
            d = freed_e if side == "after" else freed_s
            d[id(op)] = d.get(id(op), 0) + al.nbytes
    win, live, prev = {}, 0, None
    for op in plan.ops:
        if prev is not None:
            live -= freed_e.get(id(prev), 0)
        live -= freed_s.get(id(op), 0)
        if prev is not None:
            live += made_e.get(id(prev), 0)
        live += made_s.get(id(op), 0)
        win[op.anchor] = max(win.get(op.anchor, live), live)
        prev = op
    if prev is not None:
        live += made_e.get(id(prev), 0) - freed_e.get(id(prev), 0)
    win["end"] = live
    return win


_CACHE = {}   # (what, trace, setting, link, host figures) -> result: one search after another


def cached(what, trace, setting, link, host_bw, cost, f):
    key = (what, str(trace), setting_json(setting), repr(link), host_bw, cost)
    if key not in _CACHE:
        _CACHE[key] = f()
    return _CACHE[key]


_PLANS = {}   # the current trace's transformed steps, timed: a setting's quick look and its allocators share one


def timed_plan(trace, cap, setting, link, host_bw, cost):
    """The setting's transformed step (its allocator setting aside), timed on the link. Every plan
    of the trace is kept until another trace's is asked for: the searches at the other capacities
    ask for many of them again (with the last four kept, reference_search_compare.py's CTest run
    made 856 transforms for 680 settings; about 6 MB a plan on tiny-mhc)."""
    key = (str(trace), setting_json({k: v for k, v in setting.items() if k != "allocator"}), repr(link), host_bw, cost)
    if key not in _PLANS:
        if any(k[0] != key[0] for k in _PLANS):
            _PLANS.clear()
        _cap, plan = ref.transform(trace, setting, host_bw, cost, cap)
        plan.run(link)
        _PLANS[key] = plan
    return _PLANS[key]


def predict_exactly(trace, cap, setting, link, host_bw, cost):
    """reference_settings.predict, the transformed step shared between allocator settings (the
    accesses left out: the search reads none)."""
    return timed_plan(trace, cap, setting, link, host_bw, cost).result(link, setting.get("allocator", ""), False)


def quick(trace, cap, setting, link, host_bw, cost):
    return cached("quick", trace, setting, link, host_bw, cost, lambda: _quick(trace, cap, setting, link, host_bw, cost))


def _quick(trace, cap, setting, link, host_bw, cost):
    """Live bytes per window and the step time of a setting (no caching allocator)."""
    plan = timed_plan(trace, cap, setting, link, host_bw, cost)
    ops = [op for op in plan.ops if op.kind != "removed"]
    step = (max(op.t1 for op in ops) - min(op.t0 for op in ops)) if ops else 0
    return windows(plan), step


class Classes:
    """Who owns each window (a block, or none), whether it is a forward one, and (outside blocks)
    how many blocks are held there."""

    def __init__(self, cap, block_ids):
        self.owner, self.fwd, self.held = {}, {}, {}
        first_f, last_f, first_b, last_b = {}, {}, {}, {}
        for k in cap.kernels:
            i, p = k["i"], cap.pass_of[k["i"]]
            self.fwd[i] = k["phase"] == ref.FWD
            own = next((b for b, mid in enumerate(block_ids) if cap.inside(k["module"], mid)), None)
            self.owner[i] = own
            if own is None:
                continue
            if k["phase"] == ref.FWD:
                first_f.setdefault((own, p), i)
                last_f[(own, p)] = i
            elif k["phase"] == ref.BWD:
                first_b.setdefault((own, p), i)
                last_b[(own, p)] = i
        for k in cap.kernels:   # an op of no block in the middle of a block's forward or backward
            i, p = k["i"], cap.pass_of[k["i"]]
            if self.owner[i] is not None:
                continue
            for b in range(len(block_ids)):
                if first_f.get((b, p), 1 << 60) < i < last_f.get((b, p), -1) or \
                        first_b.get((b, p), 1 << 60) < i < last_b.get((b, p), -1):
                    self.owner[i] = b
                    break
        for k in cap.kernels:
            i, p = k["i"], cap.pass_of[k["i"]]
            if self.owner[i] is None:
                self.held[i] = sum(1 for b in range(len(block_ids))
                                   if first_f.get((b, p), 1 << 60) < i < last_b.get((b, p), -1))
        for slot in (None, "end"):   # before the first and after the last kernel
            self.owner[slot], self.fwd[slot], self.held[slot] = None, False, 0


# ---------------------------------------------------------------- the separable model and the DP

def build_model(cls, base_win, deltas, times, nb):
    """Per block and choice: (wf, wb, df, db, time), None where the choice is not available; the gap
    windows' peaks per number of held blocks."""
    gap_f, gap_b = [None] * (nb + 1), [None] * (nb + 1)
    for s, v in base_win.items():
        if cls.owner.get(s) is not None:
            continue
        g = gap_f if cls.fwd.get(s) else gap_b
        h = min(cls.held.get(s, 0), nb)
        g[h] = v if g[h] is None else max(g[h], v)
    blocks = []
    for k in range(nb):
        opts = []
        for c in CHOICES:
            d = deltas[k].get(c)
            if d is None:
                opts.append(None)
                continue
            wf = wb = df = db = None
            for s, v in base_win.items():
                own = cls.owner.get(s)
                ds = d.get(s, 0)
                if own == k:
                    if cls.fwd.get(s):
                        wf = v + ds if wf is None else max(wf, v + ds)
                    else:
                        wb = v + ds if wb is None else max(wb, v + ds)
                    continue
                held = (own is not None and own > k) or (own is None and cls.held.get(s, 0) > k)
                if not held:
                    continue
                if cls.fwd.get(s):
                    df = ds if df is None else max(df, ds)
                else:
                    db = ds if db is None else max(db, ds)
            opts.append((wf, wb, df or 0, db or 0, times[k][c]))
        blocks.append(opts)
    return blocks, gap_f, gap_b


def fits(w, held, capacity):
    return w is None or w + held <= capacity


def model_peak(model, choice):
    blocks, gap_f, gap_b = model
    peak, sf, sb = None, 0, 0

    def upd(v, add):
        nonlocal peak
        if v is not None:
            peak = v + add if peak is None else max(peak, v + add)
    upd(gap_f[0], 0)
    upd(gap_b[0], 0)
    for k, c in enumerate(choice):
        wf, wb, df, db, _t = blocks[k][c]
        upd(wf, sf)
        upd(wb, sb)
        sf, sb = sf + df, sb + db
        upd(gap_f[k + 1], sf)
        upd(gap_b[k + 1], sb)
    return peak


def solve(model, capacity, allowed):
    """The fastest combination whose separable peak fits: a DP over blocks keeping, after each, the
    states no other beats in both held sums and time (states within one quantum in both sums
    merged into the fastest); ties in time: the smaller held forward sum, then backward sum."""
    blocks, gap_f, gap_b = model
    if not (fits(gap_f[0], 0, capacity) and fits(gap_b[0], 0, capacity)):
        return None
    layer = [(0, 0, 0, ())]
    for k, opts in enumerate(blocks):
        nxt = []
        for sf, sb, t, ch in layer:
            for c, o in enumerate(opts):
                if CHOICES[c] not in allowed or o is None:
                    continue
                wf, wb, df, db, dt = o
                if not (fits(wf, sf, capacity) and fits(wb, sb, capacity)):
                    continue
                n = (sf + df, sb + db, t + dt, ch + (c,))
                if fits(gap_f[k + 1], n[0], capacity) and fits(gap_b[k + 1], n[1], capacity):
                    nxt.append(n)
        merged = {}
        for st in nxt:
            key = (st[0] // QUANTUM, st[1] // QUANTUM)
            if key not in merged or st[2] < merged[key][2]:
                merged[key] = st
        layer = []
        for st in sorted(merged.values(), key=lambda x: (x[2], x[0], x[1])):
            if not any(o[0] <= st[0] and o[1] <= st[1] for o in layer):
                layer.append(st)
        if not layer:
            return None
    return list(layer[0][3])


# ---------------------------------------------------------------- allocator settings

def split_size_values(cap, most=SPLIT_VALUES):
    """docs/advise.md "Search", allocator settings: the device's requests rounded up to 512 B and
    the segments the allocator would give them (2 MiB up to 1 MiB, 20 MiB under 10 MiB, else the
    request rounded up to 2 MiB), each in MiB rounded down; those above 20 cut the values N > 20
    into classes (between one such size and the next above it, the next included); from the
    largest, at most `most` classes, each by its member with the most trailing zero bits."""
    sizes = set()
    for al in cap.allocs.values():
        if al["device"] < 0:
            continue
        r = max(512, -(-al["bytes"] // 512) * 512)
        seg = 2 * MIB if r <= MIB else 20 * MIB if r < 10 * MIB else -(-r // (2 * MIB)) * 2 * MIB
        sizes |= {x for x in (r // MIB, seg // MIB) if x > LEAST_SPLIT}
    sizes = sorted(sizes, reverse=True)
    out = []
    for i, hi in enumerate(sizes[:most]):
        lo = sizes[i + 1] if i + 1 < len(sizes) else LEAST_SPLIT
        best = max(range(lo + 1, hi + 1), key=lambda n: ((n & -n), -n))   # most trailing zeros
        out.append(best)
    return out


def roundup_values(cap, most=ROUNDUP_VALUES):
    """docs/advise.md "Search", allocator settings: of 2, 4, 8 and 16 divisions, those that round the
    device's requests otherwise than plain rounding and than each value before them, at most `most`."""
    sizes = [al["bytes"] for al in cap.allocs.values() if al["device"] >= 0]
    seen = [[reference_caching.round_size(n) for n in sizes]]
    out = []
    for d in (2, 4, 8, 16):
        if len(out) >= most:
            break
        conf = reference_caching.Conf(f"roundup_power2_divisions:{d}")
        got = [reference_caching.round_size(n, conf) for n in sizes]
        if got in seen:
            continue
        seen.append(got)
        out.append(d)
    return out


def allocator_settings(cap, predict, at=None, on=({},)):
    """The allocator settings the search tries: as captured, expandable segments, and for each
    setting of `on` (the global settings alone, the captured step's first) the max_split_size_mb
    (each value alone, then with expandable segments, largest value first) or
    roundup_power2_divisions (likewise, after them) that does best on that step at the capacity,
    when it does better there than both of theirs (of equals, the first), each once: one that runs
    there first, then the smaller cost of giving cached memory back there, then the smaller reserved
    peak there, then without a limit; one that does not run, by its reserved peak without a limit.
    `at(setting, prediction)`: the run at the capacity (at_capacity); None: by the reserved peak
    without a limit alone. Returns (the list, the first one added or "")."""
    values = split_size_values(cap)
    divisions = roundup_values(cap)
    if not values and not divisions:
        return list(ALLOCATORS), ""

    def key(step, conf):
        s = dict(step, allocator=conf) if conf else dict(step)
        p = predict(s)
        if at is not None:
            r = at(s, p)
            if r["runs"]:
                return (0, r["steady_cost"], r["cost"], r["reserved_at"], p["reserved_bytes"])
        return (1, 0, 0, 0, p["reserved_bytes"])

    tries = [c for v in values for c in (f"max_split_size_mb:{v}", f"expandable_segments:True,max_split_size_mb:{v}")]
    tries += [c for d in divisions for c in (f"roundup_power2_divisions:{d}",
                                             f"expandable_segments:True,roundup_power2_divisions:{d}")]
    added = []
    for step in on:
        least = min(key(step, c) for c in ALLOCATORS)
        kept = ""
        for conf in tries:
            k = key(step, conf)
            if k < least:
                least, kept = k, conf
        if kept and kept not in added:
            added.append(kept)
    return list(ALLOCATORS) + added, (added[0] if added else "")


# ---------------------------------------------------------------- the search

def combine(names, global_setting, choice):
    """global_setting: (the global setting, the offload the block choices use)."""
    g, offload = global_setting
    s = dict(g)
    groups = []
    for c, policy in (("full", "full"), ("save_matmuls", "save_matmuls"), ("mhc", "mhc")):
        mods = [names[k] for k, x in enumerate(choice)
                if CHOICES[x] == c or (c == "full" and CHOICES[x] == "full_offload")]
        if mods:
            groups.append({"modules": mods, "policy": policy})
    if groups:
        s["checkpoint"] = groups[0] if len(groups) == 1 else groups
    off = [names[k] for k, x in enumerate(choice) if CHOICES[x] in OFFLOADING]
    if off:
        s["offload"] = dict(offload, modules=off)
    return s


def reads_as(setting):
    """The setting as its answer reads: the same choices on as many blocks of each stack (a module's
    name less its last component), the same global settings, the allocator aside."""
    def counts(mods):
        per = {}
        for m in mods:
            stack = m.rpartition(".")[0]
            per[stack] = per.get(stack, 0) + 1
        return sorted(per.items())
    s = {k: v for k, v in setting.items() if k != "allocator"}
    ck = s.get("checkpoint")
    if ck is not None:
        s["checkpoint"] = [dict(g, modules=counts(g["modules"])) for g in (ck if isinstance(ck, list) else [ck])]
    if s.get("offload") and s["offload"].get("modules") is not None:
        # an offloaded block checkpointed in full (its inputs offloaded) reads apart from one that is not
        groups = ck if isinstance(ck, list) else [ck] if ck else []
        full = {m for g in groups if g.get("policy", "full") == "full" for m in g["modules"]}
        mods = s["offload"]["modules"]
        s["offload"] = dict(s["offload"], modules=counts([m for m in mods if m not in full]) +
                            [("checkpointed " + st, n) for st, n in counts([m for m in mods if m in full])])
    return setting_json(s)


def rank_key(c):
    """The ranking's order: fitting first, faster (the time at the capacity: the step's and what
    giving cached memory back there costs in steady steps), then with the capture's own cost (a first
    step's release), the shorter setting, the smaller reserved peak, the
    setting's JSON in byte order."""
    return (not c["fits"], c["time"], c["captured_time"], len(c["key"]), c["reserved"], c["key"].encode())


def closer(x, y):
    """Whether the exact search prefers x to y: of two that do not fit, the smaller reserved peak,
    then the smaller live peak; otherwise (or on equal peaks) the ranking's order."""
    if not x["fits"] and not y["fits"]:
        if x["reserved"] != y["reserved"]:
            return x["reserved"] < y["reserved"]
        if x["peak"] != y["peak"]:
            return x["peak"] < y["peak"]
    return rank_key(x) < rank_key(y)


def exact_search(starts, globals_, names, deltas, candidate, step_time, allocators=tuple(ALLOCATORS)):
    """From the closest of the starts, moves to the closest neighbour (one block's choice changed,
    in block then choice order, then the global setting changed), each under its closer allocator
    setting, while it fits and is faster (once the combination fits: a neighbour whose step time
    alone is not below the combination's is not predicted) or is closer (before). Once it fits and
    no single change is better, two changes at once: one that alone is faster (and did not fit) with
    any other on another block or the global setting, each pair once."""
    def value(point):
        gi, choice = point
        best = None
        for conf in allocators:
            s = combine(names, globals_[gi], list(choice))
            if conf:
                s["allocator"] = conf
            c = candidate(s)
            if best is None or closer(c, best):
                best = c
        return best

    def apply(point, change):
        gi, choice = point
        at, to = change
        if at == "global":
            return (to, choice)
        return (gi, choice[:at] + (to,) + choice[at + 1:])

    cur, now = starts[0], value(starts[0])
    for p in starts:
        c = value(p)
        if closer(c, now):
            cur, now = p, c
    for _round in range(REFINE_ROUNDS):
        best = [cur, now]
        gi, choice = cur

        def consider(p):
            t = None
            if now["fits"]:
                t = step_time(p)
                if t >= now["time"]:
                    return t   # only a faster one can be better: its time first (no allocator changes it)
            c = value(p)
            if closer(c, best[1]):
                best[0], best[1] = p, c
            return t

        singles = [(k, c) for k in range(len(choice)) for c in range(len(CHOICES))
                   if c != choice[k] and deltas[k].get(CHOICES[c]) is not None]
        singles += [("global", h) for h in range(len(globals_)) if h != gi]
        times = [consider(apply(cur, ch)) for ch in singles]

        def better():
            got = best[1]
            return (got["fits"] and got["time"] < now["time"]) if now["fits"] else (got["fits"] or closer(got, now))

        if not better() and now["fits"]:
            faster = [t is not None and t < now["time"] for t in times]
            for i, a in enumerate(singles):
                if not faster[i]:
                    continue
                for j, b in enumerate(singles):
                    if b[0] == a[0] or (faster[j] and j < i):
                        continue
                    consider(apply(apply(cur, a), b))
        if not better():
            break
        cur, now = best[0], best[1]


def grads_read_on_gpu(cap):
    try:
        ref.reads_gradients_between(cap)
        return False
    except ValueError:
        return True


def at_capacity(trace, setting, p, capacity, link, host_bw, cost):
    """docs/advise.md "What fits" and "What running at the capacity costs": the run of the prediction
    p at the capacity (reference_settings.retry_cost: runs, reserved_at, retries, the counts, cost):
    at or above the reserved peak without a limit nothing fails, and unless garbage collection
    collects there (its threshold's share of the capacity below that peak) it is the run without a
    limit; else the caching model runs with the capacity as the GPU's limit."""
    gc = ref.gc_threshold(p["conf"])
    if p["reserved_bytes"] <= capacity and not (gc > 0 and p["reserved_bytes"] > int(gc * capacity)):
        return dict(runs=True, reserved_at=p["reserved_bytes"], retries=0, releases=0, segments_freed=0,
                    bytes_freed=0, segments_remade=0, bytes_remade=0, cost=0, steady=None, steady_cost=0)
    return cached(f"runs at {capacity}", trace, setting, link, host_bw, cost,
                  lambda: ref.retry_cost(p["device_rows"], p["conf"], capacity, p["steps"], p["second_step_at"]))


def search(trace, capacity, budget=None, top=3, link=ref.LINKS["pcie5"], host_bw=100e9, cost=15000):
    cap = cached("capture", trace, {}, None, 0, 0, lambda: ref.Captured(trace))
    bids = blocks(cap)
    names = [cap.modules[b]["name"] for b in bids]   # as the capture spells them
    nb = len(bids)

    def predict(s):
        return cached("predict", trace, s, link, host_bw, cost, lambda: predict_exactly(trace, cap, s, link, host_bw, cost))

    baseline = predict({})
    base_win, base_time = quick(trace, cap, {}, link, host_bw, cost)
    # each choice alone, per offload mode (a second mode evaluates only the choices that offload)
    by_mode = []
    for mode, offload in enumerate(BLOCK_OFFLOADS):
        deltas = [dict() for _ in range(nb)]
        times = [dict(keep=0) for _ in range(nb)]
        for k in range(nb):
            deltas[k]["keep"] = {}
            # neither checkpointing nor offloading where a later backward reads the block's saves again
            if ref.reread_refusal(cap, bids[k]):
                continue
            for c in CHOICES[1:]:
                if c == "mhc" and not has_type(cap, bids[k], "HcMaps"):
                    continue
                # keep matmuls on a block whose forward runs none (cuDNN's RNN) is full checkpointing
                if c == "save_matmuls" and not offers_selective(cap, bids[k]):
                    continue
                if mode > 0 and c not in OFFLOADING:
                    deltas[k][c], times[k][c] = by_mode[0][0][k][c], by_mode[0][1][k][c]
                    continue
                w, t = quick(trace, cap, combine(names, ({}, offload),
                                                 [CHOICES.index(c) if j == k else 0 for j in range(nb)]),
                             link, host_bw, cost)
                deltas[k][c] = {s: w.get(s, 0) - base_win.get(s, 0) for s in set(w) | set(base_win)}
                times[k][c] = t - base_time
        by_mode.append((deltas, times))
    deltas = by_mode[0][0]
    cls = Classes(cap, bids)
    # global combinations: the optimizer as captured, on the host, fused (foreach Adam(W) only)
    has_opt = bool(ref.optimizer_steps(cap))
    foreach = any(k["name"].startswith("aten::_foreach_") for k in cap.kernels)
    adam = any(c in cap.meta.get("capture.optimizer_class", "AdamW") for c in ("Adam", "AdamW"))
    ddp = cap.meta.get("capture.data_parallel", "") == "ddp"
    globals_ = [{}]
    # where the fused AdamW is offered the host's step is fused as well (a fifth of the for-loop's time)
    if has_opt and not grads_read_on_gpu(cap) and not ddp:
        globals_.append({"optimizer": {"state": "host", "impl": "fused"} if foreach and adam else {"state": "host"}})
    if foreach and adam and has_opt:
        globals_.append({"optimizer": {"impl": "fused"}})
    # the allocator's values, tried on each global setting alone
    allocators, split_conf = allocator_settings(
        cap, predict, lambda s, p: at_capacity(trace, s, p, capacity, link, host_bw, cost), on=globals_)
    # each global setting under each offload mode, the modes outermost (one mode where no block offloads)
    modes = range(len(BLOCK_OFFLOADS)) if any(d.get("offload") is not None for d in deltas) else range(1)
    globals_ = [(g, BLOCK_OFFLOADS[m]) for m in modes for g in globals_]
    mode_of = [m for m in modes for _g in range(len(globals_) // len(modes))]
    seen = {}

    def candidate(s):
        key = setting_json(s)
        if key not in seen:
            p = predict(s)
            run = at_capacity(trace, s, p, capacity, link, host_bw, cost)
            total = p["step_time_ns"] + run["steady_cost"]   # the time at the capacity, steady steps
            loss = total / baseline["step_time_ns"] - 1 if baseline["step_time_ns"] > 0 else 0
            seen[key] = dict(setting=s, key=key, peak=p["peak_bytes"], reserved=p["reserved_bytes"],
                             host=p["host_peak_bytes"], step=p["step_time_ns"], time=total, loss=loss,
                             fits=run["runs"], reserved_at=run["reserved_at"], retries=run["retries"],
                             cost=run["cost"], steady_cost=run["steady_cost"],
                             captured_time=p["step_time_ns"] + run["cost"],
                             within=budget is None or loss <= budget + 1e-12)
        return seen[key]

    dp_runs = 0
    starts = []   # (global's index, block choices): the global settings alone and every DP answer
    for gi, (g, _offload) in enumerate(globals_):
        starts.append((gi, (0,) * nb))
        gw, _gt = quick(trace, cap, g, link, host_bw, cost)
        model = build_model(cls, gw, *by_mode[mode_of[gi]], nb)
        pg = candidate(g)
        base_margin = max(0, pg["reserved"] - pg["peak"])
        for fam in FAMILIES:
            if mode_of[gi] > 0 and not fam & set(OFFLOADING):
                continue   # without an offload, the first mode's family again
            margin = base_margin
            for _round in range(ROUNDS):
                choice = solve(model, capacity - margin, fam)
                dp_runs += 1
                if choice is None and _round == 0 and margin > 0:
                    margin = 0   # once more without the margin: the exact prediction decides
                    continue
                if choice is None:
                    break
                starts.append((gi, tuple(choice)))
                best = None
                for conf in allocators:
                    s = combine(names, globals_[gi], choice)
                    if conf:
                        s["allocator"] = conf
                    c = candidate(s)
                    # one that runs at the capacity, else the least reserving (whose excess grows the margin)
                    if best is None or (c["fits"], -c["reserved"]) > (best["fits"], -best["reserved"]):
                        best = c
                if best["fits"]:
                    break
                margin += best["reserved"] - capacity + MARGIN_STEP
    # from each global setting's best start: each optimizer choice under each offload mode
    # (docs/advise.md "Search", step 5)
    for gi in range(len(globals_)):
        mine = [p for p in starts if p[0] == gi]
        if mine:
            exact_search(mine, globals_, names, deltas, candidate,
                         lambda p: quick(trace, cap, combine(names, globals_[p[0]], list(p[1])), link, host_bw,
                                         cost)[1], allocators)
    every = sorted(seen.values(), key=rank_key)
    ranked, shown = [], set()
    for c in every:
        if not c["fits"] or not c["within"] or len(ranked) >= top:
            continue
        key = reads_as(c["setting"])
        # as fast as one above, the same peaks (at the capacity too), at least its host bytes: it
        # adds a change that changes nothing on the GPU (docs/advise.md, how answers read)
        if key in shown or any(c["time"] == r["time"] and c["peak"] == r["peak"] and c["reserved"] == r["reserved"]
                               and c["reserved_at"] == r["reserved_at"] and c["host"] >= r["host"] for r in ranked):
            continue
        shown.add(key)
        ranked.append(c)
    if not ranked:
        fitting = [c for c in every if c["fits"]]
        if fitting:
            close = min(fitting, key=lambda c: c["loss"])
            raise NothingFits(f"within the budget: the closest is {close['key']} at {close['loss']:+.3f}")
        close = min(every, key=lambda c: c["reserved"]) if every else None
        raise NothingFits(f"the closest is {close['key'] if close else '{}'}")
    base_runs = at_capacity(trace, {}, baseline, capacity, link, host_bw, cost)["runs"]
    return dict(baseline=baseline, baseline_fits=base_runs, ranked=ranked, dp_runs=dp_runs, blocks=names,
                split_conf=split_conf)


if __name__ == "__main__":
    import sys
    r = search(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else None)
    for c in r["ranked"]:
        print(c["key"], c["peak"], c["reserved"], c["time"], f"{c['loss']:+.4f}")
    print("dp runs", r["dp_runs"])
