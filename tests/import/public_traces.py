#!/usr/bin/env python3
"""Every real public trace in tests/data/public, imported by mhc, against the source file's own
accounting computed here with Python's json/gzip/sqlite3 and no mhc code.

Usage: public_traces.py MHC PUBLIC_DIR WORK_DIR [TRACE ...]

(TRACE: more traces checked as those of kineto/ (a name with `kineto` in it) or chakra/ (any
other) are, such as the CPU fixture recorded here with two threads whose ops overlap,
tests/import/fixtures/cpu_threads_et.json.gz, and the writer-version matrix recorded here with
every torch from 2.0 on, tests/import/fixtures/writers/.)

For each Kineto JSON (kineto/*.json.gz), Nsight Systems export (nsys/*.sqlite) and execution
trace (chakra/*.json.gz):
  - the source's live bytes per device: Kineto: Total Allocated where the trace records it,
    else the running signed sum of Bytes (events in ts order, file order at one ts) plus the
    least baseline that keeps it >= 0; nsys: the signed sum of CUDA_GPU_MEMORY_USAGE_EVENTS
    (by start, then row); execution traces: each storage's bytes over the 1 us slots of the
    first to the last leaf op that uses it, the ops in id (start) order, not the file's (what the
    format implies, order only; before 2026-12-03 the file's order, which differs where two
    threads' ops overlap), and every storage's bytes and lifetime equal to mhc's allocation of it
    (check_et_storages);
  - the imported trace's peak per device (from its allocations table: frees before
    allocations at one instant, docs/trace-format.md) and `mhc info`'s peak must equal them
    within 0.1%; Kineto's reserved peak (meta) must equal the largest Total Reserved, and the
    reserved bytes at the first event (meta) the first Total Reserved;
  - `mhc simulate --capacity unlimited --allocator ideal` must give the baseline back:
    simulated peak and makespan equal to the baseline's, no stalls, no swaps, and the
    baseline peak equal to the source's on the simulated device;
  - with one GPU, its kernels are on the device of its memory;
  - `mhc info`'s counts of kernels and copies (memcpy and memset) and its kernel time (the sum
    of the kernels' durations) must equal the file's; Kineto: also its count of events and its
    steps (distinct ProfilerStep#N on the CPU; without any, the optimizer's steps: cpu_steps), and every kernel's start relative to the first
    equal to the file's to the nanosecond (read as decimals: epoch `ts` carry 19 digits), its kernels
    per step (check_kernel_steps), its kernels per (device, stream) and copies per (device, kind) with
    their bytes (check_placement), every event on a device's lane accounted for (check_device_lanes),
    meta rank/world_size equal to distributedInfo, meta nccl.stream.N of each stream whose NCCL kernels
    name one process group of known members (check_process_groups), meta time_origin_ns
    placing its ProfilerStep#N on the Unix epoch's clock as baseTimeNanoseconds + ts do (check_time_origin), meta device_name/device_memory equal to its GPU list's,
    its [OutOfMemory] events counted in meta (check_out_of_memory), its kernel launches without a kernel event
    (captured into a graph, or not recorded) counted in meta (check_launches_without_kernel), its counter events and [memory] events read
    as host memory by another rule than Device Type 0 counted in meta (check_counters_and_host_memory), the CPU
    allocator's count said to be kept only while the profiler records memory, with the bytes it held before the
    first host event and the part no free shows live (check_host_memory_scope), a peer copy
    (no args.device) on its args.inDevice (check_placement), and a ROCm trace's kernel device numbers renumbered
    or said to be the runtime's agent numbers (check_rocm_devices); execution traces: also their ops
    per step and one step marker per ProfilerStep#N with ops (check_et_steps); Kineto and nsys: also its duration (the
    first start to the last end of the kernels, copies, memsets and memory events; Kineto: from the recording's first
    event when bytes were live before the first [memory] event), and its kernel time is after the
    documented clamp (a kernel that starts before the previous one on its stream ended starts
    at that end; how many did: meta nsys.kernel_starts_clamped), and its markers are the NVTX rows
    that are marks or ranges (not domain, category or thread names); nsys: also its kernels per
    (device, stream) with their GPU time after the clamp and its memcpys/memsets per (device, kind)
    with their bytes (check_nsys_placement), and its NVTX marks and ranges as markers with their
    times and texts (check_nsys_markers), and the rows of its GPU memory and sample tables mhc does not read named
    with their counts (check_nsys_unread_tables), and its kernel launches without a GPU row counted in meta
    (check_nsys_launches_without_kernel).
Prints one line per trace with the figures; exits 1 on any mismatch.
"""
import bisect
import decimal
import functools
import glob
import gzip
import json
import os
import re
import sqlite3
import subprocess
import sys

from public_nsys import (check_nsys_kernel_steps, check_nsys_launches_without_kernel, check_nsys_markers,
                         check_nsys_placement,
                         check_nsys_unread_tables, check_nsys_uvm_migrations, nsys_source, nsys_timeline)
from public_report import (ACCELERATORS, CALL_CATEGORIES, CAPTURE_BEGIN, CAPTURE_END, HOST,
                           LAUNCH_PREFIXES, close, fail, failures, imported_copies, rel)


# ---- the source's own accounting ----

class _TraceJson:
    """A trace file's JSON, parsed once while its file is checked (each check read the file again:
    four parses of each Kineto file and of each execution trace): a Kineto trace as `exact` only (the
    checks of its top-level keys compare whole numbers and text), an execution trace as `plain`. Read
    only."""

    def __init__(self, path):
        self.path = path

    @functools.cached_property
    def exact(self):
        """Numbers with a fraction stay the text the file has (json would round epoch `ts`, 19
        significant digits, to doubles): decimal() reads them."""
        with gzip.open(self.path) as f:
            return json.load(f, parse_float=str)

    @functools.cached_property
    def plain(self):
        with gzip.open(self.path) as f:
            return json.load(f)


@functools.lru_cache(maxsize=1)   # the file checked now: both parses go when the next one starts
def trace_json(path):
    return _TraceJson(path)


def kineto_doc(path):
    return trace_json(path).exact


def kineto_events(path):
    doc = kineto_doc(path)
    return doc if isinstance(doc, list) else doc["traceEvents"]   # a list: the JSON Array Format (PyTorch 1.8)


def decimal_of(v):
    return decimal.Decimal(v if isinstance(v, str) else str(v))


def map_allocator_flags(events):
    """Per host [memory] event (args, in time order, with the process's pid): whether it is PyTorch's
    MapAllocator's (at/MapAllocator.cpp: a mapping reported as Bytes = size, Total Allocated 0, Total
    Reserved size; its end as -size, 0, 0; the CPU allocator reports Total Reserved 0 and its own
    running Total Allocated). A free with both totals 0 is a mapping's when its address is a live
    mapping's, the CPU allocator's when it is a live CPU allocation's, and otherwise a mapping's unless
    that process's CPU allocator's previous Total Allocated equals its size."""
    flags, procs = [], {}
    for pid, a in events:
        p = procs.setdefault(pid, {"map": set(), "cpu": set(), "total": None})
        b, ta, tr, addr = a["Bytes"], a.get("Total Allocated"), a.get("Total Reserved"), a.get("Addr")
        mapping = False
        if ta == 0 and addr is not None:
            if b > 0:
                mapping = tr == b
            elif b < 0 and tr == 0:
                mapping = addr in p["map"] or (addr not in p["cpu"] and p["total"] != -b)
        if addr is not None and ta is not None:
            live = p["map"] if mapping else p["cpu"]
            if b > 0:
                live.add(addr)
            elif b < 0:
                live.discard(addr)
        if not mapping and ta is not None:
            p["total"] = ta
        flags.append(mapping)
    return flags


def kineto_source(path):
    """{device: (peak live bytes, reserved peak or None, how)}"""
    events = kineto_events(path)
    mem = [e for e in events if isinstance(e, dict) and e.get("name") == "[memory]" and "ts" in e
           and e.get("ph") in ("i", "I") and isinstance(e.get("args"), dict) and "Bytes" in e["args"]]
    mem.sort(key=lambda e: decimal_of(e["ts"]))   # stable: file order at one ts
    by_dev = {}
    for e in mem:
        a = e["args"]
        dev = a.get("Device Id", 0) if a.get("Device Type") in ACCELERATORS and a.get("Device Id", 0) >= 0 else HOST
        by_dev.setdefault(dev, []).append((e.get("pid"), a))
    out = {}
    for dev, pev in by_dev.items():
        # The host's file and shared-memory mappings (map_allocator_flags) are host memory of their
        # own: their running signed sum (from the least baseline that keeps it >= 0) is added to the
        # CPU allocator's Total Allocated, which they do not carry.
        flags = map_allocator_flags(pev) if dev == HOST else [False] * len(pev)
        mapped = [a for (_, a), f in zip(pev, flags) if f]
        ev = [a for (_, a), f in zip(pev, flags) if not f]
        run = low = 0
        for a in mapped:
            run += a["Bytes"]
            low = min(low, run)
        map_live = -low
        reserved = max((a["Total Reserved"] for a in ev if "Total Reserved" in a), default=None)
        if ev and "Total Allocated" in ev[0]:
            cpu = ev[0]["Total Allocated"] - ev[0]["Bytes"]
            peak = cpu + map_live
            for (_, a), f in zip(pev, flags):
                if f:
                    map_live += a["Bytes"]
                elif "Total Allocated" in a:
                    cpu = a["Total Allocated"]
                peak = max(peak, cpu + map_live)
            out[dev] = (peak, reserved, "Total Allocated" + (" and the mappings' signed sum" if mapped else ""))
            continue
        run = low = high = 0
        for _, a in pev:
            run += a["Bytes"]
            low, high = min(low, run), max(high, run)
        out[dev] = (high - low, reserved, "signed sum of Bytes")
    return out


