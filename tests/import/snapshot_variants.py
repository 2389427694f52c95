#!/usr/bin/env python3
"""Checks `mhc import` of PyTorch CUDA memory snapshots of every layout PyTorch writes, built here
with Python's pickle, against the truth the writer knows (no mhc code):

  python3 snapshot_variants.py MHC_EXE

A small recorder (Recorder below) plays a program's allocator history: segments reserved, blocks
allocated and freed, frees still waiting on other streams, expandable mappings, a CUDA graph's
private pool, OOMs, several devices and streams. It writes the pickle as
torch.cuda.memory._snapshot() does in each PyTorch version (the dict layouts are cited where they
are built), with a ring of the last `max_entries` trace entries per device as
_record_memory_history(max_entries=...) keeps, so that a trace may start in the middle of the run.
Since the recorder saw the whole history, it knows each device's true peak of allocated blocks over
the trace's window (from the state just before its first entry), the bytes still allocated at the
dump, the reserved peak and the steps (ProfilerStep#N ranges); `mhc info --json` and the trace
database must give the same, to the byte. A layout PyTorch cannot have written must be refused
with exit 2 in one line naming the file and the entry.

Where PyTorch writes it (paths in pytorch/pytorch):
  * the dict: torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot (Python's _snapshot), and
    torch/csrc/cuda/memory_snapshot.cpp, _memory_snapshot_pickled (the C++ _dump_snapshot);
  * the actions and what addr/size mean: c10/cuda/CUDACachingAllocator.h (TraceEntry, PyTorch
    2.0-2.7) and c10/core/CachingDeviceAllocator.h (from 2.8): alloc and free_requested carry the
    request, segment_* the segment's or mapping's bytes, oom the bytes asked for and, as
    device_free in place of addr, the bytes the device had free;
  * the ring: c10/cuda/CUDACachingAllocator.cpp, RingBuffer::getEntries (oldest kept entry first);
  * user_defined entries (record_function ranges as trace entries, addr 0, size 0): nightlies of
    June-July 2024 only (pytorch#129072, moved to external_annotations by pytorch#130964);
  * 1.13 wrote 'free' for the two free actions of 2.0 on; 2.0 wrote no time_us, block addresses
    or requested_size (a block's history held its real_size and frames).
Exit status 1 on a mismatch, with one line per figure.
"""
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import tempfile

MIB = 1 << 20


class Device:
    def __init__(self, index):
        self.index = index
        self.entries = []        # every trace entry, as the allocator recorded it
        self.segments = {}       # address -> {'size', 'stream', 'pool', 'expandable'}
        self.live = {}           # block address -> [size, requested, stream, state, frames]
        self.states = []         # (allocated bytes, reserved bytes) after each entry
        self.start = (0, 0)      # the state before the first entry


def at_least(version, than):
    return tuple(map(int, version.split("."))) >= tuple(map(int, than.split(".")))


