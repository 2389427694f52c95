#!/usr/bin/env python3
"""Checks `mhc import` of PyTorch memory snapshots against the snapshot's own accounting,
computed here from the pickle with Python's standard library only (no mhc code):

  python3 snapshot_accounting.py MHC_EXE SNAPSHOT...      (a .pickle or .pickle.gz each)

For every device of every snapshot, replaying its events in file order:
  * the peak of the allocator's blocks (what torch.cuda.max_memory_allocated counts): each
    alloc event's block is its request rounded (round_size), or in the large pool without
    expandable segments the whole free block it landed in when the allocator did not split it
    (the room from its address to the next live block or the segment's end);
  * the peak of requested bytes (memory_viz's accounting: event sizes, and requested_size for
    blocks allocated before recording);
  * the peak of reserved bytes: the end state's total_size, minus the segment events after
    each point;
  * the end state: the blocks the replay leaves alive are the end state's active blocks, and
    their sizes add up to the segments' own figures.
`mhc info --json` must give the three peaks within 0.1%, and `mhc simulate --capacity unlimited`
must give back the baseline (simulated peak = baseline peak = info's peak). The same holds for the file
saved as JSON (json.dump of the same value) and for two variants of each file written here: without time_us (timing order-only, said by info and simulate)
and with time_us rounded down to 100 us (blocks allocated and freed within one microsecond).
A pickle of torch.cuda.memory_snapshot() (the segments list alone) or a snapshot recorded without
trace events is its end state: the blocks alive then, from t = 0 (timing order-only).
The snapshot's external_annotations (record_function ranges) must be mhc's range markers, placed
by the rule of annotation_ranges(), and its steps the step markers of annotation_steps().
Copies of each file with one field of the wrong type (an event's addr or size as a str, its stream
None, a segment's total_size as a str, a block in a state PyTorch does not write) must be refused,
exit 2, in one line naming the file and the event or block.
Exit status 1 on a mismatch, with one line per figure.
"""
import bisect
import gzip
import json
import math
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import tempfile

MIN_BLOCK, SMALL_SIZE = 512, 1 << 20
TOLERANCE = 0.001


class PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {module}.{name}: a snapshot is plain data")


def load(path):
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return PlainData(f).load()


