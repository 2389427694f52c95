"""An outside reading of how docs/simulator.md says a run's figures are accounted, written from the
page alone ("Inputs": the events and their order at one instant; "Time": the global shift, makespan,
throughput loss, peak reduction, OOM slowdown; "Outputs": the metrics, what the traffic and wait
metrics count, the stored events, kernel times and the memory timeline; "Coupled ranks": a coupled
wait is a stall event at the kernel's end that the rank's `stalls` leaves out) and from
docs/trace-format.md ("Events at one instant", "Run tables", "Kernel times and how far a run got").

It does not re-run the policies: whatever victim, transfer or prefetch a run chose, its stored
figures must add up as the page says, so it holds for every policy, prefetcher, allocator setting,
link and host buffer alike:

* the metrics count the stored events (`swap_outs` the swap_out events, `swap_out_bytes` their
  allocations' bytes, `stalls`/`stall_ns` the stalls, `recompute_ns` the recomputations' time, and so on);
* the shift: the stalls, walked in the order the run processes the recorded events, each starts at
  its event's recorded time plus the shift so far and adds its length to the shift; every kernel the
  run reached starts at its recorded start plus the shift after its own stall and ends its recorded
  duration later; the makespan is the last recorded event plus the final shift, less the first;
* the memory timeline: each stored sample is the state after one processed event, in the bucket of
  that event's recorded time, one sample a bucket; where nothing ever left the GPU under the `ideal`
  allocator the device bytes are the live bytes, so every sample is known exactly.

check_run(trace, run) returns the differences as lines. Standard library only; no code shared with
sim/ or the other readings.
"""
import math
import sqlite3
from fractions import Fraction

KINDS = {0: "swap_out", 1: "swap_in", 2: "evict_clean", 3: "drop", 4: "recompute", 5: "stall", 6: "oom",
         7: "prefetch"}
INSTANTS = ("evict_clean", "drop", "prefetch", "oom")   # "Outputs": an instant at the eviction / request / OOM
MEMORY_SAMPLES = 4096
FORECAST = ("forecast_error", "forecast_peak_error", "forecast_horizon_error", "forecast_horizon_steps")
OOM_FIGURES = ("oom_time_ns", "oom_bytes_needed", "oom_bytes_pinned", "oom_bytes_short", "oom_fragmentation")

# processing order at one recorded instant ("Inputs", Events): kernel ends, frees, allocations, kernel starts
END, FREE, ALLOC, START = 0, 1, 2, 3


class Trace:
    """One device of a trace file: its allocations (id, bytes, t_alloc, t_free) by row, its kernels
    (id, t_start, t_end) in `seq` order ((t_start, row)), the host's allocations (device -1)."""

    def __init__(self, path, device):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.device = device
        self.allocs = con.execute("SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device = ? ORDER BY id",
                                  (device,)).fetchall()
        self.kernels = con.execute("SELECT id, t_start, t_end FROM kernels WHERE device = ? ORDER BY t_start, id",
                                   (device,)).fetchall()
        self.host = [] if device == -1 else con.execute(
            "SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device = -1 ORDER BY id").fetchall()
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        con.close()
        self.order_only = meta.get("timing") == "order-only"
        self.alloc_by_id = {a[0]: a for a in self.allocs}
        self.kernel_by_id = {k[0]: k for k in self.kernels}
        self.seq = {k[0]: i for i, k in enumerate(self.kernels)}
        self.events = self.processing_order()
        times = [e[0] for e in self.events]
        self.first = min(times) if times else 0
        self.last = max(times) if times else 0

    def processing_order(self):
        """Every recorded event of the device as (r, kind, id), in the order the run processes them:
        at one instant kernel ends (in seq), frees of allocations made before (by row), allocations (by
        row, one freed at its own instant right after it), kernel starts (in seq, a zero-length one's
        end right after its start)."""
        keyed = []
        for i, (kid, ts, te) in enumerate(self.kernels):
            keyed.append(((ts, START, i, 0), (ts, START, kid)))
            if te == ts:
                keyed.append(((ts, START, i, 1), (te, END, kid)))
            else:
                keyed.append(((te, END, i, 0), (te, END, kid)))
        for aid, _, ta, tf in self.allocs:
            keyed.append(((ta, ALLOC, aid, 0), (ta, ALLOC, aid)))
            if tf is not None:
                keyed.append(((tf, ALLOC, aid, 1) if tf == ta else (tf, FREE, aid, 0), (tf, FREE, aid)))
        keyed.sort(key=lambda x: x[0])
        return [e for _, e in keyed]

    def duration(self, kid):
        k = self.kernel_by_id[kid]
        return k[2] - k[1]