def kineto_timeline(path):
    """What `mhc info` reports of a Kineto trace's timeline, counted from the JSON."""
    events = kineto_events(path)
    gpu = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    kernels = [e for e in gpu if e.get("cat") in ("kernel", "Kernel")]
    copies = [e for e in gpu if e.get("cat") in ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset")]
    steps = {n for _, _, n in file_steps(path)}
    # docs/import.md: a kernel that starts before the previous one on its stream (device, args.stream)
    # ended starts at that end (its end kept): CUDA graph branches and programmatic dependent launch
    # overlap on one stream; the trace keeps one kernel at a time per stream.
    lanes, clamped, lost, time_ns = {}, 0, 0, 0
    for e in sorted(kernels, key=lambda e: decimal_of(e["ts"])):
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        lanes.setdefault((args.get("device", 0), args.get("stream", 0)), []).append(e)
    for lane in lanes.values():
        prev_end = None
        for e in lane:
            start = int(decimal_of(e["ts"]) * 1000)
            end = start + max(0, int(decimal_of(e.get("dur", 0)) * 1000))
            begin = start if prev_end is None else max(start, prev_end)
            clamped += begin > start
            lost += (end - start) - max(0, end - begin)
            time_ns += max(0, end - begin)
            prev_end = max(begin, end)
    return {"events": len(events), "kernels": len(kernels), "copies": len(copies), "steps": len(steps),
            "kernel_time_ns": time_ns, "kernel_starts_clamped": clamped, "kernel_time_clamped_ns": lost,
            "duration_ns": kineto_duration(path, kernels + copies)}


def kineto_duration(path, gpu):
    """docs/import.md: the first start to the last end of the kernels, copies and [memory] events;
    when bytes were live before a device's first [memory] event, those blocks are alive from the
    recording's start: its first CPU op, annotation, kernel, copy or [memory] event."""
    events = kineto_events(path)
    mem = [e for e in events if isinstance(e, dict) and e.get("name") == "[memory]" and "ts" in e
           and e.get("ph") in ("i", "I") and isinstance(e.get("args"), dict) and "Bytes" in e["args"]]
    spans = [(decimal_of(e["ts"]), decimal_of(e["ts"]) + max(0, decimal_of(e.get("dur", 0)))) for e in gpu]
    spans += [(decimal_of(e["ts"]), decimal_of(e["ts"])) for e in mem]
    if not spans:
        return 0
    begin, end = min(s for s, _ in spans), max(e for _, e in spans)
    by_dev, before = {}, False
    for e in sorted(mem, key=lambda e: decimal_of(e["ts"])):
        by_dev.setdefault((e["args"].get("Device Type"), e["args"].get("Device Id")), []).append(e["args"])
    for ev in by_dev.values():
        if "Total Allocated" in ev[0]:
            before |= ev[0]["Total Allocated"] - ev[0]["Bytes"] > 0
        run = low = 0
        for a in ev:
            run += a["Bytes"]
            low = min(low, run)
        before |= low < 0
    if before:
        ops = [decimal_of(e["ts"]) for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e
               and e.get("cat") in ("cpu_op", "user_annotation", "Operator", "gpu_user_annotation")]
        begin = min([begin] + ops)
    return int((end - begin) * 1000)


def cpu_lanes(events):
    """The pids Kineto labels CPU (process_labels); every other labelled pid is a device's lane. A pid
    labelled both is the process's: Kineto writes GPU N's lanes under pid N, so a process whose own
    pid is N (PID 1 in a container: TraceLens's MI300X DDP ResNet-18 rank labels pid 1 'CPU' and
    'GPU 1') shares its number with GPU N's lanes; its CPU events are not device events."""
    labels = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_labels" \
                and isinstance(e.get("args"), dict):
            labels.setdefault(e.get("pid"), set()).add(e["args"].get("labels"))
    cpu = {p for p, names in labels.items() if "CPU" in names}
    return cpu, {p for p in labels if p not in cpu}


def optimizer_step_name(name):
    """'Optimizer.step#<Class>.step' (what torch.optim's step() records), anything after a comma."""
    head = str(name).split(",")[0]
    return head.startswith("Optimizer.step#") and head.endswith(".step") and len(head) > len("Optimizer.step#.step")


def loop_range_name(name):
    """A range a training loop runs once a step near its start: an optimizer's zero_grad
    ('Optimizer.zero_grad#<Class>.zero_grad') or the DataLoader's next batch ('enumerate(DataLoader)#...')."""
    head = str(name).split(",")[0]
    return (head.startswith("Optimizer.zero_grad#") and head.endswith(".zero_grad")
            and len(head) > len("Optimizer.zero_grad#.zero_grad")) or head.startswith("enumerate(DataLoader)#")


def _median(values):
    values = sorted(values)
    return values[(len(values) - 1) // 2] if values else 0


def _take_turns(values, period, ratio):
    """values[k] for k >= period, by k mod period, parted into two sets of classes, every value of the
    lower set times ratio below every value of the upper; 3 values a class at least."""
    classes = [[v for k, v in enumerate(values) if k >= period and k % period == c] for c in range(period)]
    if any(len(c) < 3 for c in classes):
        return False
    spans = sorted((min(c), max(c)) for c in classes)
    return any(max(hi for _, hi in spans[:cut]) * decimal.Decimal(ratio) < min(lo for lo, _ in spans[cut:])
               for cut in range(1, period))


def optimizer_step_bounds(ranges, t_first):
    """docs/import.md "Steps": given optimizer-step and loop ranges (name, start, end), the start of
    step 0 and the ends of the steps. An optimizer-step range inside another (beginning before the one
    before it ends) is left out; with several optimizer names, a step begins with each range of the
    most frequent name (the first seen among equals) and takes the others' ranges after it (those
    before its first one are in step 0); where that name's ranges take turns with a period of 2 to 4
    (the smallest: durations, the first period left out, parted by 1.5 times, or the gaps to the next
    by 10 times), a step begins with every period-th, from the class after the one with the longest
    median gap; durations alone make no period where every range's work (a 4th item: Kineto's ops and
    runtime calls of its thread that begin within it, an execution trace's nodes under it; None or
    absent: not known) is known and each class of the period has the same median work, above 0 (one optimizer
    stepping unevenly); where every range's tensors are known (a 5th item: the storage ids an execution
    trace's optimizer node and the nodes under it read), the period they take turns with (1 to 4:
    inputs_period) stands whatever durations, gaps and work say; a step ends where its last range ends. Step 0 begins at t_first, unless ranges of one
    loop name begin within the first tenth (where none does, the first half) of every later step (each step's first one after the step
    before ended) and one before the first optimizer range: then the median of those offsets before
    the last such one (of several names, the latest)."""
    outer, work, inputs = [], {}, {}
    for r in sorted((r for r in ranges if optimizer_step_name(r[0])), key=lambda r: (r[1], -r[2])):
        name, start, end = r[:3]
        if outer and start < outer[-1][2]:
            continue
        outer.append((str(name).split(",")[0], start, end))
        work[len(outer) - 1] = r[3] if len(r) > 3 else None
        inputs[len(outer) - 1] = r[4] if len(r) > 4 and isinstance(r[4], (set, frozenset)) else None
    if not outer:
        return t_first, []
    STEP_RULE.clear()   # a reader of several processes' ranges keeps the last process's that has some
    names = []
    for name, _, _ in outer:
        if name not in names:
            names.append(name)
    anchor = max(names, key=lambda n: (sum(1 for r in outer if r[0] == n), -names.index(n)))
    mine = [r for r in outer if r[0] == anchor]
    mine_work = [work[k] for k, r in enumerate(outer) if r[0] == anchor]
    durations = [end - start for _, start, end in mine]
    gaps = [mine[k + 1][1] - mine[k][2] for k in range(len(mine) - 1)]

    mine_inputs = [inputs[k] for k, r in enumerate(outer) if r[0] == anchor]

    def same_work(p):
        if any(w is None for w in mine_work):
            return False
        classes = [[w for k, w in enumerate(mine_work) if k >= p and k % p == c] for c in range(p)]
        # A median of nothing run (a snapshot's fused optimizer allocating nothing) tells nothing.
        return all(classes) and len({_median(c) for c in classes}) == 1 and _median(classes[0]) > 0

    def share(a, b):   # of two ranges' tensors, the share of the smaller set the other holds
        return len(a & b) / max(1, min(len(a), len(b)))

    def inputs_period():
        # The tensors an execution trace's optimizer nodes read (a 5th item: a set of storage ids),
        # where every range's are known: the smallest period 1 to 4 (2 ranges a class at least) with
        # which each range shares at least half of its tensors with the one a period after it and
        # under half with those between (each optimizer steps its own parameters).
        if any(not x for x in mine_inputs):
            return None
        n = len(mine_inputs)
        for p in range(1, 5):
            if n < 2 * p:
                break
            if all(share(mine_inputs[k], mine_inputs[k + p]) >= 0.5 and
                   all(share(mine_inputs[k], mine_inputs[k + b]) < 0.5 for b in range(1, p) if k + b < n)
                   for k in range(n - p)):
                return p
        return None

    period, phase = 1, 0
    by_inputs = inputs_period()
    uneven = by_inputs is None and any(_take_turns(durations, p, 1.5) and same_work(p) for p in (2, 3, 4))
    for p in (2, 3, 4):
        if by_inputs is not None and p != by_inputs:
            continue
        if by_inputs is not None or (_take_turns(durations, p, 1.5) and not same_work(p)) or \
                _take_turns(gaps, p, 10):
            medians = [_median([g for k, g in enumerate(gaps) if k >= p and k % p == c]) for c in range(p)]
            last = max(range(p), key=lambda c: (medians[c], -c))
            # The tensors showed the period and no class is followed by longer gaps: the first range
            # begins a step.
            alike = by_inputs is not None and len(set(medians)) == 1
            period, phase = p, 0 if alike else (last + 1) % p
            break
    how = "tensors" if by_inputs is not None else None
    if how is None and period > 1:
        how = "durations" if _take_turns(durations, period, 1.5) and not same_work(period) else "gaps"
    STEP_RULE.update(anchor=anchor, period=period, how=how, uneven=uneven and period == 1)
    ends, index = [], 0
    for name, _, end in outer:
        starts = False
        if name == anchor:
            starts = not ends if index == 0 else index >= phase and (index - phase) % period == 0
            index += 1
        if starts or not ends:
            ends.append(end)
        else:
            ends[-1] = end
    begin = t_first
    if len(ends) >= 2:
        by_name, threads = {}, {}
        for name, start, *rest in ranges:
            if loop_range_name(name):
                by_name.setdefault(str(name).split(",")[0], []).append(start)
                if len(rest) > 2 and rest[2] is not None:
                    threads.setdefault(str(name).split(",")[0], rest[2])

        def lead_by_ops(starts, thread, first):
            # Under the first-half rule: the ops and calls of the loop range's thread (a sorted list of
            # (ts, label)) before its last range before the first optimizer step that repeat, back
            # from it, those between a later step's start and its first range (the most over the
            # later steps): step 0 begins no later than the first of them.
            times = [t for t, _ in thread]
            before = bisect.bisect_left(times, first)
            most = 0
            for k in range(1, len(ends)):
                nxt = [t for t in starts if t >= ends[k - 1]]
                if not nxt:
                    break
                lo, hi = bisect.bisect_left(times, ends[k - 1]), bisect.bisect_left(times, min(nxt))
                same = 0
                while same < hi - lo and same < before and thread[hi - 1 - same][1] == thread[before - 1 - same][1]:
                    same += 1
                most = max(most, same)
            return times[before - most] if most else None
        for part in (10, 2):   # within the first tenth of every later step; where none is, the first half
            found = []
            for name, starts in by_name.items():
                offsets = []
                for k in range(1, len(ends)):
                    nxt = [t for t in starts if t >= ends[k - 1]]
                    if not nxt or min(nxt) >= ends[k] or (min(nxt) - ends[k - 1]) * part > ends[k] - ends[k - 1]:
                        break
                    offsets.append(min(nxt) - ends[k - 1])
                else:
                    before = [t for t in starts if t <= outer[0][1]]
                    if before and max(before) >= t_first:
                        at = max(before) - _median(offsets)
                        if part == 2 and name in threads:
                            by_ops = lead_by_ops(sorted(starts), threads[name], max(before))
                            if by_ops is not None:
                                at = min(at, by_ops)
                        found.append(at)
            if found:
                begin = max(begin, max(found))
                break
    return begin, ends


STEP_RULE = {}   # what the last optimizer_step_bounds() read: anchor, period, how, uneven


def check_steps_optimizers(name, meta):
    """Steps from the optimizer's ranges: meta steps_optimizers begins as this reading says."""
    want, got = steps_optimizers_said(), meta.get("steps_optimizers", "")
    print(f"  steps_optimizers: {got[:80]!r}")
    if not got.startswith(want):
        fail(name, f"meta steps_optimizers {got!r}, the file's reading {want!r}...")


def steps_optimizers_said():
    """The start of what meta steps_optimizers says (docs/import.md "Steps") of the ranges the last
    optimizer_step_bounds() read: how many optimizers, and from what."""
    anchor, period, how = STEP_RULE.get("anchor"), STEP_RULE.get("period", 1), STEP_RULE.get("how")
    count = f"{period} optimizers" if period > 1 else "one optimizer"
    if how == "tensors":
        return f"{count} of {anchor}: " + (f"its ranges take turns stepping {period} sets of tensors" if period > 1
                                           else "every range steps the same tensors")
    if period > 1:
        return f"{count} of {anchor} (their {how} take turns)"
    if STEP_RULE.get("uneven"):
        return f"one optimizer of {anchor}: its ranges' durations take turns, but each runs the same "
    return f"one optimizer of {anchor} assumed: "


def optimizer_step_ends(ranges):
    """The ends of the steps optimizer_step_bounds() gives (step 0 from the trace's start)."""
    return optimizer_step_bounds(ranges, float("-inf"))[1]


def first_ts(events):
    """The earliest ts among the events (where step 0 begins unless the loop's ranges move it)."""
    return min((decimal_of(e["ts"]) for e in events if isinstance(e, dict) and "ts" in e), default=float("-inf"))


@functools.lru_cache(maxsize=2)
def file_steps(path, by_pid=False):
    """cpu_steps of the file's complete events (ph X with a ts) and its device lanes, worked out once a
    file (five checks read them; each worked them out again, a fifth of this script's time). Read only."""
    events = kineto_events(path)
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    return cpu_steps(complete, cpu_lanes(events)[1], by_pid)


def cpu_steps(events, devices, by_pid=False):
    """The steps of a Kineto trace as (start, end, N), in microseconds: its CPU ProfilerStep#N ranges;
    where it has none, docs/import.md "Steps": each process's optimizer-step ranges (any category but
    gpu_user_annotation; one inside another is not counted), step k from the end of the one before
    (step 0 from the earliest event, the trace's start, or where the loop's ranges put it:
    optimizer_step_bounds) to the end of the k-th; the processes' ranges of one k joined, from the
    earliest start to the latest end. With by_pid, each process's own: {pid: [(start, end, N), ...]}
    (a kernel is in its launching process's step: docs/import.md "Steps")."""
    cpu = [e for e in events if e.get("cat") != "gpu_user_annotation" and e.get("pid") not in devices]
    steps = sorted((decimal_of(e["ts"]), decimal_of(e["ts"]) + decimal_of(e.get("dur", 0)), int(e["name"][13:]))
                   for e in cpu if str(e.get("name", "")).startswith("ProfilerStep#") and e["name"][13:].isdigit())
    if steps:
        mended = profiler_steps_mended(events, cpu, with_pid=by_pid)
        if not by_pid:
            return mended
        own = {}
        for a, b, n, pid in mended:
            own.setdefault(pid, []).append((a, b, n))
        return {pid: sorted(v) for pid, v in own.items()}
    joined, own = {}, {}
    # An optimizer range's work: the ops (cpu_op, user_annotation, Operator) and runtime or driver calls
    # of its process and thread that begin within it, itself included.
    # The last optimizer range of a process lasting 0 was open when recording stopped: it ends at the
    # latest end (ts + dur) of its thread's ops and calls, where that is later than its start.
    starts, last_end, labelled = {}, {}, {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "Operator") + CALL_CATEGORIES:
            key = (e.get("pid"), e.get("tid"))
            starts.setdefault(key, []).append(decimal_of(e["ts"]))
            labelled.setdefault(key, []).append(
                (decimal_of(e["ts"]), "" if e.get("cat") in CALL_CATEGORIES else str(e.get("name", ""))))
            end = decimal_of(e["ts"]) + max(0, decimal_of(e.get("dur", 0)))
            last_end[key] = max(last_end.get(key, end), end)
    for v in starts.values():
        v.sort()
    for v in labelled.values():
        v.sort()
    last_optimizer = {}
    for e in cpu:
        if optimizer_step_name(e.get("name", "")):
            at = last_optimizer.get(e.get("pid"))
            if at is None or decimal_of(e["ts"]) >= decimal_of(at["ts"]):
                last_optimizer[e.get("pid")] = e

    def work(e, start, end):
        if not optimizer_step_name(e.get("name", "")):
            return None
        v = starts.get((e.get("pid"), e.get("tid")), [])
        return bisect.bisect_right(v, end) - bisect.bisect_left(v, start)

    ranges_of = {}
    for e in cpu:
        if optimizer_step_name(e.get("name", "")) or loop_range_name(e.get("name", "")):
            start = decimal_of(e["ts"])
            end = start + max(0, decimal_of(e.get("dur", 0)))
            if last_optimizer.get(e.get("pid")) is e and end == start:
                end = max(start, last_end.get((e.get("pid"), e.get("tid")), start))
            ranges_of.setdefault(e.get("pid"), []).append(
                (e["name"], start, end, work(e, start, end),
                 labelled.get((e.get("pid"), e.get("tid"))) if loop_range_name(e.get("name", "")) else None))
    for pid in sorted({e.get("pid") for e in cpu}, key=str):
        ranges = ranges_of.get(pid, [])
        begin, ends = optimizer_step_bounds(ranges, first_ts(events))
        for k, end in enumerate(ends):
            end = max(end, begin)
            a, b = joined.get(k, (begin, end))
            joined[k] = (min(a, begin), max(b, end))
            own.setdefault(pid, []).append((begin, end, k))
            begin = end
    if by_pid:
        return own
    return sorted((a, b, k) for k, (a, b) in joined.items())


def profiler_steps_mended(events, cpu, with_pid=False):
    """The CPU ProfilerStep#N ranges as (start, end, N), each thread's mended where the file wrote them
    with their end only right (docs/import.md "Steps": torch 2.5 with with_stack=True writes each from
    the start of the step() call that ends it). A thread's ranges follow one another and hold its ops;
    where the ops and calls of the thread (cpu_op, user_annotation, Operator, runtime and driver calls)
    that begin between them (before each, after the one before ended; before the first, any) outnumber
    those that begin within them (the range itself not counted), each range begins where the one before
    it ended, the first at the first of those ops."""
    by_thread, starts = {}, {}
    for e in cpu:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#") and e["name"][13:].isdigit():
            a = decimal_of(e["ts"])
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append([a, a + max(0, decimal_of(e.get("dur", 0))),
                                                                        int(e["name"][13:])])
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and \
                e.get("cat") in ("cpu_op", "user_annotation", "Operator") + CALL_CATEGORIES:
            starts.setdefault((e.get("pid"), e.get("tid")), []).append(decimal_of(e["ts"]))
    out = []
    for key, ranges in by_thread.items():
        ranges.sort(key=lambda r: r[0])
        v = sorted(starts.get(key, []))
        between = within = 0
        for k, (a, b, _) in enumerate(ranges):
            lo = bisect.bisect_right(v, ranges[k - 1][1]) if k else 0
            between += max(0, bisect.bisect_left(v, a) - lo)
            within += max(0, bisect.bisect_right(v, b) - bisect.bisect_left(v, a) - 1)
        if v and between > within:
            ends = [b for _, b, _ in ranges]
            for k, r in enumerate(ranges):
                r[0] = min(r[0], v[0]) if k == 0 else min(r[0], ends[k - 1])
        out += [tuple(r) + ((key[0],) if with_pid else ()) for r in ranges]
    return sorted(out, key=lambda r: r[:3])


def check_step_markers(name, path, db):
    """Where the trace has ProfilerStep#N: mhc's step markers, by number, from the earliest start to the
    latest end of the file's CPU ranges of that number (cpu_steps: mended where the writer wrote them
    with their end only right), their lengths and their starts relative to the first, to the ns."""
    events = [e for e in kineto_events(path) if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    if not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events):
        return
    want = {}
    for a, b, n in file_steps(path):
        lo, hi = want.get(n, (a, b))
        want[n] = (min(lo, a), max(hi, b))
    if not want:
        return
    first = min(a for a, _ in want.values())
    want = {n: (int((a - first) * 1000), int((b - a) * 1000)) for n, (a, b) in want.items()}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = {n: (a, b - a) for n, a, b in conn.execute("SELECT idx, t_start, t_end FROM markers WHERE kind = 0")}
    if got:
        t0 = min(a for a, _ in got.values())
        got = {n: (a - t0, d) for n, (a, d) in got.items()}
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    print(f"  step markers: {len(got)} imported, {len(want)} in the file; mended: {meta.get('kineto.profiler_steps_mended', 'no')[:40]}")
    wrong = sorted(n for n in set(want) | set(got) if want.get(n) != got.get(n))
    for n in wrong[:3]:
        fail(name, f"step {n}: imported (start from the first, length) {got.get(n)} ns, the file's {want.get(n)} ns")


def check_time_origin(name, path, db):
    """Meta time_origin_ns places the trace on the Unix epoch's clock, which Kineto writes (every ts
    in us from the top-level baseTimeNanoseconds, else from 1970): where the trace has ProfilerStep#N, each step marker's
    start plus it must be the file's baseTimeNanoseconds + that step's first ts (cpu_steps), to the
    ns; where that is no time of the years 2000 to 2100 the key must be absent."""
    doc = kineto_doc(path)
    base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
    if not isinstance(base, int) or not 0 <= base <= 1 << 62:
        base = 0
    events = [e for e in kineto_events(path) if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    if not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events):
        return   # the optimizer's steps begin where the rules of "Steps" say, not at a ts of the file
    starts = {}
    for a, _, n in file_steps(path):
        starts[n] = min(starts.get(n, a), a)
    if not starts:
        return
    want = {n: base + int(a * 1000) for n, a in starts.items()}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    epoch = all(946684800 * 10**9 <= t < 4102444800 * 10**9 for t in want.values())
    origin = meta.get("time_origin_ns")
    print(f"  time_origin_ns: {origin} imported; the steps' epoch times {'are' if epoch else 'are not'} on the "
          f"Unix epoch's clock (baseTimeNanoseconds {base})")
    if origin is None:
        if epoch:
            fail(name, "no meta time_origin_ns, though the file's steps lie on the Unix epoch's clock")
        return
    if not epoch:
        fail(name, f"meta time_origin_ns {origin}, though the file's steps do not lie on the Unix epoch's clock")
        return
    got = {n: int(origin) + a for n, a in conn.execute("SELECT idx, t_start FROM markers WHERE kind = 0")}
    wrong = sorted(n for n in want if got.get(n) != want[n])
    for n in wrong[:3]:
        fail(name, f"step {n}: time_origin_ns + its marker's start {got.get(n)} ns, the file's {want[n]} ns")


def step_of(steps, t):
    """The latest step begun at or before t, if t is within it; else -1."""
    begun = [(a, b, n) for a, b, n in steps if a <= t]
    if not begun:
        return -1
    a, b, n = max(begun, key=lambda s: s[0])
    return n if t <= b else -1


def check_kernel_steps(name, path, db):
    """Kernels per step: a kernel belongs to the ProfilerStep#N (a CPU range) its launch fell in among
    its launching process's own ranges (a file of merged ranks: not the joined ones, which a lagging
    rank keeps open after another has begun the next step), the launch being the CPU-side event with
    the kernel's correlation id (any category), else the kernel's own time in the joined steps.
    Compared with the imported kernels' steps; and how many kernels have such a launch with meta
    kineto.kernels_linked_to_launch."""
    events = [e for e in kineto_events(path) if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    cpu, devices = cpu_lanes(kineto_events(path))
    kernel_cats = ("kernel", "Kernel")
    steps = file_steps(path)
    own = file_steps(path, by_pid=True)
    calls = [e for e in events if isinstance(e.get("args"), dict) and e["args"].get("correlation") is not None
             and e.get("cat") not in kernel_cats and e.get("pid") not in devices]
    kernels = [e for e in events if e.get("cat") in kernel_cats]
    want, linked = {}, 0
    launches = resolve_launches(kernels, calls)
    owner, first_id, before = lane_owners(kernels, launches, calls), {}, 0
    for e in calls:
        corr = e["args"]["correlation"]
        if isinstance(corr, int):
            first_id[e.get("pid")] = min(first_id.get(e.get("pid"), corr), corr)
    for e, call in zip(kernels, launches):
        linked += call is not None
        if call is not None:
            step = step_of(own.get(call[1], steps), call[0])
        else:   # no launch in the file: its lane's process's; before its first call's id, no step
            pid, corr = owner.get((e.get("pid"), e["args"].get("device"))), e["args"].get("correlation")
            early = pid in first_id and isinstance(corr, int) and 0 < corr < first_id[pid]
            before += early
            step = -1 if early else step_of(own.get(pid, steps), decimal_of(e["ts"]))
        want[step] = want.get(step, 0) + 1
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = dict(conn.execute("SELECT step, COUNT(*) FROM kernels GROUP BY step"))
    said = int(dict(conn.execute("SELECT key, value FROM meta")).get("kineto.kernels_linked_to_launch", 0))
    if said != linked:
        fail(name, f"{said} kernels linked to their launch, {linked} have a CPU event of their correlation id")
    if want:
        print(f"  kernels per step: {dict(sorted(got.items()))} imported, {dict(sorted(want.items()))} in the file")
    if got != want:
        fail(name, f"kernels per step {dict(sorted(got.items()))}, the file's {dict(sorted(want.items()))}")
    # The rule's premise: a stream runs its kernels in launch order, so one launched before
    # recording began starts before every kernel of its stream whose launch is in the file.
    first_launched = {}
    for e, call in zip(kernels, launches):
        if call is not None:
            lane = (e.get("pid"), e["args"].get("device"), e["args"].get("stream"))
            first_launched[lane] = min(first_launched.get(lane, decimal_of(e["ts"])), decimal_of(e["ts"]))
    for e, call in zip(kernels, launches):
        pid, corr = owner.get((e.get("pid"), e["args"].get("device"))), e["args"].get("correlation")
        lane = (e.get("pid"), e["args"].get("device"), e["args"].get("stream"))
        if call is None and pid in first_id and isinstance(corr, int) and 0 < corr < first_id[pid] \
                and decimal_of(e["ts"]) > first_launched.get(lane, float("inf")):
            fail(name, f"kernel of id {corr} below its process's first call's starts after a kernel of its stream "
                       f"launched in the file: correlation ids not in launch order")
            break
    said_before = dict(conn.execute("SELECT key, value FROM meta")).get("kineto.kernels_launched_before_recording")
    if (said_before or "0").split(" ")[0] != str(before):
        fail(name, f"meta kineto.kernels_launched_before_recording {said_before!r}, the file has {before} such kernels")
    elif before:
        print(f"  kernels launched before recording began (ids below their process's first call's): {before}")
    # Steps from the optimizer's ranges (docs/import.md "Steps"): each step's length in ns. Step 0's
    # too where mhc says the loop's ranges moved its start; where it says not, the file's start of
    # step 0 must not lie after mhc's time 0 (the first kernel's ts less its imported start).
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    pids = {e.get("pid") for e in events if optimizer_step_name(e.get("name", "")) and e.get("pid") not in devices}
    if steps and meta.get("steps_from", "").startswith("Optimizer.step#") and len(pids) == 1:
        check_steps_optimizers(name, meta)
    if steps and meta.get("steps_from", "").startswith("Optimizer.step#"):
        marked = {}
        for k, a, b in conn.execute("SELECT idx, t_start, t_end FROM markers WHERE kind = 0"):
            lo, hi = marked.get(k, (a, b))
            marked[k] = (min(lo, a), max(hi, b))
        lengths = {n: b - a for n, (a, b) in marked.items()}
        moved = "; step 0 from the last " in meta["steps_from"]
        file_lengths = {n: int((b - a) * 1000) for a, b, n in steps if n > 0 or moved}
        print(f"  optimizer steps' lengths (ns): {len(file_lengths)} of {len(steps)} compared")
        if {n: lengths.get(n) for n in file_lengths} != file_lengths:
            fail(name, f"step lengths {dict(sorted(lengths.items()))}, the file's {dict(sorted(file_lengths.items()))}")
        starts = sorted(decimal_of(e["ts"]) for e in events if e.get("cat") in kernel_cats)
        first_kernel = conn.execute("SELECT MIN(t_start) FROM kernels").fetchone()[0]
        begin = min(a for a, _, _ in steps)
        if not moved and starts and first_kernel is not None and begin != float("-inf") \
                and begin * 1000 > starts[0] * 1000 - first_kernel + 1000:
            fail(name, f"the loop's ranges put step 0 at ts {begin}, after mhc's time 0, and mhc did not move it")


def check_memory_pairs(name, path, db):
    """A Kineto trace whose [memory] events of a device all carry Addr: the file's own pairing, each
    process's allocations by address (an allocation, Bytes > 0, lives until the first later free at
    its address of the same size, events in ts order, file order at one ts), against mhc's allocations
    of that device that are not blocks allocated before recording: as many, and the same sizes freed
    and never freed (where mhc split no free: meta kineto.frees_split 0)."""
    mem = [e for e in kineto_events(path) if isinstance(e, dict) and e.get("name") == "[memory]" and "ts" in e
           and e.get("ph") in ("i", "I") and isinstance(e.get("args"), dict) and "Bytes" in e["args"]]
    mem.sort(key=lambda e: decimal_of(e["ts"]))
    by_dev = {}
    for e in mem:
        a = e["args"]
        dev = a.get("Device Id", 0) if a.get("Device Type") in ACCELERATORS and a.get("Device Id", 0) >= 0 else HOST
        by_dev.setdefault(dev, []).append((e.get("pid"), a))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    if meta.get("kineto.frees_split", "0") != "0":
        return
    strings = dict(conn.execute("SELECT id, text FROM strings"))
    for dev, events in sorted(by_dev.items()):
        if not all("Addr" in a for _, a in events):
            continue
        live, want = {}, {}
        for pid, a in events:
            key = (pid, a["Addr"])
            if a["Bytes"] > 0:
                live.setdefault(key, []).append(a["Bytes"])
            elif a["Bytes"] < 0 and -a["Bytes"] in live.get(key, []):
                live[key].remove(-a["Bytes"])
                want[(-a["Bytes"], True)] = want.get((-a["Bytes"], True), 0) + 1
        for sizes in live.values():
            for size in sizes:
                want[(size, False)] = want.get((size, False), 0) + 1
        got = {}
        for size, freed, label in conn.execute(
                "SELECT bytes, t_free IS NOT NULL, label FROM allocations WHERE device = ?", (dev,)):
            if "before recording" in strings.get(label, ""):
                continue
            got[(size, bool(freed))] = got.get((size, bool(freed)), 0) + 1
        n_want, n_got = sum(want.values()), sum(got.values())
        print(f"  device {dev}: {n_got} allocations imported, {n_want} in the file paired by address "
              f"({sum(v for (_, f), v in want.items() if f)} freed)")
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))[:3]
            fail(name, f"device {dev}: allocations (bytes, freed) differ, e.g. "
                       f"{[(k, got.get(k), want.get(k)) for k in diff]} (imported, file)")


def check_device_lanes(name, path, meta):
    """Every 'X' event on a device's lane (a pid not labelled CPU) is imported (a kernel, memcpy or
    memset, counted by check_timeline; a GPU annotation, a marker), a cuda_sync wait (documented as
    holding no device work), a Python stack frame (host code: the TraceLens H100 traces write 5 of a
    tqdm monitor thread under pid 0, GPU 0's lane), or counted by category in meta
    kineto.unread_events and warned: device events of a category mhc does not read are never left
    out in silence."""
    _, devices = cpu_lanes(kineto_events(path))
    read = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "gpu_user_annotation", "cuda_sync",
            "python_function")
    other = {}
    for e in kineto_events(path):
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and e.get("pid") in devices and e.get("cat") not in read:
            other[e.get("cat")] = other.get(e.get("cat"), 0) + 1
    said = {}
    for part in filter(None, meta.get("kineto.unread_events", "").split(", ")):
        count, cat = part.split(" ", 1)
        said[cat] = int(count)
    for cat, count in sorted(other.items()):
        print(f"  device lanes: {count} '{cat}' events, {said.get(cat, 0)} counted as unread by the import (at least)")
        if said.get(cat, 0) < count:
            fail(name, f"{count} '{cat}' events on device lanes, meta kineto.unread_events says {said.get(cat, 0)}")


