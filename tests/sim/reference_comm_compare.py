#!/usr/bin/env python3
"""Runs `mhc advise CAPTURE --setting S --json [--comm-link L] [--step-time T]` beside
reference_comm.py (an outside reading of docs/advise.md "Communication time" and "A measured step
time" and docs/simulator.md "Settings": Timing, Collectives, reshard_after_forward) on DDP, FSDP2
and HSDP captures of small models on fake ranks, each run on a copy changed at random: the world
size (and HSDP's groups), `bucket_cap_mb`, the capture's GPU, every compute kernel's duration (and
gaps between kernels), the collectives' link, `reshard_after_forward: false` on some groups, a
measured step time. Compared: the baseline's step time, the collectives' time on their streams and
the part not hidden behind compute, the setting's step time, the `--step-time` calibration and the
`comm` line's world, bus bandwidth and per-step latency.

Usage: reference_comm_compare.py MHC WORKDIR [--capture=auto|PYTHON] [--quick] [--runs=N] [--seed=S]
       [--verbose] [--only=N --keep] [TRACE.db...]
--capture: capture the small models first (DDP, FSDP2 resharding and not, HSDP on a 2 x 2 mesh, DDP
and FSDP2 with 2 micro-batches; 2 steps each) with PYTHON's torch and this tree's mhc_torch (auto:
$MHC_VENV, else .venv at the repository's root), kept in WORKDIR for the next run; --quick: three
of them (DDP with 2 micro-batches, FSDP2, HSDP), about 12 s each on this machine.
--only=N: run N alone (with --keep its changed capture stays in WORKDIR as runN.db).
Exit 0 when every run agrees, 1 otherwise (each difference printed), 77 when --capture finds no
usable environment.
"""
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_comm as ref  # noqa: E402

MODEL = """
D = WIDTH
import torch
import torch.distributed as dist
from torch import nn
from torch.testing._internal.distributed.fake_pg import FakeStore

if not dist.is_initialized():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
                                    for _ in range(3))
        self.head = nn.Linear(D, D)
    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return self.head(x).square().mean()

def make_batch():
    return (torch.randn(32, D),)

def loss_fn(model, batch):
    return model(*batch)
"""
DDP = MODEL + """
def build_model():
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(Net(), init_sync=False)
"""
FSDP2 = MODEL + """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
MESH = init_device_mesh("cpu", SHAPE, **NAMES)

def build_model():
    m = Net()
    for b in m.blocks:
        fully_shard(b, mesh=MESH, reshard_after_forward=RESHARD)
    fully_shard(m, mesh=MESH)
    return m
"""
# DDP's blocks are 256 wide: 6.3 MB of gradients, so that the default bucket_cap_mb of 25 splits
# (a first bucket of 1 MiB); FSDP2's 64
DDP = DDP.replace("WIDTH", "256")
MODEL = MODEL.replace("WIDTH", "64")
FSDP2 = FSDP2.replace("WIDTH", "64")
CAPTURES = [
    ("ddp", DDP, []),
    ("fsdp", FSDP2.replace("SHAPE", "(4,)").replace("**NAMES", "").replace("RESHARD", "True"), []),
    ("fsdp_kept", FSDP2.replace("SHAPE", "(4,)").replace("**NAMES", "").replace("RESHARD", "False"), []),
    ("hsdp", FSDP2.replace("SHAPE", "(2, 2)").replace("**NAMES", "mesh_dim_names=('replicate', 'shard')")
     .replace("RESHARD", "True"), []),
    ("ddp_mb", DDP, ["--micro-batches", "2"]),
    ("fsdp_mb", FSDP2.replace("SHAPE", "(4,)").replace("**NAMES", "").replace("RESHARD", "True"),
     ["--micro-batches", "2"]),
]
GPUS = list(ref.GPU_BUS)