def host_order(host):
    """The host's allocations and frees in the order of "Events at one instant": (r, +bytes/-bytes)."""
    keyed = []
    for aid, b, ta, tf in host:
        keyed.append(((ta, 1, aid, 0), (ta, b)))
        if tf is not None:
            keyed.append(((tf, 1, aid, 1) if tf == ta else (tf, 0, aid, 0), (tf, -b)))
    keyed.sort(key=lambda x: x[0])
    return [e for _, e in keyed]


def bucket(r, first, last, n):
    """"Outputs": bucket floor((r - first) x N / (span + 1)), span = last - first (at least 1), clamped."""
    span = max(last - first, 1)
    return min(max((r - first) * n // (span + 1), 0), n - 1)


class Run:
    """A stored run: metrics, events in stored order (kind, t_start, t_end, allocation, kernel, bytes),
    kernels {id: (t_start, t_end)}, memory [(t, device_bytes, host_bytes)], config, status."""

    def __init__(self, db, run_id):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        self.id = run_id
        self.name, self.status, self.kind = con.execute("SELECT name, status, kind FROM runs WHERE id = ?",
                                                        (run_id,)).fetchone()
        self.metrics = dict(con.execute("SELECT key, value FROM run_metrics WHERE run = ?", (run_id,)).fetchall())
        self.config = dict(con.execute("SELECT key, value FROM run_config WHERE run = ?", (run_id,)).fetchall())
        self.events = [(KINDS.get(k, str(k)), s, e, a, kn, n) for k, s, e, a, kn, n in con.execute(
            "SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events WHERE run = ? ORDER BY rowid",
            (run_id,))]
        self.kernels = {k: (s, e) for k, s, e in con.execute(
            "SELECT kernel, t_start, t_end FROM run_kernels WHERE run = ?", (run_id,))}
        self.memory = con.execute("SELECT t, device_bytes, host_bytes FROM run_memory WHERE run = ? ORDER BY t",
                                  (run_id,)).fetchall()
        con.close()


def metric(run, key, default=0):
    return run.metrics.get(key, default)


def check_events(tr, run):
    """"Outputs": events stored in order of their start; instants; a transfer carries its allocation's
    bytes; a stall is a wait longer than 0; ids of the trace's rows of this device."""
    out = []
    prev = None
    for i, (kind, s, e, a, k, n) in enumerate(run.events):
        if prev is not None and s < prev:
            out.append(f"event {i} ({kind}) starts at {s}, before the event stored before it ({prev})")
        prev = s
        if kind in INSTANTS and e != s:
            out.append(f"event {i} ({kind}) is not an instant: {s} .. {e}")
        if e < s:
            out.append(f"event {i} ({kind}) ends before it starts: {s} .. {e}")
        if kind == "stall" and e <= s:
            out.append(f"event {i}: a stall of {e - s} ns (a stall is a wait longer than 0)")
        if a and a not in tr.alloc_by_id:
            out.append(f"event {i} ({kind}) names allocation {a}, not one of device {tr.device}")
        if k and k not in tr.kernel_by_id:
            out.append(f"event {i} ({kind}) names kernel {k}, not one of device {tr.device}")
        if kind in ("swap_out", "swap_in", "evict_clean", "drop", "prefetch") and a in tr.alloc_by_id:
            if kind in ("swap_out", "swap_in") and n != tr.alloc_by_id[a][1]:
                out.append(f"event {i} ({kind}) of allocation {a}: {n} bytes, the allocation has "
                           f"{tr.alloc_by_id[a][1]}")
    return out


def check_counts(tr, run, coupled_waits):
    """"What the traffic and wait metrics count": each metric against the stored events."""
    ev = run.events
    by = {kind: [x for x in ev if x[0] == kind] for kind in KINDS.values()}
    waits = set(coupled_waits)
    stalls = [x for j, x in enumerate(ev) if x[0] == "stall" and j not in waits]
    want = {"swap_outs": len(by["swap_out"]), "swap_out_bytes": sum(x[5] for x in by["swap_out"]),
            "swap_ins": len(by["swap_in"]), "swap_in_bytes": sum(x[5] for x in by["swap_in"]),
            "clean_evictions": len(by["evict_clean"]), "drops": len(by["drop"]),
            "prefetches": len(by["prefetch"]), "recomputations": len(by["recompute"]),
            "recompute_ns": sum(x[2] - x[1] for x in by["recompute"]),
            "stalls": len(stalls), "stall_ns": sum(x[2] - x[1] for x in stalls), "oom": len(by["oom"])}
    if coupled_waits or "coupled_wait_count" in run.metrics:
        cw = [ev[j] for j in coupled_waits]
        want["coupled_wait_count"] = len(cw)
        want["coupled_wait_time"] = sum(x[2] - x[1] for x in cw)
    out = [f"metric {k} = {metric(run, k, None)}, the stored events give {v}"
           for k, v in want.items() if metric(run, k, None) != v]
    if metric(run, "prefetches") > metric(run, "swap_ins"):
        out.append(f"prefetches {metric(run, 'prefetches')} > swap_ins {metric(run, 'swap_ins')}")
    if run.memory and metric(run, "host_peak_bytes", 0) < max(x[2] for x in run.memory):
        out.append(f"host_peak_bytes {metric(run, 'host_peak_bytes', None)}, below a memory sample's "
                   f"{max(x[2] for x in run.memory)} host bytes")
    if metric(run, "early_evictions") > metric(run, "swap_outs"):
        out.append(f"early_evictions {metric(run, 'early_evictions')} > swap_outs {metric(run, 'swap_outs')}")
    if metric(run, "forecast_evictions") > metric(run, "early_evictions"):
        out.append("forecast_evictions > early_evictions")
    for x in by["prefetch"]:   # its transfer: the allocation's swap_in that starts then or, queued, later
        if not any(y[3] == x[3] and y[1] >= x[1] for y in by["swap_in"]):
            out.append(f"prefetch of allocation {x[3]} at {x[1]} has no swap_in of it at or after it")
    for x in by["recompute"]:   # the GPU spends the producer's recorded duration
        if x[4] in tr.kernel_by_id and x[2] - x[1] != tr.duration(x[4]):
            out.append(f"recompute at {x[1]} of kernel {x[4]} lasts {x[2] - x[1]} ns, the kernel's "
                       f"recorded duration is {tr.duration(x[4])}")
    return out


def check_lives(tr, run, done, policy, prefetch, early, unlimited):
    """"State" and the rules read through the stored events: nothing happens to an allocation before it
    is made, nor after it is freed but a transfer booked before the free that its queue starts later
    (rule 6: its link time is spent; the event spans the transfer from its start on the link), the
    times simulated (recorded + the shift then); a swap-in brings back
    what a swap-out put on the host (landed by then); a clean eviction needs a valid host copy (a
    swap-out landed or a swap-in); a recomputation follows a drop; only the sampled policies drop;
    early swap-out and prefetches only where rule 10 and the prefetcher make them; with unlimited
    capacity nothing is evicted, moved or waited for ("Identity")."""
    out = []
    made, freed = {}, {}
    for r, kind, eid, shift in done:
        if kind == ALLOC:
            made[eid] = r + shift
        elif kind == FREE:
            freed[eid] = r + shift
    last_out, copied = {}, set()
    for i, (kind, s, e, a, k, n) in enumerate(run.events):
        if not a or kind in ("stall", "oom"):
            continue
        if a not in made or s < made[a]:
            out.append(f"event {i} ({kind}) of allocation {a} at {s}, before it was made ({made.get(a)})")
        if a in freed and s > freed[a] and kind in INSTANTS:   # a transfer queued before may start later
            out.append(f"event {i} ({kind}) of allocation {a} at {s}, after its free at {freed[a]}")
        if kind == "swap_out":
            last_out[a] = e
        elif kind == "swap_in":
            if a not in last_out or last_out[a] > s:
                out.append(f"swap_in {i} of allocation {a} at {s}: no swap-out of it landed before "
                           f"({last_out.get(a)})")
            copied.add(a)
        elif kind == "evict_clean" and not (a in copied or last_out.get(a, s + 1) <= s):
            out.append(f"clean eviction {i} of allocation {a} at {s} without a valid host copy")
        elif kind == "recompute" and not any(x[0] == "drop" and x[3] == a and x[1] <= s for x in run.events[:i]):
            out.append(f"recompute {i} of allocation {a} at {s} with no drop of it before")
    recs = sorted((x[1], x[2]) for x in run.events if x[0] == "recompute")
    for (s0, e0), (s1, _) in zip(recs, recs[1:]):   # rule 2: recomputations run one after another
        if s1 < e0:
            out.append(f"a recomputation starts at {s1}, before the one at {s0} ends ({e0})")
            break
    kstarts = {t for r, kind, eid, shift in done if kind == START for t in (r + shift,)}
    for x in run.events:   # rule 9: a prefetch is asked for after a kernel starts, at its start
        if x[0] == "prefetch" and x[1] not in kstarts:
            out.append(f"a prefetch of allocation {x[3]} at {x[1]}, when no kernel starts")
            break
    return out + check_who(run, policy, prefetch, early, unlimited)


def check_who(run, policy, prefetch, early, unlimited):
    """Which runs drop, evict early, prefetch or run out of memory by fragmentation, and "Identity"."""
    out = []
    m = run.metrics
    if metric(run, "drops") and policy not in ("dtr", "cost_aware"):
        out.append(f"{metric(run, 'drops')} drops under {policy}, which never drops")
    learning = prefetch.split(":")[0] in ("lookahead", "periodic", "forecast")
    if metric(run, "early_evictions") and not (learning and early):
        out.append(f"{metric(run, 'early_evictions')} early evictions with --prefetch {prefetch}"
                   f"{'' if early else ' --no-early'}")
    if metric(run, "prefetches") and prefetch == "none":
        out.append(f"{metric(run, 'prefetches')} prefetches with --prefetch none")
    if metric(run, "oom_fragmentation") and run.config.get("allocator") == "ideal":
        out.append("oom_fragmentation 1 with the ideal allocator")
    what_if = "allocator_conf" in run.config   # the baseline is the recorded settings' ("Capacity")
    if unlimited and (run.events or (m.get("simulated_peak_bytes") != m.get("baseline_peak_bytes") and not what_if)):
        out.append(f"unlimited capacity: {len(run.events)} events, peak {m.get('simulated_peak_bytes')} against "
                   f"the baseline's {m.get('baseline_peak_bytes')}")
    return out


def oom_owner(run):
    """The recorded event at which the run stopped: (ALLOC, allocation) or (START, kernel), or None."""
    ooms = [x for x in run.events if x[0] == "oom"]
    if not ooms:
        return None
    _, _, _, a, k, _ = ooms[0]
    return (START, k) if k else (ALLOC, a)


def walk(tr, run, coupled):
    """Walks the recorded events in processing order with the stored stalls. Returns (problems, the
    shift after each processed event as [(r, kind, id, shift)], kernel starts {id: simulated start},
    the indices of the coupled waits among run.events, the final shift, the OOM owner's shift)."""
    out = []
    stalls = [(j, x) for j, x in enumerate(run.events) if x[0] == "stall"]
    i, shift, done, starts, waits = 0, 0, [], {}, []
    owner = oom_owner(run)
    oom_shift = None
    for r, kind, eid in tr.events:
        if owner is not None and (kind, eid) == owner:
            oom_shift = shift
            break
        nxt = stalls[i][1] if i < len(stalls) else None
        mine = nxt is not None and (
            (kind == ALLOC and nxt[3] == eid and nxt[4] == 0) or
            (kind == START and nxt[4] == eid and (not coupled or nxt[1] == r + shift)) or
            (kind == END and coupled and nxt[4] == eid and nxt[1] == r + shift))
        if mine:
            if nxt[1] != r + shift:
                out.append(f"the stall of {'allocation' if kind == ALLOC else 'kernel'} {eid} starts at {nxt[1]}, "
                           f"its recorded time {r} + the shift so far {shift} is {r + shift}")
            if kind == END:
                waits.append(stalls[i][0])
            shift += nxt[2] - nxt[1]
            i += 1
        if kind == START:
            starts[eid] = r + shift
        done.append((r, kind, eid, shift))
    if owner is None or oom_shift is not None:
        for j, x in stalls[i:]:
            out.append(f"stall {j} ({x[1]} .. {x[2]}, allocation {x[3]}, kernel {x[4]}) belongs to no recorded "
                       f"event in the order the run processes them")
    return out, done, starts, waits, shift, oom_shift


def check_kernels(tr, run, starts, owner, done):
    """"Time" and "Kernel times": every kernel reached starts at recorded start + shift and keeps its
    recorded duration; a complete run reached every kernel, an OOM run those started before it."""
    out = []
    if not run.kernels and "kernels_reached" in run.metrics and metric(run, "kernels_reached") > 0:
        return out   # stored with --no-events
    for kid, t in starts.items():
        got = run.kernels.get(kid)
        if got is None:
            out.append(f"kernel {kid} was started (recorded {tr.kernel_by_id[kid][1]}) but has no run_kernels row")
            continue
        want_end = t + tr.duration(kid)
        if got[0] != t:
            out.append(f"kernel {kid}: simulated start {got[0]}, recorded start + shift = {t}")
        elif got[1] != want_end:
            out.append(f"kernel {kid}: simulated end {got[1]}, its start + recorded duration = {want_end}")
    extra = sorted(set(run.kernels) - set(starts))
    if extra:
        out.append(f"{len(extra)} run_kernels rows of kernels the run did not start before its end "
                   f"(first: kernel {extra[0]})")
    reached = metric(run, "kernels_reached", None)
    if reached is not None and reached != len(starts):
        out.append(f"kernels_reached {reached}, the run started {len(starts)}")
    last = max(starts, key=lambda k: tr.seq[k]) if starts else None
    if metric(run, "last_kernel_reached", None) != last:
        out.append(f"last_kernel_reached {metric(run, 'last_kernel_reached', None)}, the last kernel started "
                   f"is {last}")
    if owner is None and len(starts) != len(tr.kernels):
        out.append(f"a complete run started {len(starts)} of the device's {len(tr.kernels)} kernels")
    return out


def close(a, b):
    """Shares computed from figures as doubles: equal but for the last bits of the quotient (a loss
    of 1e-12 on a span of 2^61 ns is the difference of two doubles near 1)."""
    if a is None or b is None:
        return a is None and b is None
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b)) or abs(a - b) <= 1e-15