def round_size(size, divisions):
    """CUDACachingAllocator round_size (with roundup_power2_divisions)."""
    if size < MIN_BLOCK:
        return MIN_BLOCK
    div = divisions.get(min(max(size.bit_length() - 1 - 20, 0), 15), 0)
    if div > 1 and size > MIN_BLOCK * div:
        if size & (size - 1) == 0:
            return size
        floor2 = 1 << (size.bit_length() - 1)
        step = floor2 >> (div.bit_length() - 1)
        if step == 0:
            return floor2 << 1
        lo = size & ~(step - 1)
        return size if lo == size else lo + step
    return (size + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def settings(snap):
    s = snap.get("allocator_settings") or {}
    divisions = {}
    rp = s.get("roundup_power2_divisions")
    if isinstance(rp, dict):
        for k, v in rp.items():
            if v:
                divisions[min(max(int(k).bit_length() - 1, 0), 15)] = v
    elif isinstance(rp, int) and rp > 0:
        divisions = {i: rp for i in range(16)}
    max_split = s.get("max_split_size", -1)
    max_split = max_split if isinstance(max_split, int) and 0 < max_split < (1 << 56) else float("inf")
    return bool(s.get("expandable_segments")), max_split, divisions


def end_blocks(snap, device):
    """Active end-state blocks of `device`: address -> (size, requested)."""
    out = {}
    for seg in snap.get("segments", []):
        if seg.get("device", 0) != device:
            continue
        addr = seg.get("address")
        for b in seg.get("blocks", []):
            a = b.get("address", addr)
            if a is None:
                break
            if b["state"] in ("active_allocated", "active_pending_free"):
                req = b.get("requested_size") or (b.get("history") or [{}])[0].get("real_size") or b["size"]
                out[a] = (b["size"], min(req, b["size"]))
            addr = a + b["size"]
    return out


def segment_intervals(snap, device, trace):
    """Non-expandable segments as (address, size, first, last): alive after event index
    `first` (-1: from the start) until event index `last` (len(trace): to the end)."""
    spans, open_at = [], {}
    for k, e in enumerate(trace):
        if e["action"] == "segment_alloc":
            open_at[e["addr"]] = (e["size"], k)
        elif e["action"] == "segment_free":
            size, first = open_at.pop(e["addr"], (e["size"], -1))
            spans.append((e["addr"], size, first, k))
    last_event = {}
    for k, e in enumerate(trace):
        if e["action"] in ("segment_alloc", "segment_free"):
            last_event[e["addr"]] = k
    for seg in snap.get("segments", []):
        if seg.get("device", 0) != device or seg.get("is_expandable"):
            continue
        a = seg["address"]
        if a in open_at:
            size, first = open_at.pop(a)
        else:
            size, first = seg["total_size"], last_event.get(a, -1)
        spans.append((a, size, first, len(trace)))
    for a, (size, first) in open_at.items():
        spans.append((a, size, first, len(trace)))
    return spans


def replay(snap, device, first=0):
    """The device's figures over the states from the one before event `first` on (0: all)."""
    traces = snap["device_traces"]
    trace = traces[device] if device < len(traces) else []   # an end state alone has no events
    expandable, max_split, divisions = settings(snap)
    ends = end_blocks(snap, device)
    completed = any(e["action"] == "free_completed" for e in trace)
    free_actions = ("free_completed", "free") if completed else ("free_requested", "free")
    spans = segment_intervals(snap, device, trace)
    expandable_ranges = [(s["address"], s["address"] + s["total_size"]) for s in snap.get("segments", [])
                         if s.get("device", 0) == device and s.get("is_expandable")]
    # expandable_segments is one setting for the whole allocator: where allocator_settings does not
    # name it (PyTorch < 2.4), a snapshot holding expandable segments had it on.
    if "expandable_segments" not in (snap.get("allocator_settings") or {}):
        expandable = any(e["action"] in ("segment_map", "segment_unmap") for t in traces for e in t) or \
            any(s.get("is_expandable") for s in snap.get("segments", []))
    # Blocks alive before recording: frees with no alloc before them, and end-state blocks the
    # trace leaves unexplained (alive from the start, or from the last free at their address).
    seen, pre_free = set(), []
    last_free = {}
    live_at_end = set()
    for k, e in enumerate(trace):
        if e["action"] == "alloc":
            seen.add(e["addr"])
            live_at_end.add(e["addr"])
        elif e["action"] in free_actions:
            if e["addr"] not in seen:
                pre_free.append(e)
            seen.add(e["addr"])
            live_at_end.discard(e["addr"])
            last_free[e["addr"]] = k
    born_at = {}   # event index -> end-state blocks that appear right after it
    for a, sb in ends.items():
        if a not in live_at_end:
            born_at.setdefault(last_free.get(a, -1), []).append((a, sb))
    live = {}      # address -> (block, requested)
    for e in pre_free:
        live[e["addr"]] = (round_size(e["size"], divisions), e["size"])
    for a, (size, req) in born_at.get(-1, []):
        live[a] = (size, req)

    def block_of(k, e):
        size = round_size(e["size"], divisions)
        if size <= SMALL_SIZE:
            return size
        a = e["addr"]
        if expandable or any(lo <= a < hi for lo, hi in expandable_ranges):
            return size
        seg = [s for s in spans if s[0] <= a < s[0] + s[1] and s[2] < k < s[3]]
        if not seg:
            return size
        end = seg[0][0] + seg[0][1]
        nxt = [b for b in live if a < b < end]
        room = (min(nxt) if nxt else end) - a
        return size if room < size or (size < max_split and room - size > SMALL_SIZE) else room

    # A block allocated before recording and freed in it (a wrapped ring's) takes the room at its
    # address among every block alive at the start, as an alloc's block takes the room it landed
    # in: a large-pool free block is always more than 1 MiB (a split leaves more, a freed block is
    # more), so 1 MiB or less up to the next live block is the block's own, not split off.
    for e in pre_free:
        live[e["addr"]] = (block_of(-0.5, e), e["size"])
    block_sum = sum(b for b, _ in live.values())
    req_sum = sum(r for _, r in live.values())
    peak_block, peak_req = (block_sum, req_sum) if first == 0 else (0, 0)

    for k, e in enumerate(trace):
        act = e["action"]
        if act == "alloc":
            if e["addr"] in live:   # a free the trace never recorded: the old block ends here
                b, r = live.pop(e["addr"])
                block_sum -= b
                req_sum -= r
            b = block_of(k, e)
            live[e["addr"]] = (b, e["size"])
            block_sum += b
            req_sum += e["size"]
            if k >= first:
                peak_block, peak_req = max(peak_block, block_sum), max(peak_req, req_sum)
        elif act in free_actions and e["addr"] in live:
            b, r = live.pop(e["addr"])
            block_sum -= b
            req_sum -= r
        for a, (size, req) in born_at.get(k, []):
            live[a] = (size, req)
            block_sum += size
            req_sum += req
            if k >= first:
                peak_block, peak_req = max(peak_block, block_sum), max(peak_req, req_sum)
        if k == first - 1:   # the state the window starts from
            peak_block, peak_req = max(peak_block, block_sum), max(peak_req, req_sum)
    # Reserved: the end state's total, minus each segment event after a point.
    reserved_end = sum(s["total_size"] for s in snap.get("segments", []) if s.get("device", 0) == device)
    deltas = [(k, e["size"] if e["action"] in ("segment_alloc", "segment_map") else -e["size"])
              for k, e in enumerate(trace)
              if e["action"] in ("segment_alloc", "segment_map", "segment_free", "segment_unmap")]
    reserved = reserved_end - sum(d for _, d in deltas)
    peak_reserved = None
    for k, d in deltas:
        if k >= first and peak_reserved is None:
            peak_reserved = reserved   # the state before the window's first segment event
        reserved += d
        if k >= first:
            peak_reserved = max(peak_reserved, reserved)
    if peak_reserved is None:
        peak_reserved = reserved
    end_ok = sorted(live) == sorted(ends) and all(live[a][0] == ends[a][0] for a in ends)
    return {"peak_bytes": peak_block, "requested_peak_bytes": peak_req,
            "reserved_peak_bytes": peak_reserved if snap.get("segments") else None, "end_state": end_ok}


def mhc(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mhc {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def variants(snap):
    """(name, snapshot, expected meta timing, what to write): the file as recorded (written: None),
    and variants of its shape: without time_us (order only); with time_us rounded down to 100 us,
    where many blocks are allocated and freed in one microsecond (file order decides, not the
    clock); and its end state alone, as pickle.dump(torch.cuda.memory_snapshot()) writes it (the
    segments list) and as _dump_snapshot() without _record_memory_history() does (no events)."""
    timed = all("time_us" in e for t in snap["device_traces"] for e in t) and any(snap["device_traces"])
    yield "as recorded", snap, "exact" if timed else "order-only", None
    if not any(snap["device_traces"]) or not snap.get("segments"):
        return
    end = {"segments": snap["segments"], "device_traces": []}
    yield "end state: segments list", end, "order-only", snap["segments"]
    yield "end state: no trace events", end, "order-only", dict(snap, device_traces=[[] for _ in snap["device_traces"]])
    if not timed:
        return
    strip = dict(snap, device_traces=[[{k: v for k, v in e.items() if k != "time_us"} for e in t]
                                      for t in snap["device_traces"]])
    yield "without time_us", strip, "order-only", strip
    coarse = dict(snap, device_traces=[[dict(e, time_us=e["time_us"] // 100 * 100) for e in t]
                                       for t in snap["device_traces"]])
    yield "time_us rounded to 100 us", coarse, "exact", coarse


def wrapped(snap, keep):
    """The snapshot as _record_memory_history(max_entries=M) would have written it had its ring
    held only the last `keep` of each device's events: PyTorch overwrites the oldest entries, so
    the trace starts anywhere (frees of blocks allocated before it, free_completed without its
    free_requested, segment_free of segments it never saw). The end state is unchanged."""
    traces = [t[len(t) - max(1, int(len(t) * keep)):] if t else t for t in snap["device_traces"]]
    return dict(snap, device_traces=traces)


def two_devices(snap):
    """The snapshot's device 0 recorded again on device 1 (same addresses: each device has its
    own address space), as one process driving two GPUs writes it: device_traces[1] and the
    end-state segments with device 1. Every figure of device 1 must be device 0's."""
    return dict(snap, device_traces=[snap["device_traces"][0], snap["device_traces"][0]],
                segments=snap["segments"] + [dict(s, device=1) for s in snap["segments"]])


def newer_fields(snap):
    """The snapshot as a newer PyTorch writes it (torch.cuda.memory._snapshot's TraceEntry): each
    event with `pool_id` (a tuple: the pool of the end-state segment its address lies in, from the
    last segment_alloc or segment_map inside that segment on, else the default pool's (0, 0)),
    `user_metadata` (_set_memory_metadata) and, on OOMs, `device_free`; an `annotate` event
    (_annotate_tensor: the allocation's address and metadata, no size) after every tenth alloc.
    None of them allocates or frees: every figure stays."""
    def pools_of(dev, t):
        segs = sorted((s["address"], s["address"] + s["total_size"], tuple(s.get("segment_pool_id") or (0, 0)))
                      for s in snap.get("segments") or [] if s.get("device", 0) == dev and "address" in s)
        starts = [s[0] for s in segs]

        def seg_of(e):
            i = bisect.bisect_right(starts, e.get("addr", -1)) - 1
            return i if i >= 0 and e.get("addr", -1) < segs[i][1] and len(segs[i][2]) == 2 else None
        made = {}
        for k, e in enumerate(t):
            if e["action"] in ("segment_alloc", "segment_map") and seg_of(e) is not None:
                made[seg_of(e)] = k
        return [segs[i][2] if (i := seg_of(e)) is not None and k >= made.get(i, -1) else (0, 0)
                for k, e in enumerate(t)]

    def entries(dev, t):
        pools = pools_of(dev, t)
        for k, e in enumerate(t):
            yield dict(e, pool_id=pools[k], user_metadata=f"step {k // 1000}",
                       **({"device_free": 0} if e["action"] == "oom" else {}))
            if e["action"] == "alloc" and k % 10 == 0:
                yield {k2: v for k2, v in e.items() if k2 not in ("size",)} | {"action": "annotate",
                                                                                "user_metadata": "{\"kind\": \"x\"}"}
    return dict(snap, device_traces=[list(entries(d, t)) for d, t in enumerate(snap["device_traces"])])


def ring_variants(snap):
    """(name, snapshot, expected timing, full-trace figures per device the variant must also
    give): the ring wrapped at two points, and two devices. A wrapped ring's peaks over its
    window must be the full recording's over the same window (events from the first kept one
    on, and the state just before it): the bytes alive then are reconstructed by the import."""
    if not snap.get("segments") or len(snap["device_traces"]) != 1 or len(snap["device_traces"][0]) < 100:
        return
    timed = all("time_us" in e for e in snap["device_traces"][0])
    timing = "exact" if timed else "order-only"
    for keep in (0.5,):   # one window: each variant costs an import, info and simulate (CI time)
        cut = len(snap["device_traces"][0]) - max(1, int(len(snap["device_traces"][0]) * keep))
        yield f"ring wrapped: last {int(keep * 100)}% of the events", wrapped(snap, keep), timing, {
            0: replay(snap, 0, first=cut)}
    whole = replay(snap, 0)
    yield "two devices", two_devices(snap), timing, {0: whole, 1: whole}
    yield "newer PyTorch's event fields and annotate events", newer_fields(snap), timing, {0: whole}


def hostile_variants(snap):
    """(name, snapshot, what the refusal must say): the snapshot with one field changed as another
    writer could write it (a str where PyTorch writes an int, a JSON null, a block state named as
    torch.cuda.memory._snapshot's docstring names it). Each must be refused, exit 2, in one line
    naming the file and the event or block: before 2026-12-03 each was read as 0 or as an inactive
    block, without a word."""
    for device, trace in enumerate(snap["device_traces"]):
        allocs = [k for k, e in enumerate(trace) if e["action"] == "alloc"]
        if allocs:
            k = allocs[len(allocs) // 2]
            e = trace[k]
            for key, value, said in (("addr", hex(e["addr"]), "'addr' is a str, not an int"),
                                     ("size", str(e["size"]), "'size' is a str, not an int"),
                                     ("stream", None, "'stream' is None, not an int")):
                changed = [list(t) for t in snap["device_traces"]]
                changed[device][k] = dict(e, **{key: value})
                yield f"{key} of device_traces[{device}][{k}] as {type(value).__name__}", dict(
                    snap, device_traces=changed), f"device_traces[{device}][{k}]: {said}"
            break
    for i, seg in enumerate(snap.get("segments", [])):
        for j, b in enumerate(seg.get("blocks", [])):
            if b.get("state") == "active_allocated":
                blocks = list(seg["blocks"])
                blocks[j] = dict(b, state="active_awaiting_free")
                segments = list(snap["segments"])
                segments[i] = dict(seg, blocks=blocks)
                yield f"segments[{i}].blocks[{j}] in state active_awaiting_free", dict(snap, segments=segments), \
                    f"segments[{i}].blocks[{j}]: state 'active_awaiting_free' is not one PyTorch writes"
                segments[i] = dict(seg, total_size=str(seg["total_size"]))
                yield f"segments[{i}].total_size as str", dict(snap, segments=segments), \
                    f"segments[{i}]: 'total_size' is a str, not an int"
                return


def refused(exe, name, path, said):
    r = subprocess.run([exe, "import", path, "-o", path + ".db", "--force"], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and path in lines[0] and said in lines[0]
    print(f"{name}: exit {r.returncode}: {lines[-1] if lines else ''}" + ("" if ok else f"  MISMATCH (want: {said})"))
    return not ok


def annotation_ranges(snap):
    """The range markers the snapshot's external_annotations (record_function ranges of user scope,
    one entry per START or END) stand for, at the trace's times: {(name, t_start, t_end)}. With
    t_min the earliest event's time_us, a START at microsecond u begins at 1000 (u - t_min) ns
    (before that microsecond's events), an END ends at 1000 (u - t_min + 1); each END closes the
    latest open START of its name and device, or begins at 0 (its START was before recording); a
    START left open ends after the last event. None without time_us on every event."""
    events = [e for t in snap["device_traces"] for e in t]
    notes = snap.get("external_annotations") or []
    if not notes or not events or not all("time_us" in e for e in events):
        return set()
    t_min = min(e["time_us"] for e in events)
    t_last = (math.floor(max(e["time_us"] for e in events) - t_min) + 1) * 1000
    ranges, open_ = set(), {}
    for a in notes:
        us = math.floor(a["time_us"] - t_min)
        stack = open_.setdefault((a.get("device", 0), a["name"]), [])
        if a["stage"] == "START":
            stack.append(max(0, us * 1000))
        else:
            start = stack.pop() if stack else 0
            ranges.add((a["name"], start, max(start, max(0, (us + 1) * 1000))))
    for (_, name), stack in open_.items():
        ranges.update((name, t, max(t, t_last)) for t in stack)
    return ranges


def alloc_work(snap, ranges):
    """docs/import.md "Steps": a snapshot records no ops, but its allocations: an optimizer-step
    range's work is the bytes of the alloc events (each at its microsecond's start, in the markers'
    ns) within [start, end). The ranges as (name, start, end, work), work None for other names."""
    events = [e for t in snap["device_traces"] for e in t if "time_us" in e]
    if not events:
        return [(n, a, b, None) for n, a, b in ranges]
    t_min = min(e["time_us"] for e in events)
    allocs = sorted((math.floor(e["time_us"] - t_min) * 1000, e.get("size", 0)) for e in events
                    if e.get("action") == "alloc")
    from public_traces import optimizer_step_name
    out = []
    for n, a, b in ranges:
        work = sum(size for t, size in allocs if a <= t < b) if optimizer_step_name(n) else None
        out.append((n, a, b, work))
    return out


def annotation_steps(ranges, snap=None):
    """The step markers (name, t_start, t_end) docs/import.md "Steps" derives from the annotation
    ranges: where no range is ProfilerStep#N, the optimizer's step ranges end the steps, by the rule
    of public_traces.optimizer_step_bounds (several optimizers, ranges that take turns unless each
    class allocates the same bytes (alloc_work: one optimizer stepping unevenly), step 0 from 0 or
    from the loop's zero_grad/DataLoader ranges): step k from the end of the one before to the
    end of the k-th, named step#k. ProfilerStep#N ranges are step markers themselves (in `ranges`
    already)."""
    if any(re.fullmatch(r"ProfilerStep#\d+", n) for n, _, _ in ranges):
        return set()
    from public_traces import optimizer_step_bounds
    begin, ends = optimizer_step_bounds(alloc_work(snap, ranges) if snap is not None else list(ranges), 0)
    steps = []
    for k, end in enumerate(ends):
        end = max(end, begin)
        steps.append((f"step#{k}", begin, end))
        begin = end
    return set(steps)


def check(exe, name, snap, timing, path, tmp, full=None, simulate=True):
    failures = 0
    db = os.path.join(tmp, "t.db")
    mhc(exe, "import", path, "-o", db, "--force")
    info = json.loads(mhc(exe, "info", db, "--json"))
    got = {m["device"]: m for m in info.get("memory", [])}
    if info.get("timing") != timing:
        print(f"{name}: timing {info.get('timing')}, want {timing}  MISMATCH")
        failures += 1
    devices = set(range(len(snap["device_traces"]))) | {s.get("device", 0) for s in snap.get("segments", [])}
    for device in sorted(devices):
        trace = snap["device_traces"][device] if device < len(snap["device_traces"]) else []
        if not any(e["action"] == "alloc" for e in trace) and device not in got:
            continue
        want = replay(snap, device)
        if not want["end_state"]:
            print(f"{name} device {device}: the replay does not end in the snapshot's end state  MISMATCH")
            failures += 1
        for key in ("peak_bytes", "requested_peak_bytes", "reserved_peak_bytes"):
            w, g = want[key], got.get(device, {}).get(key)
            if w is None and g is None:
                continue
            ok = w is not None and g is not None and abs(g - w) <= TOLERANCE * max(w, 1)
            line = f"{name} device {device}: {key} mhc {g} snapshot {w}"
            if full and device in full:   # the whole recording's figure over the same window
                f = full[device][key]
                line += f" whole recording {f}"
                ok = ok and f is not None and abs(g - f) <= TOLERANCE * max(f, 1)
            print(line + ("" if ok else "  MISMATCH"))
            failures += not ok
        # The import's meta says each device's reserved peak too ("X", or "device D: X, ..."):
        # 0 for every snapshot whose segments were reserved before recording, before 2026-12-03.
        said = info.get("meta", {}).get("snapshot.reserved_peak_from_segment_events")
        if want["reserved_peak_bytes"] is not None and said is not None:
            per = dict(p.split(": ") for p in said.split(", ")) if said.startswith("device ") else None
            g = int(per.get(f"device {device}", -1)) if per is not None else int(said)
            ok = g == want["reserved_peak_bytes"]
            print(f"{name} device {device}: meta reserved peak {g} snapshot {want['reserved_peak_bytes']}" +
                  ("" if ok else "  MISMATCH"))
            failures += not ok
    # Segments of private pools (segment_pool_id other than (0, 0)) are said, per device and pool,
    # with their count and bytes (meta snapshot.private_pools); a file without them says nothing.
    pools = {}
    for seg in snap.get("segments", []) if isinstance(snap.get("segments"), list) else []:
        pid = seg.get("segment_pool_id")
        if pid is None or "address" not in seg:
            continue
        pid = tuple(pid) if isinstance(pid, (list, tuple)) and len(pid) == 2 else None
        if pid == (0, 0):
            continue
        key = (seg.get("device", 0), pid)
        n, b = pools.get(key, (0, 0))
        pools[key] = (n + 1, b + seg["total_size"])
    said = info.get("meta", {}).get("snapshot.private_pools", "")
    for (device, pid), (n, b) in sorted(pools.items(), key=str):
        name_of = f"({pid[0]}, {pid[1]})" if pid else "of an unknown id"
        if f"device {device} pool {name_of}: {n} segments, {b} B" not in said:
            print(f"{name}: private pool {name_of} of device {device}: {n} segments, {b} B; meta {said!r}  MISMATCH")
            failures += 1
    if not pools and said:
        print(f"{name}: no private pool, meta snapshot.private_pools {said!r}  MISMATCH")
        failures += 1
    # The user-annotated regions are range markers (before 2026-12-03 they were dropped in silence).
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    markers = {(n, t0, t1) for n, t0, t1 in conn.execute(
        "SELECT s.text, m.t_start, m.t_end FROM markers m JOIN strings s ON s.id = m.name") if not n.startswith("oom: ")}
    conn.close()
    ranges = annotation_ranges(snap)
    steps = annotation_steps(ranges, snap)
    want_markers = ranges | steps
    if markers != want_markers:
        print(f"{name}: annotation markers mhc {sorted(markers)[:3]} ({len(markers)}), snapshot "
              f"{sorted(want_markers)[:3]} ({len(want_markers)})  MISMATCH")
        failures += 1
    elif want_markers:
        print(f"{name}: {len(markers)} annotation range and step markers equal "
              f"({len(steps)} of them steps)")
    # Every block the trace leaves alive is in the end state (the replay above checks the same):
    # the import says when it is not (frees missing from the trace).
    said = info.get("meta", {}).get("snapshot.live_not_in_end_state")
    if said is not None:
        print(f"{name}: snapshot.live_not_in_end_state {said}  MISMATCH")
        failures += 1
    # Each 'snapshot' trace entry holds the allocator's active bytes then (total_active): the import
    # checks its rows against them and must find them equal (FlexGen's one entry).
    kept = sum(1 for t in snap["device_traces"] for e in t if e["action"] == "snapshot")
    said = info.get("meta", {}).get("snapshot.active_checked", "")
    if kept and "equal at every one" not in said:
        print(f"{name}: {kept} snapshot entries, snapshot.active_checked {said!r}  MISMATCH")
        failures += 1
    elif kept:
        print(f"{name}: {kept} snapshot entries: the import's alive bytes equal the allocator's active bytes")
    if not simulate:   # the variants below hold the import's figures; the file as recorded holds simulate's
        return failures
    sim = json.loads(mhc(exe, "simulate", db, "--capacity", "unlimited", "--allocator", "ideal",
                         "--no-store", "--json"))
    m, peak = sim["metrics"], info["peak"]["bytes"]
    ok = m["baseline_peak_bytes"] == peak and m["simulated_peak_bytes"] == peak and sim["timing"] == timing
    ok = ok and (timing != "order-only" or any("order only" in w for w in sim["warnings"]))
    print(f"{name}: simulate --capacity unlimited baseline {m['baseline_peak_bytes']:.0f} "
          f"simulated {m['simulated_peak_bytes']:.0f} info {peak} timing {sim['timing']}" + ("" if ok else "  MISMATCH"))
    return failures + (not ok)


def main():
    exe, files = sys.argv[1], sys.argv[2:]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            snap = load(path)
            if isinstance(snap, list):   # torch.cuda.memory_snapshot()'s segments, as _memory_viz.py reads them
                snap = {"segments": snap, "device_traces": []}
            snap.setdefault("device_traces", [])
            for variant, s, timing, written in variants(snap):
                name = f"{os.path.basename(path)} ({variant})"
                p = path
                if written is not None:
                    p = os.path.join(tmp, "variant.pickle")
                    with open(p, "wb") as f:
                        pickle.dump(written, f, protocol=4)
                failures += check(exe, name, s, timing, p, tmp)
            # The same snapshot saved as JSON (json.dump(torch.cuda.memory._snapshot())): the same figures.
            timed = all("time_us" in e for t in snap["device_traces"] for e in t) and any(snap["device_traces"])
            p = os.path.join(tmp, "variant.json")
            with open(p, "w") as f:
                json.dump(snap, f)
            failures += check(exe, f"{os.path.basename(path)} (saved as JSON)", snap,
                              "exact" if timed else "order-only", p, tmp, simulate=False)
            for variant, s, timing, full in ring_variants(snap):
                p = os.path.join(tmp, "variant.pickle")
                with open(p, "wb") as f:
                    pickle.dump(s, f, protocol=4)
                failures += check(exe, f"{os.path.basename(path)} ({variant})", s, timing, p, tmp, full, simulate=False)
            for variant, s, said in hostile_variants(snap):
                p = os.path.join(tmp, "hostile.pickle")
                with open(p, "wb") as f:
                    pickle.dump(s, f, protocol=4)
                failures += refused(exe, f"{os.path.basename(path)} ({variant})", p, said)
    print(f"{failures} mismatches" if failures else "every figure matches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