def find_python(arg):
    if arg != "auto":
        return arg
    for cand in (os.environ.get("MHC_VENV"), str(HERE.parents[1] / ".venv")):
        if cand and Path(cand, "bin", "python").exists():
            return str(Path(cand, "bin", "python"))
    return None


QUICK = ("ddp_mb", "fsdp", "hsdp")


def capture(python, work, quick=False):
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1] / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    probe = subprocess.run([python, "-c", "import torch, torch.distributed as d; assert d.is_available()"],
                           capture_output=True, env=env)
    if probe.returncode:
        return None
    out = []
    for name, text, extra in CAPTURES:
        if quick and name not in QUICK:
            continue
        db = work / f"{name}.db"
        src = work / f"{name}.py"
        if not db.exists() or not src.exists() or src.read_text() != text:   # kept while the model is the same
            if db.exists():
                db.unlink()
            src.write_text(text)
            r = subprocess.run([python, "-m", "mhc_torch.cli", "capture", str(src), "-o", str(db), "--autocast",
                                "none", "--steps", "2", *extra], capture_output=True, text=True, env=env,
                               timeout=600)
            if r.returncode:
                print(f"capture {name} failed:\n{r.stderr[-2000:]}")
                return None
        out.append(db)
    return out


# ---------------------------------------------------------------- changing a capture at random

def retime(db, rng, gaps):
    """Every compute kernel's duration scaled by its own random factor (the collectives' recorded
    durations are not used by the ring model, the copy-in's is), optionally gaps between kernels; the
    allocations, markers and copies follow their kernels (an allocation at a boundary stays with the
    kernel that starts there, a free with the one that ends there)."""
    ks = db.execute("SELECT k.id, k.t_start, k.t_end, s.text FROM kernels k JOIN strings s ON s.id = k.name "
                    "ORDER BY k.t_start, k.id").fetchall()
    spread = rng.choice([1, 10, 100, 1000])
    new = []
    t = ks[0][1]
    prev_end = None
    for kid, t0, t1, name in ks:
        if prev_end is not None:
            t += (t0 - prev_end) + (rng.choice([0, 0, 0, rng.randint(1, 5000)]) if gaps else 0)
        prev_end = t1
        d = t1 - t0
        if name not in (ref.ALL_GATHER, ref.REDUCE_SCATTER, ref.ALL_REDUCE):
            d = max(1, int(d * rng.uniform(0.5, 1.0) * spread ** rng.random()))
        new.append((kid, t0, t1, t, t + d))
        t += d
    starts = {t0: n0 for _k, t0, _t1, n0, _n1 in new}
    ends = {t1: n1 for _k, _t0, t1, _n0, n1 in new}

    def inside(v, alloc):
        if alloc and v in starts:
            return starts[v]
        if not alloc and v in ends:
            return ends[v]
        if v in starts:
            return starts[v]
        if v in ends:
            return ends[v]
        for _k, t0, t1, n0, n1 in new:
            if t0 < v < t1:
                return n0 + (v - t0) * (n1 - n0) // (t1 - t0)
        last = new[-1]
        return v - last[2] + last[4] if v > last[2] else v

    for kid, _t0, _t1, n0, n1 in new:
        db.execute("UPDATE kernels SET t_start = ?, t_end = ? WHERE id = ?", (n0, n1, kid))
    for aid, ta, tf in db.execute("SELECT id, t_alloc, t_free FROM allocations").fetchall():
        db.execute("UPDATE allocations SET t_alloc = ?, t_free = ? WHERE id = ?",
                   (inside(ta, True), None if tf is None else inside(tf, False), aid))
    for mid, ta, tf in db.execute("SELECT id, t_start, t_end FROM markers").fetchall():
        db.execute("UPDATE markers SET t_start = ?, t_end = ? WHERE id = ?", (inside(ta, True), inside(tf, False), mid))
    for cid, ta, tf in db.execute("SELECT id, t_start, t_end FROM copies").fetchall():
        db.execute("UPDATE copies SET t_start = ?, t_end = ? WHERE id = ?", (inside(ta, True), inside(tf, False), cid))