def as_stored(n):
    """"Time": the figures are stored as doubles, beyond 2^53 ns the nearest double of the integer."""
    return float(n)


def check_time(tr, run, final_shift, oom_shift, owner, one_instant):
    """"Time": baseline and simulated makespans, throughput loss, peak reduction, OOM slowdown, and
    which of them an OOM run or a run of one instant stores."""
    out = []
    base = tr.last - tr.first
    m = run.metrics
    if m.get("baseline_makespan_ns") != as_stored(base):
        out.append(f"baseline_makespan_ns {m.get('baseline_makespan_ns')}, last - first recorded event = {base}")
    if owner is None:
        sim = tr.last + final_shift - tr.first
        if m.get("simulated_makespan_ns") != as_stored(sim):
            out.append(f"simulated_makespan_ns {m.get('simulated_makespan_ns')}, (last recorded event + final "
                       f"shift) - first = {sim}")
        loss = None if base == 0 else float(sim) / float(base) - 1
        if not close(m.get("throughput_loss"), loss):
            out.append(f"throughput_loss {m.get('throughput_loss')}, simulated / baseline - 1 = {loss}")
        peak, bpeak = m.get("simulated_peak_bytes"), m.get("baseline_peak_bytes")
        red = 1 - peak / bpeak if peak is not None and bpeak else None
        if not close(m.get("peak_reduction"), red):
            out.append(f"peak_reduction {m.get('peak_reduction')}, 1 - simulated / baseline peak = {red}")
        if "oom_slowdown" in m:
            out.append("a run that finished stores oom_slowdown")
        return out
    ooms = [x for x in run.events if x[0] == "oom"]
    t_oom = ooms[0][1]
    if m.get("oom_time_ns") != as_stored(t_oom):
        out.append(f"oom_time_ns {m.get('oom_time_ns')}, the oom event's time {t_oom}")
    if m.get("oom_bytes_short") != ooms[0][5]:
        out.append(f"oom_bytes_short {m.get('oom_bytes_short')}, the oom event's bytes {ooms[0][5]}")
    kind, eid = owner
    r = tr.kernel_by_id[eid][1] if kind == START else tr.alloc_by_id[eid][2]
    a = ooms[0][3]
    if a in tr.alloc_by_id:   # rule 7: ideal needs the allocation's bytes, caching its rounded request
        b = tr.alloc_by_id[a][1]
        ideal = run.config.get("allocator") == "ideal"
        if (m.get("oom_bytes_needed") != b) if ideal else (m.get("oom_bytes_needed", 0) < b):
            out.append(f"oom_bytes_needed {m.get('oom_bytes_needed')} for allocation {a} of {b} bytes")
    # short by: at most what was needed; 0 only with fragmentation (its max with 0: the free bytes
    # hold the request, not the segment or pages the allocator adds for it)
    floor = 0 if m.get("oom_fragmentation") else 1
    if not floor <= m.get("oom_bytes_short", 0) <= m.get("oom_bytes_needed", 0):
        out.append(f"oom_bytes_short {m.get('oom_bytes_short')}, needed {m.get('oom_bytes_needed')}")
    if oom_shift is not None and t_oom < r + oom_shift:
        out.append(f"the OOM at {t_oom} is before its event's recorded time + shift ({r} + {oom_shift})")
    sim = t_oom - tr.first
    if m.get("simulated_makespan_ns") != as_stored(sim):
        out.append(f"OOM run: simulated_makespan_ns {m.get('simulated_makespan_ns')}, the OOM's time - first = {sim}")
    ran = r - tr.first
    slow = float(sim) / float(ran) - 1 if ran > 0 else 0.0
    if not close(m.get("oom_slowdown"), slow):
        out.append(f"oom_slowdown {m.get('oom_slowdown')}, makespan / (recorded {r} - first {tr.first}) - 1 = {slow}")
    for key in ("throughput_loss", "peak_reduction"):
        if key in m:
            out.append(f"an OOM run stores {key}")
    return out