def check_gpu_memory_said(name, path, source, meta):
    """A trace whose [memory] events are all the host's (device -1) while kernels, copies or memsets ran
    on a GPU recorded no GPU memory: the import must say so (meta kineto.gpu_memory), since its peaks
    are the host's alone; and must not where a GPU's memory is there."""
    events = kineto_events(path)
    has_memory = any(isinstance(e, dict) and e.get("name") == "[memory]" for e in events)
    gpu_work = any(isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in
                   ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset") for e in events)
    want = has_memory and gpu_work and all(dev < 0 for dev in source)
    said = "kineto.gpu_memory" in meta
    if want:
        print(f"  GPU memory: no [memory] event of a GPU, {'said' if said else 'NOT said'}")
    if want != said:
        fail(name, f"GPU memory unrecorded: the file {'has' if want else 'has not'} only host [memory] events beside "
                   f"GPU work, meta kineto.gpu_memory {'present' if said else 'absent'}")


def resolve_launches(gpu, calls):
    """Each GPU event's launch, (ts, pid) of the call of its correlation id, or None. Correlation
    ids are per process: where calls of several processes (ranks merged into one file) carry the
    id, each process's last call of it stands, and the event takes the one of the process that
    launched 99% or more of its lane's (pid, device) kernels whose id one process used or whose
    id's calls only one process began by the kernel's start, else the latest of them before it
    (the earliest where none is)."""
    by_id = {}
    for e in calls:
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            by_id.setdefault(corr, {})[e.get("pid")] = (decimal_of(e["ts"]), e.get("pid"))

    def lane(e):
        return (e.get("pid"), (e.get("args") or {}).get("device"))
    votes = {}
    for e in gpu:
        mine = by_id.get((e.get("args") or {}).get("correlation"), {})
        # A vote: an id one process used, or one of several processes' calls alone begun by the
        # kernel's start (a launch precedes its kernel; ranks running one program share every id).
        begun = [pid for pid, (ts, _) in mine.items() if ts <= decimal_of(e["ts"])]
        if e.get("cat") in ("kernel", "Kernel") and (len(mine) == 1 or len(begun) == 1):
            c = votes.setdefault(lane(e), {})
            pid = next(iter(mine)) if len(mine) == 1 else begun[0]
            c[pid] = c.get(pid, 0) + 1
    owner = {k: max(c, key=c.get) for k, c in votes.items() if max(c.values()) * 100 >= sum(c.values()) * 99}
    out = []
    for e in gpu:
        mine = by_id.get((e.get("args") or {}).get("correlation"), {})
        if len(mine) <= 1:
            out.append(next(iter(mine.values()), None))
        elif owner.get(lane(e)) in mine:
            out.append(mine[owner[lane(e)]])
        else:
            t = decimal_of(e["ts"])
            before = [c for c in mine.values() if c[0] <= t]
            out.append(max(before) if before else min(mine.values()))
    return out


def lane_owners(gpu, launches, calls):
    """(pid, device) of a GPU lane -> the process whose calls launched 99% or more of its kernels
    that have a launch; a lane with none is the process's where one process made every call."""
    votes = {}
    for e, call in zip(gpu, launches):
        if call is not None:
            c = votes.setdefault((e.get("pid"), (e.get("args") or {}).get("device")), {})
            c[call[1]] = c.get(call[1], 0) + 1
    pids = {e.get("pid") for e in calls}
    only = next(iter(pids)) if len(pids) == 1 else None
    out = {lane: max(c, key=c.get) for lane, c in votes.items() if max(c.values()) * 100 >= sum(c.values()) * 99}
    for e in gpu:
        lane = (e.get("pid"), (e.get("args") or {}).get("device"))
        if lane not in votes and only is not None:
            out[lane] = only
    return out


def kernel_calls_run(events, calls):
    """(pid, correlation) of the calls whose kernel, memcpy or memset event is in the trace."""
    gpu = [e for e in events if e.get("ph") == "X" and "ts" in e and e.get("cat") in
           ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")]
    return {(call[1], (e.get("args") or {}).get("correlation"))
            for e, call in zip(gpu, resolve_launches(gpu, [e for _, e in calls])) if call is not None}


def check_launches_without_kernel(name, path, meta):
    """Kernel launches whose correlation id no kernel, memcpy or memset event carries: those made
    while a stream capture of their process was open (captured into a graph, not run) and the
    others (not recorded) must be counted in meta kineto.launches_without_kernel; a trace with none
    has no such key."""
    events = [e if isinstance(e, dict) else {} for e in kineto_events(path)]   # indexes as in traceEvents
    calls = [(i, e) for i, e in enumerate(events) if e.get("ph") == "X" and e.get("cat") in CALL_CATEGORIES
             and "ts" in e and isinstance(e.get("name"), str)]
    ran = kernel_calls_run(events, calls)
    spans = {}
    for _, e in sorted((c for c in calls if c[1]["name"].startswith(CAPTURE_BEGIN + CAPTURE_END)),
                       key=lambda c: (c[1].get("pid"), decimal_of(c[1]["ts"]))):
        mine = spans.setdefault(e.get("pid"), [])
        if e["name"].startswith(CAPTURE_BEGIN):
            mine.append([decimal_of(e["ts"]), None])
        elif mine and mine[-1][1] is None:
            mine[-1][1] = decimal_of(e["ts"])
    launches = [(i, e) for i, e in calls if e["name"].startswith(LAUNCH_PREFIXES)]
    captured = lost = 0
    first = None
    for i, e in launches:
        if (e.get("pid"), (e.get("args") or {}).get("correlation")) in ran:
            continue
        t = decimal_of(e["ts"])
        if any(b <= t and (end is None or t < end) for b, end in spans.get(e.get("pid"), [])):
            captured += 1
        else:
            lost += 1
            first = first if first is not None else (i, e["name"])
    said = meta.get("kineto.launches_without_kernel")
    if captured + lost == 0:
        if said is not None:
            fail(name, f"every launch has its kernels, yet meta kineto.launches_without_kernel = {said!r}")
        return
    want = (f"{captured + lost} of {len(launches)} kernel launches (runtime and driver calls that launch kernels or "
            f"CUDA graphs) have no kernel, memcpy or memset event of their correlation id")
    parts = []
    if captured:
        parts.append(f"{captured} made while a stream capture was open (captured into a CUDA graph, not run)")
    if lost:
        parts.append(f"{lost} not recorded (the first: traceEvents[{first[0]}] '{first[1]}')")
    want += ": " + ", ".join(parts)
    print(f"  launches without kernels: {captured} captured, {lost} not recorded, of {len(launches)}; "
          f"{'said' if said == want else 'NOT said as expected'}")
    if said != want:
        fail(name, f"launches without kernels: meta {said!r}, expected {want!r}")


# Kineto memcpy names: "Memcpy <kind> (<src> -> <dst>)", kind CUPTI's (libkineto's memcpyKindString;
# ROCm's the same words) or Intel PTI's on XPU (ptiViewMemcpyTypeToString: M2D, D2H, ...: M system
# memory, H USM host, D USM device, S USM shared, counted as the device's); the trace's copy kinds
# (docs/trace-format.md, copies.kind: 0 H2D, 1 D2H, 2 D2D, 3 P2P, 4 memset, 5 H2H). A name that
# gives no direction is D2D (docs/import.md: counted in meta kineto.copies_without_direction).
CUPTI_COPY_WORDS = {"HtoD": 0, "HtoA": 0, "DtoH": 1, "AtoH": 1, "DtoD": 2, "AtoA": 2, "AtoD": 2, "DtoA": 2,
                    "PtoP": 3, "HtoH": 5}
PTI_SIDES = {"M": "host", "H": "host", "D": "device", "S": "device"}


def copy_kind(name):
    """The copy kind a Kineto memcpy's name gives, or None."""
    words = str(name).split(" ")
    if len(words) < 2 or words[0] != "Memcpy":
        return None
    word = words[1]
    if word in CUPTI_COPY_WORDS:
        return CUPTI_COPY_WORDS[word]
    if len(word) == 3 and word[1] == "2" and word[0] in PTI_SIDES and word[2] in PTI_SIDES:
        return {("host", "host"): 5, ("host", "device"): 0, ("device", "host"): 1,
                ("device", "device"): 2}[(PTI_SIDES[word[0]], PTI_SIDES[word[2]])]
    return None


def check_placement(name, path, db):
    """Every kernel on the device and stream its args name (args.device, args.stream), and every
    memcpy/memset on its device with its direction (from its name) and its bytes: per (device,
    stream) the file's kernel count, per (device, kind) its copy count and bytes, equal to the
    imported rows'. The one documented renumbering (meta kineto.kernel_device "A -> B": a ROCm
    one-GPU trace whose kernels carry the runtime's agent number) is applied to the file's side."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    renumber = {}
    if " -> " in meta.get("kineto.kernel_device", ""):
        a, b = meta["kineto.kernel_device"].split(" ", 3)[0:3:2]
        renumber[int(a)] = int(b)
    kernels, copies, without_direction = {}, {}, 0
    for e in kineto_events(path):
        if not (isinstance(e, dict) and e.get("ph") == "X" and "ts" in e):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        # A peer copy (CUPTI memcpy2) has no args.device: Kineto writes fromDevice, inDevice (the
        # device that ran it, also its pid) and toDevice.
        dev = args.get("device", args.get("inDevice", 0))
        dev = renumber.get(dev, dev)
        if e.get("cat") in ("kernel", "Kernel"):
            key = (dev, args.get("stream", 0))
            kernels[key] = kernels.get(key, 0) + 1
        elif e.get("cat") in ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset"):
            kind = 4 if e.get("cat") in ("gpu_memset", "Memset") else copy_kind(e.get("name"))
            if kind is None:
                kind = 2
                without_direction += 1
            c = copies.setdefault((dev, kind), [0, 0])
            c[0] += 1
            c[1] += max(0, args.get("bytes", 0))
    got_k = {(d, s): n for d, s, n in conn.execute("SELECT device, stream, COUNT(*) FROM kernels GROUP BY device, stream")}
    got_c = imported_copies(conn)
    print(f"  kernels per (device, stream): {len(kernels)} lanes in the file, {len(got_k)} imported; copies per "
          f"(device, kind): {dict(sorted((k, v[0]) for k, v in copies.items()))} in the file")
    if got_k != kernels:
        fail(name, f"kernels per (device, stream) {dict(sorted(got_k.items()))}, the file's {dict(sorted(kernels.items()))}")
    if got_c != copies:
        fail(name, f"copies per (device, kind) [count, bytes] {dict(sorted(got_c.items()))}, the file's "
                   f"{dict(sorted(copies.items()))}")
    said = meta.get("kineto.copies_without_direction", "0 ").split(" ")[0]
    if int(said) != without_direction:
        fail(name, f"meta kineto.copies_without_direction {said}, the file has {without_direction} memcpys whose name "
                   "gives no direction")


def check_rocm_devices(name, path, meta):
    """A ROCm trace (a top-level roctracer_/rocprofiler_/hip_ key, or a runtime call named hip*) numbers
    its kernels by the runtime's agent, CPU agents first (docs/import.md): where one GPU's [memory]
    events, or a deviceProperties list of one GPU, give the process's number, the kernels take it
    (meta kineto.kernel_device "A -> B"); otherwise their numbers are kept and meta says which
    ("2 kept: ..."), never in silence. A CUDA trace's kernel numbers are the process's own: no line."""
    doc = kineto_doc(path)
    events = kineto_events(path)
    top = doc if isinstance(doc, dict) else {}
    rocm = any(k.startswith(("roctracer", "rocprofiler", "hip_")) for k in top) or any(
        isinstance(e, dict) and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
        and str(e.get("name", "")).startswith("hip") for e in events)
    kern = {e.get("args", {}).get("device", 0) for e in events if isinstance(e, dict) and e.get("ph") == "X"
            and e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")}
    mem = {d for d in kineto_source(path) if d >= 0}
    props = top.get("deviceProperties") or []
    if not mem and len(props) == 1 and isinstance(props[0].get("id"), int) and props[0]["id"] >= 0:
        mem = {props[0]["id"]}
    said = meta.get("kineto.kernel_device")
    if len(mem) == 1 and len(kern) == 1:
        want = None if mem == kern else f"{next(iter(kern))} -> {next(iter(mem))}"
    elif rocm and kern:
        want = ", ".join(str(d) for d in sorted(kern)) + " kept"
    else:
        want = None
    if rocm:
        print(f"  ROCm: kernels on {sorted(kern)}, GPU memory on {sorted(mem)}, {len(props)} in deviceProperties: "
              f"meta kineto.kernel_device {said!r}")
    if (want is None) != (said is None) or (want is not None and not said.startswith(want)):
        fail(name, f"meta kineto.kernel_device {said!r}, expected to begin {want!r}")


def check_device_list(name, path, meta):
    """meta device_name and device_memory are the file's GPU list's (deviceProperties, or
    computeProperties in Kineto's traces of early 2021): its device 0, else its first entry."""
    doc = kineto_doc(path)
    gpus = (doc.get("deviceProperties") or doc.get("computeProperties") or []) if isinstance(doc, dict) else []
    gpus = [g for g in gpus if isinstance(g, dict)]
    gpu = next((g for g in gpus if g.get("id") == 0), gpus[0] if gpus else {})
    want = {"device_name": gpu.get("name") or None,
            "device_memory": str(gpu["totalGlobalMem"]) if gpu.get("totalGlobalMem") else None}
    for key, value in want.items():
        if meta.get(key) != value:
            fail(name, f"meta {key} {meta.get(key)!r}, the file's GPU list says {value!r}")


def check_reserved_first(name, path, meta):
    """Meta kineto.reserved_first.deviceN is the Total Reserved of the device's first [memory] event
    that records one (in time order, file order at one ts): where the caching model starts
    (docs/simulator.md). Also prints whether Total Reserved ever changed after it."""
    events = kineto_events(path)
    mem = [e for e in events if isinstance(e, dict) and e.get("name") == "[memory]" and "ts" in e
           and e.get("ph") in ("i", "I") and isinstance(e.get("args"), dict) and "Total Reserved" in e["args"]]
    mem.sort(key=lambda e: decimal_of(e["ts"]))
    by_dev = {}
    host = [(e.get("pid"), e["args"]) for e in mem if "Bytes" in e["args"] and not (
        e["args"].get("Device Type") in ACCELERATORS and e["args"].get("Device Id", 0) >= 0)]
    mapping = {id(a) for (_, a), f in zip(host, map_allocator_flags(host)) if f}   # not the allocator's reserve
    for e in mem:
        a = e["args"]
        if id(a) in mapping:
            continue
        dev = a.get("Device Id", 0) if a.get("Device Type") in ACCELERATORS and a.get("Device Id", 0) >= 0 else HOST
        by_dev.setdefault(dev, []).append(a["Total Reserved"])
    for dev, values in sorted(by_dev.items()):
        got = int(meta.get(f"kineto.reserved_first.device{dev}", -1))
        changes = sum(1 for x, y in zip(values, values[1:]) if x != y)
        print(f"  device {dev}: reserved at the first event {got} B imported, {values[0]} B by Total Reserved "
              f"({changes} changes after it, peak {max(values)} B)")
        if got != values[0]:
            fail(name, f"device {dev}: reserved at the first event {got} B, Total Reserved {values[0]} B")


def check_counters_and_host_memory(name, path, meta):
    """Counter events (ph C: hardware_counters, mtia_counters, xpu_scope_profiler) become no row and
    are counted by category in meta kineto.counter_events; [memory] events read as host memory by
    another rule than Device Type 0 (a type that is no device's, an accelerator's Device Id -1) are
    counted in meta kineto.memory_read_as_host: neither is left out in silence."""
    counters, odd = {}, 0
    for e in kineto_events(path):
        if not isinstance(e, dict) or "ts" not in e:
            continue
        if e.get("ph") == "C":
            cat = e.get("cat") or "(no category)"
            counters[cat] = counters.get(cat, 0) + 1
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        if e.get("name") == "[memory]" and e.get("ph") in ("i", "I") and ("Bytes" in a or "Addr" in a):
            accel = a.get("Device Type") in ACCELERATORS and a.get("Device Id", 0) >= 0
            odd += not accel and a.get("Device Type", -1) != 0
    said = {}
    for part in filter(None, meta.get("kineto.counter_events", "").split(", ")):
        count, cat = part.split(" ", 1)
        said[cat] = int(count)
    said_odd = sum(int(part.split(" ", 1)[0]) for part in filter(None, meta.get("kineto.memory_read_as_host", "").split(", ")))
    if counters or odd:
        print(f"  counter events {counters}, meta {said}; {odd} [memory] events host memory not by Device Type 0, "
              f"meta {said_odd}")
    if said != counters:
        fail(name, f"meta kineto.counter_events {said}, the file's counter events {counters}")
    if said_odd != odd:
        fail(name, f"meta kineto.memory_read_as_host counts {said_odd}, the file has {odd} such [memory] events")


def check_host_memory_scope(name, path, meta):
    """The host's [memory] events of the CPU allocator (Device Type 0) are said to be its count kept only
    while the profiler records memory (meta kineto.host_memory_scope), and where Total Allocated less
    Bytes at the first one is above 0, that figure and the part of it no free of the trace shows live
    (frees of addresses no allocation of the trace holds then, up to it) are stated. Checked where the
    host's events are one process's and none has Total Allocated 0 (no MapAllocator mapping)."""
    host = [e for e in kineto_events(path) if isinstance(e, dict) and e.get("name") == "[memory]"
            and e.get("ph") in ("i", "I") and isinstance(e.get("args"), dict) and e["args"].get("Device Type") == 0]
    said = meta.get("kineto.host_memory_scope")
    if bool(host) != (said is not None):
        fail(name, f"{len(host)} host [memory] events of Device Type 0, meta kineto.host_memory_scope {said!r}")
        return
    if not host or len({e.get("pid") for e in host}) != 1 or any(e["args"].get("Total Allocated") == 0 for e in host):
        return
    host.sort(key=lambda e: decimal.Decimal(str(e["ts"])))
    first = host[0]["args"]
    if "Total Allocated" not in first or "Addr" not in first:
        return
    baseline = first["Total Allocated"] - first["Bytes"]
    pool, live = baseline, {}
    for e in host:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = a["Bytes"]
        elif a["Bytes"] < 0 and live.pop(a["Addr"], None) is None:
            pool -= min(pool, -a["Bytes"])
    if baseline > 0:
        want = f"; of its {baseline} B before the first host event (Total Allocated), {pool} B no free of the trace"
        print(f"  host: {baseline} B before the first event by Total Allocated, {pool} B of them never freed in it")
        if want not in said:
            fail(name, f"meta kineto.host_memory_scope {said!r} lacks {want!r}")
    elif "before the first host event" in said:
        fail(name, f"meta kineto.host_memory_scope {said!r}: the file counts 0 B before its first host event")


def check_out_of_memory(name, path, meta):
    """Every [OutOfMemory] instant (an allocation PyTorch's allocator failed to make) is said: meta
    kineto.out_of_memory begins with their count."""
    count = sum(1 for e in kineto_events(path) if isinstance(e, dict) and e.get("name") == "[OutOfMemory]"
                and e.get("ph") in ("i", "I"))
    said = meta.get("kineto.out_of_memory", "0 ").split(" ")[0]
    if count:
        print(f"  {count} [OutOfMemory] events; meta kineto.out_of_memory {meta.get('kineto.out_of_memory')!r}")
    if int(said) != count:
        fail(name, f"meta kineto.out_of_memory says {said}, the file has {count} [OutOfMemory] events")


def check_job_identity(name, path, meta):
    """meta rank and world_size are the file's distributedInfo (absent where it has none)."""
    doc = kineto_doc(path)
    info = doc.get("distributedInfo") or {} if isinstance(doc, dict) else {}
    for key in ("rank", "world_size"):
        want = str(info[key]) if key in info else None
        if meta.get(key) != want:
            fail(name, f"meta {key} {meta.get(key)}, distributedInfo.{key} {want}")


def nccl_op(kernel_name):
    """The operation of an NCCL (or RCCL) kernel, as docs/trace-format.md "Cross-rank events" reads
    its name (starts with nccl, then Kernel_OP); '' for any other kernel."""
    m = re.match(r"nccl.*?Kernel_([A-Za-z0-9]*)", kernel_name)
    return m.group(1) if m else ""


def group_members(text, pg_config, group):
    """A group's members: args.Process Group Ranks ("[0, 1]"), else distributedInfo.pg_config's
    list where that one is cut short ("[0, ..., 29, ...]") or empty; None where neither holds them."""
    inner = text[1:-1].split(",") if text.startswith("[") and text.endswith("]") else ["x"]
    try:
        ranks = [int(r) for r in inner if r.strip()] if text != "[]" else []
    except ValueError:
        ranks = None
    if not ranks:
        listed = pg_config.get(group)
        ranks = list(listed) if listed else None
    return sorted(set(ranks)) if ranks else None


def check_process_groups(name, path, meta):
    """Each stream whose NCCL kernels name one process group whose members are known (and hold the
    trace's rank): meta nccl.stream.N = "pg NAME:R0,R1,..."; no key for any other stream
    (docs/import.md, "Process groups")."""
    doc = kineto_doc(path)
    info = (doc.get("distributedInfo") or {}) if isinstance(doc, dict) else {}
    pg_config = {str(p.get("pg_name")): p.get("ranks") for p in info.get("pg_config") or []
                 if isinstance(p.get("ranks"), list) and all(isinstance(r, int) for r in p["ranks"])}
    streams = {}
    for e in kineto_events(path):
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in ("kernel", "Kernel"):
            continue
        if not nccl_op(e.get("name", "")):
            continue
        args = e.get("args") or {}
        group, ranks = args.get("Process Group Name"), args.get("Process Group Ranks", "")
        if isinstance(group, str) and group and isinstance(ranks, str):
            streams.setdefault(args.get("stream", 0), set()).add((group, ranks))
    want = {}
    for stream, groups in streams.items():
        resolved = {(g, tuple(group_members(r, pg_config, g) or ())) for g, r in groups}
        if len(resolved) != 1:
            continue
        (group, members), = resolved
        if members and ("rank" not in info or info["rank"] in members):
            want[f"nccl.stream.{stream}"] = f"pg {group}:" + ",".join(map(str, members))
    got = {k: v for k, v in meta.items() if k.startswith("nccl.stream.")}
    if got != want:
        fail(name, f"meta nccl.stream keys {got}, the file's process groups give {want}")
    elif want:
        print(f"  communicators from the kernels' process groups: {want}")


def check_kernel_starts(name, path, db):
    """Each kernel's start, relative to the first, to the nanosecond (Kineto without clamped starts)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    if meta.get("kineto.kernel_starts_clamped", "0") != "0":
        return
    want = sorted(int(decimal_of(e["ts"]) * 1000) for e in kineto_events(path) if isinstance(e, dict) and e.get("ph") == "X" and
                  e.get("cat") in ("kernel", "Kernel") and "ts" in e)
    got = sorted(t for (t,) in conn.execute("SELECT t_start FROM kernels"))
    if want and [t - want[0] for t in want] != [t - got[0] for t in got]:
        fail(name, "kernel starts differ from the file's to the nanosecond")
    elif want:
        print(f"  {len(want)} kernel starts equal the file's to the nanosecond, over {want[-1] - want[0]} ns")


def check_timeline(name, want, info):
    got = {"events": int(info["meta"].get("import.events", -1)), "kernels": info["counts"]["kernels"],
           "copies": info["counts"]["copies"], "markers": info["counts"]["markers"], "steps": info["steps"],
           "kernel_time_ns": info["kernel_time_ns"],
           "duration_ns": info["duration_ns"],
           "kernel_starts_clamped": int(info["meta"].get("nsys.kernel_starts_clamped",
                                                          info["meta"].get("kineto.kernel_starts_clamped", 0))),
           "kernel_time_clamped_ns": int(info["meta"].get("kineto.kernel_clamp", "; 0 ns of kernel time").split(" ns of kernel time")[0]
                                         .split("; ")[-1])}
    print("  timeline: " + ", ".join(f"{k} {got[k]} imported, {v} in the file" for k, v in want.items()))
    for k, v in want.items():
        if got[k] != v if k.startswith("kernel") else not close(got[k], v):
            fail(name, f"mhc info {k} {got[k]}, the file {v}")


def _is_tensor_value(x):
    return isinstance(x, list) and len(x) >= 5 and all(isinstance(f, int) for f in x[:5])


def et_tensors(values, types, shapes=None, strides=None):
    """(storage, device, bytes) of each tensor in one inputs/outputs list. The bytes are (offset +
    elements spanned) * itemsize: the span is 1 + sum((size - 1) * stride) where the trace writes
    shapes and strides beside the values (schema 1.1.1), else numel (an expanded view, stride 0,
    spans fewer elements than it has)."""
    out = []   # (tensor value, shape, strides)

    def at(lst, i):
        return lst[i] if isinstance(lst, list) and i < len(lst) else None

    def tensors_in(v, sh, st):   # a list of tensors, or of lists of them (a collective's outputs): any depth
        for i, x in enumerate(v):
            if _is_tensor_value(x):
                out.append((x, at(sh, i), at(st, i)))
            elif isinstance(x, list):
                tensors_in(x, at(sh, i), at(st, i))

    for i, (v, t) in enumerate(zip(values, types)):
        if t.startswith("Tensor") and isinstance(v, list) and len(v) >= 5:
            out.append((v, at(shapes, i), at(strides, i)))
        elif t.startswith("GenericList") and "Tensor" in t and isinstance(v, list):
            tensors_in(v, at(shapes, i), at(strides, i))
    res = []
    for x, shape, stride in out:
        storage, offset, numel, itemsize = x[1], x[2], x[3], x[4]
        if storage == 0 or numel == 0 or itemsize == 0:
            continue
        device = x[5] if len(x) > 5 else "cpu"
        kind, _, index = device.partition(":") if isinstance(device, str) else ("", "", "")
        if kind == "meta":   # a shape without storage
            continue
        dev = HOST
        if kind not in ("", "cpu"):   # any accelerator (cuda, xpu, hpu, mtia, a backend's name); "cuda" is cuda:0
            dev = int(index) if index else 0
        span = numel
        if strides is not None and isinstance(shape, list) and isinstance(stride, list):
            span = 1 + sum((size - 1) * step for size, step in zip(shape, stride))
        res.append((storage, dev, (offset + span) * itemsize))
    return res


def et_side_tensors(side):
    """The tensors of a Chakra-style inputs or outputs object ({values, types, shapes[, strides]})."""
    return et_tensors(side["values"], side["types"], side.get("shapes"), side.get("strides"))


def et_allocations(nodes):
    """nodes: (id, name, parent id, inputs, outputs) in id order, the tensors as (storage, device,
    bytes). The observer names a storage by its address, so an id comes back when a freed block's
    address is given to a new storage: a leaf aten:: op writing an output on a storage id that none
    of its inputs holds and that an earlier leaf op used begins that id's next allocation. Returns
    {id: (inputs, outputs)} with each storage written (storage id, allocation number from 0)."""
    has_children = {parent for nid, _, parent, _, _ in nodes if parent is not None and parent != nid}
    number, last_leaf, out = {}, {}, {}
    for nid, name, _, ins, outs in nodes:
        leaf = nid not in has_children and not name.startswith("[pytorch|")
        if leaf and name.startswith("aten::"):
            held = {(st, dev) for st, dev, _ in ins}
            for st, dev, _ in outs:
                key = (st, dev)
                if key not in held and key in last_leaf and last_leaf[key] != nid:
                    number[key] = number.get(key, 0) + 1
                    last_leaf[key] = nid
        named = lambda ts: [((st, number.get((st, dev), 0)), dev, b) for st, dev, b in ts]
        out[nid] = (named(ins), named(outs))
        if leaf:
            for st, dev, _ in ins + outs:
                last_leaf[(st, dev)] = nid
    return out


def storage_of_label(label):
    """mhc's allocation label 'storage N' (an id's first allocation) or 'storage N #K' (its K-th)
    as (N, K - 1)."""
    words = label.split()
    return int(words[1]), (int(words[2][1:]) - 1 if len(words) > 2 else 0)


def et_node_tensors(n):
    """The tensors of an ET node's inputs and outputs, in either schema (dict of values and types,
    or the older parallel lists)."""
    if isinstance(n.get("inputs"), dict):
        return et_side_tensors(n["inputs"]) + et_side_tensors(n["outputs"])
    return et_tensors(n.get("inputs", []), n.get("input_types", [])) + \
        et_tensors(n.get("outputs", []), n.get("output_types", []))


def et_node_inputs(n):
    """The tensors of an ET node's inputs alone, in either schema."""
    if isinstance(n.get("inputs"), dict):
        return et_side_tensors(n["inputs"])
    return et_tensors(n.get("inputs", []), n.get("input_types", []))


@functools.lru_cache(maxsize=1)   # et_source and check_et_storages of one file: read only
def et_storages(path):
    """Each storage's (bytes, first slot, last slot) and the number of slots: one slot per leaf op
    with tensors, in id order (ids are given as ops start; the file lists a node when its op ends,
    so two threads' ops that overlap are in another order there)."""
    nodes = sorted(trace_json(path).plain["nodes"], key=lambda n: n["id"])
    parents = set()
    for n in nodes:
        p = n.get("parent", n.get("ctrl_deps"))
        if p is not None and p != n["id"]:
            parents.add(p)
    allocations = et_allocations([(n["id"], n["name"], n.get("parent", n.get("ctrl_deps")), et_node_inputs(n),
                                   et_node_tensors(n)[len(et_node_inputs(n)):]) for n in nodes])
    storages = {}   # ((storage, allocation), device) -> [bytes, first slot, last slot]
    slot = 0
    for n in nodes:
        ins, outs = allocations[n["id"]]
        ts = ins + outs
        if n["id"] in parents or not ts or n["name"].startswith("[pytorch|"):
            continue
        for storage, dev, size in ts:
            s = storages.setdefault((storage, dev), [0, slot, slot])
            s[0], s[2] = max(s[0], size), slot
        slot += 1
    return storages, slot


def et_source(path):
    storages, slot = et_storages(path)
    out = {}
    for dev in {d for _, d in storages}:
        live = [0] * (slot + 1)
        for (_, d), (size, first, last) in storages.items():
            if d == dev:
                for k in range(first, last + 1):
                    live[k] += size
        out[dev] = (max(live), None, "storages over their first to last use")
    return out


def check_et_storages(name, path, db):
    """An execution trace imported alone: every storage is one allocation (label "storage N", its
    device) of its bytes, from its first leaf op's slot to the end of its last one's (the k-th slot
    from 0 is [k + 1, k + 2) ns), and there is no other allocation."""
    storages, _ = et_storages(path)
    want = {(s, d): (b, first + 1, last + 2) for (s, d), (b, first, last) in storages.items()}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = {}
    for label, dev, size, t0, t1 in conn.execute(
            "SELECT s.text, a.device, a.bytes, a.t_alloc, a.t_free FROM allocations a JOIN strings s ON s.id = a.label"):
        got[(storage_of_label(label), dev)] = (size, t0, t1)
    wrong = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    print(f"  storages: {len(got)} imported, {len(want)} in the file, {len(wrong)} with other bytes or lifetime")
    for k in wrong[:3]:
        fail(name, f"storage {k[0]} on device {k[1]}: imported (bytes, t_alloc, t_free) {got.get(k)}, "
                   f"the file's {want.get(k)}")


def check_et_broadcast_views(name, path, meta):
    """A trace without strides: the outputs with a tensor id of their own on an input's storage,
    larger than that input (views made by broadcasting, aten::expand), and the bytes their storages
    count above their other tensors, must be meta et.broadcast_views's figures; none, no meta."""
    nodes = trace_json(path).plain["nodes"]

    def uses(side, n):
        if isinstance(n.get(side), dict):
            io = n[side]
            if "strides" in io:
                return []   # spanned by its strides: no view is counted by numel
            values = io["values"]
        else:
            values = n.get(side, [])
        out = []

        def walk(v):
            for x in v:
                if _is_tensor_value(x) and len(x) >= 6:
                    if x[1] and x[3] and x[4] and not str(x[5]).startswith("meta"):
                        out.append((x[0], (x[1], x[5]), (x[2] + x[3]) * x[4]))
                elif isinstance(x, list):
                    walk(x)
        walk(values)
        return out

    views = set()
    for n in nodes:
        ins, outs = uses("inputs", n), uses("outputs", n)
        for tid, key, size in outs:
            base = [b for t, k, b in ins if k == key]
            if tid and tid not in {t for t, _, _ in ins} and base and size > max(base):
                views.add((tid, key))
    sizes = {}
    for n in nodes:
        for tid, key, size in uses("inputs", n) + uses("outputs", n):
            every, kept = sizes.get(key, (0, 0))
            sizes[key] = (max(every, size), kept if (tid, key) in views else max(kept, size))
    more = sum(every - kept for every, kept in sizes.values() if kept > 0)
    said = meta.get("et.broadcast_views")
    print(f"  broadcast views: {len(views)} in the file ({more} B); mhc: {said or 'none said'}")
    if not views:
        if said:
            fail(name, f"et.broadcast_views said ({said}) where the file has none")
        return
    if not said or not said.startswith(f"{len(views)} view") or f", {more} B more" not in said:
        fail(name, f"et.broadcast_views is {said!r}, the file's {len(views)} views and {more} B")


def check_et_steps(name, path, db):
    """Kernels per step of an execution trace imported alone: each leaf op with tensors (et_source's
    units) is in the ProfilerStep#N node above it; an op under none (the autograd thread's backward
    runs while the step's thread waits in backward()) is in the step whose node ids its id falls
    within (ids are given as ops start, on every thread: from the ProfilerStep#N node's id to the last
    id under it), else in none (-1)."""
    nodes = trace_json(path).plain["nodes"]
    by_id = {n["id"]: n for n in nodes}

    def parent(n):
        return n.get("parent", n.get("ctrl_deps"))
    parents = {parent(n) for n in nodes if parent(n) is not None and parent(n) != n["id"]}

    def in_tree(n):
        for _ in range(256):
            if n["name"].startswith("ProfilerStep#") and n["name"][13:].isdigit():
                return int(n["name"][13:])
            p = parent(n)
            if p is None or p == n["id"] or p not in by_id:
                return -1
            n = by_id[p]
        return -1
    ranges = {}
    for n in nodes:
        step = in_tree(n)
        if step >= 0:
            lo, hi = ranges.get(step, (n["id"], n["id"]))
            ranges[step] = (min(lo, n["id"]), max(hi, n["id"]))
    # Without ProfilerStep#N (docs/import.md "Steps"): the outermost Optimizer.step#... nodes, in id
    # order; step k holds the ids after the last id under the one before (step 0: from the first)
    # through the last id under its own.
    optimizer_last, optimizer_nodes = {}, {}   # the nodes under it, itself included: its work
    optimizer_inputs = {}   # the storages its nodes read: what it steps
    if not ranges:
        for n in nodes:
            top, m = None, n
            for _ in range(256):
                if optimizer_step_name(m["name"]):
                    top = m
                p = parent(m)
                if p is None or p == m["id"] or p not in by_id:
                    break
                m = by_id[p]
            if top is not None:
                optimizer_last[top["id"]] = max(optimizer_last.get(top["id"], top["id"]), n["id"])
                optimizer_nodes[top["id"]] = optimizer_nodes.get(top["id"], 0) + 1
                optimizer_inputs.setdefault(top["id"], set()).update(s for s, _, _ in et_node_inputs(n))
    # Loop nodes (zero_grad, the DataLoader's next batch) may move step 0's start (optimizer_step_bounds).
    loops = [(n["name"], n["id"], n["id"] + 1) for n in nodes if not ranges and loop_range_name(n["name"])]
    first, ends = optimizer_step_bounds(
        [(by_id[k]["name"], k, last + 1, optimizer_nodes[k], optimizer_inputs[k])
         for k, last in optimizer_last.items()] + loops,
        float("-inf"))
    ends = [end - 1 for end in ends]
    if not ranges and optimizer_last:
        check_steps_optimizers(name, dict(sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
            "SELECT key, value FROM meta")))
    want = {}
    for n in nodes:
        ts = et_node_tensors(n)
        if n["id"] in parents or not ts or n["name"].startswith("[pytorch|"):
            continue
        step = in_tree(n)
        if step < 0 and ranges:
            step = next((k for k, (lo, hi) in ranges.items() if lo <= n["id"] <= hi), -1)
        elif step < 0 and n["id"] >= first:
            step = next((k for k, end in enumerate(ends) if n["id"] <= end), -1)
        want[step] = want.get(step, 0) + 1
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = dict(conn.execute("SELECT step, COUNT(*) FROM kernels GROUP BY step"))
    print(f"  ops per step: {dict(sorted(got.items()))} imported, {dict(sorted(want.items()))} in the file")
    if got != want:
        fail(name, f"ops per step {dict(sorted(got.items()))}, the file's {dict(sorted(want.items()))}")
    # One step marker per ProfilerStep#N with ops (`mhc info` counts steps by them); a
    # ProfilerStep#N node with nothing under it (recording stopped as it began) has none.
    marked = sorted(i for (i,) in conn.execute("SELECT idx FROM markers WHERE kind = 0"))
    steps = sorted(k for k in want if k >= 0)
    print(f"  step markers {marked}, ProfilerStep#N with ops in the file {steps}")
    if marked != steps:
        fail(name, f"step markers {marked}, the file's steps with ops {steps}")