class Recorder:
    """The allocator's history as the program made it; `dump` writes the snapshot."""

    def __init__(self, devices=1, version="2.6"):
        self.devices = [Device(d) for d in range(devices)]
        self.version = version
        self.time_us = 1_733_000_000_000_000   # unix microseconds, as approx time converts them
        self.annotations = []
        self.recording = False

    def record(self):
        """_record_memory_history(): what happened before is in the end state only."""
        self.recording = True
        for dev in self.devices:
            dev.start = self.state(dev)

    @staticmethod
    def state(dev):
        return (sum(b[0] for b in dev.live.values()),
                sum(s["size"] for s in dev.segments.values()))

    def tick(self, us=1):
        self.time_us += us

    def _entry(self, dev, action, addr, size, stream, frames=None, pool=(0, 0)):
        d = self.devices[dev]
        if not self.recording:
            return
        e = {"action": action, "addr": addr, "size": size, "stream": stream}
        if action == "oom":   # Module.cpp: TraceEntry::OOM writes device_free where others write addr
            e = {"action": action, "device_free": addr, "size": size, "stream": stream}
        if self.version != "1.13" and self.version != "2.0":
            e["time_us"] = self.time_us
        if frames is not None:
            e["frames"] = frames
        if at_least(self.version, "2.6"):   # compile_context and user_metadata on every entry (2.6 on)
            e["compile_context"] = "N/A"
            e["user_metadata"] = ""
        if at_least(self.version, "2.15"):   # the pool of the block or segment acted on
            e["pool_id"] = pool
        d.entries.append(e)
        d.states.append(self.state(d))

    def seg_alloc(self, dev, addr, size, stream=0, pool=(0, 0)):
        d = self.devices[dev]
        assert not any(a < addr + size and addr < a + s["size"] for a, s in d.segments.items())
        d.segments[addr] = {"size": size, "stream": stream, "pool": pool, "expandable": False}
        self._entry(dev, "segment_alloc", addr, size, stream, pool=pool)

    def seg_free(self, dev, addr):
        d = self.devices[dev]
        s = d.segments.pop(addr)
        assert not any(addr <= a < addr + s["size"] for a in d.live)
        self._entry(dev, "segment_free", addr, s["size"], s["stream"], pool=s["pool"])

    def seg_map(self, dev, addr, size, stream=0):
        """Pages of an expandable segment mapped (cuMemMap); mapped ranges that touch are one."""
        d = self.devices[dev]
        d.segments[addr] = {"size": size, "stream": stream, "pool": (0, 0), "expandable": True}
        self._entry(dev, "segment_map", addr, size, stream)

    def seg_unmap(self, dev, addr, size):
        """Pages [addr, addr + size) of one mapping unmapped (empty_cache); the rest stays mapped."""
        d = self.devices[dev]
        start = next(a for a, s in d.segments.items() if a <= addr and addr + size <= a + s["size"])
        s = d.segments.pop(start)
        assert s["expandable"] and not any(addr <= a < addr + size for a in d.live)
        if addr > start:
            d.segments[start] = dict(s, size=addr - start)
        if addr + size < start + s["size"]:
            d.segments[addr + size] = dict(s, size=start + s["size"] - addr - size)
        self._entry(dev, "segment_unmap", addr, size, s["stream"])

    def _pool_of(self, dev, addr):
        for a, s in self.devices[dev].segments.items():
            if a <= addr < a + s["size"]:
                return s["pool"]
        raise AssertionError(f"no segment holds {addr:#x}")

    def alloc(self, dev, addr, size, stream=0, requested=None, frames=None):
        """A block of `size` bytes (as the allocator rounded it) for a request of `requested`."""
        d = self.devices[dev]
        requested = size if requested is None else requested
        assert addr not in d.live and not any(a < addr + size and addr < a + b[0] for a, b in d.live.items())
        pool = self._pool_of(dev, addr)
        d.live[addr] = [size, requested, stream, "active_allocated", frames]
        self._entry(dev, "alloc", addr, requested, stream, frames=frames, pool=pool)

    def free_request(self, dev, addr):
        """The program let go of the block; the allocator waits on the streams that used it."""
        d = self.devices[dev]
        b = d.live[addr]
        b[3] = "active_pending_free"
        if self.version == "1.13":
            return
        self._entry(dev, "free_requested", addr, b[1], b[2], pool=self._pool_of(dev, addr))

    def free_complete(self, dev, addr):
        d = self.devices[dev]
        pool = self._pool_of(dev, addr)
        b = d.live.pop(addr)
        self._entry(dev, "free" if self.version == "1.13" else "free_completed", addr, b[1], b[2], pool=pool)

    def free(self, dev, addr):
        self.free_request(dev, addr)
        self.free_complete(dev, addr)

    def snapshot_call(self):
        """torch.cuda.memory._snapshot() called while recording: each device's allocator notes a
        'snapshot' entry whose size is its active bytes (every block allocated or pending free:
        CUDACachingAllocator.cpp, snapshot()'s total_active), after the traces were copied, so the
        entry shows in the next dump."""
        for d in self.devices:
            self._entry(d.index, "snapshot", 0, sum(b[0] for b in d.live.values()), 0)

    def oom(self, dev, size, device_free, stream=0):
        self._entry(dev, "oom", device_free, size, stream)

    def user_defined(self, dev, name, stage):
        """A record_function range's START or END noted as a trace entry (June-July 2024 nightlies):
        addr 0, size 0, stream 0, the context one frame with the stage as 'name' and the range as
        'filename' (the snippet of device_traces in pytorch#124179's description)."""
        self._entry(dev, "user_defined", 0, 0, 0, frames=[{"name": stage, "filename": name, "line": 0}])

    def annotate(self, name, stage, device=0):
        """external_annotations (2.5 on): {'device', 'name', 'stage', 'time_us'} per START/END."""
        self.annotations.append({"device": device, "name": name, "stage": stage, "time_us": self.time_us})

    def dump(self, max_entries=None):
        """The snapshot dict. Segments ascending by address, each with its blocks tiling it (gaps are
        inactive blocks), as Module.cpp's segmentInfoToDict writes them."""
        segments = []
        for d in self.devices:
            ranges = []   # expandable mappings that touch are one segment (the snapshot walks
            for addr in sorted(d.segments):   # blocks from each head to the first unmapped page)
                s = d.segments[addr]
                if ranges and s["expandable"] and ranges[-1][1]["expandable"] and \
                        ranges[-1][0] + ranges[-1][1]["size"] == addr:
                    ranges[-1] = (ranges[-1][0], dict(ranges[-1][1], size=ranges[-1][1]["size"] + s["size"]))
                else:
                    ranges.append((addr, s))
            for addr, s in ranges:
                blocks, at = [], addr
                for b_addr in sorted(a for a in d.live if addr <= a < addr + s["size"]):
                    if b_addr > at:
                        blocks.append(self._block(at, b_addr - at, 0, "inactive", None))
                    size, requested, _, state, frames = d.live[b_addr]
                    blocks.append(self._block(b_addr, size, requested, state, frames))
                    at = b_addr + size
                if at < addr + s["size"]:
                    blocks.append(self._block(at, addr + s["size"] - at, 0, "inactive", None))
                seg = {"device": d.index, "address": addr, "total_size": s["size"],
                       "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                       "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                       "stream": s["stream"], "segment_type": "large" if s["size"] > 2 * MIB else "small",
                       "blocks": blocks}
                if at_least(self.version, "2.1"):
                    seg["requested_size"] = sum(b.get("requested_size", 0) for b in blocks)
                    seg["segment_pool_id"] = s["pool"]
                    seg["is_expandable"] = s["expandable"]
                    seg["frames"] = []
                segments.append(seg)
        traces = []
        for d in self.devices:
            kept = d.entries if max_entries is None else d.entries[-max_entries:]
            traces.append(kept)
        snap = {"segments": segments, "device_traces": traces}
        if at_least(self.version, "2.4"):
            snap["allocator_settings"] = {
                "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": any(s["expandable"] for d in self.devices for s in d.segments.values()),
                "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {str(1 << k): 0 for k in range(16)}}
        if at_least(self.version, "2.5"):
            snap["external_annotations"] = self.annotations
        return snap

    def _block(self, addr, size, requested, state, frames):
        if self.version in ("1.13", "2.0"):   # no address, no requested_size; frames in history
            b = {"size": size, "state": state}
            if state != "inactive":
                b["history"] = [{"addr": addr, "real_size": requested, "frames": frames or []}]
            return b
        return {"address": addr, "size": size, "requested_size": requested, "state": state,
                "frames": frames or []}

    def truth(self, dev, max_entries=None):
        """What the trace window stands for on device `dev`: (peak allocated bytes, reserved peak,
        allocated bytes at the dump), from the state before the window's first entry on."""
        d = self.devices[dev]
        n = len(d.entries)
        first = 0 if max_entries is None else max(0, n - max_entries)
        before = d.start if first == 0 else d.states[first - 1]
        window = [before] + d.states[first:]
        return (max(a for a, _ in window), max(r for _, r in window), self.state(d)[0])


FRAMES = [{"name": "forward", "filename": "/home/user/model.py", "line": 12},
          {"name": "main", "filename": "/home/user/train.py", "line": 40}]


def scenario_ring(version):
    """A training loop whose ring wrapped: weights (4 x 2 MiB) allocated before the trace window,
    activations allocated and freed in each step, one block freed on a side stream late
    (free_requested, then free_completed after the next alloc), a 20 MiB segment reserved and
    given back inside the window. Keeps the last 40 of 100-odd entries."""
    r = Recorder(1, version)
    r.record()
    base = 0x7F0000000000
    r.seg_alloc(0, base, 20 * MIB)
    r.seg_alloc(0, base + 20 * MIB, 20 * MIB, stream=1)   # blocks of stream 1 lie in its own segments
    for k in range(4):
        r.alloc(0, base + k * 2 * MIB, 2 * MIB, frames=FRAMES)
        r.tick()
    for step in range(8):
        if at_least(version, "2.5"):
            r.annotate(f"ProfilerStep#{step}", "START")
        act = base + 8 * MIB
        for k in range(3):   # requests the allocator rounds up to 2 MiB blocks (round_size)
            r.alloc(0, act + k * 2 * MIB, 2 * MIB, requested=2 * MIB - 100 * k - 100)
            r.tick()
        r.free_request(0, act)       # used on the side stream: completes later
        r.tick()
        r.alloc(0, base + 20 * MIB, 4 * MIB, stream=1)
        r.tick()
        r.free_complete(0, act)
        for k in (1, 2):
            r.free(0, act + k * 2 * MIB)
            r.tick()
        r.free(0, base + 20 * MIB)
        if step % 2 == 1:   # the program dumps a snapshot every other step
            r.snapshot_call()
        if step == 5:   # a burst that needs another segment, given back by empty_cache
            r.seg_alloc(0, base + 60 * MIB, 20 * MIB)
            r.alloc(0, base + 60 * MIB, 20 * MIB)
            r.tick()
            r.free(0, base + 60 * MIB)
            r.seg_free(0, base + 60 * MIB)
        if at_least(version, "2.5"):
            r.annotate(f"ProfilerStep#{step}", "END")
        r.tick(10)
    return r


def scenario_expandable(version):
    """expandable_segments:True: one virtual range whose pages are mapped as it grows and unmapped
    by empty_cache; a wrapped ring that starts after the first mapping."""
    r = Recorder(1, version)
    r.record()
    base = 0x7E0000000000
    r.seg_map(0, base, 20 * MIB)
    r.alloc(0, base, 6 * MIB, requested=6 * MIB - 4096)
    r.tick()
    r.alloc(0, base + 6 * MIB, 2 * MIB)
    r.tick()
    r.seg_map(0, base + 20 * MIB, 10 * MIB)   # touches the first: one segment in the end state
    r.alloc(0, base + 8 * MIB, 20 * MIB)
    r.tick()
    r.free(0, base + 8 * MIB)
    r.tick()
    r.seg_unmap(0, base + 20 * MIB, 10 * MIB)
    r.alloc(0, base + 8 * MIB, 4 * MIB)
    r.tick()
    r.free(0, base + 6 * MIB)
    return r


def scenario_graph_pool(version):
    """A CUDA graph captured into private pool (1, 0): its segment is reserved in that pool, the
    captured blocks live in it, the default pool keeps its own segment."""
    r = Recorder(1, version)
    base = 0x7D0000000000
    r.seg_alloc(0, base, 2 * MIB)
    r.alloc(0, base, 512 * 1024)   # before recording: in the end state only
    r.record()
    r.seg_alloc(0, base + 32 * MIB, 20 * MIB, pool=(1, 0))
    for k in range(3):
        r.alloc(0, base + 32 * MIB + k * 4 * MIB, 4 * MIB, frames=FRAMES)
        r.tick()
    r.free(0, base + 32 * MIB + 4 * MIB)   # a temporary of the captured graph
    r.tick()
    r.alloc(0, base + 512 * 1024, 1024)
    r.tick()
    return r


def scenario_devices(version):
    """Two GPUs driven by one process: each device its own address space (the same addresses),
    its own trace and segments; an OOM on device 1 (device_free in place of addr)."""
    r = Recorder(2, version)
    base = 0x7C0000000000
    r.record()
    for dev, blocks in ((0, 3), (1, 5)):
        r.seg_alloc(dev, base, 20 * MIB, stream=dev * 7)
        for k in range(blocks):
            r.alloc(dev, base + k * 2 * MIB, 2 * MIB, stream=dev * 7)
            r.tick()
    r.free(0, base)
    r.snapshot_call()
    r.oom(1, 80 * (1 << 30), 3 * MIB, stream=7)
    r.tick()
    r.free(1, base + 2 * MIB)
    r.tick()
    return r


def scenario_pending(version):
    """Frees still waiting on other streams at the dump (record_stream): free_requested with no
    free_completed; the end state holds the blocks as active_pending_free."""
    r = Recorder(1, version)
    base = 0x7B0000000000
    r.record()
    r.seg_alloc(0, base, 2 * MIB)
    r.seg_alloc(0, base + 2 * MIB, 2 * MIB, stream=1)
    for k in range(4):
        r.alloc(0, base + (k % 2) * 2 * MIB + (k // 2) * 256 * 1024, 256 * 1024, stream=k % 2)
        r.tick()
    r.free_request(0, base)
    r.tick()
    r.free_request(0, base + 2 * MIB)
    r.tick()
    r.snapshot_call()   # pending blocks are active: counted
    return r


def scenario_user_defined(version):
    """A nightly of June-July 2024: record_function ranges as user_defined trace entries (no
    memory), also on device 0 of a rank that allocates on device 1 (pytorch#130457)."""
    r = Recorder(2, version)
    base = 0x7A0000000000
    r.record()
    for step in range(3):
        r.user_defined(0, f"ProfilerStep#{step}", "START")
        r.tick()
        if step == 0:
            r.seg_alloc(1, base, 2 * MIB)
        r.user_defined(1, "## forward ##", "START")
        r.alloc(1, base + step * 8192, 1024, frames=FRAMES)
        r.tick()
        r.alloc(1, base + step * 8192 + 1024, 4096)
        r.tick()
        r.user_defined(1, "## forward ##", "END")
        r.free(1, base + step * 8192)
        r.tick()
        r.user_defined(0, f"ProfilerStep#{step}", "END")
        r.tick(5)
    return r


SCENARIOS = [
    ("wrapped ring, side-stream free, segment given back", scenario_ring, 40),
    ("expandable segments (segment_map/unmap), ring from the second entry", scenario_expandable, None),
    ("CUDA graph private pool, a block from before recording", scenario_graph_pool, None),
    ("two devices, two streams, an OOM", scenario_devices, None),
    ("frees pending at the dump (free_requested only)", scenario_pending, None),
    ("user_defined trace entries", scenario_user_defined, None),
]
VERSIONS = ["1.13", "2.0", "2.1", "2.4", "2.5", "2.6", "2.15"]


def mhc(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def check(exe, name, rec, max_entries, tmp):
    snap = rec.dump(max_entries)
    path = os.path.join(tmp, "snap.pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=2 if not at_least(rec.version, "2.1") else 4)
    db = os.path.join(tmp, "snap.db")
    rc, _, err = mhc(exe, "import", path, "-o", db, "--force")
    if rc != 0:
        print(f"{name}: import exit {rc}: {err.strip()}  MISMATCH")
        return 1
    rc, out, err = mhc(exe, "info", db, "--json")
    info = json.loads(out)
    got = {m["device"]: m for m in info.get("memory", [])}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    alive = dict(conn.execute("SELECT device, SUM(bytes) FROM allocations WHERE t_free IS NULL GROUP BY device"))
    conn.close()
    failures = 0
    for dev in range(len(rec.devices)):
        peak, reserved, at_end = rec.truth(dev, max_entries)
        if peak == 0 and dev not in got:
            continue
        g = got.get(dev, {})
        for key, want, have in (("peak_bytes", peak, g.get("peak_bytes")),
                                ("reserved_peak_bytes", reserved, g.get("reserved_peak_bytes")),
                                ("allocated at the dump", at_end, alive.get(dev, 0))):
            ok = want == have
            print(f"{name} device {dev}: {key} mhc {have} truth {want}" + ("" if ok else "  MISMATCH"))
            failures += not ok
    starts = [a["name"] for a in snap.get("external_annotations", []) if a["stage"] == "START"]
    starts += [e["frames"][0]["filename"] for t in snap["device_traces"] for e in t
               if e["action"] == "user_defined" and e["frames"][0]["name"] == "START"]
    steps = sum(1 for name in starts if name.startswith("ProfilerStep#"))
    ok = info.get("steps") == steps
    print(f"{name}: steps mhc {info.get('steps')} truth {steps}" + ("" if ok else "  MISMATCH"))
    failures += not ok
    # Each 'snapshot' entry the window kept holds the allocator's active bytes there: the import must
    # say it found them equal.
    kept = sum(1 for t in snap["device_traces"] for e in t if e["action"] == "snapshot")
    said = info.get("meta", {}).get("snapshot.active_checked", "")
    ok = (kept == 0 and not said) or (said.startswith(f"{kept} snapshot entr") and "equal at every one" in said)
    if kept or not ok:
        print(f"{name}: {kept} snapshot entries, meta {said!r}" + ("" if ok else "  MISMATCH"))
    failures += not ok
    warnings = info.get("meta", {}).get("import.warnings", "")
    if "user_defined" in warnings:
        print(f"{name}: user_defined entries warned as unknown actions: {warnings}  MISMATCH")
        failures += 1
    return failures


def frees_dropped(exe, tmp):
    """The loop recorded with _record_memory_history(skip_actions=["free_requested",
    "free_completed"]) (PyTorch 2.9 on): the trace keeps blocks alive that the program freed. Its
    'snapshot' entries show the allocator held less: the import must say they differ."""
    rec = scenario_ring("2.6")
    snap = rec.dump()
    snap["device_traces"] = [[e for e in t if e["action"] not in ("free_requested", "free_completed")]
                             for t in snap["device_traces"]]
    path = os.path.join(tmp, "skip.pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    rc, _, err = mhc(exe, "import", path, "-o", os.path.join(tmp, "skip.db"), "--force")
    ok = rc == 0 and "snapshot entries: the import's alive bytes differ from the allocator's active bytes at 4" in err
    print(f"frees dropped (skip_actions): exit {rc}, said: {[l for l in err.splitlines() if 'snapshot entries' in l]}"
          + ("" if ok else "  MISMATCH"))
    return not ok


def main():
    exe = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        failures += frees_dropped(exe, tmp)
        # The ring wrapped at every entry: the window may start between any two entries (between a
        # block's free_requested and its free_completed, inside a step, after a segment_map).
        for make in (scenario_ring, scenario_expandable, scenario_devices, scenario_graph_pool):
            rec = make("2.6")
            n = max(len(d.entries) for d in rec.devices)
            for keep in range(1, n + 1):
                failures += check(exe, f"{make.__name__} [torch 2.6, max_entries={keep}]", rec, keep, tmp)
        for title, make, max_entries in SCENARIOS:
            for version in VERSIONS:
                if make is scenario_user_defined and version != "2.5":
                    continue   # nightlies before 2.5's branch cut only
                if make is scenario_expandable and not at_least(version, "2.1"):
                    continue   # expandable segments came in 2.1
                if make is scenario_graph_pool and not at_least(version, "2.1"):
                    continue   # segment_pool_id came in 2.1
                failures += check(exe, f"{title} [torch {version}]", make(version), max_entries, tmp)
    print(f"{failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