def live_timeline(tr, done, n):
    """The memory samples of a run in which nothing left the GPU under `ideal`: after each processed
    event, the live bytes and the host's own bytes (its events up to the event's recorded time applied
    first), offered to the event's bucket; a bucket keeps the first offer of its highest value.
    Returns (samples [(t, device, host)], live peak, host peak)."""
    hosts = host_order(tr.host)
    hi, host, host_peak = 0, 0, 0
    live, peak, best = 0, 0, {}
    size = {a[0]: a[1] for a in tr.allocs}
    for r, kind, eid, shift in done:
        while hi < len(hosts) and hosts[hi][0] <= r:
            host += hosts[hi][1]
            host_peak = max(host_peak, host)
            hi += 1
        if kind == ALLOC:
            live += size[eid]
            peak = max(peak, live)
        elif kind == FREE:
            live -= size[eid]
        b = bucket(r, tr.first, tr.last, n)
        if b not in best or live > best[b][1]:
            best[b] = (r + shift, live, host)
    return sorted(best.values()), peak, host_peak


def check_memory(tr, run, done, n, capacity, exact):
    """"Outputs", the memory timeline: at most N samples, one per bucket, each taken after a processed
    event (its time r + shift, in r's bucket); device bytes at most the capacity and the simulated peak.
    With `exact` (ideal allocator, nothing ever left the GPU) every sample is known."""
    out = []
    if len(run.memory) > n:
        out.append(f"{len(run.memory)} memory samples, more than the {n} buckets")
    at = {}
    for r, kind, eid, shift in done:
        at.setdefault(r + shift, set()).add(bucket(r, tr.first, tr.last, n))
    seen = set()
    for t, dev, host in run.memory:
        cands = at.get(t, set()) - seen
        if not cands:
            out.append(f"memory sample at {t}: no processed event is at that simulated time in a bucket "
                       f"of its own")
            break
        seen.add(min(cands))
        if capacity is not None and capacity >= 0 and dev > capacity:
            out.append(f"memory sample at {t}: {dev} device bytes, above the capacity {capacity}")
    peak = metric(run, "simulated_peak_bytes", None)
    if peak is not None and capacity is not None and peak > capacity:   # "State": used <= capacity
        out.append(f"simulated_peak_bytes {peak}, above the capacity {capacity}")
    if peak is not None and run.memory and max(x[1] for x in run.memory) > peak:
        out.append(f"a memory sample holds {max(x[1] for x in run.memory)} device bytes, above the simulated "
                   f"peak {peak}")
    if exact:
        want, live_peak, host_peak = live_timeline(tr, done, n)
        if want != [tuple(x) for x in run.memory]:
            diff = next(((a, b) for a, b in zip(want, run.memory) if tuple(a) != tuple(b)), None)
            out.append(f"memory timeline: {len(run.memory)} samples, the live bytes give {len(want)}; first "
                       f"difference (reading, mhc): {diff}")
        if peak is not None and peak != live_peak and oom_owner(run) is None:
            out.append(f"simulated_peak_bytes {peak}, nothing left the GPU: the live peak is {live_peak}")
        if metric(run, "host_peak_bytes", None) != host_peak and oom_owner(run) is None:
            out.append(f"host_peak_bytes {metric(run, 'host_peak_bytes', None)}, nothing was swapped: the "
                       f"program's own host peak up to the last event is {host_peak}")
    return out


