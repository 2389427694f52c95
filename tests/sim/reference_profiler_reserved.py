"""What `mhc simulate --allocator caching` says about a profiler's reserved figures, read from the
documents alone (docs/simulator.md, "Allocator models": "Start from a profiler's figure" and "Said
where it matters"; docs/import.md, the eleventh audit: what users see; docs/cli.md "Sizes"). The
caching allocator under it is reference_allocator_outside.py (an outside reading of the same
section); nothing here is shared with sim/.

predict(allocs, meta, device) returns the model's three unlimited reserved peaks (from the first
figure, from an empty cache, with expandable segments over the recorded settings) and the warnings
the document says a caching run prints, as dicts of their facts (kind and figures), not their words.
Standard library only."""
import reference_allocator_outside as ra

SHARE = 0.05   # "more than 5%"


def off(a, b, recorded):
    """|a - b| is more than 5% of the recorded peak."""
    return abs(a - b) > SHARE * recorded


def events(allocs):
    """docs/trace-format.md, "Events at one instant": at one time the frees of earlier allocations (by
    row), then its allocations (by row), one freed at its own instant right after it."""
    times = sorted({a[1] for a in allocs} | {a[2] for a in allocs if a[2] is not None})
    made, freed = {}, {}
    for i, (_, ta, tf, _s) in enumerate(allocs):
        made.setdefault(ta, []).append(i)
        if tf is not None and tf > ta:
            freed.setdefault(tf, []).append(i)
    out = []
    for t in times:
        out += [("free", i, t) for i in freed.get(t, [])]
        for i in made.get(t, []):
            out.append(("alloc", i, t))
            if allocs[i][2] == t:
                out.append(("free", i, t))
    return out


def reserved_peak(allocs, conf, first=None):
    """The caching model's reserved peak at unlimited capacity; first: the profiler's reserved bytes
    at its first memory event, topped up "before the first allocation recorded after t = 0"."""
    a = ra.Allocator(conf)
    blocks, peak = {}, 0
    for kind, i, t in events(allocs):
        if kind == "alloc":
            if first and t > 0:
                a.top_up(first)
                first = None
            blocks[i] = a.malloc(allocs[i][0], allocs[i][3])
            assert blocks[i] is not None, "unlimited capacity places everything"
        else:
            a.free(blocks.pop(i))
        peak = max(peak, a.reserved)
    return peak


def figure(meta, key, device):
    """A meta figure of the device; absent, unreadable or 0 is none ("a figure of 0 is none")."""
    v = meta.get(f"{key}.device{device}")
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def predict(allocs, meta, device=0, asked=""):
    """allocs: the device's (bytes, t_alloc, t_free or None, stream) rows; meta: the trace's meta;
    asked: the run's --allocator-conf (over the recorded settings)."""
    recorded_conf = meta.get("allocator.conf", "")
    recorded = figure(meta, "kineto.reserved_peak", device)
    first = figure(meta, "kineto.reserved_first", device)
    model = reserved_peak(allocs, recorded_conf, first)
    out = {"model": model, "recorded": recorded, "first": first, "warnings": [],
           # mhc info: the figure at the first memory event, 0 included (an empty cache), where it is at
           # most the recorded peak (the peak counts the first event: a larger one contradicts it)
           "info_first": None}
    raw = meta.get(f"kineto.reserved_first.device{device}")
    if recorded is not None and raw is not None and raw.strip().isdigit() and int(raw) <= recorded:
        out["info_first"] = int(raw)
    if recorded is None:   # "on a trace whose meta holds the profiler's reserved peak"
        return out
    empty = reserved_peak(allocs, recorded_conf)
    # "with expandable_segments:True over the recorded settings": the model's what-if, which starts
    # from the first figure as the model does (docs/import.md's table: "model now: default / expandable")
    conf = ra.Conf(recorded_conf)
    conf.update("expandable_segments:True")
    expandable = reserved_peak(allocs, conf, first)
    out.update(empty=empty, expandable=expandable)
    if first is not None and off(model, empty, recorded):
        out["warnings"].append({"kind": "first", "first": first, "empty": empty,
                                "ratio": round(empty / recorded, 3)})
    if off(model, recorded, recorded):
        w = {"kind": "off", "ratio": round(model / recorded, 3)}
        if model > recorded:
            w["cause"] = "settings"
        elif raw is None or not raw.strip().isdigit():   # imported before the first figure was kept (0 is kept)
            w["cause"] = "import again"
        else:
            w["cause"] = "grew"
        # the what-if, above or below: not offered to a run that has expandable segments already
        run_conf = ra.Conf(recorded_conf)
        run_conf.update(asked)
        if not run_conf.expandable and not off(expandable, recorded, recorded):
            w["expandable"] = expandable
            w["expandable_ratio"] = round(expandable / recorded, 3)
        out["warnings"].append(w)
    return out


def size_text(n):
    """docs/cli.md: sizes in binary units with two decimals."""
    for unit, p in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << p:
            return f"{n / (1 << p):.2f} {unit}"
    return f"{n} B"