def vary(src, dst, rng):
    shutil.copyfile(src, dst)
    db = sqlite3.connect(dst)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    said = []
    key = "capture.fsdp2" if "capture.fsdp2" in meta else "capture.ddp"
    text = meta[key]
    r = rng.random()
    if r < 0.55:
        if "shard" in text:
            a, b = rng.choice([1, 2, 3, 4, 8, 1024]), rng.choice([1, 2, 3, 4, 1024])
            text = re.sub(r"world \d+ \(shard \d+ x replicate \d+\)", f"world {a * b} (shard {a} x replicate {b})", text)
        else:
            text = re.sub(r"world \d+", f"world {rng.choice([1, 2, 3, 5, 8, 9, 16, 64, 1000, 1 << 20])}", text)
    if key == "capture.ddp" and rng.random() < 0.7:
        text = re.sub(r"bucket_cap_mb [0-9.e+-]+",
                      f"bucket_cap_mb {rng.choice(['25', '1', '0.25', '0.1', '0.05', '0.02', '0.001', '0', '68719476736', '25.0', '2.5e1'])}", text)
    if text != meta[key]:
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (text, key))
        said.append(text)
    g = rng.random()
    if g < 0.3:
        gpu = rng.choice(GPUS)
        db.execute("UPDATE meta SET value = ? WHERE key = 'capture.gpu'", (gpu,))
        said.append(f"gpu {gpu}")
    elif g < 0.4:
        db.execute("DELETE FROM meta WHERE key = 'capture.gpu'")
        said.append("no gpu")
    t = rng.random()
    if t < 0.75:
        gaps = t < 0.2
        retime(db, rng, gaps)
        said.append("retimed" + (" with gaps" if gaps else ""))
    db.commit()
    db.close()
    return said