def live_peak(tr):
    """"Inputs": the unlimited live peak of the device (the `ideal` baseline peak)."""
    live, peak = 0, 0
    size = {a[0]: a[1] for a in tr.allocs}
    for _, kind, eid in tr.events:
        if kind == ALLOC:
            live += size[eid]
            peak = max(peak, live)
        elif kind == FREE:
            live -= size[eid]
    return peak


def share_bytes(text, peak):
    """"Capacity": a share of the baseline peak in bytes, rounded down (exact where it divides)."""
    return math.floor(Fraction(text.rstrip("%").strip()) * peak / 100)


def check_presence(run, owner, one_instant, prefetch):
    """"Outputs": which metrics a run stores."""
    out = []
    m = run.metrics
    want_status = "oom" if owner else "complete"
    if run.status != want_status:
        out.append(f"status {run.status}, the run {'ran out of memory' if owner else 'finished'}")
    if bool(metric(run, "oom")) != bool(owner):
        out.append(f"metric oom {metric(run, 'oom')}")
    for key in OOM_FIGURES + ("oom_slowdown",):
        if (key in m) != bool(owner):
            out.append(f"{key} {'absent from' if key not in m else 'stored in'} a run "
                       f"{'out of memory' if owner else 'that finished'}")
    if not owner and one_instant and "throughput_loss" in m:
        out.append("a run whose events are all at one instant stores a throughput loss")
    is_forecast = prefetch.startswith("forecast")
    if ("forecast_horizon_steps" in m) != is_forecast:
        out.append(f"forecast_horizon_steps {'stored' if not is_forecast else 'absent'} with --prefetch {prefetch}")
    if "forecast_evictions" in m and m["forecast_evictions"] <= 0:
        out.append("forecast_evictions stored as 0 (it is stored above 0 only)")
    return out