# ---- the imported trace ----

def mhc(exe, *args, ok=(0,)):
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    if p.returncode not in ok:
        raise RuntimeError(f"mhc {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def imported_peaks(db_path):
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    deltas = {}
    for dev, size, t0, t1 in db.execute("SELECT device, bytes, t_alloc, t_free FROM allocations"):
        deltas.setdefault(dev, []).append((t0, 1, size))
        if t1 is not None:
            deltas[dev].append((t1, 0, -size))   # frees before allocations at one instant
    peaks = {}
    for dev, ds in deltas.items():
        live = best = 0
        for _, _, d in sorted(ds):
            live += d
            best = max(best, live)
        peaks[dev] = best
    meta = dict(db.execute("SELECT key, value FROM meta"))
    return peaks, meta


def display_name(path):
    """The path under PUBLIC_DIR, or the file's name for a trace given on the command line."""
    rel = os.path.relpath(path, PUBLIC)
    return os.path.basename(path) if rel.startswith("..") else rel


def check_empty_descriptions(exe, name, path, db, work):
    """PyTorch's profiler (Kineto ca24bca5 to b10f04a4) wrote an empty process group description as
    `"Process Group Description": ,`, which no JSON reader takes. The trace with each of its
    descriptions written so must import as itself, each member said in meta kineto.empty_values."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    emptied, n = re.subn(r'"Process Group Description": "(?:[^"\\]|\\.)*"', '"Process Group Description": ', text)
    if n == 0:
        return
    variant = os.path.join(work, os.path.basename(path) + ".empty-descriptions.json")
    with open(variant, "w", encoding="utf-8") as f:
        f.write(emptied)
    variant_db = variant + ".db"
    mhc(exe, "import", variant, "-o", variant_db, "--force")
    notes = ("import.input", "import.warnings", "kineto.empty_values")
    def meta_of(d):
        return {k: v for k, v in sqlite3.connect(d).execute("SELECT key, value FROM meta") if k not in notes}
    said = dict(sqlite3.connect(variant_db).execute("SELECT key, value FROM meta")).get("kineto.empty_values", "")
    print(f"  {n} process group descriptions written empty: {said[:80]}")
    if meta_of(variant_db) != meta_of(db):
        fail(name, "written with empty process group descriptions, it imports as another trace (meta or rows differ)")
    if not said.startswith(f"{n} members of the trace written with no value ({n} 'Process Group Description'"):
        fail(name, f"{n} empty process group descriptions, kineto.empty_values says {said!r}")
    os.remove(variant)
    os.remove(variant_db)


def check(exe, path, source_of, work):
    source = source_of(path)
    name = display_name(path)
    print(name)
    db = os.path.join(work, os.path.basename(path) + ".db")
    mhc(exe, "import", path, "-o", db, "--force")
    peaks, meta = imported_peaks(db)
    if set(peaks) != set(source):
        fail(name, f"devices with memory: imported {sorted(peaks)}, source {sorted(source)}")
    for dev, (want, reserved, how) in sorted(source.items()):
        got = peaks.get(dev, 0)
        print(f"  device {dev}: peak {got} B imported, {want} B by the {how} (error {rel(got, want):.4%})")
        if not close(got, want):
            fail(name, f"device {dev}: imported peak {got} B, source {want} B")
        if reserved is not None:
            got_r = int(meta.get(f"kineto.reserved_peak.device{dev}", -1))
            print(f"  device {dev}: reserved peak {got_r} B imported, {reserved} B by Total Reserved")
            if not close(got_r, reserved):
                fail(name, f"device {dev}: reserved peak {got_r} B, Total Reserved {reserved} B")
    info = json.loads(mhc(exe, "info", db, "--json"))
    if source_of == kineto_source:
        check_timeline(name, kineto_timeline(path), info)
        check_kernel_starts(name, path, db)
        check_kernel_steps(name, path, db)
        check_step_markers(name, path, db)
        check_time_origin(name, path, db)
        check_memory_pairs(name, path, db)
        check_placement(name, path, db)
        check_device_lanes(name, path, meta)
        check_gpu_memory_said(name, path, source, meta)
        check_launches_without_kernel(name, path, meta)
        check_counters_and_host_memory(name, path, meta)
        check_host_memory_scope(name, path, meta)
        check_reserved_first(name, path, meta)
        check_job_identity(name, path, meta)
        check_process_groups(name, path, meta)
        check_out_of_memory(name, path, meta)
        check_device_list(name, path, meta)
        check_rocm_devices(name, path, meta)
        check_empty_descriptions(exe, name, path, db, work)
    if source_of == nsys_source:
        check_timeline(name, nsys_timeline(path), info)
        check_nsys_placement(name, path, db)
        check_nsys_markers(name, path, db)
        check_nsys_kernel_steps(name, path, db)
        check_nsys_unread_tables(name, path, meta)
        check_nsys_uvm_migrations(name, path, meta)
        check_nsys_launches_without_kernel(name, path, meta)
    if source_of == et_source:
        check_et_storages(name, path, db)
        check_et_broadcast_views(name, path, meta)
        check_et_steps(name, path, db)
    if source:
        # info's headline peak is on the device simulate takes by default: the largest GPU's,
        # the host's only where no GPU allocates (Chakra's simple_add: 768 KiB on GPU 0 beside
        # 40 MiB of host tensors).
        gpu_peaks = [p for d, (p, _, _) in source.items() if d >= 0 and p > 0]
        want = max(gpu_peaks) if gpu_peaks else max(p for p, _, _ in source.values())
        if info["peak"] is None or not close(info["peak"]["bytes"], want):
            fail(name, f"mhc info peak {info['peak']}, source {want} B")
    gpus = [d for d in source if d >= 0]
    kernel_devices = {d for (d,) in sqlite3.connect(db).execute("SELECT DISTINCT device FROM kernels WHERE device >= 0")}
    if len(gpus) == 1 and kernel_devices and kernel_devices != set(gpus):
        fail(name, f"one GPU's memory on device {gpus[0]}, its kernels on {sorted(kernel_devices)}")
    if not source:
        print("  no memory events: nothing to simulate")
        return
    device = max(gpus, key=lambda d: (source[d][0], -d)) if gpus else HOST
    sim = json.loads(mhc(exe, "simulate", db, "--capacity", "unlimited", "--allocator", "ideal", "--json",
                         "--no-store", "--device", str(device)))
    m = sim["metrics"]
    print(f"  simulate --capacity unlimited on device {device}: baseline peak {int(m['baseline_peak_bytes'])} B, "
          f"simulated {int(m['simulated_peak_bytes'])} B, makespan {int(m['baseline_makespan_ns'])} -> "
          f"{int(m['simulated_makespan_ns'])} ns, {int(m['stalls'])} stalls")
    if not (m["simulated_peak_bytes"] == m["baseline_peak_bytes"] and
            m["simulated_makespan_ns"] == m["baseline_makespan_ns"] and
            m["stalls"] == 0 and m["swap_out_bytes"] == 0 and m["swap_in_bytes"] == 0):
        fail(name, f"simulate --capacity unlimited is not the identity: {m}")
    if not close(m["baseline_peak_bytes"], source[device][0]):
        fail(name, f"simulate's baseline peak {m['baseline_peak_bytes']} B, source {source[device][0]} B")


def main():
    global PUBLIC
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    exe, PUBLIC, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    files = [(p, kineto_source) for p in sorted(glob.glob(os.path.join(PUBLIC, "kineto", "*.json.gz")))]
    files += [(p, nsys_source) for p in sorted(glob.glob(os.path.join(PUBLIC, "nsys", "*.sqlite")))]
    files += [(p, et_source) for p in sorted(glob.glob(os.path.join(PUBLIC, "chakra", "*.json.gz")))]
    # Traces given on the command line: a Kineto trace where the file name says so (`kineto`),
    # else an execution trace.
    files += [(os.path.abspath(p), kineto_source if "kineto" in os.path.basename(p) else et_source)
              for p in sys.argv[4:]]
    for path, source in files:
        try:
            check(exe, path, source, work)
        except (RuntimeError, KeyError, ValueError) as e:
            fail(display_name(path), str(e))
    print(f"{len(files)} traces, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


PUBLIC = ""
if __name__ == "__main__":
    main()