def groups(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    labels = [t for (t,) in db.execute("SELECT DISTINCT s.text FROM allocations a JOIN strings s ON s.id = a.label")]
    db.close()
    return sorted({ref.group_of(t) for t in labels if ref.group_of(t)})


def comm_line(text):
    m = re.search(r"world (\d+(?: x \d+)?)", text)
    bw = re.search(r"([0-9.]+) ([kMGT]?)B/s bus bandwidth", text)
    lat = re.search(r"([0-9.]+) us \+ ([0-9.]+) us per ring step", text)
    return (m.group(1) if m else None, float(bw.group(1)) if bw else None,
            float(lat.group(2)) if lat else None, bw.group(2) if bw else None)


def written(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT s.text, k.t_start, k.t_end FROM kernels k JOIN strings s ON s.id = k.name "
                      "ORDER BY k.t_start, k.id").fetchall()
    db.close()
    return rows


def run_one(mhc, path, setting, link, step_time, verbose):
    out = path.with_name(path.stem + "_out.db")
    if out.exists():
        out.unlink()
    cmd = [mhc, "advise", str(path), "--setting", json.dumps(setting), "--json"]
    if not step_time:
        cmd += ["--trace-out", str(out)]
    if link:
        cmd += ["--comm-link", link]
    if step_time:
        cmd += ["--step-time", f"{step_time}ns"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    try:
        want = ref.predict(str(path), setting, link, step_time)
    except ref.Refused as e:
        want = None
        why = str(e)
    if r.returncode:
        if want is None:
            return []
        return [f"mhc refused ({r.returncode}: {r.stderr.strip()[:300]}), the reading did not"]
    if want is None:
        return [f"the reading refused ({why}), mhc did not"]
    got = json.loads(r.stdout)
    diffs = []
    b = got["baseline"]
    row = got["rows"][0]

    def same(name, a, e):
        if a != e:
            diffs.append(f"{name}: mhc {a}, reading {e}")
    if step_time:
        c = got.get("calibration") or {}
        wc = want["calibration"]
        same("calibration.factor", round(c.get("factor", 0), 9), round(wc["factor"], 9))
        for k in ("estimated_step_ns", "measured_step_ns", "calibrated_step_ns"):
            same(f"calibration.{k}", c.get(k), wc[k])
        same("baseline step_time_ns", b["step_time_ns"], want["baseline_step_time_ns"])
    else:
        same("baseline step_time_ns", b["step_time_ns"], want["baseline_step_time_ns"])
        same("comm_ns", b.get("comm_ns"), want["comm_ns"])
        same("comm_exposed_ns", b.get("comm_exposed_ns"), want["comm_exposed_ns"])
    same("row step_time_ns", row["step_time_ns"], want["step_time_ns"])
    if not step_time:
        mine, theirs = want["written"], written(out)
        out.unlink()
        if len(mine) != len(theirs):
            diffs.append(f"--trace-out: mhc {len(theirs)} kernels, reading {len(mine)}")
        else:
            for n, (a, b) in enumerate(zip(theirs, mine)):
                if tuple(a) != tuple(b):
                    diffs.append(f"--trace-out kernel {n}: mhc {tuple(a)}, reading {b}")
                    break
    world, bw, lat, unit = comm_line(got.get("comm", ""))
    ag, ar, _whole, _said = want["world"]
    hsdp = "(shard" in want["world_text"] and ar > 1   # HSDP: both groups on the line
    same("comm line world", world, f"{ag} x {ar}" if hsdp else str(ag))
    scale = 1e3 ** (" kMGT".index(unit or " ") if unit is not None else 0)
    same("comm line bandwidth", bw, round(want["bus_bw"] / scale, 0 if unit in ("", None) else 1))
    same("comm line us per step", lat, round(want["per_step_s"] * 1e6, 1))
    if verbose:
        print("   ", b, got.get("comm"))
    return diffs


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in argv[1:] if a.startswith("--"))
    if len(args) < 2:
        print(__doc__)
        return 2
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    traces = [Path(t) for t in args[2:]]
    if "capture" in opts:
        python = find_python(opts["capture"])
        got = capture(python, work, "quick" in opts) if python else None
        if not got:
            print("no Python with torch.distributed to capture with: skipped")
            return 77
        traces += got
    if not traces:
        print("no captures")
        return 2
    runs = int(opts.get("runs", "40"))
    rng = random.Random(int(opts.get("seed", "1")))
    verbose = "verbose" in opts
    bad = 0
    counts = {}
    for n in range(runs):
        src = traces[n % len(traces)]
        path = work / f"run{n}.db"
        said = vary(src, path, rng)
        setting = {}
        gs = groups(path)
        if gs and rng.random() < 0.5:
            setting = {"reshard_after_forward": {g: False for g in rng.sample(gs, rng.randint(1, len(gs)))}}
        link = rng.choice([None, None, "nvlink", "ib-ndr", "ib-hdr", f"{rng.choice([5, 25, 100, 370, 900])}GB/s",
                           rng.choice(["1kB/s", "1000TB/s", "12.5GiB/s", "200 GB/s", "3e10B/s", "800MB/s"])])
        step_time = None
        if rng.random() < 0.25:
            try:
                est = ref.predict(str(path), None, link)
                step_time = int(est["baseline_step_time_ns"] / 2 * rng.uniform(0.8, 3.0))
            except ref.Refused:
                step_time = None
        if "only" in opts and str(n) != opts["only"]:
            path.unlink()
            continue
        diffs = run_one(mhc, path, setting, link, step_time, verbose)
        label = (f"run {n}: {src.name} {'; '.join(said) or 'as captured'}; setting {json.dumps(setting)}; "
                 f"comm-link {link}; step-time {step_time}")
        counts[src.name] = counts.get(src.name, 0) + 1
        if diffs:
            bad += 1
            print(label)
            for d in diffs:
                print("   ", d)
        elif verbose:
            print(label, "agrees")
        if "keep" not in opts:
            path.unlink()
    runs = sum(counts.values())
    print(f"{runs - bad} of {runs} runs agree ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