def check_run(tr, run, prefetch="none", allocator="caching", capacity_text=None, samples=MEMORY_SAMPLES,
              coupled=False, events_stored=True, policy="lru", early=True):
    """Every figure of one stored run against the page. `capacity_text` is --capacity as given."""
    out = []
    owner = oom_owner(run)
    m = run.metrics
    one_instant = tr.first == tr.last and not tr.order_only
    if allocator == "ideal" and m.get("baseline_peak_bytes") != live_peak(tr):
        out.append(f"ideal baseline_peak_bytes {m.get('baseline_peak_bytes')}, the live peak is {live_peak(tr)}")
    cap = m.get("capacity_bytes")
    if capacity_text and capacity_text.endswith("%") and m.get("baseline_peak_bytes") is not None:
        want = share_bytes(capacity_text, int(m["baseline_peak_bytes"]))
        if cap != want:
            out.append(f"capacity_bytes {cap}, {capacity_text} of the baseline peak rounded down is {want}")
    stopped = coupled and run.status == "incomplete"   # "Coupled ranks" 5: stopped waiting for a rank out of memory
    if stopped:
        out += [f"a stopped rank stores {k}" for k in ("throughput_loss", "peak_reduction") if k in m]
    else:
        out += check_presence(run, owner, one_instant, prefetch)
    if not events_stored:
        return out
    out += check_events(tr, run)
    problems, done, starts, waits, final, oom_shift = walk(tr, run, coupled)
    if stopped:   # it stopped at a cross-rank kernel's end, unprocessed: what it reached is what it stored
        starts = {k: t for k, t in starts.items() if k in run.kernels}
        problems = [x for x in problems if "belongs to no recorded event" not in x]
    out += problems
    out += check_counts(tr, run, waits)
    out += check_lives(tr, run, done, policy, prefetch, early, capacity_text == "unlimited")
    out += check_kernels(tr, run, starts, "stopped" if stopped else owner, done)
    if not stopped:
        out += check_time(tr, run, final, oom_shift, owner, one_instant)
    moved = any(x[0] in ("swap_out", "swap_in", "drop", "evict_clean") for x in run.events)
    exact = allocator == "ideal" and not moved
    out += check_memory(tr, run, done, samples, cap if cap is not None and cap >= 0 else None, exact)
    return out
